"""The worker's lifecycle through its client: cancel, a dying worker, start failures, the
environment it gets, concurrent callers, and the raw protocol."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from atenlens.report import Code, TraceReport, TraceRequest
from atenlens.worker.client import PASSED_ENV, READER_THREAD_NAME, TraceWorker, _exited, worker_environment
from atenlens.worker.supervise import RESIDENT_SLACK_MB, memory_over_limit, private_memory_mb, resident_mb
from source_lines import line_of
from worker_helpers import exits_within, fixture, process_is_gone, request

TINY = fixture("worker", "tiny.py")
LOOP = fixture("hostile", "infinite_loop.py")


@pytest.fixture(scope="module")
def worker():
    with TraceWorker() as warm:
        assert warm.wait_ready(), "the worker did not become ready"
        yield warm


def start_in_thread(worker: TraceWorker, req: TraceRequest):
    """Runs worker.trace(req) in a thread; returns (pid-of-trace event holder, result holder, thread)."""
    started = threading.Event()
    pids: list[int] = []
    result: list[TraceReport] = []

    def on_started(pid: int) -> None:
        pids.append(pid)
        started.set()

    thread = threading.Thread(target=lambda: result.append(worker.trace(req, on_started=on_started)))
    thread.start()
    assert started.wait(60), "the trace did not start"
    return pids, result, thread


def test_cancel_kills_the_running_trace_and_keeps_the_worker(worker):
    pid = worker.pid
    pids, result, thread = start_in_thread(worker, request(LOOP, "step", timeout=300))
    assert worker.cancel() is True
    thread.join(30)
    assert not thread.is_alive()
    report = result[0]
    assert (report.status, report.message, report.diagnostics) == ("error", "cancelled", ())
    assert process_is_gone(pids[0])
    assert worker.pid == pid and worker.trace(request(TINY, "linear_step")).status == "ok"


def test_cancel_without_a_running_trace_does_nothing(worker):
    assert worker.cancel() is False
    assert worker.trace(request(TINY, "linear_step")).status == "ok"


def test_a_second_caller_waits_for_the_first(worker):
    reports: list[TraceReport] = []
    threads = [
        threading.Thread(target=lambda: reports.append(worker.trace(request(TINY, "bump_global")))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [(r.status, r.stdout) for r in reports] == [("ok", "calls=1\n")] * 4


def test_a_dead_worker_fails_its_trace_and_is_replaced():
    with TraceWorker() as worker:
        assert worker.wait_ready()
        first_pid = worker.pid
        pids, result, thread = start_in_thread(worker, request(LOOP, "step", timeout=300))
        os.kill(first_pid, signal.SIGKILL)
        thread.join(30)
        report = result[0]
        assert report.status == "error"
        assert [(d.code, d.line) for d in report.diagnostics] == [(Code.WORKER_DIED, line_of(LOOP, "def step"))]
        assert "the trace worker was killed by signal 9" in report.message
        assert exits_within(pids[0], 10), "the trace outlived its worker"
        assert not worker.alive
        next_report = worker.trace(request(TINY, "linear_step"))
        assert next_report.status == "ok", next_report.message
        assert worker.pid != first_pid and worker.alive


def test_a_killed_worker_counts_as_ended_while_another_thread_waits_for_it():
    """The client's reader thread reaps a killed worker with `wait()`; while it does,
    `Popen.poll()` in another thread answers None (the wait holds the lock). A trace asked then
    must still see the worker gone (and start a fresh one), not send its request to the dead
    process and fail: `_exited` reads the process's state instead."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        os.kill(process.pid, signal.SIGKILL)
        # blocks until it has exited, and leaves it unreaped (a zombie), as the reader finds it
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        assert _proc_state(process.pid) == "Z"
        with process._waitpid_lock:  # as the reader thread's `wait()` holds it
            assert process.poll() is None  # what the client saw before: no answer yet
            assert _exited(process)
    finally:
        process.wait()
    assert _exited(process)


def _proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def reader_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == READER_THREAD_NAME}


