"""Benchmark — what simulated ranks cost: a Llama-7B-shaped FSDP2 train step on 64 ranks (8 nodes)
against the same step traced as one process.

Each in a fresh warm process (imports and a first FakeTensorMode before the clock, as the trace
worker has), one measured run each:
- one rank: `run_trace` of `bench/trace_models.py::train_step(*setup("llama"))`, no process group;
- FSDP2, 64 ranks: `train_step(*setup_fsdp("llama"))` with `world_size=64, gpus_per_node=8`: the
  program calls `init_process_group("nccl")` (the fake backend), builds a 64-rank mesh, `fully_shard`s
  every block and the root; one AdamW step over the shards; every all-gather and reduce-scatter
  recorded and priced.
- and each of the two as a floor: the same load, build and step under the device's bare
  FakeTensorMode, nothing recorded (the FSDP2 one on torch's fake process group with the mesh built
  outside fake mode, as the trace does): what torch itself spends on FSDP2 and DTensor there.
Reported: wall and CPU time (loading, building the model, the step), peak RSS (ru_maxrss of the
process), ops, collectives, their summed estimate and the part of it exposed on two streams
(trace/overlap.py), the forecast peak memory of a rank; the ratio of the two traces' CPU times
(target: under 2, the FSDP2 step must not cost a multiple of the plain one; CPU time, because on a
shared machine the wall time is mostly waiting for a core) and of the two floors'. With `--rounds N`
each of the four runs N times, in turn, and the table gives medians.

    python bench/trace_ranks.py [--quick] [--rounds N] [--json PATH]     (--quick: the tiny Llama shape)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from harness import REPO_ROOT, Result, Table, Target, finish, parser

MODELS = os.path.join(REPO_ROOT, "bench", "trace_models.py")
MiB, GiB = 2**20, 2**30
RATIO_TARGET = 2.0

PROBE = r"""
import json, os, resource, sys, time
mode, models, call, world = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
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
if mode == "floor":
    import importlib.util
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh
    from atenlens.trace import torch_compat
    from atenlens.trace.device import simulated_device
    from atenlens.trace.runner import build_example_call
    started, cpu = time.perf_counter(), time.process_time()
    real_init, real_mesh = dist.init_process_group, device_mesh.init_device_mesh
    dist.init_process_group = lambda *a, **k: real_init("fake", rank=0, world_size=world)

    def init_device_mesh(*a, **k):
        with torch_compat.outside_trace_modes():
            return real_mesh(*a, **k)

    device_mesh.init_device_mesh = init_device_mesh
    with simulated_device("cuda") as session, torch_compat.fake_module_fixes(), session.make_fake_mode():
        spec = importlib.util.spec_from_file_location("trace_models", models)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        example = build_example_call(module, call)
        example.function(*example.args, **example.kwargs)
    print(json.dumps({"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu,
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
    sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
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
                  "exposed_communication_seconds": summary.exposed_communication_seconds,
                  "step_seconds": summary.time.step_seconds if summary.time else None,
                  "peak_bytes": summary.memory.peak_bytes if summary.memory else None}))
sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
"""


def measure(mode: str, call: str, world: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, MODELS, call, str(world)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=3600,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{call} on {world} ranks failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=1, help="runs of each case; the table gives medians")
    args = p.parse_args(argv)
    shape = "tiny=True, batch=2, seq=32" if args.quick else "batch=8, seq=1024"
    name = "Llama tiny" if args.quick else "Llama-7B shape (6.7B, bf16), batch 8 x seq 1024 per rank"
    cases = [
        ("one rank", f'train_step(*setup("llama", {shape}))', 1),
        ("FSDP2, 64 ranks (8 nodes)", f'train_step(*setup_fsdp("llama", {shape}))', 64),
    ]
    result = Result(
        "trace_ranks",
        "What simulated ranks cost: FSDP2 on 64 ranks vs one process",
        "python bench/trace_ranks.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    table = Table(
        f"{name}: each trace in a fresh warm process",
        [
            "trace",
            "wall s",
            "CPU s",
            "peak RSS MiB",
            "ops",
            "collectives",
            "peak memory per rank GiB",
            "communication ms",
            "exposed ms",
        ],
    )
    runs: dict[str, dict] = {}
    rounds: dict[str, list[dict]] = {}
    loads: list[float] = []
    for _ in range(args.rounds):  # the four cases in turn, so a change of load touches each alike
        for mode, prefix in (("atenlens", ""), ("floor", "floor: ")):
            for label, call, world in cases:
                loads.append(os.getloadavg()[0])
                rounds.setdefault(prefix + label, []).append(measure(mode, call, world))
    for key, measured in rounds.items():
        runs[key] = dict(measured[-1])
        for field in ("seconds", "cpu_seconds", "peak_rss"):
            runs[key][field] = statistics.median(run[field] for run in measured)
    for label, _, _ in cases:
        run = runs[label]
        table.add(
            label,
            run["seconds"],
            run["cpu_seconds"],
            run["peak_rss"] / MiB,
            run["ops"],
            run["collectives"],
            run["peak_bytes"] / GiB,
            run["communication_seconds"] * 1e3,
            run["exposed_communication_seconds"] * 1e3,
        )
    for label, _, _ in cases:
        run = runs[f"floor: {label}"]
        table.add(f"floor: {label}", run["seconds"], run["cpu_seconds"], run["peak_rss"] / MiB, "-", "-", "-", "-", "-")
    one, fsdp = cases[0][0], cases[1][0]
    ratio = runs[fsdp]["cpu_seconds"] / runs[one]["cpu_seconds"]
    result.tables.append(table)
    result.targets.append(Target("FSDP2 64-rank trace CPU time / one-rank trace CPU time", ratio, RATIO_TARGET, "x"))
    ratios = Table("ratios (CPU time; wall time in brackets)", ["", "FSDP2 64 ranks / one rank"])
    for what, a, b in (
        ("traced", fsdp, one),
        ("floor", f"floor: {fsdp}", f"floor: {one}"),
        ("trace / floor, FSDP2", fsdp, f"floor: {fsdp}"),
        ("trace / floor, one rank", one, f"floor: {one}"),
    ):
        ratios.add(
            what,
            f"{runs[a]['cpu_seconds'] / runs[b]['cpu_seconds']:.2f} ({runs[a]['seconds'] / runs[b]['seconds']:.2f})",
        )
    result.tables.append(ratios)
    result.raw = {"medians": runs, "rounds": rounds, "load_average_1min": loads}
    result.notes.append(
        f"{args.rounds} round(s) of each run, medians; 1-minute load average at the runs' starts "
        f"{min(loads):.1f}-{max(loads):.1f}. The floor is torch as it is, without the set-up shortcuts "
        "of a trace (torch_compat.spmd_setup_shortcuts)"
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
