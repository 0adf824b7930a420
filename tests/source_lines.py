"""Where a marker is in a test input, as the two consumers count lines: a report (trace, lint,
CLI) from 1, the LSP from 0. Both assert the marker is on exactly one line, so a test that finds
its lines by marker breaks loudly, not silently, when its input changes."""

from __future__ import annotations

from pathlib import Path
from typing import Union


def line_of(path: Union[str, Path], marker: str) -> int:
    """1-based number of the only line of the file `path` containing `marker` (as reports count)."""
    hits = [n for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1) if marker in line]
    assert len(hits) == 1, f"{marker!r} is on lines {hits} of {path}"
    return hits[0]


def lsp_line(text: str, marker: str) -> int:
    """0-based index of the only line of `text` containing `marker` (as the LSP counts)."""
    hits = [i for i, line in enumerate(text.split("\n")) if marker in line]
    assert len(hits) == 1, f"{marker!r} is on lines {hits} (0-based)"
    return hits[0]
