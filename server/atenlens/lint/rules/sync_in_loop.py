"""AL100 sync-in-loop: `.item()`, `.tolist()`, `.cpu()` or `.numpy()` inside a loop.

What it does:
    Flags a call of `.item()`, `.tolist()`, `.cpu()` or `.numpy()` that runs once per iteration
    of a `for` or `while` loop or of a comprehension (its body, a `while` condition, a
    comprehension's element, conditions and inner iterables; not a `for` loop's iterable or
    `else`, and not the body of a `def`/`lambda` nested in the loop). The linter knows no types,
    so it stays silent only where the receiver is provably not a CUDA tensor: a literal, a
    builtin's result (`len(x)`, `range(n)`, `float(v)`, ...), the variable of a
    `for ... in range(...)` loop, or the result of an earlier `.cpu()`/`.numpy()`/`.tolist()`/
    `.item()`/`.to("cpu")` in the same expression (the copy was already reported).
    `.cpu(non_blocking=True)` does not wait (see AL201).

Why it matters:
    CUDA kernels run asynchronously: the host queues work and moves on. Reading a value on the
    host makes it wait until every queued kernel has finished, so the GPU idles while the host
    catches up, on every iteration. Same code as the engine's `sync` diagnostic.

Example:
    for x, y in loader:
        loss = model(x).sub(y).pow(2).mean()
        total += loss.item()

Fix:
    Keep the value on the device and read it once after the loop:
    `total = total + loss.detach()` inside the loop, `total.item()` after it; or log every N steps.
"""
from __future__ import annotations

from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.pinning import is_device_to_host
from atenlens.lint.registry import Rule
from atenlens.lint.source import ancestors
from atenlens.lint.syntax import (
    LITERAL_TYPES, SCOPE_TYPES, arguments, callee, dotted_name, is_true, method_name, receiver,
    repeating_loop, text,
)
from atenlens.report import Code

SYNC_METHODS = ("item", "tolist", "cpu", "numpy")
HOST_RESULT_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
NOT_TENSOR_BUILTINS = frozenset(
    {"len", "range", "int", "float", "str", "bool", "list", "tuple", "dict", "set", "enumerate",
     "zip", "repr", "format", "round", "abs", "ord", "chr"}
)


def check(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls(*SYNC_METHODS):
        method = method_name(call)
        if method not in SYNC_METHODS:
            continue
        if method == "cpu" and is_true(arguments(call)[1].get("non_blocking")):
            continue
        loop = repeating_loop(call)
        if loop is None or _provably_not_cuda(receiver(call), call):
            continue
        fn = callee(call)
        attr = fn.child_by_field_name("attribute") if fn is not None else None
        yield ctx.finding(
            Code.SYNC,
            f"`.{method}()` inside a loop: the host waits for the GPU on every iteration",
            attr or call,
            end=call,
        )


def _provably_not_cuda(value: Optional[Node], call: Node) -> bool:
    if value is None:
        return True
    while value.type == "parenthesized_expression" and value.named_child_count == 1:
        value = value.named_children[0]
    if value.type in LITERAL_TYPES:
        return True
    if value.type == "call":
        name = dotted_name(callee(value))
        if name in NOT_TENSOR_BUILTINS:
            return True
        inner = method_name(value)
        if inner in HOST_RESULT_METHODS:
            return True
        return inner == "to" and is_device_to_host(value)
    if value.type == "identifier":
        return _is_range_loop_variable(text(value), call)
    return False


def _is_range_loop_variable(name: str, call: Node) -> bool:
    for parent in ancestors(call):
        if parent.type in SCOPE_TYPES:
            return False
        if parent.type == "for_statement":
            target = parent.child_by_field_name("left")
            iterable = parent.child_by_field_name("right")
            if target is not None and target.type == "identifier" and text(target) == name:
                return (iterable is not None and iterable.type == "call"
                        and dotted_name(callee(iterable)) == "range")
    return False


RULE = Rule(
    code=Code.SYNC,
    name="sync-in-loop",
    summary="`.item()`, `.tolist()`, `.cpu()` or `.numpy()` inside a loop: a host-device sync every iteration",
    calls=frozenset(SYNC_METHODS),
    check=check,
    doc=__doc__ or "",
)
