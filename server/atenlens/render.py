"""The annotated listing `atenlens trace` prints: a TraceReport as text for a terminal.

Pure: a report (plus the source text of the files it names) in, a string out. Layout:

    header        target, device, example call, status
    per function  every user function that did work, the traced one first: its source lines, and
                  under each line that did work its calls, the module tree of the models it called
                  (qualified names, types, outputs, ops, FLOPs, parameters, as torchinfo shows them),
                  its aten ops per phase with output labels (`f32[8, 32]`, torch logging_tensor's
                  vocabulary), autograd nodes and FLOPs; a line that calls into other user code says
                  what that call caused (`-> MLP.forward`)
    totals        ops per phase, calls, FLOPs, syncs, seconds
    diagnostics   syncs, copy hazards, the exception
    stdout/stderr what the traced code printed, fenced

What keeps a big trace readable: identical ops of one line fold into one row with a count
(`aten.add_.Tensor  f32[4]  x4`); more than MAX_SHAPES_PER_ROW shapes of one op on one line fold
into one row that names the most common shapes; an op with many tensors (`_foreach_*`) is one row
(`161 f32 tensors`); a long list of API calls is cut to the most frequent; bookkeeping ops (views
and `detach`: they allocate and compute nothing) are hidden unless `all_ops`; numbered sibling
modules that did the same work fold into one tree row (`h.0-47  Block  x48`).

The columns of op rows and of module rows are declared once (OP_COLUMNS, MODULE_COLUMNS): a new
column is one entry there and one cell in the row builder.
"""

from __future__ import annotations

import os
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

from atenlens import vocabulary
from atenlens.communication import collective_label, ranks_summary
from atenlens.cost import format_bytes, format_seconds
from atenlens.lines import split_lines
from atenlens.module_tree import ModuleNode, module_trees, walk
from atenlens.named_text import dims_header, formulas_text
from atenlens.render_cost import CostView
from atenlens.report import Diagnostic, TensorMeta, TraceReport
from atenlens.traceable import FunctionInfo, find_functions
from atenlens.vocabulary import dtype_abbr, format_flops

PHASES = ("forward", "backward", "optimizer")
MAX_SHAPES_PER_ROW = 3  # more distinct output shapes of one op on one line fold into one row
MAX_TENSORS_LISTED = 4  # an op with more output tensors than this shows their count
MAX_CALLS_WIDTH = 100  # a line's `call` row is cut to about this many characters
DEFAULT_DEPTH = 2  # module tree rows shown below the root module (`--depth`)

_COLORS = {
    "dim": "\x1b[2m",
    "bold": "\x1b[1m",
    "reset": "\x1b[0m",
    "forward": "\x1b[36m",
    "backward": "\x1b[35m",
    "optimizer": "\x1b[33m",
    "call": "\x1b[34m",
    "module": "\x1b[32m",
    "error": "\x1b[31m",
    "warning": "\x1b[33m",
    "information": "\x1b[34m",
    "hint": "\x1b[2m",
    "ok": "\x1b[32m",
    "cost": "\x1b[32m",
}


def tensor_label(meta: TensorMeta) -> str:
    """`f32[8, 32]`; the device is added when it is not the trace's main one (see op rows); a DTensor's
    local shard with its placements and the global shape: `f32[8, 32] Shard(1) of [8, 128]`; a plain
    tensor holding such a shard (`to_local()`): `f32[8, 32] local Shard(1) of [8, 128]`. With named dims
    (`dims: B=8 T=1024`): `bf16[B, T, 768]`."""
    label = vocabulary.tensor_label(meta.dtype, meta.dims or meta.shape)
    if meta.placements:
        label += f" local {meta.placements}" if meta.local else f" {meta.placements}"
        if meta.global_shape is not None:
            label += f" of [{', '.join(str(n) for n in meta.global_shape)}]"
    return label


