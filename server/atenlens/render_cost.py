"""The cost parts of the terminal listing (render.py calls these): a cost row under each line that
costs something, and the cost summary block after the totals. Pure: report data in, text out.

    cost      1.23 ms  4.1%  compute-bound  allocates 2 MiB, holds 256 KiB at line end (saved by ReluBackward0)

    memory    peak 10.2 MiB @ examples/train_step.py:36 (optimizer) of 80 GiB on H100 SXM 80GB
              at peak: parameters 2 MiB, gradients 2 MiB, optimizer state 4 MiB, temporaries 2.1 MiB, inputs 64 KiB
              holders: optimizer state 4 MiB; parameters 2 MiB; gradients 2 MiB
    time      ~128 µs/step on H100 SXM 80GB (forward 20 µs, backward 44 µs, optimizer 64 µs), MFU bound 2%
    costliest examples/train_step.py:36  64 µs  50.0%  launch-bound
    ...
"""

from __future__ import annotations

from typing import Callable, Optional

from atenlens.cost import LineCost, format_bytes, format_seconds, holder_label, line_costs, most_expensive
from atenlens.gpus import find_gpu
from atenlens.report import MemoryLine, TraceReport

Style = Callable[..., str]
Key = tuple[Optional[str], Optional[int]]
PHASES = ("forward", "backward", "optimizer")


class CostView:
    """Per-line costs of one report, computed once for the listing."""

    def __init__(self, report: TraceReport) -> None:
        self.report = report
        time = report.summary.time
        self.gpu = find_gpu(time.gpu) if time is not None else None
        self.lines: dict[Key, LineCost] = (
            line_costs(report.events, time.gpu, time.fp32_matmul_as_tf32) if time is not None else {}
        )
        memory = report.summary.memory
        self.memory_lines: dict[Key, MemoryLine] = (
            {(m.file, m.line): m for m in memory.lines} if memory is not None else {}
        )
        self.step = time.step_seconds if time is not None else 0.0

    def line_row(self, key: Key, style: Style) -> Optional[str]:
        cost = self.lines.get(key)
        memory = self.memory_lines.get(key)
        if (cost is None or cost.seconds <= 0) and memory is None:
            return None
        parts: list[str] = []
        if cost is not None and cost.seconds > 0:
            share = cost.seconds / self.step if self.step else 0.0
            parts.append(f"{format_seconds(cost.seconds)}  {share:.1%}  {cost.bound}-bound")
        if memory is not None and memory.bytes_allocated:
            text = f"allocates {format_bytes(memory.bytes_allocated)}"
            if memory.bytes_held:
                who = ", ".join(f"{h.who} {format_bytes(h.bytes)}" for h in memory.held_by[:2])
                text += f", holds {format_bytes(memory.bytes_held)} at line end ({who})"
            parts.append(text)
        if not parts:
            return None
        return style("cost".ljust(10), "cost") + style("  ".join(parts), "dim")

    def summary(self, style: Style, show: Callable[[Optional[str]], str]) -> list[str]:
        summary = self.report.summary
        memory, time = summary.memory, summary.time
        out: list[str] = []
        if memory is not None and self.gpu is not None:
            where = f"{show(memory.peak_file)}:{memory.peak_line}" if memory.peak_line is not None else "?"
            over = max(memory.peak_bytes, memory.reserved_peak_bytes) > memory.device_bytes
            out.append(
                style("memory".ljust(10), "bold") + f"peak {format_bytes(memory.peak_bytes)} @ {where} "
                f"({memory.peak_phase}) of {format_bytes(memory.device_bytes)} on {self.gpu.name}"
                + (style("  DOES NOT FIT", "error") if over else "")
            )
            out.append(
                " " * 10 + f"reserved {format_bytes(memory.reserved_at_peak_bytes)} at the peak, "
                f"{format_bytes(memory.reserved_peak_bytes)} at most (caching allocator segments, a model)"
            )
            at = memory.at_peak
            parts = [
                f"{name.replace('_', ' ')} {format_bytes(getattr(at, name))}"
                for name in (
                    "parameters",
                    "unsharded_parameters",
                    "gradients",
                    "unsharded_gradients",
                    "optimizer_state",
                    "activations",
                    "temporaries",
                    "communication",
                    "inputs",
                )
                if getattr(at, name)
            ]
            out.append(" " * 10 + "at peak: " + (", ".join(parts) or "nothing"))
            holders = [
                holder_label(h, None if h.line is None else f"{show(h.file)}:{h.line}") for h in memory.holders[:5]
            ]
            if holders:
                out.append(" " * 10 + "holders: " + "; ".join(holders))
        if time is not None and self.gpu is not None:
            phases = ", ".join(f"{p} {format_seconds(time.by_phase.get(p, 0.0))}" for p in PHASES)
            out.append(
                style("time".ljust(10), "bold") + f"~{format_seconds(time.step_seconds)}/step on {self.gpu.name} "
                f"({phases}), MFU bound {time.mfu_bound:.0%}"
            )
            for i, cost in enumerate(most_expensive(self.lines)):
                share = cost.seconds / time.step_seconds if time.step_seconds else 0.0
                label = "costliest" if i == 0 else ""
                where = f"{show(cost.file)}:{cost.line}" if cost.line is not None else "no user line"
                out.append(
                    style(label.ljust(10), "bold") + f"{where}  {format_seconds(cost.seconds)}  {share:.1%}  "
                    f"{cost.bound}-bound"
                )
        if out:
            notes = [n for n in ((memory.assumptions if memory else ""), (time.assumptions if time else "")) if n]
            out.extend(style(" " * 10 + note, "dim") for note in notes)
        return out
