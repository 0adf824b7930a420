"""How collectives read in the listing, hints and hover (torch-free): `8x 2.0 MiB · ~4.09 µs NVLink`."""
from __future__ import annotations

from atenlens.cost import format_bytes, format_seconds
from atenlens.report import Event, Summary

LINK_NAMES = {"nvlink": "NVLink", "pcie": "PCIe", "network": "network"}


def collective_label(event: Event) -> str:
    """Group size, bytes per rank, estimated time and link of one collective event."""
    parts = [f"{event.group_size}x {format_bytes(event.bytes)}" if event.group_size else format_bytes(event.bytes)]
    if event.estimate_seconds:
        parts.append(f"~{format_seconds(event.estimate_seconds)} {LINK_NAMES.get(event.link or '', event.link or '')}".rstrip())
    return " · ".join(parts)


def ranks_summary(summary: Summary) -> str:
    """"rank 0 of 8 · 6 collectives ~24.5 µs" ("" for a single-process run without collectives)."""
    if summary.world_size <= 1 and not summary.collectives:
        return ""
    text = f"rank {summary.rank} of {summary.world_size}"
    if summary.collectives:
        text += (f" · {summary.collectives} collective{'s' if summary.collectives != 1 else ''}"
                 f" ~{format_seconds(summary.communication_seconds)}")
    return text