def tensors_label(metas: Sequence[TensorMeta]) -> str:
    """`f32[8, 32], f32[8]`; past MAX_TENSORS_LISTED tensors their count: `161 f32 tensors`."""
    if len(metas) <= MAX_TENSORS_LISTED:
        return ", ".join(tensor_label(m) for m in metas)
    dtypes = {m.dtype for m in metas}
    kind = f"{dtype_abbr(next(iter(dtypes)))} " if len(dtypes) == 1 else ""
    return f"{len(metas)} {kind}tensors"


def format_count(n: int) -> str:
    """12_345_678 -> `12.3M` (parameter counts)."""
    for unit, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _read_file(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


# -- columns -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of a table of rows: cells are padded to the longest cell of the column, within
    [min_width, max_width] (a longer cell overflows rather than being cut)."""

    key: str
    align: str = "<"  # "<" left, ">" right
    min_width: int = 0
    max_width: int = 1000
    before: str = "  "  # separator printed before the column
    style: Optional[str] = None  # a _COLORS key; "phase" takes the row's phase


# An op row: `forward   aten.addmm.default   f32[8, 32]   x3   8.19 kFLOP  AddmmBackward0`
OP_COLUMNS = (
    Column("phase", min_width=10, max_width=10, before="", style="phase"),
    Column("op", max_width=48, before=""),
    Column("output", max_width=40),
    Column("count", ">", min_width=5, max_width=5),
    Column("flops", ">", min_width=11, max_width=11),
    Column("time", ">", max_width=9),  # cost: estimated time and device bytes allocated (render_cost.py)
    Column("alloc", ">", max_width=9),
    Column("node", style="dim"),
)

# A module tree row: `module    layer1.0  Block  f32[2, 8, 16, 16]  x3  24 ops  1.2 MFLOP  1.2K params`
MODULE_COLUMNS = (
    Column("tag", min_width=10, max_width=10, before="", style="module"),
    Column("name", max_width=36, before=""),
    Column("type", max_width=24),
    Column("output", max_width=40),
    Column("count", ">", min_width=4, max_width=6),
    Column("ops", ">", max_width=10),
    Column("flops", ">", max_width=11),
    Column("params", ">", max_width=14),
)


def column_widths(columns: Sequence[Column], rows: Iterable[dict[str, str]]) -> dict[str, int]:
    longest: dict[str, int] = {c.key: 0 for c in columns}
    for row in rows:
        for c in columns:
            longest[c.key] = max(longest[c.key], len(row.get(c.key, "")))
    return {c.key: min(max(longest[c.key], c.min_width), c.max_width) for c in columns}


def format_row(
    columns: Sequence[Column], widths: dict[str, int], row: dict[str, str], style: "_Style", phase: Optional[str] = None
) -> str:
    parts: list[str] = []
    for c in columns:
        text = row.get(c.key, "")
        pad = " " * max(widths[c.key] - len(text), 0)
        styled = style(text, phase if c.style == "phase" else c.style) if text else text
        parts.append(c.before + (styled + pad if c.align == "<" else pad + styled))
    return "".join(parts).rstrip()


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
    folded: bool = False  # stands for several shapes: its label may overflow the column
    seconds: float = 0.0  # estimated time on the selected GPU
    allocated: int = 0  # device bytes allocated

    def cells(self) -> dict[str, str]:
        return {
            "op": self.name,
            "output": self.labels[0],
            "count": f"x{self.count}" if self.count > 1 else "",
            "flops": format_flops(self.flops) if self.has_flops and self.flops else "",
            "time": format_seconds(self.seconds) if self.seconds else "",
            "alloc": format_bytes(self.allocated) if self.allocated else "",
            "node": self.node or "",
        }


@dataclass
class _ModuleRow:
    """One row of a module tree: one module, or numbered siblings that did the same work."""

    depth: int
    name: str
    type: str
    output: str
    calls: int
    ops: int
    flops: int
    params: int

    def cells(self) -> dict[str, str]:
        return {
            "name": "  " * self.depth + self.name,
            "type": self.type,
            "output": self.output,
            "count": f"x{self.calls}" if self.calls > 1 else "",
            "ops": f"{self.ops} op{'s' if self.ops != 1 else ''}",
            "flops": format_flops(self.flops) if self.flops else "",
            "params": f"{format_count(self.params)} params" if self.params else "",
        }


@dataclass
class _LineWork:
    calls: "OrderedDict[str, int]" = field(default_factory=OrderedDict)
    rows: list[_Row] = field(default_factory=list)
    trees: list[list[_ModuleRow]] = field(default_factory=list)
    trees_partial: bool = False  # the report kept only some events: the trees' op counts are of those
    # callee function -> phase -> op count, for work this line caused inside other user functions
    callees: "OrderedDict[str, dict[str, int]]" = field(default_factory=OrderedDict)
    callee_flops: "dict[str, int]" = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: Optional[str]) -> str:
        names = [s for s in styles if s is not None and s != ""]
        if not self.color or not names:
            return text
        return "".join(_COLORS[s] for s in names) + text + _COLORS["reset"]


def render(
    report: TraceReport,
    *,
    color: bool = False,
    read_source: Callable[[str], Optional[str]] = _read_file,
    base: Optional[str] = None,
    all_ops: bool = False,
    depth: int = DEFAULT_DEPTH,
) -> str:
    """The annotated listing. `read_source(path)` gives a file's text (None when unreadable);
    `base` is the folder paths are shown relative to (default: as recorded); `all_ops` shows the
    bookkeeping ops (views, detach) too; `depth`: module tree levels below the root module."""
    style = _Style(color)
    show = _path_shower(base)
    out: list[str] = []
    out.extend(_header(report, style, show))

    hidden = frozenset() if all_ops else frozenset(report.bookkeeping_ops)
    work = _collect(report, hidden, depth)
    sections = _sections(report, work, read_source)
    widths = column_widths(OP_COLUMNS, (r.cells() for w in work.values() for r in w.rows if not r.folded))
    costs = CostView(report)
    named_lines = {(n.file, n.line): n for n in report.named_shapes.lines} if report.named_shapes else {}
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
                out.extend(gutter + row for row in _annotations(line_work, widths, style, show))
            cost_row = costs.line_row((file, number), style)
            if cost_row is not None:
                out.append(" " * number_width + " |     " + cost_row)
            formulas = named_lines.get((file, number))
            if formulas is not None:
                out.append(" " * number_width + " |     " + style("named".ljust(10), "dim") + formulas_text(formulas))

    unattributed = work.get((None, None))
    if unattributed is not None:
        out.append("")
        out.append(style("no user line", "bold") + style("  (ops that ran outside the user's code)", "dim"))
        out.extend("    " + row for row in _annotations(unattributed, widths, style, show))

    out.append("")
    out.extend(_totals(report, style, hidden))
    cost_summary = costs.summary(style, show)
    if cost_summary:
        out.append("")
        out.extend(cost_summary)
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
    parts = [
        style(f"{show(report.target.file)}::{report.target.qualname}", "bold"),
        f"device {report.device}",
        style(report.status, status_style, "bold"),
    ]
    lines = ["  ".join(parts)]
    if report.call:
        lines.append(style("call ", "dim") + report.call)
    if report.message:
        lines.append(style(report.message, status_style))
    for note in report.notes:
        lines.append(style(f"note: {note}", "dim"))
    dims = dims_header(report.named_shapes)
    if dims is not None:
        lines.append(style(dims, "dim"))
    return lines


def _collect(report: TraceReport, hidden: frozenset, depth: int) -> "dict[tuple, _LineWork]":
    """Events and diagnostics grouped by the line that owns them (its innermost user frame).
    Ops named in `hidden` get no row (they still count in roll-ups and totals)."""
    work: dict[tuple, _LineWork] = {}
    rows_by_key: dict[tuple, dict[tuple, _Row]] = defaultdict(dict)

    def at(key: tuple) -> _LineWork:
        found = work.get(key)
        if found is None:
            found = work[key] = _LineWork()
        return found

    for event in report.events:
        key = (event.file, event.line)
        if event.kind == "call":
            line_work = at(key)
            short = event.name.rsplit(".", 1)[-1]
            line_work.calls[short] = line_work.calls.get(short, 0) + 1
        elif event.name not in hidden:
            line_work = at(key)
            if event.kind == "collective":
                label = collective_label(event)
            elif event.outputs:
                label = tensors_label(event.outputs)
            elif len(event.inputs) > MAX_TENSORS_LISTED:
                label = "in: " + tensors_label(event.inputs)  # an in-place `_foreach_*` op
            else:
                label = "-"
            row_key = (event.phase, event.name, event.node, label)
            row = rows_by_key[key].get(row_key)
            if row is None:
                row = rows_by_key[key][row_key] = _Row(event.phase, event.name, [label], node=event.node)
                line_work.rows.append(row)
            row.count += 1
            row.seconds += event.estimate_seconds
            row.allocated += event.bytes_allocated
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
    # past the report's event limit the tree counts only the ops that were kept: it says so
    kept = sum(1 for e in report.events if e.kind == "op")
    partial = sum(report.summary.ops.values()) > kept
    for key, roots in module_trees(report).items():
        line_work = at(key)
        line_work.trees = [_module_rows(root, depth) for root in roots]
        line_work.trees_partial = partial
    for line_work in work.values():
        line_work.rows = _fold_shapes(line_work.rows)
    return work


def module_tree_lines(root: ModuleNode, depth: int = DEFAULT_DEPTH) -> list[str]:
    """The rows of one module tree as plain text (no colour, no tag column): the editor's hover."""
    cells = [row.cells() for row in _module_rows(root, depth)]
    columns = MODULE_COLUMNS[1:]
    widths = column_widths(columns, cells)
    plain = _Style(False)
    return [format_row(columns, widths, row, plain) for row in cells]


def _module_rows(root: ModuleNode, depth: int) -> list[_ModuleRow]:
    return [
        _ModuleRow(
            depth=level,
            name=node.name,
            type=node.type,
            output=tensors_label(node.outputs[:1]) if len(node.outputs) == 1 else tensors_label(node.outputs),
            calls=node.calls,
            ops=node.ops,
            flops=node.flops,
            params=node.params,
        )
        for level, node in walk(root, max(depth, 0))
    ]


def _fold_shapes(rows: list[_Row]) -> list[_Row]:
    """Rows of one op that differ only by output shape: kept apart up to MAX_SHAPES_PER_ROW, else
    one row with the total count that names the most common shapes (an optimizer's per-parameter
    loop: `f32[64] x580, f32[64, 64] x98 +6 shapes`)."""
    groups: "OrderedDict[tuple, list[_Row]]" = OrderedDict()
    for row in rows:
        groups.setdefault((row.phase, row.name, row.node), []).append(row)
    folded: list[_Row] = []
    for (phase, name, node), group in groups.items():
        if len(group) <= MAX_SHAPES_PER_ROW:
            folded.extend(group)
            continue
        merged = _Row(phase, name, [_common_shapes(group)], node=node, folded=True)
        for row in group:
            merged.count += row.count
            merged.seconds += row.seconds
            merged.allocated += row.allocated
            merged.flops += row.flops
            merged.has_flops = merged.has_flops or row.has_flops
        folded.append(merged)
    order = {phase: i for i, phase in enumerate(PHASES)}
    folded.sort(key=lambda r: order.get(r.phase, len(order)))  # stable: program order within a phase
    return folded


def _common_shapes(group: list[_Row], width: int = 40) -> str:
    """The most common labels (with their counts when some repeat), as many as fit `width`, and
    how many other shapes there were: `f32[64] x580, f32[64, 64] x98 +6 shapes`."""
    ranked = sorted(group, key=lambda r: -r.count)  # stable: first seen first among equals
    counted = ranked[0].count > 1
    shown: list[str] = []
    for row in ranked:
        item = f"{row.labels[0]} x{row.count}" if counted else row.labels[0]
        if shown and len(", ".join(shown + [item])) + len(f" +{len(group)} shapes") > width:
            break
        shown.append(item)
    rest = len(group) - len(shown)
    return ", ".join(shown) + (f" +{rest} shapes" if rest else "")


def _sections(
    report: TraceReport, work: "dict[tuple, _LineWork]", read_source: Callable[[str], Optional[str]]
) -> list[tuple[str, str, list[int], list[str]]]:
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
            sources[file] = (split_lines(text or ""), infos)
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


def _calls_text(calls: "OrderedDict[str, int]", width: int = MAX_CALLS_WIDTH) -> str:
    """`linear, relu x2`; when that is longer than `width`: the most frequent names that fit, in
    program order, and how many other names and calls there were."""
    named = [name if n == 1 else f"{name} x{n}" for name, n in calls.items()]
    text = ", ".join(named)
    if len(text) <= width:
        return text
    ranked = sorted(calls, key=lambda name: -calls[name])
    kept: set[str] = set()
    for name in ranked:
        trial = kept | {name}
        shown = ", ".join(n if calls[n] == 1 else f"{n} x{calls[n]}" for n in calls if n in trial)
        if len(shown) > width - 24 and kept:
            break
        kept = trial
    others = [n for n in calls if n not in kept]
    shown = ", ".join(n if calls[n] == 1 else f"{n} x{calls[n]}" for n in calls if n in kept)
    return f"{shown} +{len(others)} more ({sum(calls[n] for n in others)} calls)"


def _annotations(
    line_work: _LineWork, widths: dict[str, int], style: _Style, show: Callable[[Optional[str]], str]
) -> Iterable[str]:
    if line_work.calls:
        yield style("call".ljust(10), "call") + _calls_text(line_work.calls)
    for tree in line_work.trees:
        cells = [row.cells() for row in tree]
        cells[0]["tag"] = "module"
        tree_widths = column_widths(MODULE_COLUMNS, cells)
        for row_cells in cells:
            yield format_row(MODULE_COLUMNS, tree_widths, row_cells, style)
        if line_work.trees_partial:
            yield style(" " * 10 + "(ops and FLOPs of the events the report kept; see the notes)", "dim")
    previous_phase = None
    for row in line_work.rows:
        op_cells = row.cells()
        op_cells["phase"] = row.phase if row.phase != previous_phase else ""
        previous_phase = row.phase
        yield format_row(OP_COLUMNS, widths, op_cells, style, phase=row.phase)
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


def _totals(report: TraceReport, style: _Style, hidden: frozenset = frozenset()) -> list[str]:
    s = report.summary
    ops = ", ".join(f"{s.ops.get(p, 0)} {p}" for p in PHASES)
    parts = [
        f"ops: {ops}",
        f"calls: {s.calls}",
        f"FLOPs: {format_flops(s.flops) if s.flops else '0'}",
        f"syncs: {s.syncs}",
    ]
    if s.assumptions:  # values the trace assumed (AL906): shown only when there are some
        parts.append(f"assumed values: {s.assumptions}")
    ranks = ranks_summary(s)
    if ranks:  # simulated ranks (docs/distributed.md)
        parts.append(ranks)
    parts.append(f"{s.seconds:.2f} s")
    lines = [style("totals", "bold") + "  " + "  |  ".join(parts)]
    not_shown = sum(1 for e in report.events if e.kind == "op" and e.name in hidden)
    if not_shown:
        lines.append(
            style(
                f"{not_shown} bookkeeping op{'s' if not_shown != 1 else ''} (views, detach: no memory, "
                "no compute) not listed; --all-ops lists them",
                "dim",
            )
        )
    return lines
