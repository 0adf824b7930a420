"""Named dimensions: the `dims:` part of an example-call directive.

    # atenlens: train_step(*setup())  dims: B=8 T=1024

Torch-free (the language server reads directives too). Each name stands for one size of the example
call's inputs: wherever an input tensor has that size, the trace gives the dimension a symbol, and
hints show `bf16[B, T, 768]` instead of `bf16[8, 1024, 768]` (trace/shapes.py).
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Optional

# `dims:` after the call, separated from it by whitespace: `f(x)  dims: B=8 T=1024`
_DIMS_SUFFIX = re.compile(r"^(?P<call>.*?)\s+dims:(?P<dims>.*)$")
_ENTRY = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z_0-9]*)(?:=(?P<value>-?[0-9]+))?$")


def split_directive(text: str) -> tuple[str, Optional[str]]:
    """("train_step(*setup())", "B=8 T=1024") for "train_step(*setup())  dims: B=8 T=1024";
    (text, None) when it names no dims. Text that is valid Python as a whole is a call with no dims
    (`f(dims=3)` or a lambda with a parameter called `dims` stays as it is)."""
    match = _DIMS_SUFFIX.match(text)
    if match is None:
        return text, None
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return match.group("call").strip(), match.group("dims").strip()
    return text, None


def parse_dims(text: str, lookup: Optional[Callable[[str], Any]] = None) -> tuple[tuple[str, int], ...]:
    """ "B=8 T=1024" -> (("B", 8), ("T", 1024)). Raises ValueError saying what is wrong.

    A bare name (`dims: B T`) takes its size from the variable of that name the example call's module
    binds at its top level (`B, T = 8, 1024`): `lookup(name)` gives it, raising KeyError when there is
    none. Every value must be at least 2 (torch specialises sizes 0 and 1: they can never be symbols)
    and the values must differ: a size found in an input is named after the one name that has it, so
    two names sharing a value could not be told apart."""
    entries = text.replace(",", " ").split()
    if not entries:
        raise ValueError("`dims:` names no dimensions; write them as `dims: B=8 T=1024`")
    found: dict[str, int] = {}
    by_value: dict[int, str] = {}
    for entry in entries:
        match = _ENTRY.match(entry)
        if match is None:
            raise ValueError(f"{entry!r} is not NAME=SIZE (e.g. `B=8`)")
        name = match.group("name")
        value = int(match.group("value")) if match.group("value") is not None else _looked_up(name, lookup)
        if name in found:
            raise ValueError(f"{name} is named twice")
        if value < 2:
            raise ValueError(f"{name}={value}: sizes 0 and 1 cannot be named (torch treats them as constants)")
        if value in by_value:
            raise ValueError(
                f"{by_value[value]} and {name} are both {value}: give each name a distinct size "
                f"(e.g. {by_value[value]}={value} {name}={value * 2}) so the trace can tell them apart"
            )
        found[name] = value
        by_value[value] = name
    return tuple(found.items())


def _looked_up(name: str, lookup: Optional[Callable[[str], Any]]) -> int:
    try:
        if lookup is None:
            raise KeyError(name)
        value = lookup(name)
    except KeyError:
        raise ValueError(
            f"{name} has no size: write {name}=SIZE, or bind {name} to a whole number at the module's top level"
        ) from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} is {type(value).__name__} {value!r} in the module, not a whole number")
    return value


def dims_text(dims: tuple[tuple[str, int], ...]) -> str:
    """(("B", 8), ("T", 1024)) -> "B=8, T=1024"."""
    return ", ".join(f"{name}={value}" for name, value in dims)
