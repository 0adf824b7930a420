"""Markdown for hovering a traced line: API calls, aten ops with their tensors, backward ops with
their autograd nodes, FLOPs and the line's diagnostics. Pure function of a `LineTrace`."""
from __future__ import annotations

from typing import Sequence

from atenlens.report import Event, TensorMeta
from atenlens.lsp.labels import flops_label, short_op, tensor_label_with_device
from atenlens.lsp.trace_view import LineTrace

_MAX_ROWS = 40


def _tensors(metas: Sequence[TensorMeta]) -> str:
    return ", ".join(tensor_label_with_device(m) for m in metas) or "—"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _op_table(events: Sequence[Event], with_node: bool) -> list[str]:
    head = "| op | node | inputs | outputs |" if with_node else "| op | inputs | outputs |"
    rule = "|---|---|---|---|" if with_node else "|---|---|---|"
    rows = [head, rule]
    for event in events[:_MAX_ROWS]:
        cells = [f"`{short_op(event.name)}`"]
        if with_node:
            cells.append(f"`{event.node}`" if event.node else "—")
        cells += [_cell(_tensors(event.inputs)), _cell(_tensors(event.outputs))]
        rows.append("| " + " | ".join(cells) + " |")
    if len(events) > _MAX_ROWS:
        rows.append(f"\n… and {len(events) - _MAX_ROWS} more")
    return rows


def _flops(events: Sequence[Event]) -> int:
    return sum(e.flops or 0 for e in events)


def hover_markdown(trace: LineTrace) -> str:
    parts: list[str] = []
    if trace.calls:
        names = list(dict.fromkeys(e.name for e in trace.calls))
        parts.append("**API calls:** " + ", ".join(f"`{n}`" for n in names))
    if trace.forward:
        parts.append(f"**Forward** ({len(trace.forward)} aten ops)\n\n" + "\n".join(_op_table(trace.forward, False)))
    if trace.nested:
        parts.append(f"**Inside calls from this line:** {len(trace.nested)} aten ops")
    if trace.backward:
        parts.append(f"**Backward** ({len(trace.backward)} aten ops)\n\n" + "\n".join(_op_table(trace.backward, True)))
    if trace.nested_backward:
        parts.append(f"**Backward inside calls from this line:** {len(trace.nested_backward)} aten ops")
    if trace.optimizer:
        parts.append(f"**Optimizer** ({len(trace.optimizer)} aten ops)\n\n" + "\n".join(_op_table(trace.optimizer, False)))
    flops = _flops(trace.forward + trace.backward + trace.optimizer)
    nested_flops = _flops(trace.nested + trace.nested_backward)
    if flops or nested_flops:
        line = f"**FLOPs:** {flops_label(flops)}"
        if nested_flops:
            line += f" (+ {flops_label(nested_flops)} inside calls)"
        parts.append(line)
    if trace.diagnostics:
        parts.append("**Diagnostics**\n\n" + "\n".join(
            f"- `{d.code}` {d.message}" + (f" (×{d.count})" if d.count > 1 else "") for d in trace.diagnostics))
    if parts and trace.notes:
        # what the whole trace is subject to (traced on cpu instead of cuda, events cut): first, one line each
        parts.insert(0, "\n\n".join(f"_Note: {note}_" for note in trace.notes))
    return "\n\n".join(parts)
