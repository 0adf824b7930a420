"""AL201 unsynced-d2h-read: the result of a `non_blocking=True` device-to-host copy read before a synchronize.

What it does:
    Finds device-to-host copies with `non_blocking=True` — `.cpu(non_blocking=True)`,
    `.to("cpu", non_blocking=True)` of a tensor not made on the CPU, `buf.copy_(src, non_blocking=True)`
    into a provably pinned `buf` (see AL200 for "provably pinned") — and flags the first read of the result (the name it
    is assigned to, also through parentheses, or `buf`) that comes after the copy and before
    anything waits for the GPU in the same function: a synchronize (`torch.cuda.synchronize()`,
    `event.synchronize()`, `stream.synchronize()`, any `synchronize` method or function, a name
    bound to `torch.cuda.synchronize`), a blocking host read (`.item()`, `.tolist()`, a blocking
    `.cpu()` or `.to("cpu")`: each waits for everything queued before it, the copy included)
    unless that call itself reads the result, or a call of a function of the same file that
    does one of these. A copy whose result is used at once (`x.cpu(non_blocking=True).numpy()`,
    `print(x.to("cpu", non_blocking=True))`) is flagged at the copy. Not reads: returning the
    result (`return host`) hands it to the caller; keeping a reference (`cache[k] = host`,
    `self.buf = host`, `{"x": host}`, `[host]`, `out.append(host)`, `ctx.save_for_backward(host)`,
    an argument of a class built with it (`LogprobsTensors(host, ...)`), a comprehension's element:
    `tuple(x.to("cpu", non_blocking=True) for x in xs)`) reads nothing yet; keyword
    names (`f(host=1)`) and attribute names (`obj.host`); the tensor's metadata (`host.shape`,
    `host.size(0)`, `host.device`). "After" and "before" are textual order within the function;
    assigning the name again ends the tracking, but for a view of the same memory under the same
    name (`host = host.numpy()`, `host = host.view(-1)`), whose later reads still count.

Why it matters:
    A non-blocking device-to-host copy returns before the data has arrived. Reading the
    destination before synchronizing may read stale or partial data, with no error. Same code as
    the engine's `unsynced-d2h-read` diagnostic.

Example:
    def fetch(logits):
        host = logits.to("cpu", non_blocking=True)
        return host.argmax(-1)

Fix:
    Record an event after the copy and synchronize on it before reading:
    `done = torch.cuda.Event(); done.record(); ...; done.synchronize()`, or
    `torch.cuda.synchronize()` before the first read, or drop `non_blocking=True`.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.context import LintContext
from atenlens.lint.dataflow import scope_for
from atenlens.lint.findings import Finding
from atenlens.lint.provenance import HOST_ATTRIBUTES, VIEW_METHODS, Device, device_of, is_device_to_host, is_pinned
from atenlens.lint.registry import Rule
from atenlens.lint.syntax import arguments, callee, dotted_name, is_true, method_name, receiver, text
from atenlens.lint.waits import WAIT_CALLS, alias_calls, is_wait, waiting_function_calls

COPY_METHODS = ("to", "cpu", "copy_")


def _is_d2h_non_blocking(ctx: LintContext, call: Node) -> bool:
    method = method_name(call)
    if method not in COPY_METHODS or not is_true(arguments(call)[1].get("non_blocking")):
        return False
    if method == "copy_":
        return is_pinned(ctx, receiver(call))
    # (not of a tensor made on the CPU: `torch.from_numpy(frame).float().to("cpu", non_blocking=True)`
    # copies nothing)
    return is_device_to_host(call) and device_of(ctx, receiver(call)) is not Device.CPU


def _result(call: Node) -> tuple[Optional[str], bool]:
    """(the name holding the copy's result, whether the result is used right where it is made)."""
    if method_name(call) == "copy_":
        dst = receiver(call)
        return (text(dst) if dst is not None and dst.type == "identifier" else None), False
    node, parent = call, call.parent
    while parent is not None and parent.type == "parenthesized_expression":  # `host = (t.cpu(...))`
        node, parent = parent, parent.parent
    call = node
    if parent is None or parent.type == "expression_statement":
        return None, False
    if parent.type == "assignment" and parent.child_by_field_name("right") == call:
        left = parent.child_by_field_name("left")
        return (text(left) if left is not None and left.type == "identifier" else None), False
    if _is_stored(call):
        return None, False  # `cache[k] = (t.cpu(non_blocking=True), 1)`: a reference kept, nothing read yet
    if parent.type in _COMPREHENSIONS and parent.named_children and parent.named_children[0] == call:
        # `tuple(x.to("cpu", non_blocking=True) for x in xs)`: each copy is kept in the container
        # the comprehension builds, nothing read yet (a read of an element would sit around the call)
        return None, False
    if parent.type in (
        "assignment",
        "augmented_assignment",
        "return_statement",
        "yield",
        "expression_list",
        "pattern_list",
        "named_expression",
    ):
        return None, False
    return None, True


_COMPREHENSIONS = ("generator_expression", "list_comprehension", "set_comprehension")


def _is_read(node: Node) -> bool:
    """An identifier that reads its variable (not a keyword name, an attribute name or an
    assignment target)."""
    parent = node.parent
    if parent is None:
        return True
    if parent.type == "keyword_argument" and parent.child_by_field_name("name") == node:
        return False
    if parent.type == "attribute" and parent.child_by_field_name("attribute") == node:
        return False
    # `return host` hands the tensor to the caller, which may synchronize before reading it.
    if parent.type == "expression_list" and parent.parent is not None:
        parent = parent.parent
    if parent.type in ("return_statement", "yield"):
        return False
    return not _is_stored(node)


# (`ctx.save_for_backward(host)` keeps the tensor for the backward pass)
STORING_METHODS = frozenset(
    {"append", "extend", "insert", "put", "put_nowait", "add", "setdefault", "save_for_backward"}
)


def _is_stored(node: Node) -> bool:
    """Is `node` only kept somewhere (`d[k] = host`, `self.buf = host`, `{"x": host}`,
    `[host, ...]`, `out.append(host)`), not read? The data is read later, through the container."""
    child, parent = node, node.parent
    while parent is not None and parent.type in (
        "parenthesized_expression",
        "tuple",
        "list",
        "pair",
        "dictionary",
        "expression_list",
    ):
        if parent.type == "pair" and parent.child_by_field_name("value") != child:
            return False
        child, parent = parent, parent.parent
    if parent is None:
        return False
    if parent.type == "assignment" and parent.child_by_field_name("right") == child:
        return True
    if parent.type == "keyword_argument" and parent.child_by_field_name("value") == child:
        child, parent = parent, parent.parent  # `LogprobsTensors(token_ids=host)`
    if parent is not None and parent.type == "argument_list" and parent.parent is not None:
        call = parent.parent
        if call.type != "call":
            return False
        name = (dotted_name(callee(call)) or "").split(".")[-1]
        # a class built with it keeps it (a dataclass, a NamedTuple, `dist.P2POp(...)`)
        return method_name(call) in STORING_METHODS or (name[:1].isupper() and not name.isupper())
    return False


# What describes the copy without reading its data (`host.shape`, `host.size(0)`), and the methods
# that give its memory another shape or type (`host.view(-1)`, `host.numpy()`)
METADATA = HOST_ATTRIBUTES | {
    "size",
    "dim",
    "numel",
    "nelement",
    "stride",
    "element_size",
    "is_contiguous",
    "is_pinned",
    "record_stream",
}
SAME_MEMORY = VIEW_METHODS | {"numpy"}


def _reads_metadata_only(node: Node, name: str) -> bool:
    """`host.shape`, `host.size(0)`: a description of the tensor, not its data; or `host` in
    `host = host.numpy()`, which only gives the same memory another type."""
    parent = node.parent
    if parent is None or parent.type != "attribute" or parent.child_by_field_name("object") != node:
        return False
    attribute = parent.child_by_field_name("attribute")
    if attribute is not None and text(attribute) in METADATA:
        return True
    call = parent.parent
    while call is not None and call.type == "parenthesized_expression":
        call = call.parent
    assignment = call.parent if call is not None and call.type == "call" else None
    return assignment is not None and assignment.type == "assignment" and _view_of_itself(assignment, name)


def _view_of_itself(assignment: Node, name: str) -> bool:
    """`host = host.numpy()` / `host = host.view(-1)`: the name keeps the copy's memory."""
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    while right is not None and right.type == "parenthesized_expression" and right.named_child_count == 1:
        right = right.named_children[0]
    if left is None or text(left) != name or right is None or right.type != "call":
        return False
    owner = receiver(right)
    return method_name(right) in SAME_MEMORY and owner is not None and text(owner) == name


def _is_rebinding(node: Node) -> bool:
    parent = node.parent
    return parent is not None and parent.type == "assignment" and parent.child_by_field_name("left") == node


WAITS = tuple(WAIT_CALLS)


def _settles(ctx: LintContext, wait: Node, name: str) -> bool:
    """Does `wait` settle the copy held in `name` before anything reads it? Not when the wait
    is itself a read of `name` (`host.numpy()`)."""
    return not any(_is_read(n) for n in ctx.identifiers((name,), wait.start_byte, wait.end_byte))


def _first_settling_wait(
    ctx: LintContext, waits: list[Node], starts: list[int], call: Node, scope: Node, name: str
) -> Optional[int]:
    """Where the first wait after `call` in `scope` that settles `name` starts (None: no such
    wait). `waits` is in source order and `starts` holds their start bytes."""
    for index in range(bisect_left(starts, call.end_byte), len(waits)):
        wait = waits[index]
        if wait.start_byte >= scope.end_byte:
            break
        if scope_for(wait) == scope and _settles(ctx, wait, name):
            return wait.start_byte
    return None


def check(ctx: LintContext) -> Iterator[Finding]:
    waits: Optional[list[Node]] = None
    starts: list[int] = []
    for call in ctx.calls(*COPY_METHODS):
        if not ctx.writes_in_arguments(call, b"non_blocking") or not _is_d2h_non_blocking(ctx, call):
            continue
        name, used_at_once = _result(call)
        if used_at_once:
            yield ctx.finding(
                Code.UNSYNCED_D2H_READ,
                "the result of a `non_blocking=True` device-to-host copy is used at once, before any "
                "synchronize: it may not have landed yet (stale data, no error)",
                call,
            )
            continue
        if name is None:
            continue
        scope = scope_for(call)
        if waits is None:
            waits = [c for c in [*ctx.calls(*WAITS), *alias_calls(ctx)] if is_wait(ctx, c)]
            waits += waiting_function_calls(ctx)
            waits.sort(key=lambda c: c.start_byte)
            starts = [w.start_byte for w in waits]
        boundary = _first_settling_wait(ctx, waits, starts, call, scope, name)
        rebound_after: Optional[int] = None
        end = boundary if boundary is not None else scope.end_byte
        for node in ctx.identifiers((name,), call.end_byte, end):
            if rebound_after is not None and node.start_byte >= rebound_after:
                break
            if scope_for(node) != scope:
                continue
            if _is_rebinding(node):
                if node.parent is not None and _view_of_itself(node.parent, name):
                    continue  # `host = host.numpy()`: the same memory under the same name
                # `name = ...` ends the copy's result; its right side still runs first.
                rebound_after = node.parent.end_byte if node.parent is not None else node.end_byte
                continue
            if _reads_metadata_only(node, name):
                continue
            if _is_read(node):
                line = ctx.source.position(call.start_point)[0]
                yield ctx.finding(
                    Code.UNSYNCED_D2H_READ,
                    f"`{name}` is read before a synchronize: the `non_blocking=True` device-to-host copy on "
                    f"line {line} may not have landed yet (stale data, no error)",
                    node,
                )
                break


RULE = Rule(
    code=Code.UNSYNCED_D2H_READ,
    name="unsynced-d2h-read",
    summary="result of a `non_blocking=True` device-to-host copy read before any synchronize",
    calls=frozenset(COPY_METHODS) | frozenset(WAITS),
    check=check,
    doc=__doc__ or "",
    # The waits that settle the copy include helper functions anywhere in the file.
    triggers=((b"non_blocking",),),
)