def worker_processes() -> set[int]:
    """The trace workers this test process started that still run (a reaped one is gone from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if parent == os.getpid() and b"atenlens.worker" in command:
            found.add(int(entry))
    return found


def test_a_worker_killed_mid_trace_fails_that_trace_only_and_leaks_nothing():
    threads_before, processes_before = reader_threads(), worker_processes()
    with TraceWorker() as worker:
        assert worker.wait_ready()
        first_pid = worker.pid
        assert worker_processes() - processes_before == {first_pid}
        assert len(reader_threads() - threads_before) == 1  # one reader per worker process
        pids, result, running = start_in_thread(worker, request(LOOP, "step", timeout=300))
        waiting: list[TraceReport] = []
        callers = [
            threading.Thread(target=lambda: waiting.append(worker.trace(request(TINY, "bump_global"))))
            for _ in range(2)
        ]
        for caller in callers:
            caller.start()
        os.kill(first_pid, signal.SIGKILL)
        running.join(30)
        for caller in callers:
            caller.join(240)
        report = result[0]
        assert (report.status, report.message) == (
            "error",
            "the trace worker was killed by signal 9; the next trace starts a new one",
        )
        assert [(d.code, d.line) for d in report.diagnostics] == [(Code.WORKER_DIED, line_of(LOOP, "def step"))]
        # the traces waiting behind it were not sent to the dead worker: they ran on a new one
        assert [(r.status, r.stdout) for r in waiting] == [("ok", "calls=1\n")] * 2
        second_pid = worker.pid
        assert second_pid != first_pid and exits_within(pids[0], 10)
        assert worker_processes() - processes_before == {second_pid}
        pids, result, running = start_in_thread(worker, request(LOOP, "step", timeout=300))
        assert worker.cancel() is True
        running.join(30)
        assert (result[0].status, result[0].message) == ("error", "cancelled")
        assert exits_within(pids[0], 10) and worker.pid == second_pid
    for thread in reader_threads() - threads_before:
        thread.join(10)
    assert reader_threads() - threads_before == set()
    assert worker_processes() - processes_before == set()


def test_a_worker_that_cannot_start_becomes_a_report():
    with TraceWorker(python="/nonexistent/python3") as worker:
        worker.start()
        assert worker.wait_ready(5) is False
        report = worker.trace(request(TINY, "linear_step"))
    assert report.status == "error"
    assert report.diagnostics[0].code == Code.WORKER_DIED
    assert report.diagnostics[0].line == line_of(TINY, "def linear_step")
    assert report.message.startswith("the trace worker could not start: cannot run '/nonexistent/python3'")


def test_a_python_without_torch_says_so(tmp_path):
    # this interpreter without its site-packages (-S): atenlens comes from PYTHONPATH, torch from nowhere
    python = tmp_path / "python-without-site"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    with TraceWorker(python=str(python)) as worker:
        report = worker.trace(request(TINY, "linear_step"))
    assert report.status == "error"
    assert report.message == ("the trace worker could not start: ModuleNotFoundError: No module named 'torch'")


def test_a_worker_that_stops_answering_is_replaced():
    with TraceWorker() as worker:
        assert worker.wait_ready()
        stuck_pid = worker.pid
        pids, result, thread = start_in_thread(worker, request(LOOP, "step", timeout=300))
        os.kill(stuck_pid, signal.SIGSTOP)  # the worker can no longer answer a cancel
        try:
            assert worker.cancel() is True
            thread.join(60)
            assert (result[0].status, result[0].message) == ("error", "cancelled")
        finally:
            try:
                os.kill(stuck_pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        assert process_is_gone(stuck_pid)
        assert exits_within(pids[0], 10), "the trace outlived its worker"
        report = worker.trace(request(TINY, "linear_step"))
        assert report.status == "ok", report.message
        assert worker.pid != stuck_pid


def test_close_during_a_trace_ends_it():
    worker = TraceWorker()
    pids, result, thread = start_in_thread(worker, request(LOOP, "step", timeout=300))
    worker_pid = worker.pid
    worker.close()
    thread.join(30)
    assert (result[0].status, result[0].message) == ("error", "cancelled")
    assert process_is_gone(worker_pid) and process_is_gone(pids[0])


def test_close_ends_the_worker():
    worker = TraceWorker()
    assert worker.wait_ready()
    pid = worker.pid
    worker.close()
    assert not worker.alive and process_is_gone(pid)


def test_the_worker_gets_only_the_environment_it_needs(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "not-for-user-code")
    monkeypatch.setenv(
        "ATENLENS_CACHE_DIR", os.environ.get("ATENLENS_CACHE_DIR", os.path.expanduser("~/.cache/atenlens"))
    )
    with TraceWorker() as worker:
        report = worker.trace(request(fixture("worker", "environment.py"), "show_environment"))
    assert report.status == "ok", report.message
    names = set(report.stdout.split())
    assert "GITHUB_TOKEN" not in names
    expected = set(worker_environment())
    # nothing else reaches user code but what Python and torch set in the process itself
    assert expected <= names and names - expected <= {"LC_CTYPE", "TORCHINDUCTOR_CACHE_DIR"}
    assert set(worker_environment()) - set(PASSED_ENV) <= {
        "PYTHONPATH",
        "OMP_NUM_THREADS",
        "PYTHONIOENCODING",
        "ATENLENS_CACHE_DIR",
    }


def test_the_worker_finds_this_package_without_the_callers_sys_path():
    env = worker_environment(base={"PATH": os.environ["PATH"]})
    root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["atenlens"].__file__)))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == root


def test_raw_protocol_survives_junk_and_answers_by_id():
    process = subprocess.Popen(
        [sys.executable, "-m", "atenlens.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=worker_environment(),
    )
    try:
        ready = json.loads(process.stdout.readline())
        assert ready["event"] == "ready" and ready["pid"] == process.pid
        good = json.dumps({"id": "b", "request": json.loads(request(TINY, "linear_step").to_json())})
        bad_requests = [
            {"file": 1},
            {"file": 1, "qualname": "step"},
            {"file": "x.py", "qualname": "f", "device": "tpu"},
            {"file": "x.py", "qualname": "f", "timeout_seconds": "soon"},
        ]
        lines = (
            [b"this is not json", b"[1, 2]"]
            + [json.dumps({"id": f"bad{i}", "request": bad}).encode() for i, bad in enumerate(bad_requests)]
            + [good.encode()]
        )
        process.stdin.write(b"\n".join(lines) + b"\n")
        process.stdin.flush()
        for i in range(len(bad_requests)):
            malformed = json.loads(process.stdout.readline())
            assert malformed["id"] == f"bad{i}" and malformed["error"].startswith("malformed request")
        started = json.loads(process.stdout.readline())
        assert started["id"] == "b" and started["event"] == "started" and started["pid"] != process.pid
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == "b" and answer["report"]["status"] == "ok"
        assert answer["report"]["stdout"] == "hello from the traced code\n"
    finally:
        process.stdin.close()
        assert process.wait(30) == 0


def test_without_pidfd_the_worker_polls_for_the_childs_exit(tmp_path):
    # the path for systems without pidfd_open (macOS, Linux < 5.3), forced here
    python = tmp_path / "python-without-pidfd"
    code = (
        "import sys, atenlens.worker.supervise as s; s.USE_PIDFD = False; "
        "from atenlens.worker.main import main; sys.exit(main(sys.argv[sys.argv.index('atenlens.worker') + 1:]))"
    )
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{code}" "$@"\n')
    python.chmod(0o755)
    with TraceWorker(python=str(python)) as worker:
        assert worker.trace(request(TINY, "linear_step")).status == "ok"
        crash = worker.trace(request(fixture("hostile", "os_exit.py"), "step"))
        assert "exited with exit code 7" in crash.message
        stuck = fixture("hostile", "blocks_alarm.py")
        timeout = worker.trace(request(stuck, "step", timeout=1))
        assert (timeout.status, timeout.diagnostics[0].line) == ("timeout", line_of(stuck, "while True: pass"))
        assert worker.trace(request(TINY, "linear_step")).status == "ok"


def test_the_memory_limit_counts_a_process_private_memory():
    # The worker's memory poll on a real process holding 300 MB it wrote: nothing over a limit its
    # whole resident size stays under; over a lower one, the private memory it holds.
    code = "import sys; held = b'x' * (300 << 20); print('ready', flush=True); sys.stdin.read()"
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        resident = resident_mb(process.pid)
        private = private_memory_mb(process.pid)
        assert resident is not None and private is not None
        assert 300 <= private <= resident < 400, (private, resident)
        assert memory_over_limit(process.pid, 4096) is None
        assert memory_over_limit(process.pid, resident + RESIDENT_SLACK_MB) is None
        assert memory_over_limit(process.pid, private + 8) is None  # near the limit: read, and under it
        over = memory_over_limit(process.pid, 200)
        assert over is not None and 300 <= over <= resident, over
    finally:
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(30) == 0
    assert resident_mb(process.pid) is None and memory_over_limit(process.pid, 200) is None  # gone: nothing to read


BROKEN_TORCH = 'raise ImportError("this torch cannot be imported")\n'


def test_a_worker_that_fails_while_starting_says_why_every_time(tmp_path):
    # The client used to race its reader thread here: a trace waiting for the worker's start could
    # come back as "the trace worker exited (exit code 1)" (the cause lost) in some runs under load.
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "torch.py").write_text(BROKEN_TORCH)
    with TraceWorker(env={"PYTHONPATH": str(stub)}) as worker:
        reports = [worker.trace(request(TINY, "linear_step")) for _ in range(5)]
    assert [(r.status, r.message) for r in reports] == [
        ("error", "the trace worker could not start: ImportError: this torch cannot be imported")
    ] * 5
    assert all('raise ImportError("this torch cannot be imported")' in r.stderr for r in reports)


def test_a_cancel_decided_before_the_trace_reaches_the_worker_runs_nothing(worker):
    pid = worker.pid
    started: list[int] = []
    report = worker.trace(request(LOOP, "step", timeout=300), on_started=started.append, is_cancelled=lambda: True)
    assert (report.status, report.message, started) == ("error", "cancelled", [])
    assert worker.pid == pid and worker.trace(request(TINY, "linear_step")).status == "ok"
