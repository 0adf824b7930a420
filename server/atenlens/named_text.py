"""How the CLI and the editor write named dims (`dims: B=8 T=1024`, trace/shapes.py): each line's
FLOPs and bytes as formulas with their values, and what the estimates are computed at. Torch-free."""

from __future__ import annotations

from typing import Optional

from atenlens.cost import format_bytes
from atenlens.report import NamedLine, NamedShapes
from atenlens.vocabulary import format_flops


def formulas_text(line: NamedLine, code: bool = False) -> str:
    """`FLOPs 4718592*B*T = 38.7 GFLOP · bytes moved 7680*B*T + 4724736 = 64.5 MiB`; `code` puts the
    formulas in backticks (Markdown)."""
    quote = "`" if code else ""
    parts = []
    if line.flops is not None:
        parts.append(f"FLOPs {quote}{line.flops}{quote} = {format_flops(line.flops_value)}")
    if line.bytes is not None:
        parts.append(f"bytes moved {quote}{line.bytes}{quote} = {format_bytes(line.bytes_value)}")
    return " · ".join(parts)


def estimates_note(named: NamedShapes) -> str:
    """What the numbers are computed at: `memory and time are estimated at B=8, T=1024`."""
    return f"memory and time are estimated at {', '.join(named.dims)}"


def dims_header(named: Optional[NamedShapes]) -> Optional[str]:
    """The CLI's header line for a trace with named dims (None without them)."""
    if named is None:
        return None
    dims = ", ".join(named.dims) + (" (from the example call)" if named.inferred else "")
    if not named.symbolic:
        return f"dims {dims}: shapes shown with concrete sizes (see AL920)"
    return f"dims {dims}: shapes in these names; {estimates_note(named)}"
