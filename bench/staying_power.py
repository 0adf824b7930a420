"""Benchmark 5 — staying power: many traces in one warm trace worker.

Starts one `TraceWorker`, waits until it is warm, then runs the same trace N times (default 50,
examples/train_step.py::train_step, then a GPT-2-small-shaped train step from bench/trace_models.py). After each
trace it samples the resident memory of the worker's whole process tree (the worker and any child
still alive), so a leak in the worker or a child that never exits shows up. Reported: memory after
warm-up, after the first trace and after the last, the growth from the first trace to the last,
and the time per trace at the start, middle and end of the run.

    python bench/staying_power.py [--quick] [--traces N] [--no-gpt2] [--json PATH]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Literal

from harness import REPO_ROOT, Result, Table, Target, finish, median, ms, parser, spread, tree_rss_bytes

TARGET_GROWTH_MB = 50.0
EXAMPLE = os.path.join(REPO_ROOT, "examples", "train_step.py")
MODELS = os.path.join(REPO_ROOT, "bench", "trace_models.py")  # GPT-2 / Llama-shaped user code
MB = 2**20


def run_series(file: str, qualname: str, call: str | None, traces: int, device: Literal["cpu", "cuda"]) -> dict:
    from atenlens.report import TraceRequest
    from atenlens.worker.client import TraceWorker

    worker = TraceWorker()
    try:
        t0 = time.perf_counter()
        if not worker.wait_ready():
            raise RuntimeError(f"the trace worker did not become ready: {worker.ready_info}")
        warm_s = time.perf_counter() - t0
        pid = worker.pid
        rss_warm = tree_rss_bytes(pid)
        seconds, rss, statuses = [], [], []
        for _ in range(traces):
            t = time.perf_counter()
            report = worker.trace(
                TraceRequest(file=file, qualname=qualname, device=device, call=call, timeout_seconds=120)
            )
            seconds.append(time.perf_counter() - t)
            statuses.append(report.status)
            if worker.pid != pid:
                raise RuntimeError(
                    f"the worker was replaced during the run (trace status {report.status}: {report.message})"
                )
            rss.append(tree_rss_bytes(pid))
        return {
            "warm_s": warm_s,
            "rss_warm": rss_warm,
            "seconds": seconds,
            "rss": rss,
            "statuses": statuses,
            "device": report.device,
        }
    finally:
        worker.close()


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--traces", type=int, default=50)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--no-gpt2", dest="gpt2", action="store_false", help="skip the GPT-2-small series")
    args = p.parse_args(argv)
    if args.quick:
        args.traces, args.gpt2 = 3, False
    targets: list[tuple[str, str, str, str | None]] = [
        ("examples/train_step.py::train_step", EXAMPLE, "train_step", None)
    ]
    if args.gpt2:
        targets.append(("GPT-2-small train step", MODELS, "train_step", 'train_step(*setup("gpt2"))'))
    series = {
        label: run_series(file, qualname, call, args.traces, args.device) for label, file, qualname, call in targets
    }

    result = Result(
        "staying_power",
        f"Staying power: {args.traces} traces in one warm worker",
        "python bench/staying_power.py"
        + (" --quick" if args.quick else "")
        + (" --no-gpt2" if not args.gpt2 and not args.quick else ""),
        quick=args.quick,
    )
    third = max(1, args.traces // 3)
    memory = Table(
        "worker process tree, resident memory (MB)",
        ["trace", "device", "warm", "after trace 1", f"after trace {args.traces}", "growth 1 -> last"],
    )
    timing = Table(
        "time per trace (ms): median and spread of each third of the run",
        [
            "trace",
            "worker warm-up (s)",
            "first third",
            "spread",
            "middle third",
            "spread",
            "last third",
            "spread",
            "statuses",
        ],
    )
    for label, s in series.items():
        rss = [b / MB for b in s["rss"]]
        memory.add(label, s["device"], s["rss_warm"] / MB, rss[0], rss[-1], rss[-1] - rss[0])
        t = [ms(x) for x in s["seconds"]]
        parts = [t[:third], t[third : len(t) - third] or t[:third], t[len(t) - third :]]
        cells = []
        for part in parts:
            cells += [median(part), spread(part)]
        counts = {st: s["statuses"].count(st) for st in sorted(set(s["statuses"]))}
        timing.add(label, s["warm_s"], *cells, ", ".join(f"{k} x{v}" for k, v in counts.items()))
        result.targets.append(
            Target(f"{label}: memory growth over {args.traces} traces", rss[-1] - rss[0], TARGET_GROWTH_MB, "MB")
        )
    result.tables += [memory, timing]
    result.raw = {label: {"seconds": s["seconds"], "rss_mb": [b / MB for b in s["rss"]]} for label, s in series.items()}
    result.notes.append("memory is sampled after each trace returns: the worker plus any child process still alive")
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
