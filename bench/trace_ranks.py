"""Benchmark — what simulated ranks cost: a Llama-7B-shaped FSDP2 train step on 64 ranks (8 nodes)
against the same step traced as one process.

Each in a fresh warm process (imports and a first FakeTensorMode before the clock, as the trace
worker has), one measured run each:
- one rank: `run_trace` of `bench/trace_models.py::train_step(*setup("llama"))`, no process group;
- FSDP2, 64 ranks: `train_step(*setup_fsdp("llama"))` with `world_size=64, gpus_per_node=8`: the
  program calls `init_process_group("nccl")` (the fake backend), builds a 64-rank mesh, `fully_shard`s
  every block and the root; one AdamW step over the shards; every all-gather and reduce-scatter
  recorded and priced.
Reported: wall and CPU time of the trace (loading, building the model, the step), peak RSS
(ru_maxrss of the process), ops, collectives, the forecast peak memory of a rank, and the ratio of
the two traces' times (target: under 2, the FSDP2 step must not cost a multiple of the plain one).

    python bench/trace_ranks.py [--quick] [--json PATH]     (--quick: the tiny Llama shape)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from harness import REPO_ROOT, Result, Table, Target, finish, parser

MODELS = os.path.join(REPO_ROOT, "bench", "trace_models.py")
MiB, GiB = 2**20, 2**30
RATIO_TARGET = 2.0

PROBE = r"""
import json, os, resource, sys, time
models, call, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
from atenlens.trace.device import preload_before_torch
preload_before_torch("cuda")
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():                                  # warm like the worker
    layer = torch.nn.Linear(4, 4)
    layer(torch.randn(2, 4)).sum().backward()
    torch.optim.AdamW(layer.parameters()).step()
import torch.distributed.fsdp, torch.distributed.tensor  # noqa: F401  (imported by the worker's first FSDP2 trace)
from atenlens.report import TraceRequest
from atenlens.trace.runner import run_trace
import gc
gc.collect(); gc.freeze()
started, cpu = time.perf_counter(), time.process_time()
report = run_trace(TraceRequest(file=models, qualname="train_step", device="cuda", call=call, timeout_seconds=1800,
                                world_size=world if world > 1 else None, gpus_per_node=8))
seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
assert report.status == "ok", report.message
summary = report.summary
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "ops": sum(summary.ops.values()), "collectives": summary.collectives,
                  "communication_seconds": summary.communication_seconds,
                  "step_seconds": summary.time.step_seconds if summary.time else None,
                  "peak_bytes": summary.memory.peak_bytes if summary.memory else None}))
sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
"""


def measure(call: str, world: int) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, MODELS, call, str(world)], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{call} on {world} ranks failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    shape = 'tiny=True, batch=2, seq=32' if args.quick else 'batch=8, seq=1024'
    name = "Llama tiny" if args.quick else "Llama-7B shape (6.7B, bf16), batch 8 x seq 1024 per rank"
    cases = [("one rank", f'train_step(*setup("llama", {shape}))', 1),
             ("FSDP2, 64 ranks (8 nodes)", f'train_step(*setup_fsdp("llama", {shape}))', 64)]
    result = Result("trace_ranks", "What simulated ranks cost: FSDP2 on 64 ranks vs one process",
                    "python bench/trace_ranks.py" + (" --quick" if args.quick else ""), quick=args.quick)
    table = Table(f"{name}: one trace each, fresh warm process",
                  ["trace", "wall s", "CPU s", "peak RSS MiB", "ops", "collectives", "peak memory per rank GiB",
                   "communication ms"])
    runs = {}
    for label, call, world in cases:
        run = runs[label] = measure(call, world)
        table.add(label, run["seconds"], run["cpu_seconds"], run["peak_rss"] / MiB, run["ops"], run["collectives"],
                  run["peak_bytes"] / GiB, run["communication_seconds"] * 1e3)
    ratio = runs[cases[1][0]]["seconds"] / runs[cases[0][0]]["seconds"]
    result.tables.append(table)
    result.targets.append(Target("FSDP2 64-rank trace time / one-rank trace time", ratio, RATIO_TARGET, "x"))
    result.raw = runs
    result.notes.append("one measured run per trace (no rounds): a benchmark run is quoted with its conditions; "
                        "the machine's load is part of them")
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
