"""Benchmark — the trace's forecast against a real CUDA GPU: syncs, peak memory, per-line kernel time.

Needs a machine with a CUDA GPU and a CUDA build of torch; elsewhere it says so and exits 2. For each
case (a FILE::QUALNAME with its example call) it
1. traces it with atenlens (`atenlens trace --json --gpu KEY`, KEY from the GPU's name, or --gpu),
2. imports the same file and runs the same call for real on the GPU: once to warm up (cuBLAS handles,
   the caching allocator, lazy optimizer state would otherwise make the first step special), then
   - syncs: under `torch.cuda.set_sync_debug_mode("warn")`, one warning per synchronizing call, counted
     (the "error" mode raises at the first one; "warn" counts them all);
   - memory: `torch.cuda.max_memory_allocated()` over one step after `reset_peak_memory_stats()`;
   - time: the step under `torch.profiler.profile(activities=[CUDA, CPU], with_stack=True)`, each
     kernel's device time given to its op's innermost frame in the traced file; backward ops (no
     Python stack: autograd's thread) go to the forward op with the same sequence number, as the
     trace does; and the step's wall time between two synchronizes;
3. prints a table per case: forecast vs measured, and per line the estimated vs measured kernel time.

    python bench/gpu_truth.py [--gpu KEY] [--json PATH] [FILE::QUALNAME --call EXPR ...]
    python bench/gpu_truth.py --forecast-only [--gpu KEY] [...]     (any machine: the trace's side alone)

`--forecast-only` runs step 1 and prints the forecast's half of the table (the GPU columns empty); it
needs no GPU, and CI runs it (tests/test_bench_smoke.py), so the script is known to parse its arguments,
trace its cases and read their reports before it ever meets a GPU.

The first run on a given GPU also tells whether the roofline's efficiency factors (atenlens/cost.py)
hold: the per-line ratios of measured to estimated time are that GPU's answer.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from typing import Any, Optional

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "server"))

# (target, example call): a small MLP step and GPT-2 small at a size every listed GPU holds
CASES = [
    ("tests/fixtures/cost/mlp_adamw.py::step", "step(*setup())"),
    ("bench/trace_models.py::train_step", 'train_step(*setup("gpt2", batch=4, seq=512))'),
]


def gpu_key(name: str) -> str:
    """The table's key for torch.cuda.get_device_name()."""
    from atenlens.gpus import find_gpu

    lowered = name.lower()
    for needle, key in (
        ("h200", "h200"),
        ("h100 pcie", "h100-pcie"),
        ("h100", "h100-sxm"),
        ("a100-sxm4-40gb", "a100-40gb"),
        ("a100-pcie-40gb", "a100-40gb"),
        ("a100", "a100-80gb"),
        ("l40s", "l40s"),
        ("l4", "l4"),
        ("4090", "rtx-4090"),
        ("mi300x", "mi300x"),
    ):
        if needle in lowered:
            return find_gpu(key).key
    return find_gpu(None).key


def forecast(target: str, call: str, gpu: str) -> Any:
    from atenlens.report import TraceReport

    # the package from this checkout, installed or not
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(REPO_ROOT, "server"), os.environ.get("PYTHONPATH")])),
    )
    out = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", target, "--call", call, "--gpu", gpu, "--json", "--timeout", "600"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=1200,
        env=env,
    )
    if out.returncode not in (0, 1):
        raise RuntimeError(out.stderr)
    report = TraceReport.from_json(out.stdout)
    if report.status != "ok":
        raise RuntimeError(f"{target}: the trace did not complete: {report.status}: {report.message}")
    return report


def print_case(target: str, call: str, report: Any, path: str, measured: Optional[dict] = None) -> None:
    """Forecast against measurement for one case; `measured` None (--forecast-only): the forecast alone."""
    from atenlens.cost import format_bytes, format_seconds, line_costs

    memory, estimate = report.summary.memory, report.summary.time
    estimated = {
        c.line: c.seconds
        for c in line_costs(report.events, estimate.gpu).values()
        if c.file == path and c.line is not None
    }
    m = measured or {}
    na = "-"
    peak = m.get("peak")
    print(f"\n{target}  {call}")
    print(f"  syncs            trace {report.summary.syncs:>12}   GPU {m.get('syncs', na):>12}")
    print(
        f"  peak memory      trace {format_bytes(memory.peak_bytes):>12}   GPU "
        f"{format_bytes(peak) if peak is not None else na:>12}"
        + (f"   ratio {memory.peak_bytes / peak:.3f}" if peak else "")
    )
    kernels = m.get("kernel_seconds")
    print(
        f"  kernel time      trace {format_seconds(estimate.step_seconds):>12}   GPU "
        f"{format_seconds(kernels) if kernels is not None else na:>12}"
        + (f"   (step wall time {format_seconds(m['wall_seconds'])})" if "wall_seconds" in m else "")
    )
    print("  line   estimated   measured   measured / estimated")
    lines = m.get("lines", {})
    for line in sorted(set(estimated) | {k for k in lines if k is not None}):
        e = estimated.get(line, 0.0)
        if measured is None:
            print(f"  {line:>4}  {format_seconds(e):>10} {na:>10}")
            continue
        got = lines.get(line, 0.0)
        print(f"  {line:>4}  {format_seconds(e):>10} {format_seconds(got):>10}   {got / e if e else float('nan'):.2f}")
    if lines.get(None):
        print(f"  (no line) measured {format_seconds(lines[None])}")


