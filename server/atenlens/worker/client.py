"""The client side of the trace worker, used by the language server and by `atenlens trace`.

Torch-free (a test asserts it): it starts `python -m atenlens.worker` as a subprocess, talks to it
over pipes (docs/worker.md) and turns everything that can go wrong on the way (the worker fails to
start, dies, stops answering, the caller cancels) into an ordinary `TraceReport`.

Concurrency, one model: each worker process has one reader thread, the only reader of its stdout
and stderr, which routes each answer to the trace waiting for it by request id. All state (of the
client and of each worker process) is guarded by one condition variable; whoever changes it
notifies, and whoever waits, waits on it for what it needs. `trace()` runs one trace at a time per
worker (a second caller waits for the first; a caller that wants to supersede calls `cancel()`
first), and its thread is the only one that writes to the worker: the request, then the cancel that
`cancel()` asks for, and it decides when a worker that does not answer is killed. So there is no
timer thread, and a cancel can never be written before its request. `cancel()`, `close()`, `alive`
and `pid` may be called from any thread.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import IO, Any, Callable, Mapping, Optional

import atenlens
from atenlens.report import TraceReport, TraceRequest, from_jsonable, to_jsonable
from atenlens.worker.limits import DEFAULT_MEMORY_LIMIT_MB, hard_timeout
from atenlens.worker.outcome import cancelled_report, worker_died_report

DEFAULT_STARTUP_TIMEOUT = 240.0  # a first start may compile the simulated-CUDA shims; torch on a cold disk is slow too
# How long past the worker's own hard timeout (limits.hard_timeout) the client waits for an answer before it decides
# the worker itself is stuck and kills it.
ANSWER_MARGIN_SECONDS = 15.0
# How long a cancelled trace may take to come back before the client kills the worker.
CANCEL_WAIT_SECONDS = 5.0
STDERR_TAIL_BYTES = 16 * 1024

# Environment variables passed to the worker (docs/worker.md): what Python, torch and the user's
# code need to start and find their files; nothing else (no tokens, no editor state).
PASSED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "PYTHONHOME",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_HOME",
    "XDG_CACHE_HOME",
    "CXX",
)
PASSED_ENV_PREFIXES = ("ATENLENS_",)  # the product's own settings (ATENLENS_CACHE_DIR, ATENLENS_CXX)


def _package_root() -> str:
    """The folder that holds the `atenlens` package this client was imported from."""
    return os.path.dirname(os.path.dirname(os.path.abspath(atenlens.__file__)))


def worker_environment(extra: Optional[dict] = None, base: Optional[dict] = None) -> dict:
    """The worker's environment: PASSED_ENV from `base` (default os.environ), PYTHONPATH with this
    client's package root first (the language server may run from a bundled sys.path the worker
    cannot see), one OpenMP thread, then `extra` on top."""
    source: Mapping[str, str] = os.environ if base is None else base
    env = {name: value for name, value in source.items() if name in PASSED_ENV or name.startswith(PASSED_ENV_PREFIXES)}
    paths = [_package_root()] + [p for p in source.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra or {})
    return env


WRITE_CHUNK_BYTES = 4096  # PIPE_BUF: a pipe that selects writable takes this much without blocking
READER_THREAD_NAME = "atenlens-worker-reader"


class _Pending:
    """One trace of this client: made by `trace()`, answered by the reader thread (or by `trace()`
    itself when it gives up on the worker)."""

    def __init__(
        self, request_id: int, request: TraceRequest, on_started: Optional[Callable[[int], None]] = None
    ) -> None:
        self.id = request_id
        self.request = request
        self.on_started = on_started
        self.report: Optional[TraceReport] = None
        # Set once the request is on its way to a worker that said it was ready. Before that the
        # trace has nothing in the worker to cancel, and a worker that dies is a start failure.
        self.sent = False
        # When `cancel()` was asked: the worker must have answered by then (monotonic seconds).
        self.cancel_by: Optional[float] = None

    def finish(self, report: TraceReport) -> None:
        """The first report wins (the caller holds the condition)."""
        if self.report is None:
            self.report = report


_PROC = os.path.isdir("/proc/self")


def _exited(process: subprocess.Popen) -> bool:
    """Has the worker process ended? `poll()` answers None while another thread is inside
    `wait()` for it (the reader thread reaping a killed worker), so on Linux its state in /proc
    decides: a zombie, or no entry left, has ended."""
    if process.poll() is not None:
        return True
    if not _PROC:
        return False
    try:
        with open(f"/proc/{process.pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[:1]
    except FileNotFoundError:
        return True  # reaped by the thread that waits for it
    except OSError:
        return False
    return state in ([b"Z"], [b"X"])


class _Connection:
    """One worker process: its pipes, what it said, the traces sent to it, and its reader thread.
    Every field is guarded by the client's condition."""

    def __init__(self, process: subprocess.Popen, changed: threading.Condition) -> None:
        self.process = process
        self.changed = changed
        self.state = "starting"  # then "ready", or "failed" (it said "fatal")
        self.ready_info: dict = {}
        self.fatal: Optional[str] = None
        self.ended = False  # its output is read to the end and its exit status is known
        self.discarded = False  # the client gave up on it (killed, replaced or closed)
        self.stdin_closed = False
        self.sent: dict[Any, _Pending] = {}  # request id -> the trace it answers
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self.reader = threading.Thread(target=self._read, name=READER_THREAD_NAME, daemon=True)

    def usable(self) -> bool:
        return not (self.discarded or self.ended or self.state == "failed") and not _exited(self.process)

    def stderr_text(self) -> str:
        return b"".join(self._stderr).decode("utf-8", errors="replace")[-STDERR_TAIL_BYTES:]

    def _keep_stderr(self, chunk: bytes) -> None:
        self._stderr.append(chunk)
        self._stderr_size += len(chunk)
        while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr) > 1:
            self._stderr_size -= len(self._stderr.popleft())

    def close_stdin(self) -> None:
        """The worker ends its running trace and itself at the end of its input (caller holds the condition)."""
        if not self.stdin_closed:
            self.stdin_closed = True
            try:
                _pipe(self.process.stdin).close()
            except OSError:
                pass

    def death_report(self, pending: _Pending) -> TraceReport:
        if pending.cancel_by is not None:
            return cancelled_report(pending.request)
        code = self.process.poll()
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited (exit code {code})"
        return worker_died_report(
            pending.request, f"the trace worker {how}; the next trace starts a new one", self.stderr_text()
        )

    # -- the reader thread ---------------------------------------------------------------------

    def _read(self) -> None:
        out, err = _pipe(self.process.stdout), _pipe(self.process.stderr)
        buffered = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ)
            selector.register(err, selectors.EVENT_READ)
            # Until both pipes end, or the worker has exited and its pipes stay quiet for 0.5 s
            # (something it forked may still hold them open).
            while selector.get_map():
                events = selector.select(timeout=0.5)
                if not events and self.process.poll() is not None:
                    break
                for key, _ in events:
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.fileobj is err:
                        with self.changed:
                            self._keep_stderr(chunk)
                    else:
                        buffered += chunk
                        while (newline := buffered.find(b"\n")) >= 0:
                            line = bytes(buffered[:newline])
                            del buffered[: newline + 1]
                            self._dispatch(line)
        try:
            self.process.wait(timeout=5.0)  # both pipes ended: the worker is exiting
        except subprocess.TimeoutExpired:
            pass
        out.close()
        err.close()
        with self.changed:
            self.ended = True
            for pending in self.sent.values():  # only a trace whose request was sent dies with the worker
                pending.finish(self.death_report(pending))
            self.changed.notify_all()

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return  # cannot happen: only the worker writes here
        if not isinstance(message, dict):
            return
        event = message.get("event")
        report: Optional[TraceReport] = None
        if "report" in message:
            try:  # decoded outside the lock; the worker checked it (worker/validate.py)
                report = from_jsonable(TraceReport, message["report"])
            except (TypeError, ValueError, KeyError, AttributeError) as error:
                message = {"id": message.get("id"), "error": f"unreadable report from the worker: {error}"}
        started: Optional[tuple[Callable[[int], None], int]] = None
        with self.changed:
            if event == "ready":
                self.state, self.ready_info = "ready", message
            elif event == "fatal":
                self.state, self.fatal = "failed", message.get("message") or "unknown error"
                self._keep_stderr((message.get("traceback") or "").encode())
            else:
                pending = self.sent.get(message.get("id"))
                if pending is None:
                    return  # an answer for a trace given up on
                if event == "started":
                    if pending.on_started is not None and isinstance(message.get("pid"), int):
                        started = (pending.on_started, message["pid"])
                elif report is not None:
                    pending.finish(report)
                elif "error" in message:
                    pending.finish(worker_died_report(pending.request, str(message["error"])))
            self.changed.notify_all()
        if started is not None:
            try:
                started[0](started[1])
            except Exception:  # noqa: BLE001 - a caller's callback must not stop the reader
                pass


