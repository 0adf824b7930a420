"""Jupyter notebooks (`.ipynb`) on the command line, as ruff lints them: the code cells joined in
order into one module (they run in one namespace, so a device set in one cell is known in the
next), IPython's magics and shell escapes blanked, and each finding placed back in its cell.

Cells are numbered as ruff numbers them: from 1, counting every cell (markdown too), so
`train.ipynb:cell 4:2:11` is the fourth cell's second line. A code cell that starts with a cell
magic other than the Python ones below (`%%bash`, `%%writefile`, ...) is not Python: left out.
A blanked line keeps its length (spaces), so every column stays where it was. Notebooks get no
quick fixes: `--fix` and `--diff` leave them as they are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# Cell magics whose body is Python (IPython's built-ins that time, profile or capture it).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
# A line IPython rewrites before Python sees it: a magic or shell escape (`%pip`, `!ls`,
# `files = !ls`), or help (`torch.zeros?`).
_MAGIC = re.compile(r"^\s*(?:[%!?]|\w+\s*=\s*[%!]|[\w.]+\?{1,2}\s*$)")


class NotANotebook(ValueError):
    """The file is not a notebook this can read; the message says why."""


@dataclass(frozen=True)
class Notebook:
    source: str  # the Python of the code cells, joined
    cells: tuple[tuple[int, int], ...]  # per code cell kept: (its number among all cells, its first line in `source`)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, 1-based row in that cell) of 1-based `line` of `source`."""
        cell, first = self.cells[0]
        for number, start in self.cells:
            if start > line:
                break
            cell, first = number, start
        return cell, line - first + 1


def _text(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    if isinstance(value, str):
        return value
    raise NotANotebook("a cell's source is neither a string nor a list of strings")


def read_notebook(text: str) -> Notebook:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotANotebook(f"not a notebook: not JSON ({exc.msg}, line {exc.lineno})") from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise NotANotebook("not a notebook: no list of cells")
    parts: list[str] = []
    index: list[tuple[int, int]] = []
    line = 1
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        lines = _text(cell.get("source", "")).splitlines()
        if lines and lines[0].lstrip().startswith("%%"):
            magic = lines[0].lstrip()[2:].split(maxsplit=1)
            if not magic or magic[0] not in PYTHON_CELL_MAGICS:
                continue  # %%bash, %%writefile, ...: not Python
        kept = [" " * len(row) if _MAGIC.search(row) else row for row in lines]
        index.append((number, line))
        parts.append("".join(row + "\n" for row in kept) or "\n")
        line += max(1, len(kept))
    if not index:
        return Notebook("", ((1, 1),))
    return Notebook("".join(parts), tuple(index))
