"""The annotated listing `atenlens trace` prints: a TraceReport as text for a terminal.

Pure: a report (plus the source text of the files it names) in, a string out. Layout:

    header        target, device, example call, status
    per function  every user function that did work, the traced one first: its source lines, and
                  under each line that did work its calls, its aten ops per phase with output labels
                  (`f32[8, 32]`, torch logging_tensor's vocabulary), autograd nodes and FLOPs;
                  a line that calls into other user code says what that call caused (`-> MLP.forward`)
    totals        ops per phase, calls, FLOPs, syncs, seconds
    diagnostics   syncs, copy hazards, the exception
    stdout/stderr what the traced code printed, fenced

Identical ops of one line are folded (`aten.add_.Tensor  f32[4]  x4`); many shapes of one op on
one line are folded into one row with a count.
"""
from __future__ import annotations

import os
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from atenlens.functions import FunctionInfo, find_functions
from atenlens.report import Diagnostic, TensorMeta, TraceReport

DTYPE_LABELS = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "float8_e4m3fnuz": "f8e4m3fnuz",
    "float8_e5m2fnuz": "f8e5m2fnuz",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "bool": "b8",
    "complex64": "c64", "complex128": "c128", "complex32": "c32",
}
PHASES = ("forward", "backward", "optimizer")
MAX_SHAPES_PER_ROW = 3        # more distinct output shapes of one op on one line fold into one row

_COLORS = {
    "dim": "\x1b[2m", "bold": "\x1b[1m", "reset": "\x1b[0m",
    "forward": "\x1b[36m", "backward": "\x1b[35m", "optimizer": "\x1b[33m", "call": "\x1b[34m",
    "error": "\x1b[31m", "warning": "\x1b[33m", "information": "\x1b[34m", "hint": "\x1b[2m",
    "ok": "\x1b[32m",
}


def tensor_label(meta: TensorMeta) -> str:
    """`f32[8, 32]`; the device is added when it is not the trace's main one (see op rows)."""
    return f"{DTYPE_LABELS.get(meta.dtype, meta.dtype)}[{', '.join(str(d) for d in meta.shape)}]"


def format_flops(flops: int) -> str:
    for unit, size in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if flops >= size:
            return f"{flops / size:.3g}{unit}FLOP"
    return f"{flops}FLOP"