class TraceWorker:
    """A warm trace worker process, started on demand and replaced when it dies."""

    def __init__(
        self,
        python: str = sys.executable,
        env: Optional[dict] = None,
        memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        self.python = python
        self.env = env
        self.memory_limit_mb = memory_limit_mb
        self.startup_timeout = startup_timeout
        self._changed = threading.Condition()  # guards the fields below and every _Connection's
        self._trace_lock = threading.Lock()  # one trace() at a time
        self._connection: Optional[_Connection] = None
        self._current: Optional[_Pending] = None  # the trace `cancel()` cancels
        self._ready_info: dict = {}
        self._closed = False
        self._ids = itertools.count(1)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the worker in the background (returns at once); a no-op while one is alive. A
        worker that cannot be started is reported by the next trace(), not raised here."""
        with self._changed:
            if self._closed:
                raise RuntimeError("TraceWorker is closed")
            if self._connection is None or not self._connection.usable():
                self._spawn()

    def _spawn(self) -> Optional[str]:
        """Starts a worker process (caller holds the condition); returns why it could not, or None."""
        old, self._connection = self._connection, None
        if old is not None:
            self._discard(old)
        # -P: the current directory (the workspace, where editors start servers) is not on sys.path,
        # so a `copy.py` there neither breaks nor runs in the worker (Python 3.11+, as pyproject says)
        command = [self.python, "-P", "-m", "atenlens.worker", "--memory-limit-mb", str(self.memory_limit_mb)]
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,  # the pipes are read and written with os.read / os.write only
                env=worker_environment(self.env),
                start_new_session=True,  # a Ctrl-C in the caller's terminal is the caller's to handle
                close_fds=True,
            )
        except OSError as error:
            return f"cannot run {self.python!r}: {error.strerror or error}"
        self._connection = _Connection(process, self._changed)
        self._ready_info = {}
        self._connection.reader.start()
        return None

    @property
    def alive(self) -> bool:
        with self._changed:
            return self._connection is not None and self._connection.usable()

    @property
    def pid(self) -> Optional[int]:
        """The worker process's pid (None before start)."""
        with self._changed:
            return self._connection.process.pid if self._connection is not None else None

    @property
    def ready_info(self) -> dict:
        """What the worker said when it became ready: pid, torch version, warm-up seconds, notes."""
        with self._changed:
            if self._connection is not None and self._connection.ready_info:
                self._ready_info = self._connection.ready_info
            return dict(self._ready_info)

    def wait_ready(self, timeout: Optional[float] = None) -> bool:
        """Starts the worker if needed and waits until it is warm; False on failure or timeout."""
        self.start()
        with self._changed:
            connection = self._connection
            if connection is None:
                return False
            self._changed.wait_for(
                lambda: connection.state != "starting" or not connection.usable(),
                self.startup_timeout if timeout is None else timeout,
            )
            return connection.state == "ready" and connection.usable()

    def close(self, grace: float = 2.0) -> None:
        """Ends the worker (and any trace it runs); the pending trace() returns "cancelled". The
        worker ends its trace and itself at the end of its input; one that has not after `grace`
        seconds is killed. Returns once its reader thread has ended."""
        with self._changed:
            self._closed = True
            connection, self._connection = self._connection, None
            if self._current is not None:
                self._current.cancel_by = time.monotonic()
                self._current.finish(cancelled_report(self._current.request))
            if connection is not None:
                connection.discarded = True
                connection.close_stdin()
            self._changed.notify_all()
        if connection is not None:
            try:
                connection.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _kill(connection.process)  # its trace children die with it (PR_SET_PDEATHSIG)
            connection.reader.join(timeout=5.0)

    def __enter__(self) -> "TraceWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _discard(self, connection: _Connection, report: Optional[tuple[_Pending, TraceReport]] = None) -> None:
        """Gives up on a worker process: `report` answers its trace first (so that the reader, seeing
        the worker die, does not answer it as a death), then the process is killed. Caller holds the
        condition; the kill takes milliseconds (SIGKILL to its session)."""
        if report is not None:
            report[0].finish(report[1])
        connection.discarded = True
        if self._connection is connection:
            self._connection = None
        connection.close_stdin()
        _kill(connection.process)
        self._changed.notify_all()

    # -- tracing -------------------------------------------------------------------------------

    def trace(
        self,
        request: TraceRequest,
        on_started: Optional[Callable[[int], None]] = None,
        is_cancelled: Optional[Callable[[], bool]] = None,
    ) -> TraceReport:
        """Runs one trace in the worker and returns its report; never raises for what the traced
        code or the worker does. Blocks while another trace of this worker runs. `on_started`
        (optional) is called, on the client's reader thread, with the pid of the process running
        the trace once it runs. `is_cancelled` (optional) is asked once this trace is the one that
        `cancel()` cancels: a caller that decided to cancel before that (while this call was on
        its way, or waiting for another trace) says so there, and nothing runs."""
        with self._trace_lock:
            with self._changed:
                if self._closed:
                    return cancelled_report(request)
                if self._connection is None or not self._connection.usable():
                    failure = self._spawn()
                    if failure is not None:
                        return worker_died_report(request, f"the trace worker could not start: {failure}")
                connection = self._connection
                assert connection is not None  # started above when there was none
                pending = self._current = _Pending(next(self._ids), request, on_started)
            try:
                if is_cancelled is not None and is_cancelled():
                    return cancelled_report(request)
                return self._run(connection, pending)
            finally:
                with self._changed:
                    self._current = None
                    connection.sent.pop(pending.id, None)

    def _run(self, connection: _Connection, pending: _Pending) -> TraceReport:
        with self._changed:
            started = self._changed.wait_for(
                lambda: connection.state != "starting" or connection.ended or pending.report is not None,
                self.startup_timeout,
            )
            if pending.report is not None:
                return pending.report  # cancelled or closed while the worker started
            if not started:
                stderr = connection.stderr_text()
                self._discard(connection)
                return worker_died_report(
                    pending.request, f"the trace worker did not start within {self.startup_timeout:g} s", stderr
                )
            if connection.state != "ready" or connection.ended:
                return self._start_failure(connection, pending)
            connection.sent[pending.id] = pending
            pending.sent = True
        deadline = time.monotonic() + hard_timeout(pending.request) + ANSWER_MARGIN_SECONDS
        self._write(connection, pending, {"id": pending.id, "request": to_jsonable(pending.request)}, deadline)
        cancel_written = False
        while True:
            with self._changed:
                while pending.report is None and (pending.cancel_by is None or cancel_written):
                    left = self._give_up_at(pending, deadline) - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                if pending.report is not None:
                    return self._answer(pending)
                if pending.cancel_by is None or cancel_written or time.monotonic() >= pending.cancel_by:
                    # the worker did not answer in time: replace it (the next trace starts a new one)
                    given_up = (
                        cancelled_report(pending.request)
                        if pending.cancel_by is not None
                        else worker_died_report(
                            pending.request,
                            "the trace worker stopped answering and was restarted",
                            connection.stderr_text(),
                        )
                    )
                    self._discard(connection, (pending, given_up))
                    return self._answer(pending)
            cancel_written = True  # written here, by the thread that wrote the request: never before it
            self._write(connection, pending, {"id": pending.id, "cancel": True}, deadline)

    @staticmethod
    def _give_up_at(pending: _Pending, deadline: float) -> float:
        return min(deadline, pending.cancel_by if pending.cancel_by is not None else math.inf)

    @staticmethod
    def _answer(pending: _Pending) -> TraceReport:
        report = pending.report
        assert report is not None, "asked for the report of an unfinished trace"
        if pending.cancel_by is not None and report.message != "cancelled":
            return cancelled_report(pending.request, report.stdout, report.stderr)
        return report

    def _start_failure(self, connection: _Connection, pending: _Pending) -> TraceReport:
        """The worker said "fatal", or ended, before this trace's request was sent: report why, with
        what it wrote to stderr (read to its end first: the reason is often its last line). The
        caller holds the condition."""
        self._changed.wait_for(lambda: connection.ended, CANCEL_WAIT_SECONDS)
        if connection.fatal is None and connection.ready_info:
            report = connection.death_report(pending)  # it was ready, then died before the request
        else:
            code = connection.process.poll()
            message = connection.fatal or f"the trace worker exited while starting (exit code {code})"
            report = worker_died_report(
                pending.request, f"the trace worker could not start: {message}", connection.stderr_text()
            )
        self._discard(connection)
        return report

    def _write(self, connection: _Connection, pending: _Pending, message: dict, deadline: float) -> None:
        """Writes one message to the worker, a chunk at a time when its stdin can take it, so that a
        worker that stops reading never blocks this thread past the moment to give up on it. A write
        that fails (the worker died) is answered by the reader, which sees the worker end."""
        data = memoryview((json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8"))
        stdin = _pipe(connection.process.stdin)
        while data and time.monotonic() < self._give_up_at(pending, deadline):
            try:
                _, writable, _ = select.select([], [stdin], [], 0.1)
            except (OSError, ValueError):  # closed under us
                return
            if not writable:
                continue
            with self._changed:  # stdin is closed under the condition, so not between these lines
                if connection.stdin_closed or connection.discarded:
                    return
                try:
                    data = data[os.write(stdin.fileno(), data[:WRITE_CHUNK_BYTES]) :]
                except OSError:
                    return

    def cancel(self) -> bool:
        """Kills the running trace (from any thread); its trace() returns status "error" with
        message "cancelled". Returns False when no trace was running."""
        with self._changed:
            pending = self._current
            if pending is None or pending.report is not None:
                return False
            if pending.cancel_by is not None:
                return True  # cancelled already; its deadline stands
            pending.cancel_by = time.monotonic() + CANCEL_WAIT_SECONDS
            if not pending.sent:  # nothing in the worker to cancel yet
                pending.finish(cancelled_report(pending.request))
            self._changed.notify_all()
            return True


def _kill(process: subprocess.Popen) -> None:
    # The worker's trace children die with it (PR_SET_PDEATHSIG); the worker is its own session.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.kill()
    except OSError:
        pass
    try:
        process.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass


def _pipe(stream: Optional[IO[Any]]) -> IO[Any]:
    """One of the worker's standard streams: pipes, as `_spawn` starts them (unbuffered)."""
    assert stream is not None, "the worker's pipes are opened by _spawn"
    return stream
