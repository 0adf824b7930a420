"""Roofline time estimates and cost roll-ups: pure arithmetic on report data, no torch.

The engine prices each op with `op_seconds` as it records it; the CLI and the editor roll the ops'
estimates up per line and phase with `line_costs`. The model (docs/cost.md):

    roofline(op) = max(FLOPs / (peak FLOPS for the op's dtype x COMPUTE_EFFICIENCY),
                       bytes moved / (HBM bandwidth x MEMORY_EFFICIENCY))
    time(op)     = max(roofline(op), LAUNCH_SECONDS)      (0 when the roofline is 0: no kernel)

Views and metadata ops move no bytes and cost nothing; copies between host and device move their
bytes at the PCIe rate instead of HBM's; ops on host tensors only cost nothing on the GPU. Not
modelled: Python and dispatcher overhead beyond the launch floor, overlap of copies with compute,
caches (L2 reuse between ops), and the efficiency differences between kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from atenlens.gpus import GPU, find_gpu
from atenlens.report import Event, MemoryHolder, Summary

# cuBLAS/cuDNN reach 70-80% of the dense tensor-core peak on large GEMMs and attention (torch's own
# estimators, inductor's and torch.distributed._tools.RuntimeEstimator, assume 75% too).
COMPUTE_EFFICIENCY = 0.75
# Streaming kernels (elementwise, reductions, copies) reach 80-90% of the datasheet HBM bandwidth.
MEMORY_EFFICIENCY = 0.85
# Every kernel is launched by the host, and a launch takes microseconds (NVIDIA, "Getting Started with
# CUDA Graphs"; about 4-6 µs of runtime and driver work per kernel measured with CUDA 13, docs/cost.md).
# Launches are asynchronous: while a kernel runs the host enqueues the next one, so a kernel longer
# than a launch hides it, and a shorter one leaves the GPU waiting for the next launch. Hence the floor
# is max(roofline, launch), not a sum: a 10 ms GEMM is not 4 µs slower, and no kernel takes 1 ns.
LAUNCH_SECONDS = 4e-6

ASSUMPTIONS = (
    f"estimates: roofline per op, max(FLOPs / ({COMPUTE_EFFICIENCY:g} x peak dense FLOPS of the op's dtype), "
    f"bytes moved / ({MEMORY_EFFICIENCY:g} x HBM bandwidth)), at least {LAUNCH_SECONDS * 1e6:g} µs per kernel "
    "(launch); views cost 0; host-device copies at the PCIe rate; no overlap, no caches"
)


def compute_seconds(gpu: GPU, flops: int, dtype: str, fp32_as_tf32: bool = False) -> float:
    if not flops:
        return 0.0
    return flops / (gpu.peak_flops(dtype, fp32_as_tf32) * COMPUTE_EFFICIENCY)


def memory_seconds(gpu: GPU, bytes_moved: int, host_copy: bool = False) -> float:
    if not bytes_moved:
        return 0.0
    bandwidth = gpu.host_link_bandwidth if host_copy else gpu.hbm_bandwidth
    return bytes_moved / (bandwidth * MEMORY_EFFICIENCY)


def op_seconds(
    gpu: GPU, flops: Optional[int], bytes_moved: int, dtype: str, fp32_as_tf32: bool = False, host_copy: bool = False
) -> float:
    """The estimate of one op on `gpu`: its roofline, at least one kernel launch (0 for an op that
    launches no kernel: nothing to compute, nothing to move)."""
    roofline = max(compute_seconds(gpu, flops or 0, dtype, fp32_as_tf32), memory_seconds(gpu, bytes_moved, host_copy))
    return max(roofline, LAUNCH_SECONDS) if roofline else 0.0


def compute_dtype(event: Event) -> str:
    """The dtype an op computes in: its first floating-point input's (else its first output's)."""
    for meta in event.inputs + event.outputs:
        if meta.dtype.startswith(("float", "bfloat", "complex")):
            return meta.dtype
    return "float32"


@dataclass
class LineCost:
    file: Optional[str]
    line: Optional[int]
    seconds: float = 0.0
    compute_seconds: float = 0.0
    memory_seconds: float = 0.0
    launch_seconds: float = 0.0
    bytes_allocated: int = 0
    flops: int = 0
    by_phase: dict[str, float] = field(default_factory=dict)

    @property
    def bound(self) -> str:
        """ "compute", "memory" or "launch": what most of the line's time comes from (its ops' FLOPs, their
        bytes, or kernels too small to take longer than their launch)."""
        if self.compute_seconds >= max(self.memory_seconds, self.launch_seconds):
            return "compute"
        return "memory" if self.memory_seconds >= self.launch_seconds else "launch"


def line_costs(
    events: Iterable[Event], gpu_name: Optional[str] = None, fp32_as_tf32: bool = False
) -> dict[tuple[Optional[str], Optional[int]], LineCost]:
    """Per innermost user line (backward ops at the forward line that caused them): summed estimates."""
    gpu = find_gpu(gpu_name)
    costs: dict[tuple[Optional[str], Optional[int]], LineCost] = {}
    for event in events:
        if event.kind != "op":
            continue
        key = (event.file, event.line)
        cost = costs.get(key)
        if cost is None:
            cost = costs[key] = LineCost(event.file, event.line)
        cost.seconds += event.estimate_seconds
        cost.bytes_allocated += event.bytes_allocated
        cost.flops += event.flops or 0
        cost.by_phase[event.phase] = cost.by_phase.get(event.phase, 0.0) + event.estimate_seconds
        if event.estimate_seconds:
            c = compute_seconds(gpu, event.flops or 0, compute_dtype(event), fp32_as_tf32)
            if c >= event.estimate_seconds:
                cost.compute_seconds += event.estimate_seconds
            elif event.estimate_seconds == LAUNCH_SECONDS:  # neither side of the roofline reached the floor
                cost.launch_seconds += event.estimate_seconds
            else:
                cost.memory_seconds += event.estimate_seconds
    return costs


def most_expensive(costs: dict, count: int = 5) -> list[LineCost]:
    return sorted((c for c in costs.values() if c.seconds > 0), key=lambda c: -c.seconds)[:count]


def lens_label(summary: Summary) -> str:
    """ "peak 61.2 GiB @ line 48 (backward) · ~412 ms/step on H100 SXM" for the editor's summary lens;
    "" when the report has no cost summary."""
    memory, time = summary.memory, summary.time
    parts: list[str] = []
    if memory is not None:
        where = f" @ line {memory.peak_line}" if memory.peak_line is not None else ""
        parts.append(
            f"peak {format_bytes(memory.peak_bytes)}{where} ({memory.peak_phase})"
            + (" — does not fit" if max(memory.peak_bytes, memory.reserved_peak_bytes) > memory.device_bytes else "")
        )
    if time is not None:
        try:
            name = find_gpu(time.gpu).short_name
        except KeyError:
            name = time.gpu
        parts.append(f"~{format_seconds(time.step_seconds)}/step on {name}")
    return " · ".join(parts)


def holder_label(holder: MemoryHolder, place: Optional[str]) -> str:
    """`activations of model.py:18 (saved by AddmmBackward0) 2 MiB`: one holder at the peak, for the
    CLI summary and the out-of-memory message alike (`place` is how the caller names its line)."""
    what = holder.category.replace("_", " ")
    if place is not None:
        what += f" of {place}"
    if holder.node:
        what += f" (saved by {holder.node})"
    return f"{what} {format_bytes(holder.bytes)}"


def format_bytes(n: int) -> str:
    """1536 -> "1.5 KiB", 65_712_144_384 -> "61.2 GiB" (binary units, as torch's memory tools)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            if unit == "B":
                return f"{int(value)} B"
            return f"{value:.3g} {unit}" if abs(value) < 100 else f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.0f} GiB"


def format_seconds(seconds: float) -> str:
    """0.412 -> "412 ms", 3.1e-5 -> "31 µs"."""
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    if seconds >= 1e-9:
        return f"{seconds * 1e9:.3g} ns"
    return "<1 ns" if seconds > 0 else "0 s"
