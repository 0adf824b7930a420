"""Benchmark — `atenlens check` over many functions: what each function costs after the first.

`atenlens check` traces every configured function in ONE warm worker (atenlens/check/run.py). This
prints, from one run: the first function's wall time (the worker's start: interpreter, torch, the
simulated-CUDA shims, warm-up, then its trace), each later function's, and, side by side, what one
`atenlens trace` process per function costs for the same functions (a fresh worker each time).
A single measured run on whatever machine it is run on; quote it with its conditions.

    python bench/check_cost.py [--cold N]      # N: how many functions also run one process each (default 2)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "server"))

from atenlens.check.budgets import Budget, CheckedFunction  # noqa: E402
from atenlens.check.run import trace_all  # noqa: E402

TARGETS = [  # (file relative to the repository, qualname, world_size)
    ("examples/train_step.py", "train_step", None),
    ("examples/train_step.py", "train", None),
    ("examples/input_pipeline.py", "train_stalling", None),
    ("examples/input_pipeline.py", "train_overlapped", None),
    ("tests/fixtures/check/step.py", "train", None),
    ("tests/fixtures/check/step.py", "train_clean", None),
    ("examples/fsdp_tp_step.py", "train_step", 8),
]


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--cold", type=int, default=2)
    args = options.parse_args()
    functions = tuple(
        CheckedFunction(
            target=f"{file}::{name}", file=os.path.join(REPO, file), qualname=name, budget=Budget(), world_size=world
        )
        for file, name, world in TARGETS
    )
    started = time.perf_counter()
    results = trace_all(functions, None, None)
    total = time.perf_counter() - started
    print("| function | status | seconds in the warm worker |\n|---|---|---|")
    for r in results:
        print(f"| {r.function.target} | {r.report.status} | {r.seconds:.2f} |")
    later = [r.seconds for r in results[1:]]
    print(
        f"\n{len(results)} functions in one worker: {total:.1f} s in all; first {results[0].seconds:.1f} s "
        f"(worker start + trace); after it, median {statistics.median(later):.2f} s per function "
        f"(min {min(later):.2f}, max {max(later):.2f})"
    )
    cold = []
    for r in results[: args.cold]:
        f = r.function
        command = [sys.executable, "-m", "atenlens", "trace", f"{f.file}::{f.qualname}", "--json"]
        if f.world_size:
            command += ["--world-size", str(f.world_size)]
        t = time.perf_counter()
        subprocess.run(command, cwd=REPO, capture_output=True, timeout=600)
        cold.append(time.perf_counter() - t)
        print(f"one `atenlens trace` process for {f.target}: {cold[-1]:.1f} s")
    if cold:
        print(
            f"one process per function / warm worker per function (median): "
            f"{statistics.median(cold) / statistics.median(later):.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
