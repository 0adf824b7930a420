"""The hover's named-dims section: the line's FLOPs and bytes as formulas in the user's names, each
with its value at the given sizes, and what the estimates are computed at."""

from __future__ import annotations

from atenlens.named_text import estimates_note, formulas_text
from atenlens.report import NamedLine, NamedShapes


def named_section(line: NamedLine, named: NamedShapes) -> str:
    """`**Named dims:** FLOPs `4718592*B*T` = 38.7 GFLOP · bytes moved `...` = 64.5 MiB (memory and
    time are estimated at B=8, T=1024)`."""
    return f"**Named dims:** {formulas_text(line, code=True)} ({estimates_note(named)})"
