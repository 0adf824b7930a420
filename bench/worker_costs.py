"""Benchmark — the trace worker's costs: cold start, warm round trip, fork, memory.

Side by side: a trace through the warm worker (a fresh forked child per trace, JSON both ways)
versus the same `run_trace` called in this process (warm, no isolation): the ratio is what the
process boundary costs. Also: spawn to "ready" (interpreter + torch + simulated-CUDA shims + fake
warm-up), the fork of a warm worker-sized process alone, and the worker's resident memory before
and after many traces (a zygote must stay flat).

    python bench/worker_costs.py [--quick] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time

from atenlens.report import TraceRequest
from atenlens.worker.client import TraceWorker, worker_environment
from harness import REPO_ROOT, Result, Table, finish, median, ms, parser, rss_bytes, spread

TINY = os.path.join(REPO_ROOT, "tests", "fixtures", "worker", "tiny.py")
TRAIN_STEP = os.path.join(REPO_ROOT, "examples", "train_step.py")
TRACES = [  # (label, file, qualname, device)
    ("tiny.py::uses_silu (forward only, 1 op), cpu", TINY, "uses_silu", "cpu"),
    ("tiny.py::linear_step (Linear + backward), cpu", TINY, "linear_step", "cpu"),
    ("examples/train_step.py::train_step, cuda", TRAIN_STEP, "train_step", "cuda"),
]

IN_PROCESS_PROBE = """
import sys, time
from atenlens.trace.device import preload_before_torch
preload_before_torch("cuda")
from atenlens.report import TraceRequest
from atenlens.trace.runner import run_trace
request = TraceRequest.from_json(sys.argv[1])
run_trace(request)
times = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    run_trace(request)
    times.append(time.perf_counter() - started)
print(" ".join(repr(t) for t in times))
"""

FORK_PROBE = """
import os, sys, time
from atenlens.worker.main import _warm_up
_warm_up("cuda")
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    times.append(time.perf_counter() - started)
print(" ".join(repr(t) for t in times))
"""


def cold_starts(rounds: int) -> tuple[list[float], list[float]]:
    """(spawn to ready, the worker's own warm-up seconds) per round."""
    total, warm_up = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        with TraceWorker() as worker:
            assert worker.wait_ready(), "the worker did not start"
            total.append(time.perf_counter() - started)
            warm_up.append(float(worker.ready_info["seconds"]))
    return total, warm_up


def mark_time(marks: list[float], pid: int) -> None:
    """`on_started`: when the trace's process started."""
    marks.append(time.perf_counter())


def round_trips(worker: TraceWorker, request: TraceRequest, rounds: int) -> tuple[list[float], list[float]]:
    """(request to report, request to the child's start) per trace."""
    total, to_start = [], []
    for _ in range(rounds):
        marks: list[float] = []
        started = time.perf_counter()
        report = worker.trace(request, on_started=functools.partial(mark_time, marks))
        total.append(time.perf_counter() - started)
        to_start.append(marks[0] - started)
        assert report.status == "ok", report.message
    return total, to_start


def in_process(request: TraceRequest, rounds: int) -> list[float]:
    """The same trace in a process that loaded the simulated-CUDA shims before torch (like the
    worker), called repeatedly: warm, no isolation."""
    out = subprocess.run(
        [sys.executable, "-c", IN_PROCESS_PROBE, request.to_json(), str(rounds)],
        env=worker_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(t) for t in out.stdout.split()[-rounds:]]


def fork_costs(rounds: int) -> list[float]:
    out = subprocess.run(
        [sys.executable, "-c", FORK_PROBE, str(rounds)],
        env=worker_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(t) for t in out.stdout.split()]


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    rounds = 2 if args.quick else args.rounds
    starts = 1 if args.quick else 3

    result = Result(
        "worker_costs",
        "Trace worker: cold start, warm round trip, fork, memory",
        "python bench/worker_costs.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    total, warm_up = cold_starts(starts)
    start_table = Table(f"cold start, seconds, {starts} rounds", ["what", "median", "spread"])
    start_table.add("spawn to ready (Python + torch + shims + fake warm-up)", median(total), spread(total))
    start_table.add("of which the worker's own warm-up after interpreter start", median(warm_up), spread(warm_up))
    result.tables.append(start_table)

    trip_table = Table(
        f"one trace, back to back, milliseconds, {rounds} rounds",
        [
            "trace",
            "worker: request to report",
            "spread",
            "request to child started",
            "in one process (no isolation)",
            "ratio worker / in-process",
        ],
    )
    with TraceWorker() as worker:
        assert worker.wait_ready()
        rss_ready = rss_bytes(worker.pid)
        raw = {}
        for label, file, qualname, device in TRACES:
            request = TraceRequest(file=file, qualname=qualname, device=device)  # type: ignore[arg-type]
            worker_times, to_start = round_trips(worker, request, rounds)
            local = in_process(request, rounds)
            trip_table.add(
                label,
                ms(median(worker_times)),
                spread([ms(t) for t in worker_times]),
                ms(median(to_start)),
                ms(median(local)),
                median(worker_times) / median(local),
            )
            raw[label] = {"worker_ms": [ms(t) for t in worker_times], "in_process_ms": [ms(t) for t in local]}
        rss_after = rss_bytes(worker.pid)
    result.tables.append(trip_table)

    forks = fork_costs(10 if args.quick else 50)
    memory_table = Table("fork and memory", ["what", "value"])
    memory_table.add("fork + exit + wait of a warm worker-sized process, median ms", ms(median(forks)))
    memory_table.add("worker RSS when ready, MB", rss_ready / 2**20)
    memory_table.add(f"worker RSS after {len(TRACES) * rounds} traces, MB", rss_after / 2**20)
    result.tables.append(memory_table)
    result.raw = {"cold_start_s": total, "warm_up_s": warm_up, "fork_ms": [ms(t) for t in forks], **raw}
    result.notes.append(
        "Each trace forks a fresh child of the warm worker, so the worker's own memory stays "
        "where it was when it became ready; a trace's memory is freed when its child exits."
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
