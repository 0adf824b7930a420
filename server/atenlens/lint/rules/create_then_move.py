"""AL302 create-then-move: a tensor created on the CPU and then moved (`torch.randn(...).to(device)`).

What it does:
    Flags `.to(device)` or `.cuda()` called directly on the result of a torch factory —
    `torch.randn`, `rand`, `randint`, `randperm`, `zeros`, `ones`, `empty`, `full`, `arange`,
    `linspace`, `logspace`, `eye` — that has no `device=` argument of its own. The target must
    be written as a device: a string, `torch.device(...)`, a call of a function spelled as
    returning one (`get_model_device(model)`, `get_device()`, `current_device()`), or a name or
    attribute spelled `device`, `dev` or `*_device` (`x.device`, `self.device`). Not flagged: `.to(dtype)`,
    `.to(x.dtype)` and `.to(other_tensor)` (a cast, or a target that may not be a device),
    `.to("cpu")`, `.to("meta")` (no data is copied), `*_like` factories (they inherit the device of their input), a factory with
    `generator=` (a generator lives on one device: a CPU generator needs the CPU tensor) or
    `pin_memory=`, and `torch.tensor(data)` / `torch.as_tensor(data)` (the data comes from the
    host either way: `device=` does the same host fill and copy).

    Quick fix, offered only in the simple, safe cases: the factory has no `device=` and no
    `**kwargs`, and the move is `.cuda()` with no arguments, or `.to(X)` / `.to(device=X)` with
    nothing else (no dtype, no `non_blocking`, no `copy`). It rewrites
    `torch.randn(2, 3).to(device)` to `torch.randn(2, 3, device=device)` and
    `torch.zeros(4).cuda()` to `torch.zeros(4, device="cuda")`, keeping the factory's arguments
    and comments as written.

Why it matters:
    The tensor is first filled on the CPU, then copied to the GPU: two allocations, a
    host-to-device copy and CPU time for the fill, where creating it on the device costs one
    kernel. Lint only: the engine does not report it.

Example:
    noise = torch.randn(batch, dim).to(device)

Fix:
    Create it where it is used: `torch.randn(batch, dim, device=device)`.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding, Fix, TextEdit
from atenlens.lint.provenance import is_clear_device, is_cpu_device, string_value, strip_parens, to_device_argument
from atenlens.lint.registry import Rule
from atenlens.lint.syntax import arguments, callee, dotted_name, has_splat, method_name, receiver, text

# Not `torch.tensor` / `torch.as_tensor`: their data comes from the host either way, and
# `device=` does the same host fill and copy, so there is nothing to gain.
FACTORIES = frozenset(
    {"randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye"}
)
# Trigger bytes (triggers.py), from the checks below: the factory is the attribute `<factory>` of
# the name `torch`, the move an attribute `to` or `cuda` of the factory's call (maybe in
# brackets), so right after a closing bracket; between the tokens only spaces, line breaks,
# backslashes and comments (a comment runs to its line's end: matched one way only, so a banner
# of `#`s cannot make the search backtrack exponentially). A definition whose only move is of
# a name (`x.to(device)`) is not kept for this rule.
_GAP = rb"(?:\s|\\|#[^\n]*(?![^\n]))*"
FACTORY_CALL = re.compile(
    rb"torch" + _GAP + rb"\." + _GAP + rb"(?:" + b"|".join(sorted(map(str.encode, FACTORIES))) + rb")\b"
)
MOVE = re.compile(rb"\)" + _GAP + rb"\." + _GAP + rb"(?:to|cuda)\b")


def _factory(node: Optional[Node]) -> Optional[Node]:
    if node is None:
        return None
    node = strip_parens(node)
    if node.type != "call":
        return None
    name = dotted_name(callee(node)) or ""
    parts = name.split(".")
    if len(parts) == 2 and parts[0] == "torch" and parts[1] in FACTORIES:
        return node
    return None


def _fix(ctx: LintContext, move: Node, factory: Node) -> Optional[Fix]:
    positional, keywords = arguments(move)
    if method_name(move) == "cuda":
        if positional or keywords or has_splat(move):
            return None
        device_text = '"cuda"'
    else:
        device = to_device_argument(move)
        if device is None or has_splat(move) or len(positional) + len(keywords) != 1:
            return None
        device_text = text(device)
    args = factory.child_by_field_name("arguments")
    if args is None or args.type != "argument_list" or any(c.type == "ERROR" for c in args.children):
        return None
    if any(c.type == "dictionary_splat" for c in args.named_children):
        return None
    if strip_parens(receiver(move) or factory) != factory or receiver(move) != factory:
        return None  # `(torch.randn(3)).to(d)`: keep it simple, no rewrite
    if text(args.children[-1]) != ")":
        return None
    inner = ctx.source.data[args.start_byte + 1 : args.end_byte - 1].decode("utf-8", errors="surrogatepass")
    stripped = inner.rstrip()
    if not stripped:
        new_args = f"device={device_text}"
    elif stripped.endswith(","):
        new_args = f"{stripped} device={device_text}"
    elif "#" in stripped.splitlines()[-1]:
        return None  # a trailing comment would swallow the new argument
    else:
        new_args = f"{stripped}, device={device_text}"
    factory_head = ctx.source.data[factory.start_byte : args.start_byte].decode("utf-8", errors="surrogatepass")
    line, col = ctx.source.position(move.start_point)
    end_line, end_col = ctx.source.position(move.end_point)
    return Fix(
        title=f"Create the tensor on the device (`device={device_text}`)",
        edits=(TextEdit(line, col, end_line, end_col, f"{factory_head}({new_args})"),),
    )


def check(ctx: LintContext) -> Iterator[Finding]:
    for move in ctx.calls("to", "cuda"):
        method = method_name(move)
        if method not in ("to", "cuda"):
            continue
        factory = _factory(receiver(move))
        if factory is None:
            continue
        factory_keywords = arguments(factory)[1]
        if "device" in factory_keywords or "generator" in factory_keywords or "pin_memory" in factory_keywords:
            continue  # a generator lives on one device: a CPU generator needs the CPU tensor
        if method == "to":
            device = to_device_argument(move)
            if device is None or is_cpu_device(device) or not is_clear_device(device):
                continue  # `.to(dtype)`, `.to(other_tensor)`, `.to(x.dtype)`: not (known to be) a move
            if _is_meta(device):
                continue  # `.to("meta")` copies nothing: a shape for tracing, no host-device copy
        name = dotted_name(callee(factory))
        fn = callee(move)
        attr = fn.child_by_field_name("attribute") if fn is not None else None
        yield ctx.finding(
            Code.CREATE_THEN_MOVE,
            f"`{name}(...)` is created on the CPU and then copied to the device: create it there with `device=`",
            attr or move,
            fix=_fix(ctx, move, factory),
            end=move,
        )


RULE = Rule(
    code=Code.CREATE_THEN_MOVE,
    name="create-then-move",
    summary="a tensor created on the CPU then moved (`torch.randn(...).to(device)`) instead of created on the device",
    calls=frozenset({"to", "cuda"}),
    check=check,
    doc=__doc__ or "",
    fixable=True,
    # `torch.<factory>(...).to(...)` / `.cuda()`: the factory's name, `torch`, the move.
    # Cheapest first: `torch` (a substring search), the factory (a pattern that starts with
    # `torch`), then the move (a pattern that starts with a dot: many candidates).
    triggers=((b"torch",), (FACTORY_CALL,), (MOVE,)),
    definition_triggers=((b"torch",), (FACTORY_CALL,), (MOVE,)),
)


def _is_meta(device: Node) -> bool:
    """`"meta"`, `torch.device("meta")`."""
    node = strip_parens(device)
    if node.type == "call" and (dotted_name(callee(node)) or "").split(".")[-1] == "device":
        positional, keywords = arguments(node)
        node = keywords.get("type") or (positional[0] if positional else node)
    return node.type == "string" and string_value(node) == "meta"
