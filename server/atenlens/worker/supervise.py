"""The worker's side of one trace: fork the child, read its output and report while it runs,
enforce the hard timeout, honour a cancel, and turn however the child ended into a report."""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from atenlens.report import Code, TraceReport, TraceRequest, to_jsonable
from atenlens.worker.child import DUMP_SIGNAL, EXIT_NO_REPORT, EXIT_REPORT_PIPE_CLOSED, ReportFrameReader, run_child
from atenlens.worker.limits import hard_timeout
from atenlens.worker.outcome import BoundedCapture, abnormal_report, cancelled_report, signal_description
from atenlens.worker.validate import MalformedReport, checked_report

# The child's exit is watched with a pidfd (Linux 5.3+); elsewhere the worker polls at this rate.
USE_PIDFD = hasattr(os, "pidfd_open")
EXIT_POLL_SECONDS = 0.02
# How often the worker reads a running child's private memory (the memory limit, beyond RLIMIT_DATA).
MEMORY_POLL_SECONDS = 0.1
# After asking a stuck child to dump its stacks, how long to wait for the dump before SIGKILL.
DUMP_WAIT_SECONDS = 2.0
DUMP_QUIET_SECONDS = 0.1


class ControlChannel(Protocol):
    """The worker's control input (its stdin), watched while a child runs."""

    fd: int

    def on_readable(self, running_id: Any) -> Optional[str]:
        """Reads what arrived; returns "cancel" (for `running_id`), "eof", or None."""


@dataclass
class ChildEnd:
    """What the worker saw of one child."""

    report_bytes: Optional[bytes]  # the child's report (JSON), None when it wrote none
    stdout: str
    stderr: str
    wait_status: Optional[int]  # os.waitpid status; None when the report came first
    timed_out: bool
    cancelled: bool
    over_memory_limit_mb: Optional[int] = None  # killed for using this much private memory


def private_memory_mb(pid: int) -> Optional[int]:
    """The memory only this process maps (Private_Clean + Private_Dirty of /proc/PID/smaps_rollup):
    what it allocated, wrote over (copy-on-write) or mapped shared and touched alone, but not the
    warm worker's pages it still shares. None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    kib = 0
    for line in data.split(b"\n"):
        if line.startswith((b"Private_Clean:", b"Private_Dirty:")):
            kib += int(line.split()[1])
    return kib // 1024


# /proc/PID/statm counts pages; its resident count can lag the exact one by a few per-CPU batches.
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
RESIDENT_SLACK_MB = 64


def resident_mb(pid: int) -> Optional[int]:
    """Everything the process has resident (`/proc/PID/statm`, kept as counters by the kernel, so
    reading it costs microseconds). None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE_BYTES // (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return None


def memory_over_limit(pid: int, limit_mb: int) -> Optional[int]:
    """The child's private memory in MB when it is over `limit_mb`, else None.

    Private memory is part of the resident memory, so while the resident size is clearly under the
    limit there is nothing to read: smaps_rollup walks every page of the process (about 8 ms of CPU
    for a copy of the 300 MB warm worker, every poll, beside the trace it slows down)."""
    resident = resident_mb(pid)
    if resident is not None and resident + RESIDENT_SLACK_MB <= limit_mb:
        return None
    used = private_memory_mb(pid)
    return used if used is not None and used > limit_mb else None


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    # Called only while the child is unreaped (a zombie at worst), so its pid, which is also its
    # process group id, cannot have been reused by anyone else.
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        pass


def _has_exited(pid: int) -> bool:
    """Whether the child has exited, leaving it unreaped (WNOWAIT), so its group id stays ours."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_stragglers(pgid: int, rounds: int = 100) -> None:
    """After the child is reaped: kill again whatever its group still holds (a process forked while
    the first kill went through the group). A group id stays reserved while any member lives, so
    this cannot hit a stranger; it stops when the group is empty."""
    for _ in range(rounds):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        os.sched_yield()


def _set_nonblocking(fd: int) -> None:
    os.set_blocking(fd, False)


def _drain(fd: int, sink: Any) -> bool:
    """Reads what is available without blocking; returns True at end of file."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError as error:
            if error.errno == errno.EINTR:
                continue
            return True
        if not chunk:
            return True
        sink(chunk)


