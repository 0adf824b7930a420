"""The cost part of a report: memory and time summaries, and the out-of-memory forecast (AL400)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from atenlens.cost import (
    ASSUMPTIONS,
    COMPUTE_EFFICIENCY,
    LAUNCH_SECONDS,
    MEMORY_EFFICIENCY,
    compute_dtype,
    format_bytes,
    holder_label,
)
from atenlens.report import Code, Diagnostic, Event, MemorySummary, Summary, TimeSummary

MEMORY_ASSUMPTIONS = (
    "memory: every storage on the simulated device, rounded as CUDA's caching allocator rounds "
    "blocks (512 B); reserved: a model of the allocator's segments (2 MiB for blocks up to 1 MiB, "
    "20 MiB up to 10 MiB, larger ones rounded to 2 MiB; best fit, splits, cached frees; one stream, "
    "default allocator settings); the CUDA context and library workspaces (cuBLAS, cuDNN, NCCL) are "
    "not counted"
)


def cost_summaries(
    recorder: Any, events: tuple[Event, ...], summary: Summary
) -> tuple[Summary, tuple[Diagnostic, ...]]:
    gpu = recorder.gpu
    if not recorder.cost:
        return summary, ()
    memory = replace(recorder.memory.summary(gpu.memory_bytes, recorder._site_of_node), assumptions=MEMORY_ASSUMPTIONS)
    by_phase = {phase: recorder.estimate_seconds.get(phase, 0.0) for phase in ("forward", "backward", "optimizer")}
    step = sum(by_phase.values())
    tf32 = _tf32()
    time = TimeSummary(
        gpu=gpu.key,
        step_seconds=step,
        mfu_bound=_mfu_bound(gpu, events, summary.flops, step, tf32),
        by_phase=by_phase,
        compute_efficiency=COMPUTE_EFFICIENCY,
        memory_efficiency=MEMORY_EFFICIENCY,
        launch_seconds=LAUNCH_SECONDS,
        fp32_matmul_as_tf32=tf32,
        assumptions=ASSUMPTIONS,
    )
    return replace(summary, memory=memory, time=time), _out_of_memory(memory, gpu)


def _tf32() -> bool:
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32)


def _mfu_bound(gpu: Any, events: tuple[Event, ...], flops: int, step: float, tf32: bool) -> float:
    """Model FLOPs utilisation this estimate allows: FLOPs / (step time x peak FLOPS of the dtype that
    does most of the FLOPs). At most COMPUTE_EFFICIENCY; lower where memory-bound and launch-bound ops take time."""
    if not flops or step <= 0:
        return 0.0
    by_dtype: dict[str, int] = {}
    for event in events:
        if event.kind == "op" and event.flops:
            dtype = compute_dtype(event)
            by_dtype[dtype] = by_dtype.get(dtype, 0) + event.flops
    main = max(by_dtype, key=by_dtype.__getitem__) if by_dtype else "float32"
    return flops / (step * gpu.peak_flops(main, tf32))


def _out_of_memory(memory: MemorySummary, gpu: Any) -> tuple[Diagnostic, ...]:
    # What has to fit is what the caching allocator reserves (its segments; it releases its cached
    # ones before it gives up, so it passes the GPU's memory only when the program cannot run).
    needed = max(memory.peak_bytes, memory.reserved_peak_bytes)
    if needed <= gpu.memory_bytes:
        return ()
    holders = [holder_label(h, None if h.line is None else f"line {h.line}") for h in memory.holders[:3]]
    message = (
        f"forecast peak memory {format_bytes(memory.peak_bytes)} here ({memory.peak_phase}), "
        f"{format_bytes(memory.reserved_peak_bytes)} reserved by the caching allocator, exceeds the "
        f"{format_bytes(gpu.memory_bytes)} of {gpu.name} by {format_bytes(needed - gpu.memory_bytes)}; "
        f"largest holders: {', '.join(holders)}"
    )
    return (
        Diagnostic(
            file=memory.peak_file,
            line=memory.peak_line,
            column=None,
            severity="error",
            code=Code.OUT_OF_MEMORY,
            kind="out-of-memory",
            message=message,
        ),
    )
