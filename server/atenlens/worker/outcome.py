"""Reports for traces that did not end with the runner's own report, and bounded output capture.

Torch-free: the worker process builds these when a trace's child process exits, crashes, is killed
or times out; the client builds them when the worker process itself is gone or a trace is cancelled.
Every abnormal end becomes an ordinary `TraceReport` with one error diagnostic at the traced
function's `def` line (or at the innermost line of the traced file that a crash dump names).
"""

from __future__ import annotations

import os
import re
import signal
from typing import Optional

from atenlens.report import Code, Diagnostic, Target, TraceReport, TraceRequest
from atenlens.traceable import find_functions
from atenlens.worker.limits import CAPTURE_HEAD_BYTES, CAPTURE_TAIL_BYTES

CANCELLED = "cancelled"


class BoundedCapture:
    """Keeps the head and the tail of a byte stream of any length in bounded memory; the middle of
    a flood is dropped with a note saying how much."""

    def __init__(self, head: int = CAPTURE_HEAD_BYTES, tail: int = CAPTURE_TAIL_BYTES) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._tail_limit:  # trim rarely, not on every chunk
                del self._tail[: len(self._tail) - self._tail_limit]

    def text(self) -> str:
        tail = bytes(self._tail[-self._tail_limit :]) if self._tail else b""
        dropped = self.total - len(self._head) - len(tail)
        head_text = self._head.decode("utf-8", errors="replace")
        if dropped <= 0:
            return head_text + tail.decode("utf-8", errors="replace")
        note = f"\n[atenlens: {dropped:,} bytes of output omitted; {self.total:,} bytes in all]\n"
        return head_text + note + tail.decode("utf-8", errors="replace")


def target_def_position(request: TraceRequest) -> tuple[Optional[int], Optional[int]]:
    """(1-based line, 0-based column) of the traced function's `def`, or (None, None)."""
    source = request.source
    if source is None:
        try:
            with open(request.file, encoding="utf-8", errors="replace") as handle:
                source = handle.read()
        except OSError:
            return None, None
    try:
        functions = find_functions(source)
    except (SyntaxError, ValueError):
        return None, None
    for info in functions:
        if info.qualname == request.qualname:
            return info.line, info.column
    return None, None


_DUMP_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


def line_from_crash_dump(stderr: str, file: str) -> Optional[int]:
    """The innermost line of `file` in a faulthandler dump (most recent call first) in `stderr`."""
    wanted = os.path.realpath(file)
    for match in _DUMP_FRAME.finditer(stderr):
        if os.path.realpath(match.group("file")) == wanted:
            return int(match.group("line"))
    return None


def signal_description(signum: int) -> str:
    known: dict[int, str] = {
        signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
        signal.SIGABRT: "aborted (SIGABRT: torch or a C extension called abort())",
        signal.SIGBUS: "crashed with a bus error (SIGBUS)",
        signal.SIGFPE: "crashed with a floating-point exception (SIGFPE)",
        signal.SIGILL: "crashed with an illegal instruction (SIGILL)",
        signal.SIGKILL: "was killed (SIGKILL), most likely by the system for running out of memory",
    }
    if signum in known:
        return known[signum]
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"was killed by {name}"


def abnormal_report(
    request: TraceRequest,
    *,
    status: str,
    code: str,
    kind: str,
    message: str,
    stdout: str = "",
    stderr: str = "",
    notes: tuple[str, ...] = (),
) -> TraceReport:
    """An error/timeout report with one diagnostic at the traced function (or the crash line)."""
    line, column = target_def_position(request)
    crash_line = line_from_crash_dump(stderr, request.file) if stderr else None
    if crash_line is not None:
        line, column = crash_line, None
    file = os.path.abspath(request.file)
    diagnostic = Diagnostic(
        file=file,
        line=line,
        column=column,
        severity="error",
        code=code,
        kind=kind,
        message=message,
    )
    return TraceReport(
        target=Target(file=file, qualname=request.qualname),
        status=status,  # type: ignore[arg-type]
        device=request.device,
        diagnostics=(diagnostic,),
        stdout=stdout,
        stderr=stderr,
        message=message,
        notes=notes,
    )


def cancelled_report(request: TraceRequest, stdout: str = "", stderr: str = "") -> TraceReport:
    """A cancelled trace: status "error", message "cancelled", no diagnostic (nothing is wrong
    with the user's code; the caller asked to stop)."""
    file = os.path.abspath(request.file)
    return TraceReport(
        target=Target(file=file, qualname=request.qualname),
        status="error",
        device=request.device,
        stdout=stdout,
        stderr=stderr,
        message=CANCELLED,
    )


def worker_died_report(request: TraceRequest, message: str, stderr: str = "") -> TraceReport:
    return abnormal_report(
        request,
        status="error",
        code=Code.WORKER_DIED,
        kind="worker-died",
        message=message,
        stderr=stderr,
    )