def run_supervised(
    request: TraceRequest,
    runner: Callable[[TraceRequest], TraceReport],
    *,
    memory_limit_mb: int,
    inherited_fds: tuple[int, ...],
    on_started: Callable[[int], None],
    on_end: Callable[[ChildEnd], None],
    control: ControlChannel,
    request_id: Any,
) -> None:
    """Forks a child for `request`, supervises it, calls `on_end` once with how it ended, and
    returns when the child and everything it forked are gone and reaped.

    A child that wrote its report has nothing left to say (it flushes its output before the report),
    so `on_end` is called as soon as the report is complete; the child's exit (tearing down a copy
    of a 300 MB process) and the reaping happen after the answer, off the caller's clock."""
    nonce = os.urandom(16).hex()
    report_r, report_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        run_child(
            request,
            runner,
            report_fd=report_w,
            nonce=nonce,
            stdout_fd=out_w,
            stderr_fd=err_w,
            close_fds=(report_r, out_r, err_r) + inherited_fds,
            memory_limit_mb=memory_limit_mb,
        )
    for fd in (report_w, out_w, err_w):
        os.close(fd)
    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race
    except OSError:
        pass
    on_started(pid)

    report = ReportFrameReader(nonce)
    stdout = BoundedCapture()
    stderr = BoundedCapture()
    sinks = {report_r: report.feed, out_r: stdout.feed, err_r: stderr.feed}
    pidfd = os.pidfd_open(pid) if USE_PIDFD else None
    selector = selectors.DefaultSelector()
    for fd in sinks:
        _set_nonblocking(fd)
        selector.register(fd, selectors.EVENT_READ, "pipe")
    if pidfd is not None:
        selector.register(pidfd, selectors.EVENT_READ, "exit")
    selector.register(control.fd, selectors.EVENT_READ, "control")

    deadline = time.monotonic() + hard_timeout(request)
    timed_out = cancelled = exited = False
    over_limit: Optional[int] = None  # MB of private memory when the memory limit was exceeded
    next_memory_check = time.monotonic() + MEMORY_POLL_SECONDS
    try:
        while not exited and report.payload is None:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                timed_out = True
                break
            if memory_limit_mb > 0 and now >= next_memory_check:
                next_memory_check = now + MEMORY_POLL_SECONDS
                over_limit = memory_over_limit(pid, memory_limit_mb)
                if over_limit is not None:
                    break
            command = None
            wait = remaining if pidfd is not None else min(remaining, EXIT_POLL_SECONDS)
            if memory_limit_mb > 0:
                wait = min(wait, max(next_memory_check - now, 0.0))
            for key, _ in selector.select(wait):
                if key.data == "pipe":
                    if _drain(key.fd, sinks[key.fd]):
                        selector.unregister(key.fd)
                elif key.data == "exit":
                    exited = True
                elif key.data == "control":
                    command = control.on_readable(request_id) or command
            if command in ("cancel", "eof"):
                cancelled = True
                break
            if pidfd is None and not exited:
                exited = _has_exited(pid)
        payload = report.payload if over_limit is None else None
        if payload is not None and not cancelled:
            for fd in sinks:  # what the child printed is in its pipes by now
                _drain(fd, sinks[fd])
            on_end(ChildEnd(payload, stdout.text(), stderr.text(), None, False, False))
        if timed_out or over_limit is not None:  # the dump names the line it was stuck at (or allocating)
            selector.unregister(control.fd)  # pending control input waits; it is not for us
            _ask_for_stack_dump(pid, err_r, stderr, selector)
        _kill_group(pid)  # the child is dead or dies now; so does anything it forked
        _, wait_status = os.waitpid(pid, 0)
        _kill_stragglers(pid)
        if payload is None or cancelled:
            for fd in sinks:  # everything the child wrote is in the pipes by now
                _drain(fd, sinks[fd])
            on_end(
                ChildEnd(
                    None if over_limit is not None else report.payload,
                    stdout.text(),
                    stderr.text(),
                    wait_status,
                    timed_out,
                    cancelled,
                    over_limit,
                )
            )
    finally:
        selector.close()
        for fd in list(sinks) + ([pidfd] if pidfd is not None else []):
            os.close(fd)


def _ask_for_stack_dump(pid: int, err_r: int, stderr: BoundedCapture, selector: selectors.BaseSelector) -> None:
    """A stuck child is asked (SIGUSR1 -> faulthandler) to print its Python stacks, so the report
    can say which line it was stuck on. faulthandler writes a dump in many small writes, so the
    worker reads until stderr has been quiet for DUMP_QUIET_SECONDS after the dump began, or
    DUMP_WAIT_SECONDS in all."""
    try:
        os.kill(pid, DUMP_SIGNAL)
    except ProcessLookupError:
        return
    before = stderr.total
    now = time.monotonic()
    end = now + DUMP_WAIT_SECONDS
    while now < end:
        began = stderr.total > before
        wait = min(end, now + DUMP_QUIET_SECONDS) - now if began else end - now
        try:
            ready = selector.select(max(wait, 0.0))
        except OSError:
            return
        got = False
        for key, _ in ready:
            if key.fd == err_r:
                got = True
                if _drain(err_r, stderr.feed):
                    return
        if began and not got:
            return  # quiet after the dump began: it is complete
        now = time.monotonic()


