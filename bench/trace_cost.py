"""Benchmark — what a trace costs: GPT-2-small and Llama-7B-shaped training steps, atenlens vs the floor.

For each model, side by side in alternating rounds (A B C, B C A, ...), each in a fresh warm process:
- atenlens: `run_trace` of `bench/trace_models.py::train_step` on simulated CUDA (module load, model
  and optimizer built on fake tensors, one AdamW step recorded: calls, ops, attribution, hazards, and
  the memory and time forecast);
- atenlens without cost: the same with `TraceRequest(cost=False)` (no memory model, no roofline), to
  show what the forecast itself costs;
- floor:    the same load, build and step under the device's bare FakeTensorMode, nothing recorded;
- DebugMode: the floor with torch's own op logger around the step,
  `torch.utils._debug_mode.DebugMode(record_faketensor=True, record_stack_trace=True)` (aten ops with
  shapes, and a Python stack for each, backward ops' forward stacks through anomaly mode; no function-
  level calls, no attribution to lines, no hazards): what a user can get from torch itself today.
Reported: median and spread (min-max) of the wall time, the ratios of medians, peak RSS (ru_maxrss of
the whole process, torch included) and the op counts. A "warm process" has imported torch and
entered a first FakeTensorMode before the clock starts, and frozen its heap (gc.freeze), as the trace
worker has.

    python bench/trace_cost.py [--quick] [--rounds N] [--json PATH]     (--quick: GPT-2 at tiny sizes only)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from harness import REPO_ROOT, Result, Table, Target, finish, median, parser, rotated, spread

MODELS = os.path.join(REPO_ROOT, "bench", "trace_models.py")
MiB = 2**20

# (name, kind in trace_models.setup, target seconds for the atenlens trace)
MODELS_MEASURED = [("GPT-2 small (124M, fp32)", "gpt2", 1.5), ("Llama-7B shape (6.7B, bf16)", "llama", 6.0)]
FULL_SHAPE = {"batch": 8, "seq": 1024}
TINY_SHAPE = {"batch": 2, "seq": 32}
RSS_TARGET_BYTES = 1024 * MiB
RATIO_TARGET = 1.3

# Runs in a fresh interpreter: warm up like the worker, then time one trace (or one floor run).
PROBE = r"""
import importlib.util, json, os, resource, sys, time
mode, models, call = sys.argv[1], sys.argv[2], sys.argv[3]
from atenlens.trace.device import preload_before_torch, simulated_device
notes = preload_before_torch("cuda")
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():                                 # warm like the worker: the first FakeTensorMode,
    layer = torch.nn.Linear(4, 4)                       # autograd and optimizer imports cost ~2 s once
    layer(torch.randn(2, 4)).sum().backward()
    torch.optim.AdamW(layer.parameters()).step()
from atenlens.report import TraceRequest
from atenlens.trace import torch_compat
from atenlens.trace.runner import build_example_call, run_trace
import gc                                              # and, like the worker before it forks a trace, move
gc.collect()                                           # the warm heap out of the collector's reach: else a
gc.freeze()                                            # full collection (~0.4 s here) lands in a run or not, by chance

result = {"mode": mode, "notes": list(notes)}
if mode in ("atenlens", "nocost"):
    started, cpu = time.perf_counter(), time.process_time()
    report = run_trace(TraceRequest(file=models, qualname="train_step", device="cuda", call=call,
                                    timeout_seconds=600, cost=mode == "atenlens"))
    result["seconds"], result["cpu_seconds"] = time.perf_counter() - started, time.process_time() - cpu
    assert report.status == "ok", report.message
    result["device"] = report.device
    result["ops"] = report.summary.ops
    result["unattributed_backward"] = sum(1 for e in report.events
                                          if e.kind == "op" and e.phase == "backward" and e.line is None)
else:
    import contextlib
    from torch.utils._debug_mode import DebugMode
    started, cpu = time.perf_counter(), time.process_time()
    with simulated_device("cuda") as session, torch_compat.fake_module_fixes(), session.make_fake_mode():
        spec = importlib.util.spec_from_file_location("trace_models", models)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        example = build_example_call(module, call)
        # like atenlens's recorder, DebugMode is active around the step only
        logger = (DebugMode(record_faketensor=True, record_stack_trace=True) if mode == "debugmode"
                  else contextlib.nullcontext())
        with logger:
            example.function(*example.args, **example.kwargs)
    result["seconds"], result["cpu_seconds"] = time.perf_counter() - started, time.process_time() - cpu
    result["device"] = session.device
    if mode == "debugmode":
        result["logged"] = len(logger.operators)
result["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(result))
# leave as the worker's children do: a normal exit can race autograd's device thread (device.py)
sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
"""


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float
    peak_rss: int
    device: str
    ops: dict
    unattributed_backward: int
    logged: int = 0  # DebugMode: entries in its log


def example_call(kind: str, tiny: bool) -> str:
    shape = TINY_SHAPE if tiny else FULL_SHAPE
    return f'train_step(*setup("{kind}", tiny={tiny}, batch={shape["batch"]}, seq={shape["seq"]}))'


def measure_once(mode: str, kind: str, tiny: bool) -> Run:
    """One fresh process: `mode` is "atenlens" (run_trace), "floor" (bare FakeTensorMode) or "debugmode"."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, MODELS, example_call(kind, tiny)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} {kind} failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Run(
        data["seconds"],
        data["cpu_seconds"],
        data["peak_rss"],
        data["device"],
        data.get("ops", {}),
        data.get("unattributed_backward", 0),
        data.get("logged", 0),
    )


