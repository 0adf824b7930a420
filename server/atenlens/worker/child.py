"""The forked child that runs one trace, then `os._exit`s.

It inherits the warm worker (torch imported, fake mode warmed up) by fork, so a trace starts at
once, and whatever the user's module does to the process (globals, monkey patches, threads, a
crash) dies with the child. The child never touches the protocol stream: fd 0 is /dev/null,
fds 1 and 2 are pipes the worker reads (so C-level output is captured too), and the report goes
to its own pipe.
"""

from __future__ import annotations

import ctypes
import errno
import faulthandler
import io
import os
import resource
import signal
import sys
import traceback
from typing import Callable, Optional

from atenlens.report import Code, TraceReport, TraceRequest
from atenlens.worker.outcome import abnormal_report

# The signal the worker sends before a hard kill, so the child writes where it was stuck.
DUMP_SIGNAL = signal.SIGUSR1
EXIT_NO_REPORT = 70  # the child could not even build an error report
EXIT_REPORT_PIPE_CLOSED = 71  # the traced code closed the report pipe's descriptor

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this child if the worker dies, so no trace outlives its worker."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def apply_memory_limit(limit_mb: int) -> None:
    """Cap the child's data segment (heap and private anonymous mappings; RLIMIT_DATA, Linux
    >= 4.7). Unlike RLIMIT_AS it does not count torch's ~400 MB of mapped libraries or reserved
    thread stacks, so the number means what a user expects: memory the trace may allocate."""
    if limit_mb <= 0:
        return
    limit = limit_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def report_frame(nonce: str, payload: bytes) -> bytes:
    """The report as written to the report pipe. The traced code can write to any descriptor the
    child holds, that pipe included; the worker takes the frame carrying the nonce it chose for
    this trace and ignores anything else in the pipe."""
    return f"\natenlens-report {nonce} {len(payload)}\n".encode("ascii") + payload


class ReportFrameReader:
    """Reads the report pipe incrementally and knows when the framed report is complete (the pipe
    itself may never end: something the traced code forked can hold it open)."""

    def __init__(self, nonce: str) -> None:
        self._marker = f"\natenlens-report {nonce} ".encode("ascii")
        self._data = bytearray()
        self._scanned = 0  # where the marker search resumes
        self._start: Optional[int] = None
        self._length: Optional[int] = None

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if self._length is None:
            self._find_header()

    def _find_header(self) -> None:
        found = self._data.find(self._marker, max(0, self._scanned - len(self._marker)))
        if found < 0:
            self._scanned = len(self._data)
            return
        self._scanned = found
        header_end = self._data.find(b"\n", found + len(self._marker))
        if header_end < 0:
            return
        try:
            self._length = int(self._data[found + len(self._marker) : header_end])
        except ValueError:  # cannot happen without the nonce; skip this marker
            self._scanned = header_end
            return
        self._start = header_end + 1

    @property
    def payload(self) -> Optional[bytes]:
        """The report's JSON once complete, else None."""
        if self._length is None or self._start is None or len(self._data) < self._start + self._length:
            return None
        return bytes(self._data[self._start : self._start + self._length])


def run_child(
    request: TraceRequest,
    runner: Callable[[TraceRequest], TraceReport],
    *,
    report_fd: int,
    nonce: str,
    stdout_fd: int,
    stderr_fd: int,
    close_fds: tuple[int, ...],
    memory_limit_mb: int,
) -> None:
    """Runs in the child after fork; never returns."""
    status = EXIT_NO_REPORT
    me = os.getpid()
    try:
        os.setpgid(0, 0)  # its own process group: the worker kills it and all it forked
        _die_with_parent()
        for fd in close_fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        os.close(stdout_fd)
        os.close(stderr_fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        signal.signal(signal.SIGINT, signal.default_int_handler)
        faulthandler.enable(file=sys.stderr, all_threads=True)  # a crash names the user's line
        faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True)
        sys.dont_write_bytecode = True  # tracing leaves no __pycache__ in the user's project
        apply_memory_limit(memory_limit_mb)
        try:
            report = runner(request)
        except SystemExit as exit_:  # the runner reports user exceptions; this is a last resort
            report = abnormal_report(
                request,
                status="error",
                code=Code.WORKER_DIED,
                kind="exit",
                message=f"the traced code called sys.exit({exit_.code!r})",
            )
        except BaseException as error:  # noqa: BLE001 - anything left must still become a report
            report = abnormal_report(
                request,
                status="error",
                code=Code.WORKER_DIED,
                kind="internal-error",
                message=f"atenlens failed while tracing: {type(error).__name__}: {error}",
                stderr=traceback.format_exc(),
            )
        if os.getpid() != me:
            os._exit(0)  # a copy the traced code forked: only the child reports
        payload = report.to_json().encode("utf-8")
        _flush_all()  # all output is in its pipes before the report is complete,
        try:
            _write_all(report_fd, report_frame(nonce, payload))  # so the worker can answer at once
            os.close(report_fd)
        except OSError as error:
            if error.errno != errno.EBADF:
                raise
            status = EXIT_REPORT_PIPE_CLOSED
            return  # (the finally exits)
        status = 0
    except BaseException:  # noqa: BLE001
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        _flush_all()
        os._exit(status)


def _flush_all() -> None:
    """Python's and C's stdio buffers (os._exit skips C's exit handlers, so what C extensions
    printf'ed would be lost)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
