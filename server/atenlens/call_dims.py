"""Named dims read from the example call itself, asked for by a bare `dims:` after the call.

    B, T = 8, 1024

    # atenlens: train_step(torch.randn(B, T, 768))  dims:    -> B=8, T=1024
    # atenlens: train_step(*setup())  dims:                  -> B=8, T=1024 with def setup(B=8, T=1024)

Asked for, not automatic: the names need a second, symbolic run of the call, which costs 2-3 times
the trace itself (docs/named-shapes.md).

The rule (docs/named-shapes.md): a name is a dim when the example call builds a tensor with it as a
size, written as a plain name in a size position of a tensor factory (`torch.randn(B, T, 768)`,
`torch.zeros((B, T))`, `torch.randint(0, V, (B, T))`: V is no size). The factories are those written
in the directive itself, and those in the body of a function of the module the directive calls
(`setup(...)`), whose parameters then name the sizes: `setup(B=4)` or the default `def setup(B=8)`; a
module variable passed to such a parameter (`setup(batch)`) names it after the variable.

Never a guess: a name whose value is not a whole number, two names with one value, or a name with the
same value as a literal size of the same tensors (`torch.randn(B, 8)` with B = 8) is left out, its
sizes stay numbers, and the trace says which and why (AL920). Sizes 0 and 1 are never names (torch
treats them as constants). Torch-free: the module's values come in through `namespace`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional

# the tensor factories whose size arguments are read (torch.X or X imported from torch)
_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "full", "randint"})
# factories whose bare positional arguments are not sizes (randint's low/high, full's fill value)
_SIZE_IN_A_TUPLE = frozenset({"full", "randint"})


NO_CALL_DIMS = (
    "the example call builds no tensor from a named size (`torch.randn(B, T, 768)` with module variables, "
    "or a setup function whose parameters size its tensors); name them as `dims: B=8 T=1024`"
)


@dataclass(frozen=True)
class CallDims:
    """The names found in the example call, and the notes on those that were left out."""

    dims: tuple[tuple[str, int], ...]
    notes: tuple[str, ...] = ()


def call_dims(expression: str, source: str, namespace: Mapping[str, Any]) -> CallDims:
    """The dims the example call `expression` names (see the module's docstring); `source` is the
    module's text (for the functions it calls), `namespace` its variables after loading."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        module = ast.parse(source)
    except SyntaxError:
        return CallDims(())
    functions = {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}
    found: list[tuple[str, Any, str]] = []  # (name, value, where it was read)
    literals: set[int] = set()
    for call in _calls(tree):
        if _is_factory(call):
            names, numbers = _sizes(call)
            literals |= numbers
            found += [(n, namespace[n], "the module") for n in names if n in namespace]
        elif isinstance(call.func, ast.Name) and call.func.id in functions:
            more, numbers = _parameter_sizes(call, functions[call.func.id], namespace)
            found += more
            literals |= numbers
    return _checked(found, literals)


def _calls(tree: ast.AST) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def _is_factory(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in _FACTORIES


def _sizes(call: ast.Call) -> tuple[list[str], set[int]]:
    """The plain names and the literal whole numbers in the factory call's size positions."""
    func = call.func
    factory = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    positions: list[ast.expr] = []
    for arg in call.args:
        if isinstance(arg, (ast.Tuple, ast.List)):
            positions += arg.elts
        elif factory not in _SIZE_IN_A_TUPLE:
            positions.append(arg)
    for keyword in call.keywords:
        if keyword.arg == "size" and isinstance(keyword.value, (ast.Tuple, ast.List)):
            positions += keyword.value.elts
    names = [p.id for p in positions if isinstance(p, ast.Name)]
    numbers = {p.value for p in positions if isinstance(p, ast.Constant) and type(p.value) is int}
    return names, numbers


def _parameter_sizes(
    call: ast.Call, function: ast.FunctionDef, namespace: Mapping[str, Any]
) -> tuple[list[tuple[str, Any, str]], set[int]]:
    """The sizes a module function called by the example call builds its tensors with, named after
    its parameters, or after the module variable the call passes to one."""
    parameters = [a.arg for a in function.args.posonlyargs + function.args.args]
    keyword_only = [a.arg for a in function.args.kwonlyargs]
    defaults = dict(zip(parameters[len(parameters) - len(function.args.defaults) :], function.args.defaults))
    defaults.update({a.arg: d for a, d in zip(function.args.kwonlyargs, function.args.kw_defaults) if d is not None})
    passed: dict[str, ast.expr] = {}
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return [], set()  # which parameter gets what is decided at run time: nothing is read
        if index < len(parameters):
            passed[parameters[index]] = arg
    passed.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    sized: set[str] = set()
    literals: set[int] = set()
    for inner in _calls(function):
        if _is_factory(inner):
            names, numbers = _sizes(inner)
            sized |= {n for n in names if n in parameters or n in keyword_only}
            literals |= numbers
    found: list[tuple[str, Any, str]] = []
    for parameter in sorted(sized, key=(parameters + keyword_only).index):
        value = passed.get(parameter, defaults.get(parameter))
        where = f"{function.name}()"
        if isinstance(value, ast.Constant):
            found.append((parameter, value.value, where))
        elif isinstance(value, ast.Name) and value.id in namespace:
            name = value.id if parameter in passed else parameter
            found.append((name, namespace[value.id], "the module" if parameter in passed else where))
    return found, literals


def _checked(found: list[tuple[str, Any, str]], literals: set[int]) -> CallDims:
    notes: list[str] = []
    values: dict[str, int] = {}
    left_out: set[str] = set()
    for name, value, where in found:
        if name in values or name in left_out:
            if values.get(name, value) != value:
                notes.append(f"{name} is both {values[name]} and {value}")
                left_out.add(name)
                values.pop(name)
            continue
        if type(value) is not int:
            notes.append(f"{name} is {type(value).__name__} {value!r} in {where}, not a Python int")
            left_out.add(name)
        elif value >= 2:  # 0 and 1 are constants to torch: they stay numbers, as they would anyway
            values[name] = value
    by_value: dict[int, list[str]] = {}
    for name, value in values.items():
        by_value.setdefault(value, []).append(name)
    dims: list[tuple[str, int]] = []
    for value, names in by_value.items():
        if len(names) > 1:
            notes.append(
                f"{_listed(names)} are all {value}" if len(names) > 2 else f"{_listed(names)} are both {value}"
            )
        elif value in literals:
            notes.append(f"{names[0]} is {value}, and so is a size written as a number")
        else:
            dims.append((names[0], value))
    return CallDims(tuple(dims), tuple(notes))


def _listed(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1]


def notes_text(notes: tuple[str, ...]) -> Optional[str]:
    """The AL920 text for the names left out, None when there are none."""
    if not notes:
        return None
    return (
        f"names from the example call: {'; '.join(notes)}: the sizes of these names are shown as numbers "
        "(name them with `dims:` and distinct sizes)"
    )
