"""Calls that make the host wait for the GPU, and clock reads: what AL101, AL201 and AL301 ask.

- A device synchronize: `torch.cuda.synchronize()`, `cuda.synchronize()`,
  `torch.accelerator.synchronize()`, `synchronize()` taken by name from the `torch.cuda` module, and a name bound
  to one of them (`sync = torch.cuda.synchronize`, anywhere in the file).
- An event or stream synchronize: `.synchronize()` of a name bound to `torch.cuda.Event(...)`,
  `torch.cuda.Stream(...)`, `torch.cuda.current_stream()` / `default_stream()` (or called on
  them directly), or any other `x.synchronize()` (for "does something wait here", every
  `synchronize` method counts).
- A host read that waits for all queued work: `.item()`, `.tolist()`, a blocking `.cpu()` or
  `.to("cpu")`.
- A call of a function of the same file (`helper()`, `self.helper()`) whose body waits.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.provenance import is_device_to_host
from atenlens.lint.source import names_imported_from
from atenlens.lint.syntax import arguments, callee, dotted_name, is_true, method_name, receiver, text

DEVICE_SYNCHRONIZE = frozenset(
    {
        "torch.cuda.synchronize",
        "cuda.synchronize",
        "torch.accelerator.synchronize",
        "torch.cuda.current_stream.synchronize",
        "torch.xpu.synchronize",
        "torch.mps.synchronize",
    }
)
EVENT_OR_STREAM_MAKERS = frozenset(
    {
        "torch.cuda.Event",
        "cuda.Event",
        "torch.cuda.Stream",
        "cuda.Stream",
        "torch.cuda.current_stream",
        "torch.cuda.default_stream",
        "torch.Event",
        "torch.Stream",
        "torch.cuda.ExternalStream",
    }
)
CLOCK_FUNCTIONS = ("time", "perf_counter", "monotonic", "time_ns", "perf_counter_ns", "monotonic_ns")
CLOCK_NAMES = frozenset({f"time.{n}" for n in CLOCK_FUNCTIONS} | {n for n in CLOCK_FUNCTIONS if n != "time"})
HOST_READS = ("item", "tolist", "cpu", "to")
# A process-group barrier blocks the host until the collective has run on the device (NCCL's
# barrier synchronizes its stream), so it waits for the queued work as a synchronize does.
BARRIERS = ("barrier", "wait_for_everyone")
WAIT_CALLS = frozenset({"synchronize", *HOST_READS, *BARRIERS})
FUNCTION_DEPTH = 3  # helpers calling helpers that synchronize


# the user's source imports names from torch.cuda (bytes searched in the linted file; nothing is imported).
# Joined at run time: the compiled module then holds no constant that reads as an import of torch.
_TORCH_CUDA = rb"torch\.cuda"
_IMPORTS_FROM_TORCH_CUDA = re.compile(rb"[ \t]+".join((b"from", _TORCH_CUDA, b"import")))


def is_clock_read(ctx: LintContext, call: Node) -> bool:
    """`time.perf_counter()`, `perf_counter()`, or a bare `time()` where the file imports it with
    `from time import time` (a bare `time()` of another kind is not a clock the file shows)."""
    name = dotted_name(callee(call))
    return name in CLOCK_NAMES or (name == "time" and "time" in _names_from_time(ctx))


def _names_from_time(ctx: LintContext) -> frozenset[str]:
    cached: Optional[frozenset[str]] = getattr(ctx, "_names_from_time", None)
    if cached is None:
        cached = ctx._names_from_time = names_imported_from(ctx.source.whole_data, rb"time")
    return cached


def synchronize_aliases(ctx: LintContext) -> frozenset[str]:
    """Names bound to a device synchronize anywhere in the file (`sync = torch.cuda.synchronize`)."""
    cached = getattr(ctx, "_sync_aliases", None)
    if cached is None:
        names = set()
        for ident in ctx.identifiers(("synchronize",)):
            value = ident.parent
            if value is None or value.type != "attribute" or dotted_name(value) not in DEVICE_SYNCHRONIZE:
                continue
            assignment = value.parent
            if assignment is not None and assignment.type == "conditional_expression":
                # `synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None`
                value, assignment = assignment, assignment.parent
            if (
                assignment is not None
                and assignment.type == "assignment"
                and assignment.child_by_field_name("right") == value
            ):
                left = assignment.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    names.add(text(left))
        if _imports_bare_synchronize(ctx):
            names.add("synchronize")
        cached = frozenset(names)
        ctx._sync_aliases = cached
    return cached


def _imports_bare_synchronize(ctx: LintContext) -> bool:
    return (
        b"import synchronize" in ctx.source.data
        or b"synchronize," in ctx.source.data
        and _IMPORTS_FROM_TORCH_CUDA.search(ctx.source.data) is not None
    )


def torch_cuda_imports(ctx: LintContext) -> frozenset[str]:
    """The names the file imports from `torch.cuda` to call bare (`empty_cache`)."""
    cached = getattr(ctx, "_torch_cuda_imports", None)
    if cached is None:
        cached = ctx._torch_cuda_imports = names_imported_from(ctx.source.whole_data, _TORCH_CUDA)
    return cached


def alias_calls(ctx: LintContext) -> list[Node]:
    """Calls of the names in `synchronize_aliases` within the context's span, in source order."""
    return _alias_calls_within(ctx, synchronize_aliases(ctx), *ctx.span)


def _alias_calls_within(ctx: LintContext, aliases: frozenset[str], start: int, end: int) -> list[Node]:
    found = []
    for ident in ctx.identifiers(aliases, start, end):
        parent = ident.parent
        if parent is not None and parent.type == "call" and parent.child_by_field_name("function") == ident:
            found.append(parent)
    return found


