"""`atenlens trace --plot FILE.svg`: the memory timeline and the per-line time share as one SVG picture.

Written by hand (no plotting library): a stepped area of live device memory over the step's ops with
the phases shaded, the peak marked and the GPU's memory drawn when the peak comes near it; beside it,
one bar per costliest line with its share of the estimated step time. Pure: report in, SVG text out.
"""

from __future__ import annotations

import os
from html import escape
from typing import Optional

from atenlens.cost import format_bytes, format_seconds, line_costs, most_expensive
from atenlens.gpus import find_gpu
from atenlens.report import TraceReport

WIDTH, HEIGHT = 1000, 360
_PHASE_COLORS = {"forward": "#dbeafe", "backward": "#f3e8ff", "optimizer": "#fef3c7"}
_LINE = "#2563eb"
_BARS = 10


def _op_phases(report: TraceReport) -> list[str]:
    return [e.phase for e in report.events if e.kind == "op"]


def _phase_spans(phases: list[str]) -> list[tuple[str, int, int]]:
    spans: list[tuple[str, int, int]] = []
    for i, phase in enumerate(phases):
        if spans and spans[-1][0] == phase:
            spans[-1] = (phase, spans[-1][1], i + 1)
        else:
            spans.append((phase, i, i + 1))
    return spans


def memory_and_time_svg(report: TraceReport, base: Optional[str] = None) -> str:
    memory, time = report.summary.memory, report.summary.time
    if memory is None or time is None:
        raise ValueError("the report has no cost summary (traced by an older atenlens?)")
    gpu = find_gpu(time.gpu)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
    ]
    title = (
        f"{report.target.qualname}: peak {format_bytes(memory.peak_bytes)} ({memory.peak_phase}), "
        f"~{format_seconds(time.step_seconds)}/step on {gpu.name} (estimates)"
    )
    out.append(f'<text x="20" y="22" font-size="14" font-weight="bold">{escape(title)}</text>')
    out.extend(_timeline(report, x0=60, y0=54, width=560, height=256))
    out.extend(_bars(report, x0=650, y0=54, width=330, base=base))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _timeline(report: TraceReport, x0: int, y0: int, width: int, height: int) -> list[str]:
    memory = report.summary.memory
    assert memory is not None
    points = list(zip(memory.timeline.op_index, memory.timeline.live_bytes))
    ops = max((i for i, _ in points), default=0) + 1
    top: float = max(memory.peak_bytes, 1)
    near_limit = memory.device_bytes <= 2 * memory.peak_bytes
    if near_limit:
        top = max(top, memory.device_bytes)
    top *= 1.08

    def x(op: float) -> float:
        return x0 + width * op / max(ops, 1)

    def y(value: float) -> float:
        return y0 + height - height * value / top

    out = [f'<text x="{x0}" y="{y0 - 6}">live device memory over the step\'s {ops} ops</text>']
    for phase, start, end in _phase_spans(_op_phases(report)[:ops]):
        out.append(
            f'<rect x="{x(start):.1f}" y="{y0}" width="{max(x(end) - x(start), 0.5):.1f}" height="{height}" '
            f'fill="{_PHASE_COLORS.get(phase, "#eee")}"><title>{phase}</title></rect>'
        )
    for phase, color in _PHASE_COLORS.items():
        index = list(_PHASE_COLORS).index(phase)
        out.append(
            f'<rect x="{x0 + 10 + index * 90}" y="{y0 + height + 28}" width="10" height="10" fill="{color}" '
            f'stroke="#999"/><text x="{x0 + 24 + index * 90}" y="{y0 + height + 37}">{phase}</text>'
        )
    if points:
        path = [f"M{x(points[0][0]):.1f},{y(0):.1f}"]
        for op, live in points:
            path.append(f"L{x(op):.1f},{y(live):.1f} L{x(op + 1):.1f},{y(live):.1f}")
        path.append(f"L{x(points[-1][0] + 1):.1f},{y(0):.1f} Z")
        out.append(f'<path d="{" ".join(path)}" fill="{_LINE}" fill-opacity="0.35" stroke="{_LINE}" stroke-width="1"/>')
        peak_op = max(points, key=lambda p: p[1])[0]
        out.append(f'<circle cx="{x(peak_op + 0.5):.1f}" cy="{y(memory.peak_bytes):.1f}" r="4" fill="#dc2626"/>')
        where = f"line {memory.peak_line}" if memory.peak_line is not None else "no user line"
        out.append(
            f'<text x="{min(x(peak_op) + 8, x0 + width - 150):.1f}" y="{y(memory.peak_bytes) - 8:.1f}" '
            f'fill="#dc2626">peak {escape(format_bytes(memory.peak_bytes))} @ {escape(where)}</text>'
        )
    if near_limit:
        out.append(
            f'<line x1="{x0}" x2="{x0 + width}" y1="{y(memory.device_bytes):.1f}" '
            f'y2="{y(memory.device_bytes):.1f}" stroke="#dc2626" stroke-dasharray="6 4"/>'
        )
        out.append(
            f'<text x="{x0 + 4}" y="{y(memory.device_bytes) - 4:.1f}" fill="#dc2626">GPU memory '
            f"{escape(format_bytes(memory.device_bytes))}</text>"
        )
    for fraction in (0, 0.25, 0.5, 0.75, 1.0):
        value = top / 1.08 * fraction
        out.append(f'<line x1="{x0 - 4}" x2="{x0}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#333"/>')
        out.append(
            f'<text x="{x0 - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="10">'
            f"{escape(format_bytes(int(value)))}</text>"
        )
    out.append(f'<rect x="{x0}" y="{y0}" width="{width}" height="{height}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{x0 + width / 2}" y="{y0 + height + 16}" text-anchor="middle">op</text>')
    return out