def _read_file(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class _Row:
    """One folded op row under a line."""
    phase: str
    name: str
    labels: list[str]
    count: int = 0
    flops: int = 0
    has_flops: bool = False
    node: Optional[str] = None


@dataclass
class _LineWork:
    calls: "OrderedDict[str, int]" = field(default_factory=OrderedDict)
    rows: list[_Row] = field(default_factory=list)
    # callee function -> phase -> op count, for work this line caused inside other user functions
    callees: "OrderedDict[str, dict[str, int]]" = field(default_factory=OrderedDict)
    callee_flops: "dict[str, int]" = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        return "".join(_COLORS[s] for s in styles) + text + _COLORS["reset"]


def render(
    report: TraceReport,
    *,
    color: bool = False,
    read_source: Callable[[str], Optional[str]] = _read_file,
    base: Optional[str] = None,
) -> str:
    """The annotated listing. `read_source(path)` gives a file's text (None when unreadable);
    `base` is the folder paths are shown relative to (default: as recorded)."""
    style = _Style(color)
    show = _path_shower(base)
    out: list[str] = []
    out.extend(_header(report, style, show))

    work = _collect(report)
    sections = _sections(report, work, read_source)
    ops_width, labels_width = _column_widths(work)
    for file, function, lines, source_lines in sections:
        out.append("")
        out.append(style(f"{function}", "bold") + style(f"  {show(file)}", "dim"))
        number_width = max(len(str(n)) for n in lines) if lines else 1
        for number in lines:
            text = source_lines[number - 1] if source_lines and 0 < number <= len(source_lines) else ""
            out.append(f"{str(number).rjust(number_width)} | {text}".rstrip())
            line_work = work.get((file, number))
            if line_work is not None:
                gutter = " " * number_width + " |     "
                out.extend(gutter + row for row in _annotations(line_work, ops_width, labels_width, style, show))

    unattributed = work.get((None, None))
    if unattributed is not None:
        out.append("")
        out.append(style("no user line", "bold") + style("  (ops that ran outside the user's code)", "dim"))
        out.extend("    " + row for row in _annotations(unattributed, ops_width, labels_width, style, show))

    out.append("")
    out.extend(_totals(report, style))
    if report.diagnostics:
        out.append("")
        out.append(style("diagnostics", "bold"))
        for d in report.diagnostics:
            out.append("  " + _diagnostic_line(d, style, show))
    for stream in ("stdout", "stderr"):
        text = getattr(report, stream)
        if text:
            out.append("")
            out.append(style(f"----- {stream} of the traced code -----", "dim"))
            out.append(text.rstrip("\n"))
            out.append(style(f"----- end of {stream} -----", "dim"))
    return "\n".join(out) + "\n"


def _path_shower(base: Optional[str]) -> Callable[[Optional[str]], str]:
    def show(path: Optional[str]) -> str:
        if path is None:
            return "?"
        if base is not None:
            relative = os.path.relpath(path, base)
            if not relative.startswith(".."):
                return relative
        return path
    return show


def _header(report: TraceReport, style: _Style, show: Callable[[Optional[str]], str]) -> list[str]:
    status_style = "ok" if report.status == "ok" else ("information" if report.status == "needs-inputs" else "error")
    parts = [style(f"{show(report.target.file)}::{report.target.qualname}", "bold"),
             f"device {report.device}", style(report.status, status_style, "bold")]
    lines = ["  ".join(parts)]
    if report.call:
        lines.append(style("call ", "dim") + report.call)
    if report.message:
        lines.append(style(report.message, status_style))
    for note in report.notes:
        lines.append(style(f"note: {note}", "dim"))
    return lines


def _collect(report: TraceReport) -> "dict[tuple, _LineWork]":
    """Events and diagnostics grouped by the line that owns them (its innermost user frame)."""
    work: dict[tuple, _LineWork] = {}
    rows_by_key: dict[tuple, dict[tuple, _Row]] = defaultdict(dict)

    def at(key: tuple) -> _LineWork:
        found = work.get(key)
        if found is None:
            found = work[key] = _LineWork()
        return found

    for event in report.events:
        key = (event.file, event.line)
        line_work = at(key)
        if event.kind == "call":
            short = event.name.rsplit(".", 1)[-1]
            line_work.calls[short] = line_work.calls.get(short, 0) + 1
        else:
            label = ", ".join(tensor_label(o) for o in event.outputs) or "-"
            row_key = (event.phase, event.name, event.node, label)
            row = rows_by_key[key].get(row_key)
            if row is None:
                row = rows_by_key[key][row_key] = _Row(event.phase, event.name, [label], node=event.node)
                line_work.rows.append(row)
            row.count += 1
            if event.flops is not None:
                row.flops += event.flops
                row.has_flops = True
        # what this event means for the outer user frames that called into it
        if event.kind == "op":
            for outer, inner in zip(event.stack, event.stack[1:]):
                outer_work = at((outer.file, outer.line))
                counts = outer_work.callees.setdefault(inner.function, {})
                counts[event.phase] = counts.get(event.phase, 0) + 1
                callee_flops = outer_work.callee_flops
                callee_flops[inner.function] = callee_flops.get(inner.function, 0) + (event.flops or 0)
    for diagnostic in report.diagnostics:
        at((diagnostic.file, diagnostic.line)).diagnostics.append(diagnostic)
    for line_work in work.values():
        line_work.rows = _fold_shapes(line_work.rows)
    return work


def _fold_shapes(rows: list[_Row]) -> list[_Row]:
    """Rows of one op that differ only by output shape: kept apart up to MAX_SHAPES_PER_ROW, else
    one row with the total count (an optimizer's per-parameter loop over 148 parameters)."""
    groups: "OrderedDict[tuple, list[_Row]]" = OrderedDict()
    for row in rows:
        groups.setdefault((row.phase, row.name, row.node), []).append(row)
    folded: list[_Row] = []
    for (phase, name, node), group in groups.items():
        if len(group) <= MAX_SHAPES_PER_ROW:
            folded.extend(group)
            continue
        merged = _Row(phase, name, [f"{len(group)} shapes"], node=node)
        for row in group:
            merged.count += row.count
            merged.flops += row.flops
            merged.has_flops = merged.has_flops or row.has_flops
        folded.append(merged)
    order = {phase: i for i, phase in enumerate(PHASES)}
    folded.sort(key=lambda r: order.get(r.phase, len(order)))     # stable: program order within a phase
    return folded


def _sections(report: TraceReport, work: "dict[tuple, _LineWork]",
              read_source: Callable[[str], Optional[str]]) -> list[tuple[str, str, list[int], list[str]]]:
    """(file, function, line numbers to show, source lines) for the traced function and every
    user function that did work, in order of first appearance."""
    functions: "OrderedDict[tuple[str, str], None]" = OrderedDict()
    functions[(report.target.file, report.target.qualname)] = None
    for event in report.events:
        for frame in event.stack:
            functions.setdefault((frame.file, frame.function), None)
    sources: dict[str, tuple[list[str], dict[str, FunctionInfo]]] = {}

    def source_of(file: str) -> tuple[list[str], dict[str, FunctionInfo]]:
        if file not in sources:
            text = read_source(file)
            infos: dict[str, FunctionInfo] = {}
            if text is not None:
                try:
                    infos = {info.qualname: info for info in find_functions(text)}
                except SyntaxError:
                    pass
            sources[file] = ((text or "").splitlines(), infos)
        return sources[file]

    # lines each function was seen executing (for functions whose span is unknown, e.g. nested ones)
    frame_lines: dict[tuple[str, str], set[int]] = defaultdict(set)
    for event in report.events:
        for frame in event.stack:
            frame_lines[(frame.file, frame.function)].add(frame.line)
    for diagnostic in report.diagnostics:
        if diagnostic.stack:
            inner = diagnostic.stack[-1]
            functions.setdefault((inner.file, inner.function), None)
            frame_lines[(inner.file, inner.function)].add(inner.line)

    shown: set[tuple[str, int]] = set()
    sections = []
    for file, function in functions:
        lines, infos = source_of(file)
        info = infos.get(function)
        if info is not None:
            numbers = list(range(info.first_line, info.end_line + 1))
        else:
            numbers = sorted(frame_lines.get((file, function), ()))
        numbers = [n for n in numbers if (file, n) not in shown]
        if not numbers or (function != report.target.qualname and not any((file, n) in work for n in numbers)):
            continue
        shown.update((file, n) for n in numbers)
        sections.append((file, function, numbers, lines))
    return sections


def _column_widths(work: "dict[tuple, _LineWork]") -> tuple[int, int]:
    ops_width = max((len(r.name) for w in work.values() for r in w.rows), default=0)
    labels_width = max((len(r.labels[0]) for w in work.values() for r in w.rows), default=0)
    return min(ops_width, 48), min(labels_width, 40)


def _annotations(line_work: _LineWork, ops_width: int, labels_width: int, style: _Style,
                 show: Callable[[Optional[str]], str]) -> Iterable[str]:
    if line_work.calls:
        listed = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in line_work.calls.items())
        yield style("call".ljust(10), "call") + listed
    previous_phase = None
    for row in line_work.rows:
        phase = row.phase if row.phase != previous_phase else ""
        previous_phase = row.phase
        count = f"x{row.count}" if row.count > 1 else ""
        flops = format_flops(row.flops) if row.has_flops and row.flops else ""
        text = (style(phase.ljust(10), row.phase) + row.name.ljust(ops_width) + "  "
                + row.labels[0].ljust(labels_width) + "  " + count.rjust(5) + "  " + flops.rjust(11))
        if row.node:
            text += "  " + style(row.node, "dim")
        yield text.rstrip()
    for callee, counts in line_work.callees.items():
        summary = ", ".join(f"{counts[p]} {p}" for p in PHASES if counts.get(p))
        flops = line_work.callee_flops.get(callee, 0)
        text = f"-> {callee}: {summary} ops"
        if flops:
            text += f", {format_flops(flops)}"
        yield style(text, "dim")
    for diagnostic in line_work.diagnostics:
        yield _diagnostic_line(diagnostic, style, show, located=False)


def _diagnostic_line(d: Diagnostic, style: _Style, show: Callable[[Optional[str]], str], located: bool = True) -> str:
    where = ""
    if located:
        where = f"{show(d.file)}:{d.line if d.line is not None else '?'}"
        if d.column is not None:
            where += f":{d.column + 1}"
        where += "  "
    count = f" (x{d.count})" if d.count > 1 else ""
    return where + style(f"{d.severity} {d.code}", d.severity) + f" {d.kind}: {d.message}{count}"


def _totals(report: TraceReport, style: _Style) -> list[str]:
    s = report.summary
    ops = ", ".join(f"{s.ops.get(p, 0)} {p}" for p in PHASES)
    parts = [f"ops: {ops}", f"calls: {s.calls}", f"FLOPs: {format_flops(s.flops) if s.flops else '0'}",
             f"syncs: {s.syncs}", f"{s.seconds:.2f} s"]
    return [style("totals", "bold") + "  " + "  |  ".join(parts)]
