"""Hostile user code through the real worker and the real engine: each case ends with one clear
diagnostic at the right line, and the same warm worker serves the next trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pytest

from atenlens.report import Code
from atenlens.worker.client import TraceWorker
from source_lines import line_of
from worker_helpers import fixture, process_is_gone, request

MEMORY_LIMIT_MB = 1024
TINY = fixture("worker", "tiny.py")


def hostile(name: str) -> str:
    return fixture("hostile", name)


@pytest.fixture(scope="module")
def worker():
    with TraceWorker(memory_limit_mb=MEMORY_LIMIT_MB) as warm:
        assert warm.wait_ready(), "the worker did not become ready"
        yield warm


def trace_then_check_worker(worker: TraceWorker, path: str, timeout: float = 30.0):
    pid = worker.pid
    started: list[int] = []
    report = worker.trace(request(path, "step", timeout=timeout), on_started=started.append)
    after = worker.trace(request(TINY, "linear_step"))
    assert after.status == "ok", after.message
    assert worker.pid == pid and worker.alive, "the worker was replaced"
    assert len(started) == 1 and process_is_gone(started[0]), "the trace's process outlived it"
    return report


@dataclass(frozen=True)
class Case:
    file: str
    status: str
    code: str
    kind: str
    at: str  # text of the line the diagnostic must point at
    message: str  # a fragment of the diagnostic's message
    timeout: float = 30.0
    column: Optional[int] = None


CASES = [
    Case(
        "infinite_loop.py",
        "timeout",
        Code.TIMEOUT,
        "timeout",
        "while True: x = x + 1",
        "ran past its 1 s budget",
        timeout=1,
    ),
    Case(
        "blocks_alarm.py",
        "timeout",
        Code.TIMEOUT,
        "timeout",
        "while True: pass",
        "did not finish within 1 s and was killed after 6 s",
        timeout=1,
    ),
    Case("sys_exit.py", "error", Code.EXCEPTION, "exception", "sys.exit(3)", "SystemExit(3)", column=4),
    Case("os_exit.py", "error", Code.WORKER_DIED, "exit", "def step", "exited with exit code 7", column=0),
    Case("segfault.py", "error", Code.WORKER_DIED, "crash", "ctypes.string_at(0)", "segmentation fault (SIGSEGV)"),
    Case("aborts.py", "error", Code.WORKER_DIED, "crash", "os.abort()", "aborted (SIGABRT"),
    Case("torch_abort.py", "error", Code.WORKER_DIED, "crash", "torch._C._abort()", "aborted (SIGABRT"),
    Case(
        "memory_hog.py",
        "error",
        Code.EXCEPTION,
        "exception",
        "blocks.append(",
        f"MemoryError (the trace's memory limit is {MEMORY_LIMIT_MB} MB)",
    ),
    Case("recursion.py", "error", Code.EXCEPTION, "exception", "return down(n + 1) + 1", "RecursionError"),
    Case(
        "deep_recursion.py",
        "error",
        Code.WORKER_DIED,
        "crash",
        "def down(n): return list(map(down",
        "segmentation fault (SIGSEGV); its stack was over 100 frames deep (unbounded recursion?)",
    ),
    Case("reads_stdin.py", "error", Code.EXCEPTION, "exception", "return input(", "EOFError"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.file for c in CASES])
def test_hostile_code_gets_one_clear_diagnostic(worker, case: Case):
    path = hostile(case.file)
    report = trace_then_check_worker(worker, path, timeout=case.timeout)
    assert report.status == case.status
    assert len(report.diagnostics) == 1, report.diagnostics
    diagnostic = report.diagnostics[0]
    assert (diagnostic.code, diagnostic.kind, diagnostic.severity) == (case.code, case.kind, "error")
    assert (diagnostic.file, diagnostic.line) == (path, line_of(path, case.at))
    assert case.message in diagnostic.message
    if case.column is not None:
        assert diagnostic.column == case.column


def test_os_exit_keeps_what_was_printed(worker):
    report = trace_then_check_worker(worker, hostile("os_exit.py"))
    assert report.stdout == "about to leave\n"


def test_a_crash_report_carries_the_crash_dump(worker):
    path = hostile("segfault.py")
    report = trace_then_check_worker(worker, path)
    assert report.stderr.startswith("Fatal Python error: Segmentation fault")
    assert f'File "{path}", line {line_of(path, "string_at(0)")} in step' in report.stderr


def test_a_million_printed_lines_are_kept_head_and_tail(worker):
    report = trace_then_check_worker(worker, hostile("flood.py"), timeout=120)
    assert report.status == "ok", report.message
    total = sum(len(f"line {i}\n") for i in range(1_000_000))
    assert report.stdout.startswith("line 0\nline 1\n")
    assert report.stdout.endswith("line 999998\nline 999999\n")
    assert f"bytes of output omitted; {total:,} bytes in all]" in report.stdout
    assert len(report.stdout) < 100_000


def test_lsp_looking_output_is_only_output(worker):
    frame = 'Content-Length: 38\r\n\r\n{"jsonrpc":"2.0","id":1,"result":null}'
    report = trace_then_check_worker(worker, hostile("lsp_bytes.py"))
    assert report.status == "ok", report.message
    assert report.stdout == frame + frame + '{"id": 1, "report": null}\n'
    assert report.stderr == frame


def test_writing_junk_to_every_descriptor_reaches_no_protocol(worker):
    report = trace_then_check_worker(worker, hostile("writes_every_fd.py"))
    assert report.status == "ok", report.message
    junk = 'Content-Length: 2\r\n\r\n{}\n{"id": 1, "report": {}}\n'
    assert (report.stdout, report.stderr) == (junk, junk)


def test_a_spinning_non_daemon_thread_ends_with_its_trace(worker):
    path = hostile("spinning_thread.py")
    report = trace_then_check_worker(worker, path)
    assert report.status == "ok", report.message
    line = line_of(path, "torch.ones(3) * 2")
    assert "aten.mul.Tensor" in [e.name for e in report.events if e.kind == "op" and e.line == line]


def test_a_forked_process_is_killed_with_its_trace(worker):
    report = trace_then_check_worker(worker, hostile("forks.py"))
    assert report.status == "ok", report.message
    assert report.stdout.startswith("forked ")
    assert process_is_gone(int(report.stdout.split()[1]))


def test_a_fork_that_goes_on_tracing_does_not_report_twice(worker):
    path = hostile("fork_continues.py")
    report = trace_then_check_worker(worker, path)
    assert report.status == "ok", report.message
    line = line_of(path, "torch.ones(2) + 1")
    assert [e.name for e in report.events if e.kind == "op" and e.line == line].count("aten.add.Tensor") == 1


def test_output_of_c_code_is_captured(worker):
    report = trace_then_check_worker(worker, hostile("c_printf.py"))
    assert report.status == "ok", report.message
    assert (report.stdout, report.stderr) == ("printed by C, 42\n", "also by C\n")


def test_eight_forked_processes_are_killed_with_their_trace(worker):
    report = trace_then_check_worker(worker, hostile("forks_many.py"))
    assert report.status == "ok", report.message
    pids = [int(pid) for pid in report.stdout.split()]
    assert len(pids) == 8
    assert [pid for pid in pids if not process_is_gone(pid)] == []