def is_device_synchronize(ctx: LintContext, call: Node) -> bool:
    name = dotted_name(callee(call))
    if name in DEVICE_SYNCHRONIZE:
        return True
    fn = callee(call)
    if fn is not None and fn.type == "attribute" and method_name(call) == "synchronize":
        owner = receiver(call)
        if (
            owner is not None
            and owner.type == "call"
            and dotted_name(callee(owner)) in ("torch.cuda.current_stream", "torch.cuda.default_stream")
        ):
            return True
    return name is not None and name in synchronize_aliases(ctx)


def is_event_or_stream_synchronize(ctx: LintContext, call: Node) -> bool:
    """`event.synchronize()` / `stream.synchronize()` of an event or stream this file makes."""
    if method_name(call) != "synchronize":
        return False
    owner = receiver(call)
    if owner is None:
        return False
    if owner.type == "call":
        return dotted_name(callee(owner)) in EVENT_OR_STREAM_MAKERS
    if owner.type == "identifier":
        binding = ctx.bindings(owner).at(text(owner), owner.start_byte)
        value = binding.value if binding is not None else None
        return value is not None and value.type == "call" and dotted_name(callee(value)) in EVENT_OR_STREAM_MAKERS
    if owner.type == "attribute":
        return any(
            v.type == "call" and dotted_name(callee(v)) in EVENT_OR_STREAM_MAKERS
            for v in ctx.attribute_assignments(text(owner))
        )
    return False


def is_wait(ctx: LintContext, call: Node) -> bool:
    """Does this call make the host wait for the GPU (a synchronize, a blocking host read)?"""
    method = method_name(call)
    name = dotted_name(callee(call)) or ""
    if method == "synchronize" or name.endswith("synchronize") or name in synchronize_aliases(ctx):
        return True
    if method in ("item", "tolist") or (method or name) in BARRIERS:
        return True
    if method in ("cpu", "to"):
        return is_device_to_host(call) and not is_true(arguments(call)[1].get("non_blocking"))
    return False


def waiting_functions(ctx: LintContext) -> frozenset[str]:
    """Names of the functions of this file whose body waits for the GPU (`def sync_all():
    torch.cuda.synchronize()`), or calls such a function (up to FUNCTION_DEPTH levels): a call
    of one of them waits too."""
    cached = ctx.memo.get("waiting-functions")
    if cached is None:
        whole = (0, len(ctx.source.data))
        cached = close_waiting_functions(waits_within(ctx, *whole), lambda names: callers_within(ctx, names, *whole))
        ctx.memo["waiting-functions"] = cached
    return cached  # type: ignore[return-value]


def close_waiting_functions(
    waiting: frozenset[Optional[str]], callers: Callable[[frozenset[str]], frozenset[Optional[str]]]
) -> frozenset[str]:
    """`waiting_functions` from the functions a wait is written in (`waits_within`) and the
    functions that call given ones (`callers_within`); None stands for code outside a function."""
    names: set[str] = set()
    found = waiting
    for _ in range(FUNCTION_DEPTH):
        new = frozenset(name for name in found if name is not None and name not in names)
        if not new:
            break
        names |= new
        found = callers(new)
    return frozenset(names)


def waits_within(ctx: LintContext, start: int, end: int) -> frozenset[Optional[str]]:
    """The names of the functions in which a wait is written within [start, end)."""
    aliases = synchronize_aliases(ctx)
    calls = [*ctx.calls_named(WAIT_CALLS, start, end), *_alias_calls_within(ctx, aliases, start, end)]
    return frozenset(_function_name(call) for call in calls if is_wait(ctx, call))


def callers_within(ctx: LintContext, names: frozenset[str], start: int, end: int) -> frozenset[Optional[str]]:
    """The names of the functions in which one of `names` is called within [start, end)."""
    return frozenset(_function_name(call) for call in _calls_of(ctx, names, start, end))


def _function_name(call: Node) -> Optional[str]:
    function = _enclosing_function(call)
    name = function.child_by_field_name("name") if function is not None else None
    return text(name) if name is not None else None


def _calls_of(ctx: LintContext, names: frozenset[str], start: int, end: int) -> list[Node]:
    found = []
    for ident in ctx.identifiers(names, start, end):
        parent = ident.parent
        call = parent.parent if parent is not None and parent.type == "attribute" else parent
        if call is not None and call.type == "call":
            name = dotted_name(callee(call)) or ""
            parts = name.split(".")
            if parts[-1] in names and (len(parts) == 1 or (len(parts) == 2 and parts[0] in ("self", "cls"))):
                found.append(call)
    return found


def calls_waiting_function(ctx: LintContext, call: Node) -> bool:
    name = dotted_name(callee(call))
    if name is None:
        return False
    parts = name.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[0] in ("self", "cls")):
        return parts[-1] in waiting_functions(ctx)
    return False


def _enclosing_function(node: Node) -> Optional[Node]:
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            return parent
        if parent.type in ("lambda", "class_definition", "module"):
            return None
        parent = parent.parent
    return None


def waiting_function_calls(ctx: LintContext) -> list[Node]:
    """Calls of the functions in `waiting_functions` (`helper()`, `self.helper()`) within the
    context's span. Memoized on the context: AL201 and AL301 both ask, and each answer is a scan."""
    cached = getattr(ctx, "_waiting_function_calls", None)
    if cached is None or cached[0] != ctx.span:
        found = []
        for ident in ctx.identifiers(waiting_functions(ctx), *ctx.span):
            parent = ident.parent
            call = parent.parent if parent is not None and parent.type == "attribute" else parent
            if call is not None and call.type == "call" and calls_waiting_function(ctx, call):
                found.append(call)
        cached = (ctx.span, found)
        ctx._waiting_function_calls = cached
    return list(cached[1])
