"""How collectives read in the listing, hints and hover (torch-free): `8x 2.0 MiB · ~4.09 µs NVLink`."""

from __future__ import annotations

from typing import Sequence

from atenlens.cost import format_bytes, format_seconds
from atenlens.report import Event, Summary

LINK_NAMES = {"nvlink": "NVLink", "pcie": "PCIe", "network": "network"}


def collective_label(event: Event) -> str:
    """Group size, bytes per rank, estimated time and link of one collective event."""
    parts = [f"{event.group_size}x {format_bytes(event.bytes)}" if event.group_size else format_bytes(event.bytes)]
    if event.estimate_seconds:
        parts.append(
            f"~{format_seconds(event.estimate_seconds)} {LINK_NAMES.get(event.link or '', event.link or '')}".rstrip()
        )
    return " · ".join(parts)


def ranks_summary(summary: Summary) -> str:
    """ "rank 0 of 8 · 6 collectives ~114 µs (~44.9 µs exposed)" ("" for a single-process run without
    collectives); the exposed part is the two-stream overlap estimate (trace/overlap.py)."""
    if summary.world_size <= 1 and not summary.collectives:
        return ""
    text = f"rank {summary.rank} of {summary.world_size}"
    if summary.collectives:
        text += (
            f" · {summary.collectives} collective{'s' if summary.collectives != 1 else ''}"
            f" ~{format_seconds(summary.communication_seconds)}"
        )
        if summary.communication_seconds:
            text += f" (~{format_seconds(summary.exposed_communication_seconds)} exposed)"
    return text


def short_name(name: str) -> str:
    """`all_gather_into_tensor` -> `all_gather`, `reduce_scatter_tensor` -> `reduce_scatter` (hints)."""
    for suffix in ("_into_tensor", "_tensor", "_single"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _grouped(events: Sequence[Event]) -> list[tuple[Event, int, float, float]]:
    """Equal collectives (phase, name, group, bytes) folded: (first event, count, summed seconds, summed
    exposed seconds)."""
    groups: dict[tuple, list] = {}
    for e in events:
        key = (e.phase, e.name, e.group, e.group_size, e.link, e.bytes)
        found = groups.setdefault(key, [e, 0, 0.0, 0.0])
        found[1] += 1
        found[2] += e.estimate_seconds
        found[3] += e.exposed_seconds
    return [(e, count, seconds, exposed) for e, count, seconds, exposed in groups.values()]


def collectives_hint(events: Sequence[Event], room: int = 10_000) -> str:
    """ "all_gather 8x 2 MiB ~4.09 µs NVLink ×2, ∇ reduce_scatter 8x 2 MiB ~4.09 µs NVLink" for a hint;
    past `room` characters the rest is counted (`+2`), the first one is always named."""
    parts: list[str] = []
    for e, count, seconds, _ in _grouped(events):
        text = ("∇ " if e.phase == "backward" else "") + f"{short_name(e.name)} {e.group_size}x {format_bytes(e.bytes)}"
        if seconds:
            text += f" ~{format_seconds(seconds)} {LINK_NAMES.get(e.link or '', e.link or '')}".rstrip()
        parts.append(text + (f" ×{count}" if count > 1 else ""))
    shown = 1
    while shown < len(parts) and len(", ".join(parts[: shown + 1])) + len(f" +{len(parts)}") <= room:
        shown += 1
    rest = len(parts) - shown
    return ", ".join(parts[:shown]) + (f" +{rest}" if rest else "")


def collectives_table(events: Sequence[Event]) -> str:
    """The hover's **Collectives** section: one row per distinct collective of the line."""
    rows = [
        "**Collectives** (estimates: NCCL ring and tree model; exposed: not hidden by compute on two streams, "
        "docs/distributed.md)",
        "",
        "| phase | collective | group | ranks | bytes per rank | time | exposed | link | count |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e, count, seconds, exposed in _grouped(events):
        rows.append(
            f"| {e.phase} | `{e.name}` | {e.group or ''} | {e.group_size or ''} | {format_bytes(e.bytes)} | "
            f"{format_seconds(seconds)} | {format_seconds(exposed)} | {LINK_NAMES.get(e.link or '', e.link or '')} "
            f"| {count} |"
        )
    return "\n".join(rows)
