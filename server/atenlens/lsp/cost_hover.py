"""The cost section of a traced line's hover (hover.py appends it): the line's estimated time, its
share of the step and which roofline bound it is on, the device memory it allocated and who still
held it when the line was done. Pure function of a `LineTrace`; the figures are the report's
estimates (docs/cost.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from atenlens.cost import format_bytes, format_seconds
from atenlens.report import MemorySummary

if TYPE_CHECKING:  # document_traces imports this module for the hints
    from atenlens.lsp.document_traces import LineTrace


def cost_section(trace: LineTrace) -> Optional[str]:
    events = trace.forward + trace.backward + trace.optimizer
    seconds = sum(e.estimate_seconds for e in events)
    by_phase = {
        p: sum(e.estimate_seconds for e in events if e.phase == p) for p in ("forward", "backward", "optimizer")
    }
    nested = sum(e.estimate_seconds for e in trace.nested + trace.nested_backward)
    memory = trace.memory
    if not seconds and not nested and (memory is None or not memory.bytes_allocated) and trace.peak is None:
        return None
    lines = ["**Cost** (estimate)"]
    if seconds:
        share = f", {seconds / trace.step_seconds:.1%} of the step" if trace.step_seconds else ""
        phases = ", ".join(f"{p} {format_seconds(s)}" for p, s in by_phase.items() if s)
        lines.append(f"- time: ~{format_seconds(seconds)}{share} ({phases})")
    if nested:
        share = f", {nested / trace.step_seconds:.1%} of the step" if trace.step_seconds else ""
        lines.append(f"- inside calls from this line: ~{format_seconds(nested)}{share}")
    if memory is not None and memory.bytes_allocated:
        text = f"- memory: allocates {format_bytes(memory.bytes_allocated)}"
        if memory.bytes_held:
            who = ", ".join(f"{h.who} {format_bytes(h.bytes)}" for h in memory.held_by)
            text += f"; {format_bytes(memory.bytes_held)} still held when the line is done ({who})"
        lines.append(text)
    if trace.peak is not None:
        lines.append(f"- {peak_text(trace.peak)}")
    return "\n".join(lines)


def peak_text(peak: MemorySummary) -> str:
    """`the step's memory peak: 11.2 GiB allocated, 11.9 GiB reserved (a model of CUDA's caching
    allocator: its segments) of 80 GiB`, for the hover of the peak line."""
    fits = "" if max(peak.peak_bytes, peak.reserved_peak_bytes) <= peak.device_bytes else " — does not fit"
    return (
        f"the step's memory peak ({peak.peak_phase}): {format_bytes(peak.peak_bytes)} allocated, "
        f"{format_bytes(peak.reserved_at_peak_bytes)} reserved (a model of CUDA's caching allocator: its "
        f"segments; at most {format_bytes(peak.reserved_peak_bytes)} over the step) of "
        f"{format_bytes(peak.device_bytes)}{fits}"
    )


def cost_hint(trace: LineTrace, time: bool, memory: bool) -> Optional[str]:
    """The cost part of a line's inlay hint (hints.time, hints.memory): `~20 µs 33% · alloc 5.5 KiB`.
    Time: the line's own ops and those of the code it calls; memory: what its own ops allocated."""
    parts: list[str] = []
    if time:
        events = trace.forward + trace.backward + trace.optimizer + trace.nested + trace.nested_backward
        seconds = sum(e.estimate_seconds for e in events)
        if seconds:
            share = f" {seconds / trace.step_seconds:.0%}" if trace.step_seconds else ""
            parts.append(f"~{format_seconds(seconds)}{share}")
    if memory and trace.memory is not None and trace.memory.bytes_allocated:
        parts.append(f"alloc {format_bytes(trace.memory.bytes_allocated)}")
    return " · ".join(parts) or None