def load(target: str, call: str) -> tuple[Any, tuple, dict, str]:
    file, _, qualname = target.rpartition("::")
    path = os.path.join(REPO_ROOT, file)
    spec = importlib.util.spec_from_file_location(f"gpu_truth_{os.path.basename(file)[:-3]}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    spec.loader.exec_module(module)
    function = eval(call.split("(", 1)[0], module.__dict__)
    inner = call[call.index("(") + 1 : call.rindex(")")]
    args, kwargs = eval(f"(lambda *a, **k: (a, k))({inner})", module.__dict__)
    return function, args, kwargs, path


def count_syncs(function: Any, args: tuple, kwargs: dict) -> int:
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            function(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum(1 for w in caught if "synchroniz" in str(w.message).lower())


def peak_memory(function: Any, args: tuple, kwargs: dict) -> int:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    function(*args, **kwargs)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def _line_in(stack: list, path: str) -> Optional[int]:
    """'/x/train.py(33): train_step' frames, innermost first: the innermost in `path`."""
    for frame in stack or ():
        location = frame.split(":", 1)[0]
        if "(" in location and os.path.abspath(location[: location.rindex("(")]) == path:
            return int(location[location.rindex("(") + 1 : location.rindex(")")])
    return None


def kernel_time_per_line(function: Any, args: tuple, kwargs: dict, path: str) -> tuple[dict, float, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as prof:
        started = time.perf_counter()
        function(*args, **kwargs)
        torch.cuda.synchronize()
        wall = time.perf_counter() - started
    events = prof.events()
    line_of_sequence: dict[int, int] = {}
    for event in events:
        line = _line_in(event.stack, path)
        if line is not None and getattr(event, "sequence_nr", -1) >= 0 and not event.is_async:
            line_of_sequence.setdefault(event.sequence_nr, line)
    per_line: dict[Any, float] = defaultdict(float)
    total = 0.0
    for event in events:
        device = getattr(event, "self_device_time_total", 0.0)  # µs of kernels this op launched itself
        if not device:
            continue
        total += device
        line = _line_in(event.stack, path)
        if line is None and getattr(event, "sequence_nr", -1) >= 0:
            line = line_of_sequence.get(event.sequence_nr)
        per_line[line] += device
    return {k: v / 1e6 for k, v in per_line.items()}, total / 1e6, wall


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", metavar="FILE::QUALNAME")
    p.add_argument("--call", action="append", default=[], help="example call of each FILE::QUALNAME given")
    p.add_argument("--gpu", help="the table's key for this GPU (default: from its name)")
    p.add_argument("--json", metavar="PATH")
    p.add_argument(
        "--forecast-only",
        action="store_true",
        help="trace the cases and print the forecast's side of the table; needs no GPU",
    )
    args = p.parse_args(argv)
    if len(args.call) != len(args.cases):
        p.error(f"give one --call per FILE::QUALNAME ({len(args.cases)} cases, {len(args.call)} --call)")
    from atenlens.cost import line_costs
    from atenlens.gpus import find_gpu

    if args.gpu is not None:
        try:
            find_gpu(args.gpu)
        except KeyError as error:
            p.error(str(error.args[0]))
    cases = list(zip(args.cases, args.call)) if args.cases else CASES
    results = []
    if args.forecast_only:
        gpu = find_gpu(args.gpu).key
        print(f"forecast only (no GPU run), priced as {gpu}")
        for target, call in cases:
            report = forecast(target, call, gpu)
            path = os.path.join(REPO_ROOT, target.rpartition("::")[0])
            print_case(target, call, report, path)
            results.append(
                {
                    "target": target,
                    "call": call,
                    "key": gpu,
                    "syncs": [report.summary.syncs, None],
                    "peak": [report.summary.memory.peak_bytes, None],
                    "kernel_seconds": [report.summary.time.step_seconds, None],
                }
            )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=2)
        return 0

    import torch

    if not torch.cuda.is_available():
        print(
            "bench/gpu_truth.py needs a CUDA GPU and a CUDA build of torch; this machine has none "
            "(--forecast-only runs the trace's side alone)",
            file=sys.stderr,
        )
        return 2
    name = torch.cuda.get_device_name()
    gpu = find_gpu(args.gpu).key if args.gpu else gpu_key(name)
    print(f"GPU: {name} (priced as {gpu}), torch {torch.__version__}")
    for target, call in cases:
        report = forecast(target, call, gpu)
        function, fargs, fkwargs, path = load(target, call)
        function(*fargs, **fkwargs)  # warm-up
        syncs = count_syncs(function, fargs, fkwargs)
        peak = peak_memory(function, fargs, fkwargs)
        measured, kernel_total, wall = kernel_time_per_line(function, fargs, fkwargs, path)
        estimated = {
            c.line: c.seconds for c in line_costs(report.events, gpu).values() if c.file == path and c.line is not None
        }
        print_case(
            target,
            call,
            report,
            path,
            {"syncs": syncs, "peak": peak, "kernel_seconds": kernel_total, "wall_seconds": wall, "lines": measured},
        )
        memory, estimate = report.summary.memory, report.summary.time
        results.append(
            {
                "target": target,
                "call": call,
                "gpu": name,
                "key": gpu,
                "syncs": [report.summary.syncs, syncs],
                "peak": [memory.peak_bytes, peak],
                "kernel_seconds": [estimate.step_seconds, kernel_total],
                "wall_seconds": wall,
                "lines": {
                    str(k): [estimated.get(k, 0.0), measured.get(k, 0.0)] for k in set(estimated) | set(measured)
                },
            }
        )
        with contextlib.suppress(Exception):
            del function, fargs, fkwargs
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