def report_for(request: TraceRequest, end: ChildEnd, memory_limit_mb: int) -> dict:
    """The report (as JSON-ready data) for how the child ended."""
    if end.cancelled:
        return to_jsonable(cancelled_report(request, end.stdout, end.stderr))
    if end.over_memory_limit_mb is not None:
        return to_jsonable(
            abnormal_report(
                request,
                status="error",
                code=Code.WORKER_DIED,
                kind="out-of-memory",
                message=f"the process running the trace used {end.over_memory_limit_mb:,} MB of memory of its own, "
                f"over the trace's memory limit of {memory_limit_mb:,} MB, and was killed",
                stdout=end.stdout,
                stderr=end.stderr,
            )
        )
    if end.timed_out:
        seconds = hard_timeout(request)
        return to_jsonable(
            abnormal_report(
                request,
                status="timeout",
                code=Code.TIMEOUT,
                kind="timeout",
                message=f"the trace did not finish within {request.timeout_seconds:g} s "
                f"and was killed after {seconds:g} s",
                stdout=end.stdout,
                stderr=end.stderr,
            )
        )
    if end.report_bytes is not None:
        try:
            data = json.loads(end.report_bytes)
            checked_report(data)
        except (ValueError, RecursionError) as error:  # MalformedReport is a ValueError
            return to_jsonable(
                abnormal_report(
                    request,
                    status="error",
                    code=Code.WORKER_DIED,
                    kind="malformed-report",
                    message=f"the process running the trace wrote a malformed report ({_reason(error)}); "
                    "the traced code may have written over it",
                    stdout=end.stdout,
                    stderr=end.stderr,
                )
            )
        return _merge_output(data, end, memory_limit_mb)
    return to_jsonable(_abnormal_exit_report(request, end, memory_limit_mb))


def _reason(error: BaseException) -> str:
    if isinstance(error, MalformedReport):
        return str(error)
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return f"not JSON: {error}"


def _merge_output(data: dict, end: ChildEnd, memory_limit_mb: int) -> dict:
    """The runner's report plus the child's fd-level stdout/stderr (C-level output, prints the
    runner did not capture itself)."""
    for key, captured in (("stdout", end.stdout), ("stderr", end.stderr)):
        if captured:
            data[key] = (data.get(key) or "") + captured
    if memory_limit_mb > 0:
        for diagnostic in data.get("diagnostics") or []:
            message = diagnostic.get("message") or ""
            if diagnostic.get("kind") == "exception" and _is_out_of_memory(message):
                diagnostic["message"] = message + f" (the trace's memory limit is {memory_limit_mb} MB)"
    return data


_DEEP_STACK_FRAMES = 100  # faulthandler prints at most this many frames per thread


def _dump_depth(stderr: str) -> int:
    """Frames in the first thread of a faulthandler dump in `stderr`."""
    start = stderr.find("(most recent call first):")
    if start < 0:
        return 0
    block = stderr[start:].split("\n\n", 1)[0]
    return sum(1 for line in block.splitlines() if line.lstrip().startswith('File "'))


def _is_out_of_memory(text: str) -> bool:
    return "MemoryError" in text or "can't allocate memory" in text or "bad_alloc" in text


def _abnormal_exit_report(request: TraceRequest, end: ChildEnd, memory_limit_mb: int) -> TraceReport:
    status = end.wait_status
    out_of_memory = _is_out_of_memory(end.stderr)
    if status is not None and os.WIFSIGNALED(status):
        what = signal_description(os.WTERMSIG(status))
        kind = "crash"
        if os.WTERMSIG(status) == signal.SIGSEGV and _dump_depth(end.stderr) >= _DEEP_STACK_FRAMES:
            what += f"; its stack was over {_DEEP_STACK_FRAMES} frames deep (unbounded recursion?)"
    elif status is not None and os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if code == 0:
            what = "exited (exit code 0) without a report: the traced code ended it or wrote over the report"
        elif code == EXIT_NO_REPORT and out_of_memory:
            what = "could not write its report"
        elif code == EXIT_REPORT_PIPE_CLOSED:
            what = (
                "could not write its report: the traced code closed the file descriptors the trace writes to "
                "(os.close or os.closerange), so its output and report were lost"
            )
        else:
            what = f"exited with exit code {code} (os._exit, or a C extension called exit())"
        kind = "exit"
    else:
        what, kind = "ended in an unknown way", "crash"
    if out_of_memory:
        what += f"; it ran out of memory (limit {memory_limit_mb} MB)"
        kind = "out-of-memory"
    return abnormal_report(
        request,
        status="error",
        code=Code.WORKER_DIED,
        kind=kind,
        message=f"the process running the trace {what}",
        stdout=end.stdout,
        stderr=end.stderr,
    )
