"""AL301 unsynced-timing: wall-clock timing of CUDA work with no synchronize before the second clock read.

What it does:
    Looks at the wall-clock reads of each function (or of the module's top level):
    `time.time()`, `time.perf_counter()`, `time.monotonic()` and their `_ns` forms (also
    imported bare: `perf_counter()`, `monotonic()`). For each two consecutive reads of the same
    clock (in text order), it flags the second one when
    1. the function's text mentions CUDA — the word `cuda` or `device` — anywhere, and
    2. there is a call between the two reads that can be the work being timed: not a clock
       read, not `print` or a logging call (`logging.*`, `logger.*`, `log.*`), not a builtin
       that never touches a tensor (`range`, `len`, `enumerate`, `zip`, `list`, `dict`,
       `tuple`, `set`, `str`, `int`, `float`, `bool`, `isinstance`, `sorted`, `repr`,
       `format`) and not a list or dict method (`append`, `extend`, `items`, `keys`,
       `values`, `get`), and
    3. no call between the two reads waits for the GPU: a `synchronize` call
       (`torch.cuda.synchronize()`, `event.synchronize()`, `stream.synchronize()`) or a call of
       `.item()`, `.tolist()`, `.cpu()` or `.numpy()` (each waits for the queued work).

Why it matters:
    CUDA kernels are launched asynchronously. Without a synchronize before the second clock
    read, the interval measures how long the host took to queue the work, not how long the GPU
    took to run it. Lint only: the engine does not report it.

Example:
    start = time.perf_counter()
    out = model(x.cuda())
    elapsed = time.perf_counter() - start

Fix:
    Call `torch.cuda.synchronize()` before the second read, or time with CUDA events:
    `start = torch.cuda.Event(enable_timing=True)`, `end = ...`, `start.record()`, work,
    `end.record()`, `end.synchronize()`, `start.elapsed_time(end)` (milliseconds).
"""
from __future__ import annotations

import bisect
import re
from typing import Iterator

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.dataflow import scope_for
from atenlens.lint.findings import Finding
from atenlens.lint.registry import Rule
from atenlens.lint.syntax import callee, dotted_name, method_name
from atenlens.report import Code

CLOCK_FUNCTIONS = ("time", "perf_counter", "monotonic", "time_ns", "perf_counter_ns", "monotonic_ns")
CLOCK_NAMES = frozenset({f"time.{n}" for n in CLOCK_FUNCTIONS} | {n for n in CLOCK_FUNCTIONS if n != "time"})
WAITING_METHODS = frozenset({"synchronize", "item", "tolist", "cpu", "numpy"})
NOT_WORK = frozenset({"print", "range", "len", "enumerate", "zip", "list", "dict", "tuple", "set", "str", "int",
                      "float", "bool", "isinstance", "sorted", "repr", "format"})
NOT_WORK_METHODS = frozenset({"append", "extend", "items", "keys", "values", "get"})
_MENTIONS_CUDA = re.compile(rb"\b(cuda|device)\b")


def is_clock_read(call: Node) -> bool:
    return dotted_name(callee(call)) in CLOCK_NAMES


def _is_logging(call: Node) -> bool:
    name = dotted_name(callee(call)) or ""
    head = name.split(".")[0]
    return (name in NOT_WORK or head in ("logging", "logger", "log", "LOGGER")
            or method_name(call) in NOT_WORK_METHODS)


def _waits(call: Node) -> bool:
    name = dotted_name(callee(call)) or ""
    return (method_name(call) or name) in WAITING_METHODS or name.endswith(".synchronize")


def check(ctx: LintContext) -> Iterator[Finding]:
    by_clock: dict[tuple[int, str], list[Node]] = {}
    scopes: dict[int, Node] = {}
    for call in ctx.calls(*CLOCK_FUNCTIONS):
        if is_clock_read(call):
            scope = scope_for(call)
            clock = (dotted_name(callee(call)) or "").split(".")[-1]
            by_clock.setdefault((scope.id, clock), []).append(call)
            scopes[scope.id] = scope
    waiting = [c for c in ctx.calls(*WAITING_METHODS) if _waits(c)]
    waiting_starts = [c.start_byte for c in waiting]
    for (scope_id, _), reads in by_clock.items():
        if len(reads) < 2:
            continue
        scope = scopes[scope_id]
        if not _MENTIONS_CUDA.search(ctx.source.data, scope.start_byte, scope.end_byte):
            continue
        for first, second in zip(reads, reads[1:]):
            start, end = first.end_byte, second.start_byte
            first_wait = bisect.bisect_left(waiting_starts, start)
            if any(c.end_byte <= end and scope_for(c) == scope
                   for c in waiting[first_wait:bisect.bisect_left(waiting_starts, end)]):
                continue
            work = next((c for c in ctx.calls_within(start, end)
                         if scope_for(c) == scope and not is_clock_read(c) and not _is_logging(c)), None)
            if work is None:
                continue
            name = dotted_name(callee(second))
            line = ctx.source.position(first.start_point)[0]
            yield ctx.finding(
                Code.UNSYNCED_TIMING,
                f"`{name}()` read with no synchronize since the clock read on line {line}: CUDA work is "
                "asynchronous, so the interval measures its launch, not its run time",
                second,
            )


RULE = Rule(
    code=Code.UNSYNCED_TIMING,
    name="unsynced-timing",
    summary="wall-clock timing of CUDA work with no synchronize before the second clock read",
    calls=frozenset(CLOCK_FUNCTIONS) | WAITING_METHODS,
    check=check,
    doc=__doc__ or "",
)
