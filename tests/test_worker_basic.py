"""The trace worker through its client, with real subprocesses and the real engine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reliability_helpers import wait_until
from source_lines import line_of
from worker_helpers import fixture, request

TINY = fixture("worker", "tiny.py")


def _parent_of(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def test_a_trace_returns_the_engines_report(worker):
    report = worker.trace(request(TINY, "linear_step"))
    assert report.status == "ok", report.message
    layer_line = line_of(TINY, "y = layer(torch.randn(2, 4))")
    forward = [e.name for e in report.events if e.kind == "op" and e.phase == "forward" and e.line == layer_line]
    assert "aten.addmm.default" in forward
    backward = [e.name for e in report.events if e.phase == "backward" and e.line == layer_line]
    assert "aten.mm.default" in backward


def test_user_prints_land_in_the_report(worker):
    report = worker.trace(request(TINY, "linear_step"))
    assert report.stdout == "hello from the traced code\n"


def test_repeated_traces_reuse_one_warm_worker(worker):
    pid = worker.pid
    for _ in range(3):
        assert worker.trace(request(TINY, "linear_step")).status == "ok"
    assert worker.pid == pid and worker.alive


def test_each_trace_starts_from_fresh_module_state(worker):
    first = worker.trace(request(TINY, "bump_global"))
    second = worker.trace(request(TINY, "bump_global"))
    assert (first.stdout, second.stdout) == ("calls=1\n", "calls=1\n")
    # bump_global replaced torch.nn.functional.silu in its own process only
    report = worker.trace(request(TINY, "uses_silu"))
    assert report.status == "ok", report.message
    assert "aten.silu.default" in [e.name for e in report.events if e.kind == "op"]


def test_the_client_does_not_import_torch():
    code = "import sys, atenlens.worker.client; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_one_worker_serves_cpu_and_simulated_cuda(worker, device):
    # the worker loads the simulated-CUDA shims once at start; a cpu trace must not see them
    report = worker.trace(request(TINY, "device_step", device=device))
    assert report.status == "ok", report.message
    assert report.device == device
    line = line_of(TINY, "y = layer(torch.randn(2, 4, device=device))")
    addmm = [e for e in report.events if e.name == "aten.addmm.default" and e.line == line]
    assert [o.device for e in addmm for o in e.outputs] == ["cuda:0" if device == "cuda" else "cpu"]
    assert "aten.mm.default" in [e.name for e in report.events if e.phase == "backward" and e.line == line]
    assert report.stdout == f"cuda available: {device == 'cuda'}\n"


def test_the_worker_forks_from_a_single_thread(worker):
    # a thread alive at fork time (autograd's device threads after a backward, a pool) would be
    # missing in every child, and any lock it held would stay held there
    assert worker.trace(request(TINY, "linear_step")).status == "ok"
    assert os.listdir(f"/proc/{worker.pid}/task") == [str(worker.pid)]


def test_many_traces_leak_no_descriptors_and_no_memory(worker):
    def open_descriptors() -> int:
        return len(os.listdir(f"/proc/{worker.pid}/fd"))

    def resident_kb() -> int:
        with open(f"/proc/{worker.pid}/status", encoding="ascii") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))

    def idle() -> bool:
        # the worker answers as soon as a report is complete and reaps the child (closing its
        # pipes) after: idle is when it has no child, not even a zombie, and holds no pidfd
        kids = [p for p in os.listdir("/proc") if p.isdigit() and _parent_of(p) == worker.pid]
        return not kids and not any(
            "pidfd" in os.readlink(f"/proc/{worker.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{worker.pid}/fd")
        )

    assert worker.trace(request(TINY, "linear_step")).status == "ok"
    wait_until(idle, "the worker did not finish with its child")
    descriptors, memory = open_descriptors(), resident_kb()
    for _ in range(10):
        assert worker.trace(request(TINY, "linear_step")).status == "ok"
    wait_until(idle, "the worker did not finish with its child")
    assert open_descriptors() == descriptors
    assert resident_kb() - memory < 1024  # the traces ran in children; the worker did not grow


@pytest.mark.parametrize(
    ("budget", "killed_after"),
    [(1, 6.0), (15, 20.0), (30, 40.0), (120, 150.0), (600, 630.0), (float("inf"), 24 * 3600.0 + 30.0)],
)
def test_the_hard_kill_leaves_a_long_trace_time_to_write_its_report(budget, killed_after):
    """A trace stopped by its budget still has to turn up to 20,000 events into a report; the
    kill for code that ignores the budget comes a third of the budget later (5 s to 30 s)."""
    from atenlens.report import TraceRequest
    from atenlens.worker.limits import hard_timeout

    assert hard_timeout(TraceRequest(file=TINY, qualname="linear_step", timeout_seconds=budget)) == killed_after
