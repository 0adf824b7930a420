"""Markdown for hovering a traced line: API calls, aten ops with their tensors, backward ops with
their autograd nodes, FLOPs and the line's diagnostics. Pure function of a `LineTrace`.

Sized to read without scrolling: identical ops are one row with a count (`addmm` ×48), an op over
many tensors says how many (`161 f32 tensors cuda:0`), each table keeps its first _MAX_ROWS rows and
counts the rest, bookkeeping ops (views, detach) are left out unless asked. A line that calls a
model shows its module tree one level deep; a line that calls into user code shows what those calls
ran (their top ops) and links to the function it rolls up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from atenlens.communication import collectives_table
from atenlens.lsp.cost_hover import cost_section
from atenlens.lsp.document_traces import LineTrace
from atenlens.lsp.labels import short_op, sync_label, tensors_label_with_device
from atenlens.lsp.named_hover import named_section
from atenlens.render import module_tree_lines
from atenlens.report import Event
from atenlens.vocabulary import format_flops

_MAX_ROWS = 12
_MAX_ROLLUP_ROWS = 8


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# The columns of an op table, in one place: a header and the cell of a row (one distinct op: its
# first event and how many times it ran). A new column (time, memory) is one entry here.
OpColumn = tuple[str, Callable[[Event, int], str]]
_OP = ("op", lambda e, n: f"`{short_op(e.name)}`" + (f" ×{n}" if n > 1 else ""))
_NODE = ("node", lambda e, n: f"`{e.node}`" if e.node else "—")
_INPUTS = ("inputs", lambda e, n: _cell(tensors_label_with_device(e.inputs) or "—"))
_OUTPUTS = ("outputs", lambda e, n: _cell(tensors_label_with_device(e.outputs) or "—"))
FORWARD_COLUMNS: tuple[OpColumn, ...] = (_OP, _INPUTS, _OUTPUTS)
BACKWARD_COLUMNS: tuple[OpColumn, ...] = (_OP, _NODE, _INPUTS, _OUTPUTS)


def _op_table(events: Sequence[Event], columns: Sequence[OpColumn], max_rows: int = _MAX_ROWS) -> list[str]:
    """One row per distinct (op, node, inputs, outputs), in order of first appearance, counted."""
    groups: dict[tuple, list] = {}
    for event in events:
        key = (event.name, event.node, event.inputs, event.outputs)
        group = groups.get(key)
        if group is None:
            groups[key] = [event, 1]
        else:
            group[1] += 1
    rows = ["| " + " | ".join(header for header, _ in columns) + " |", "|" + "---|" * len(columns)]
    listed = list(groups.values())
    for event, count in listed[:max_rows]:
        rows.append("| " + " | ".join(cell(event, count) for _, cell in columns) + " |")
    if len(listed) > max_rows:
        rest = listed[max_rows:]
        left = sum(n for _, n in rest)
        rows.append(
            f"\n… and {len(rest)} more row{'s' if len(rest) != 1 else ''} ({left} op{'s' if left != 1 else ''})"
        )
    return rows


def _flops(events: Sequence[Event]) -> int:
    return sum(e.flops or 0 for e in events)


def _ops(count: int) -> str:
    return f"{count} aten op{'s' if count != 1 else ''}"


def _section(title: str, events: Sequence[Event], hidden: frozenset, columns: Sequence[OpColumn], max_rows: int) -> str:
    shown = [e for e in events if e.name not in hidden]
    left_out = len(events) - len(shown)
    heading = f"**{title}** ({_ops(len(events))}"
    heading += f"; {left_out} bookkeeping not shown)" if left_out else ")"
    if not shown:
        return heading
    return heading + "\n\n" + "\n".join(_op_table(shown, columns, max_rows))


def _rollup(trace: LineTrace, hidden: frozenset) -> list[str]:
    """What the calls from this line ran: totals, the top ops, links to the functions."""
    inner = trace.nested + trace.nested_backward
    per_phase = {phase: sum(1 for e in inner if e.phase == phase) for phase in ("forward", "backward", "optimizer")}
    totals = ", ".join(f"{n} {p}" for p, n in per_phase.items() if n)
    flops = _flops(inner)
    head = f"**Inside calls from this line:** {totals} aten ops" + (f" · {format_flops(flops)}" if flops else "")
    links = [f"[{function}]({Path(file).as_uri()}#L{line})" for (file, function), line in trace.callees.items()]
    if links:
        head += "\n\nin " + ", ".join(links)
    by_op: dict[tuple[str, str], list[int]] = {}
    for event in inner:
        if event.name in hidden:
            continue
        phase: str = "backward" if event.phase == "backward" else event.phase
        found = by_op.setdefault((short_op(event.name), phase), [0, 0])
        found[0] += 1
        found[1] += event.flops or 0
    ranked = sorted(by_op.items(), key=lambda item: (-item[1][1], -item[1][0]))
    parts = [head]
    if ranked:
        rows = ["| op | phase | count | FLOPs |", "|---|---|---|---|"]
        for (op, phase), (count, op_flops) in ranked[:_MAX_ROLLUP_ROWS]:
            rows.append(f"| `{op}` | {phase} | {count} | {format_flops(op_flops) if op_flops else '—'} |")
        if len(ranked) > _MAX_ROLLUP_ROWS:
            rest = ranked[_MAX_ROLLUP_ROWS:]
            rows.append(f"\n… and {len(rest)} more ops ({sum(c for _, (c, _) in rest)} in all)")
        parts.append("\n".join(rows))
    return parts


def hover_markdown(trace: LineTrace, show_bookkeeping: bool = False, stale_note: Optional[str] = None) -> str:
    hidden = frozenset() if show_bookkeeping else trace.bookkeeping
    parts: list[str] = []
    if trace.calls:
        names = list(dict.fromkeys(e.name for e in trace.calls))
        shown = names[:_MAX_ROWS]
        parts.append(
            "**API calls:** "
            + ", ".join(f"`{n}`" for n in shown)
            + (f" and {len(names) - len(shown)} more" if len(names) > len(shown) else "")
        )
    for root in trace.trees:
        parts.append("**Modules**\n\n```\n" + "\n".join(module_tree_lines(root, depth=1)) + "\n```")
    # under a module tree the tree is the summary: the op tables stay short
    rows = _MAX_ROWS // 2 if trace.trees else _MAX_ROWS
    if trace.forward:
        parts.append(_section("Forward", trace.forward, hidden, FORWARD_COLUMNS, rows))
    if trace.backward:
        parts.append(_section("Backward", trace.backward, hidden, BACKWARD_COLUMNS, rows))
    if trace.optimizer:
        parts.append(_section("Optimizer", trace.optimizer, hidden, FORWARD_COLUMNS, rows))
    if trace.collectives:
        parts.append(collectives_table(trace.collectives))
    if trace.nested or trace.nested_backward:
        parts.extend(_rollup(trace, hidden))
    flops = _flops(trace.forward + trace.backward + trace.optimizer)
    nested_flops = _flops(trace.nested + trace.nested_backward)
    if flops and nested_flops:
        parts.append(f"**FLOPs:** {format_flops(flops)} (+ {format_flops(nested_flops)} inside calls)")
    elif flops or nested_flops:
        parts.append(
            f"**FLOPs:** {format_flops(flops)}" if flops else f"**FLOPs:** {format_flops(nested_flops)} inside calls"
        )
    if trace.named is not None and trace.named_shapes is not None:
        parts.append(named_section(trace.named, trace.named_shapes))
    cost = cost_section(trace)
    if cost is not None:
        parts.append(cost)
    if trace.nested_syncs:
        parts.append(f"**Syncs inside calls from this line:** {sync_label(trace.nested_syncs)}")
    if trace.diagnostics:
        # one entry per problem: the same code and message found again is counted, not repeated
        counted: dict[tuple[str, str], int] = {}
        for d in trace.diagnostics:
            counted[(d.code, d.message)] = counted.get((d.code, d.message), 0) + d.count
        parts.append(
            "**Diagnostics**\n\n"
            + "\n".join(
                f"- `{code}` {message}" + (f" (×{count})" if count > 1 else "")
                for (code, message), count in counted.items()
            )
        )
    if parts and trace.notes:
        # what the whole trace is subject to (traced on cpu instead of cuda, events cut): first, one line each
        parts.insert(0, "\n\n".join(f"_Note: {note}_" for note in trace.notes))
    if parts and stale_note:
        parts.insert(0, f"_Stale: {stale_note}._")
    return "\n\n".join(parts)
