"""The client side of the trace worker, used by the language server and by `atenlens trace`.

Torch-free (a test asserts it): it starts `python -m atenlens.worker` as a subprocess, talks to it
over pipes (docs/worker.md) and turns everything that can go wrong on the way (the worker fails to
start, dies, stops answering, the caller cancels) into an ordinary `TraceReport`.

Thread model: `trace()` blocks and runs one trace at a time per worker; a second caller waits for
the first to finish (a caller that wants to supersede calls `cancel()` first). `cancel()`,
`close()` and `alive` may be called from any thread.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import IO, Callable, Mapping, Optional

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


class _Pending:
    """One trace in flight."""

    def __init__(
        self, request_id: int, request: TraceRequest, on_started: Optional[Callable[[int], None]] = None
    ) -> None:
        self.id = request_id
        self.request = request
        self.on_started = on_started
        self.done = threading.Event()
        self.report: Optional[TraceReport] = None
        self.child_pid: Optional[int] = None
        self.cancelled = False
        # Set (under the client's state lock) once the request is on its way to a worker that said
        # it was ready. Before that, the trace has nothing in the worker to cancel, and a worker that
        # dies is a start failure, which the tracing thread reports with its cause.
        self.sent = False

    def finish(self, report: TraceReport) -> None:
        if not self.done.is_set():
            self.report = report
            self.done.set()

    def answer(self) -> TraceReport:
        """The report, once `done` is set (finish() sets both)."""
        assert self.report is not None, "asked for the report of an unfinished trace"
        return self.report


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
        self._state = threading.Lock()  # guards the fields below
        self._trace_lock = threading.Lock()  # one trace at a time
        self._process: Optional[subprocess.Popen] = None
        self._ready = threading.Event()  # set when the worker is ready, failed to start, or ended
        self._ended = threading.Event()  # set when the client has read all of the worker's output
        self._ready_info: dict = {}
        self._fatal: Optional[str] = None
        self._pending: Optional[_Pending] = None
        self._stderr_tail: deque[bytes] = deque()
        self._ids = itertools.count(1)
        self._closed = False
        self._send_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the worker in the background (returns at once); a no-op while one is alive. A
        worker that cannot be started is reported by the next trace(), not raised here."""
        with self._state:
            if self._closed:
                raise RuntimeError("TraceWorker is closed")
            if self._process is not None and self._process.poll() is None:
                return
            self._spawn()

    def _spawn(self) -> Optional[str]:
        """Starts a worker process; returns why it could not be started, or None."""
        # -P: the current directory (the workspace, where editors start servers) is not on sys.path,
        # so a `copy.py` there neither breaks nor runs in the worker (Python 3.11+, as pyproject says)
        command = [self.python, "-P", "-m", "atenlens.worker", "--memory-limit-mb", str(self.memory_limit_mb)]
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=worker_environment(self.env),
                start_new_session=True,  # a Ctrl-C in the caller's terminal is the caller's to handle
                close_fds=True,
            )
        except OSError as error:
            self._process = None
            return f"cannot run {self.python!r}: {error.strerror or error}"
        self._process = process
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._ready_info = {}
        self._fatal = None
        self._stderr_tail = deque()
        threading.Thread(
            target=self._read_responses,
            args=(process, self._ready, self._ended),
            name="atenlens-worker-out",
            daemon=True,
        ).start()
        threading.Thread(
            target=self._read_stderr, args=(process, self._stderr_tail), name="atenlens-worker-err", daemon=True
        ).start()
        return None

    @property
    def alive(self) -> bool:
        with self._state:
            return self._process is not None and self._process.poll() is None and self._fatal is None

    @property
    def pid(self) -> Optional[int]:
        """The worker process's pid (None before start)."""
        with self._state:
            return self._process.pid if self._process is not None else None

    @property
    def ready_info(self) -> dict:
        """What the worker said when it became ready: pid, torch version, warm-up seconds, notes."""
        return dict(self._ready_info)

    def wait_ready(self, timeout: Optional[float] = None) -> bool:
        """Starts the worker if needed and waits until it is warm; False on failure or timeout."""
        self.start()
        with self._state:
            if self._process is None:
                return False
            ready = self._ready
        return ready.wait(self.startup_timeout if timeout is None else timeout) and self.alive

    def close(self, grace: float = 2.0) -> None:
        """Ends the worker (and any trace it runs); the pending trace() returns "cancelled". The
        worker ends its trace and itself at the end of its input; one that has not after `grace`
        seconds is killed."""
        with self._state:
            self._closed = True
            process, self._process = self._process, None
            pending = self._pending
        if pending is not None:
            pending.cancelled = True
            pending.finish(cancelled_report(pending.request))
        if process is not None:
            self._end_process(process, grace)

    def __enter__(self) -> "TraceWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _end_process(process: subprocess.Popen, grace: float) -> None:
        try:
            _pipe(process.stdin).close()  # the worker ends its running trace and exits at EOF
        except OSError:
            pass
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            TraceWorker._kill(process)  # its trace children die with it (PR_SET_PDEATHSIG)

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
            pending = _Pending(next(self._ids), request, on_started)
            with self._state:
                if self._closed:
                    return cancelled_report(request)
                if self._process is None or self._process.poll() is not None or self._fatal is not None:
                    if self._process is not None:
                        self._discard_process_locked()
                    failure = self._spawn()
                    if failure is not None:
                        return worker_died_report(request, f"the trace worker could not start: {failure}")
                self._pending = pending
                process, ready, ended = self._process, self._ready, self._ended
            assert process is not None  # started above when there was none
            try:
                if is_cancelled is not None and is_cancelled():
                    pending.cancelled = True
                    return cancelled_report(request)
                return self._run(pending, process, ready, ended)
            finally:
                with self._state:
                    self._pending = None

    def _run(
        self, pending: _Pending, process: subprocess.Popen, ready: threading.Event, ended: threading.Event
    ) -> TraceReport:
        started = time.monotonic()
        while not ready.wait(0.1):  # the reader sets it at "ready", at "fatal" and at end of output
            if pending.done.is_set():
                return pending.answer()  # cancelled or closed while starting
            if time.monotonic() - started > self.startup_timeout:
                self._discard_process(process)
                return worker_died_report(
                    pending.request,
                    f"the trace worker did not start within {self.startup_timeout:g} s",
                    self._stderr_text(),
                )
        if pending.done.is_set():
            return pending.answer()
        with self._send_lock:  # a cancel() is written after the request, never before it
            with self._state:
                failed = self._fatal is not None or not self._ready_info or ended.is_set()
                if not failed and not pending.cancelled:
                    pending.sent = True
            written = False
            if pending.sent:
                try:
                    self._write(process, {"id": pending.id, "request": to_jsonable(pending.request)})
                    written = True
                except (OSError, ValueError):  # the worker died (its stdin is closed)
                    pass
        if failed:
            return self._start_failure(pending, process, ended)
        if not pending.sent:
            return cancelled_report(pending.request)
        if not written:
            ended.wait(CANCEL_WAIT_SECONDS)  # its output's end has the exit status
            pending.finish(self._death_report(pending, process))
        limit = hard_timeout(pending.request) + ANSWER_MARGIN_SECONDS
        if not pending.done.wait(limit):
            self._discard_process(process)
            pending.finish(
                worker_died_report(
                    pending.request, "the trace worker stopped answering and was restarted", self._stderr_text()
                )
            )
        if pending.cancelled and pending.report is not None and pending.report.message != "cancelled":
            return cancelled_report(pending.request, pending.report.stdout, pending.report.stderr)
        return pending.answer()

    def _start_failure(self, pending: _Pending, process: subprocess.Popen, ended: threading.Event) -> TraceReport:
        """The worker said "fatal", or ended, before this trace's request was sent: report why,
        with what it wrote to stderr (read to its end first: the reason is often its last line)."""
        ended.wait(CANCEL_WAIT_SECONDS)
        if self._fatal is None and self._ready_info:
            report = self._death_report(pending, process)  # it was ready, then died before the request
        else:
            code = process.poll()
            message = self._fatal or f"the trace worker exited while starting (exit code {code})"
            report = worker_died_report(
                pending.request, f"the trace worker could not start: {message}", self._stderr_text()
            )
        self._discard_process(process)
        return report

    def cancel(self) -> bool:
        """Kills the running trace (from any thread); its trace() returns status "error" with
        message "cancelled". Returns False when no trace was running."""
        with self._state:
            pending, process = self._pending, self._process
            if pending is None or pending.done.is_set():
                return False
            pending.cancelled = True
            sent = pending.sent
        if process is None or not sent:
            pending.finish(cancelled_report(pending.request))
            return True
        try:
            self._send(process, {"id": pending.id, "cancel": True})
        except (OSError, ValueError):  # the worker is gone (its stdin closed): its end answers
            pass
        backstop = threading.Timer(CANCEL_WAIT_SECONDS, self._cancel_backstop, args=(pending, process))
        backstop.daemon = True
        backstop.start()
        return True

    def _cancel_backstop(self, pending: _Pending, process: subprocess.Popen) -> None:
        """The worker did not answer a cancel in time: replace it. Decided under the state lock:
        a worker that answered meanwhile may already run the next trace, and must not be killed."""
        with self._state:
            if pending.done.is_set() or self._pending is not pending or self._process is not process:
                return
            self._process = None
        self._kill(process)
        pending.finish(cancelled_report(pending.request))

    # -- plumbing ------------------------------------------------------------------------------

    def _send(self, process: subprocess.Popen, message: dict) -> None:
        with self._send_lock:
            self._write(process, message)

    @staticmethod
    def _write(process: subprocess.Popen, message: dict) -> None:
        """One message to the worker; the caller holds the send lock."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        stdin = _pipe(process.stdin)
        stdin.write(data)
        stdin.flush()

    def _discard_process(self, process: subprocess.Popen) -> None:
        with self._state:
            if self._process is process:
                self._process = None
        self._kill(process)  # outside the lock: `alive` and `pid` never wait on a kill

    def _discard_process_locked(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            self._kill(process)

    @staticmethod
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
        for stream in (process.stdin, process.stdout, process.stderr):
            try:
                _pipe(stream).close()
            except OSError:
                pass

    def _read_responses(self, process: subprocess.Popen, ready: threading.Event, ended: threading.Event) -> None:
        try:
            self._read_messages(process, ready)
        except (OSError, ValueError):  # the stream was closed under us: the worker was discarded
            pass
        # end of output: the worker is gone. Only a trace whose request was sent dies with it here;
        # one still waiting for the worker to start is reported by its own thread, with the cause.
        process.wait()
        with self._state:
            ended.set()
            pending = self._pending if self._process is process else None
            sent = pending is not None and pending.sent
        ready.set()
        if sent and pending is not None:
            pending.finish(self._death_report(pending, process))

    def _read_messages(self, process: subprocess.Popen, ready: threading.Event) -> None:
        for line in _pipe(process.stdout):
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                continue  # cannot happen: only the worker writes here
            if not isinstance(message, dict):
                continue
            event = message.get("event")
            if self._process is not process:
                return  # replaced; nobody waits for this one any more
            if event == "ready":
                self._ready_info = message
                ready.set()
                continue
            if event == "fatal":
                self._fatal = message.get("message") or "unknown error"
                self._stderr_tail.append((message.get("traceback") or "").encode())
                ready.set()
                continue
            pending = self._pending
            if pending is None or message.get("id") != pending.id:
                continue
            if event == "started":
                pending.child_pid = message.get("pid")
                if pending.on_started is not None and pending.child_pid is not None:
                    try:
                        pending.on_started(pending.child_pid)
                    except Exception:  # noqa: BLE001 - a caller's callback must not stop the reader
                        pass
            elif "report" in message:
                try:
                    # the worker checked the child's report (worker/validate.py); here it is only decoded
                    report = from_jsonable(TraceReport, message["report"])
                except (TypeError, ValueError, KeyError, AttributeError) as error:
                    report = worker_died_report(pending.request, f"unreadable report from the worker: {error}")
                pending.finish(report)
            elif "error" in message:
                pending.finish(worker_died_report(pending.request, str(message["error"])))

    def _death_report(self, pending: _Pending, process: subprocess.Popen) -> TraceReport:
        if pending.cancelled:
            return cancelled_report(pending.request)
        code = process.poll()
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited (exit code {code})"
        return worker_died_report(
            pending.request, f"the trace worker {how}; the next trace starts a new one", self._stderr_text()
        )

    def _read_stderr(self, process: subprocess.Popen, tail: deque) -> None:
        size = 0
        stderr = _pipe(process.stderr)
        for chunk in iter(lambda: stderr.read1(1 << 14), b""):
            tail.append(chunk)
            size += len(chunk)
            while size > STDERR_TAIL_BYTES and len(tail) > 1:
                size -= len(tail.popleft())

    def _stderr_text(self) -> str:
        return b"".join(self._stderr_tail).decode("utf-8", errors="replace")[-STDERR_TAIL_BYTES:]


def _pipe(stream: Optional[IO[bytes]]) -> io.BufferedIOBase:
    """One of the worker's standard streams: pipes, as `_spawn` starts it (binary, buffered)."""
    assert isinstance(stream, io.BufferedIOBase), stream
    return stream