MODES = ("atenlens", "nocost", "floor", "debugmode")


def measure_model(kind: str, tiny: bool, rounds: int) -> dict[str, list[Run]]:
    """Rounds in rotating order (A B C, B C A, ...), so that drift on a shared machine hits all."""
    runs: dict[str, list[Run]] = {mode: [] for mode in MODES}
    for r in range(rounds):
        for mode in rotated(MODES, r):
            runs[mode].append(measure_once(mode, kind, tiny))
    return runs


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    shape = TINY_SHAPE if args.quick else FULL_SHAPE

    result = Result(
        "trace_cost",
        "Trace cost: GPT-2 and Llama-7B-shaped train steps vs bare FakeTensorMode",
        "python bench/trace_cost.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    times = Table(
        f"one AdamW train step, batch {shape['batch']}, seq {shape['seq']}, seconds, {rounds} rounds "
        "(fresh warm process each)",
        [
            "model",
            "atenlens median",
            "spread",
            "floor median",
            "spread",
            "ratio",
            "CPU-time ratio",
            "DebugMode median",
            "spread",
            "atenlens / DebugMode",
            "device",
        ],
    )
    memory = Table(
        "peak RSS of the process (torch included), MiB, and what was recorded",
        [
            "model",
            "atenlens",
            "floor",
            "DebugMode",
            "ops forward / backward / optimizer",
            "unattributed backward",
            "DebugMode log entries",
        ],
    )
    costs = Table(
        "what the memory and time forecast costs: atenlens with and without it, seconds (medians)",
        [
            "model",
            "with cost",
            "without cost",
            "ratio to floor with",
            "ratio to floor without",
            "peak RSS with, MiB",
            "peak RSS without, MiB",
        ],
    )
    # --quick (the smoke test): one model, the same code path; each variant still in its own process
    for name, kind, seconds_target in MODELS_MEASURED[:1] if args.quick else MODELS_MEASURED:
        name = f"{name}, tiny sizes" if args.quick else name
        runs = measure_model(kind, args.quick, rounds)
        traced = [r.seconds for r in runs["atenlens"]]
        floor = [r.seconds for r in runs["floor"]]
        ratio = median(traced) / median(floor)
        cpu_ratio = median([r.cpu_seconds for r in runs["atenlens"]]) / median([r.cpu_seconds for r in runs["floor"]])
        first = runs["atenlens"][0]
        logged = [r.seconds for r in runs["debugmode"]]
        vs_debugmode = median(traced) / median(logged)
        times.add(
            name,
            median(traced),
            spread(traced),
            median(floor),
            spread(floor),
            ratio,
            cpu_ratio,
            median(logged),
            spread(logged),
            vs_debugmode,
            first.device,
        )
        peak = max(r.peak_rss for r in runs["atenlens"])
        memory.add(
            name,
            peak / MiB,
            max(r.peak_rss for r in runs["floor"]) / MiB,
            max(r.peak_rss for r in runs["debugmode"]) / MiB,
            " / ".join(str(first.ops.get(p, 0)) for p in ("forward", "backward", "optimizer")),
            str(first.unattributed_backward),
            str(runs["debugmode"][0].logged),
        )
        if not args.quick:
            result.targets.append(Target(f"{name}: trace time", median(traced), seconds_target, "s"))
            result.targets.append(Target(f"{name}: ratio to bare FakeTensorMode", ratio, RATIO_TARGET))
            # the same two targets in process CPU time: what wall time shows on a machine without other load
            result.targets.append(
                Target(
                    f"{name}: trace CPU time", median([r.cpu_seconds for r in runs["atenlens"]]), seconds_target, "s"
                )
            )
            result.targets.append(Target(f"{name}: ratio to bare FakeTensorMode, CPU time", cpu_ratio, RATIO_TARGET))
            result.targets.append(Target(f"{name}: peak RSS", peak / MiB, RSS_TARGET_BYTES / MiB, "MiB"))
            result.targets.append(Target(f"{name}: time / DebugMode's (faster than DebugMode)", vs_debugmode, 1.0))
        plain = [r.seconds for r in runs["nocost"]]
        costs.add(
            name,
            median(traced),
            median(plain),
            ratio,
            median(plain) / median(floor),
            peak / MiB,
            max(r.peak_rss for r in runs["nocost"]) / MiB,
        )
        if not args.quick:
            result.targets.append(
                Target(
                    f"{name}: ratio to bare FakeTensorMode without the cost forecast",
                    median(plain) / median(floor),
                    RATIO_TARGET,
                )
            )
        result.raw[kind] = {mode: [r.__dict__ for r in rs] for mode, rs in runs.items()}
    result.tables += [times, memory, costs]
    result.notes.append(
        "CPU-time ratio = ratio of the medians of process CPU time over the same interval: less "
        "sensitive than wall time to other load on a shared machine"
    )
    result.notes.append(
        "each process freezes its warm heap (gc.freeze) before the clock starts, as the trace worker "
        "does before it forks: unfrozen, a full collection of that heap (~0.4 s here) falls inside "
        "some runs and not others, more often in traces, whose events allocate"
    )
    result.notes.append(
        "trace time = run_trace in a warm process: load the module, build the model, optimizer "
        "and batch on fake tensors, record the step; the worker's fork and JSON are not included "
        "(bench/worker_costs.py measures those)"
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