_BOUND_COLORS = {"compute": "#f97316", "memory": "#0ea5e9", "launch": "#a3a3a3"}


def _bars(report: TraceReport, x0: int, y0: int, width: int, base: Optional[str]) -> list[str]:
    time = report.summary.time
    assert time is not None
    costs = most_expensive(line_costs(report.events, time.gpu, time.fp32_matmul_as_tf32), _BARS)
    out = [f'<text x="{x0}" y="{y0 - 6}">share of the estimated step time, per line</text>']
    bar_height, gap, label_width = 18, 8, 120
    for i, cost in enumerate(costs):
        share = cost.seconds / time.step_seconds if time.step_seconds else 0.0
        top = y0 + i * (bar_height + gap)
        file = cost.file or "?"
        if base is not None and cost.file is not None and not os.path.relpath(cost.file, base).startswith(".."):
            file = os.path.relpath(cost.file, base)
        label = f"{os.path.basename(file)}:{cost.line}" if cost.line is not None else "no user line"
        color = _BOUND_COLORS[cost.bound]
        length = (width - label_width - 60) * share
        out.append(
            f'<text x="{x0 + label_width - 6}" y="{top + 13}" text-anchor="end" font-size="11">'
            f"{escape(label)}<title>{escape(file)}</title></text>"
        )
        out.append(
            f'<rect x="{x0 + label_width}" y="{top}" width="{max(length, 1):.1f}" height="{bar_height}" '
            f'fill="{color}"><title>{escape(format_seconds(cost.seconds))}, {cost.bound}-bound</title></rect>'
        )
        out.append(f'<text x="{x0 + label_width + length + 4:.1f}" y="{top + 13}" font-size="11">{share:.1%}</text>')
    legend = y0 + len(costs) * (bar_height + gap) + 10
    for i, (bound, color) in enumerate(_BOUND_COLORS.items()):
        name = f"{bound}-bound"
        out.append(
            f'<rect x="{x0 + i * 120}" y="{legend}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x0 + 14 + i * 120}" y="{legend + 9}">{name}</text>'
        )
    return out


def chrome_trace(report: TraceReport) -> dict:
    """The step as a Chrome trace-event file (chrome://tracing, https://ui.perfetto.dev): one slice per op
    at its estimated time, back to back, with its line, and a "device memory" counter of live bytes."""
    memory = report.summary.memory
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "atenlens estimate"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "GPU (estimated)"}},
    ]
    starts: list[float] = []
    now = 0.0
    for event in report.events:
        if event.kind != "op":
            continue
        starts.append(now)
        duration = event.estimate_seconds * 1e6
        if duration > 0:
            events.append(
                {
                    "name": event.name,
                    "ph": "X",
                    "pid": 1,
                    "tid": 1,
                    "ts": now,
                    "dur": duration,
                    "cat": event.phase,
                    "args": {
                        "line": f"{event.file}:{event.line}",
                        "bytes_allocated": event.bytes_allocated,
                        "node": event.node,
                    },
                }
            )
        now += duration
    if memory is not None:
        for op, live in zip(memory.timeline.op_index, memory.timeline.live_bytes):
            if op < len(starts):
                events.append(
                    {"name": "device memory", "ph": "C", "pid": 1, "ts": starts[op], "args": {"live bytes": live}}
                )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"note": "estimates: " + (report.summary.time.assumptions if report.summary.time else "")},
    }
