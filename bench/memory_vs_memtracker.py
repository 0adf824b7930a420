"""Benchmark — atenlens's memory forecast side by side with torch's MemTracker, on the same fake run.

For GPT-2 small (fp32) and a Llama-7B-shaped model (bf16), one AdamW train step of
`bench/trace_models.py::train_step` on simulated CUDA, in one fresh process per model: the atenlens
trace of the step (its memory model: summary.memory), with `torch.distributed._tools.mem_tracker.MemTracker`
around the step inside it (`bench/memtracker_step.py`: `track_external(model, opt, batch)` first, as its
documentation says; its "peak" snapshot). Both see the very same ops: run apart, MemTracker would see
attention take the math path (FakeTensorMode alone does not choose the fused kernel a GPU runs), which
saves the T x T attention matrix of every layer.
Reported: both peaks, their ratio, and both breakdowns at the peak. The categories differ by
definition (docs/fidelity.md, "Memory against torch's MemTracker"): MemTracker calls every forward
output an Activation and everything allocated inside `step()` Optstate.

    python bench/memory_vs_memtracker.py [--quick] [--json PATH]     (--quick: both models at tiny sizes)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness import REPO_ROOT, Result, Table, Target, finish, parser

MODELS = os.path.join(REPO_ROOT, "bench", "trace_models.py")
MiB = 2**20
PEAK_TOLERANCE = 0.05

PROBE = r"""
import json, os, sys
models, call = sys.argv[1], sys.argv[2]
from atenlens.trace.device import preload_before_torch
preload_before_torch("cuda")
from atenlens.report import TraceRequest
from atenlens.trace.runner import run_trace
import contextlib, io
printed = io.StringIO()                      # what the step prints (the worker would capture it)
with contextlib.redirect_stdout(printed):
    report = run_trace(TraceRequest(file=models, qualname="train_step", device="cuda", call=call, timeout_seconds=1200))
assert report.status == "ok", report.message
memory = report.summary.memory
line = next(l for l in printed.getvalue().splitlines() if l.startswith("MEMTRACKER "))
theirs = json.loads(line[len("MEMTRACKER "):])
print(json.dumps({
    "atenlens": {"device": report.device, "peak": memory.peak_bytes, "line": memory.peak_line,
                 "phase": memory.peak_phase, "categories": vars(memory.at_peak)},
    "memtracker": {"device": report.device, "peak": theirs.pop("Total", 0), "categories": theirs},
}))
sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
"""

# (name, kind in trace_models.setup)
MODELS_MEASURED = [("GPT-2 small (124M, fp32)", "gpt2"), ("Llama-7B shape (6.7B, bf16)", "llama")]
FULL_SHAPE = {"batch": 8, "seq": 1024}
TINY_SHAPE = {"batch": 2, "seq": 32}


def example_call(kind: str, tiny: bool) -> str:
    shape = TINY_SHAPE if tiny else FULL_SHAPE
    return f'train_step(*setup("{kind}", tiny={tiny}, batch={shape["batch"]}, seq={shape["seq"]}))'


def compare(kind: str, tiny: bool) -> tuple[dict, dict]:
    """One fresh process: the atenlens trace of the step, with MemTracker around the step inside it."""
    shape = TINY_SHAPE if tiny else FULL_SHAPE
    call = (
        f'__import__("memtracker_step").tracked_step(train_step, *setup("{kind}", tiny={tiny}, '
        f"batch={shape['batch']}, seq={shape['seq']}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE, MODELS, call], capture_output=True, text=True, cwd=REPO_ROOT, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["atenlens"], data["memtracker"]


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    shape = TINY_SHAPE if args.quick else FULL_SHAPE
    result = Result(
        "memory_vs_memtracker",
        "Memory forecast: atenlens vs torch's MemTracker on the same fake step",
        "python bench/memory_vs_memtracker.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    peaks = Table(
        f"peak device memory of one AdamW train step, batch {shape['batch']}, seq {shape['seq']}, MiB",
        ["model", "atenlens peak", "at", "MemTracker peak", "atenlens / MemTracker"],
    )
    breakdown = Table("what each says is live at its peak, MiB", ["model", "tool", "breakdown"])
    for name, kind in MODELS_MEASURED:
        name = f"{name}, tiny sizes" if args.quick else name
        ours, theirs = compare(kind, args.quick)
        ratio = ours["peak"] / theirs["peak"] if theirs["peak"] else float("nan")
        peaks.add(name, ours["peak"] / MiB, f"line {ours['line']} ({ours['phase']})", theirs["peak"] / MiB, ratio)
        for tool, data in (("atenlens", ours), ("MemTracker", theirs)):
            breakdown.add(name, tool, ", ".join(f"{k} {v / MiB:.1f}" for k, v in data["categories"].items() if v))
        result.targets.append(Target(f"{name}: |atenlens / MemTracker - 1|", abs(ratio - 1), PEAK_TOLERANCE))
        result.raw[kind] = {"atenlens": ours, "memtracker": theirs}
    result.tables += [peaks, breakdown]
    result.notes.append(
        "both run the same code on the same simulated CUDA device under FakeTensorMode; the peak "
        "is over the step only (memory live before it included)"
    )
    result.notes.append(
        "categories differ by definition: MemTracker's Activation is every forward output, its "
        "Optstate everything allocated inside step() (AdamW's sqrt temporaries too), its Temp "
        "everything allocated in backward; atenlens's activations are what autograd saved, "
        "temporaries the rest (docs/fidelity.md)"
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
