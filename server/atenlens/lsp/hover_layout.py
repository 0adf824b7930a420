"""The hover's markdown (hover.py) laid out for what the client can show.

hover.py writes one markdown text, with GFM tables, as VS Code shows it. Other clients read it
differently, and the client's capabilities say which way:

- `MARKDOWN`: the client names its markdown parser (`general.markdown`, VS Code: "marked"): the text
  as it is.
- `MARKDOWN_NO_TABLES`: markdown, but no parser named (Neovim): Neovim shows markdown source with its
  markers concealed, and draws no tables (the pipes show) and takes any `[...]` for a link (its
  brackets are hidden: `f32[512, 128]` read `f32512, 128`). Tables become aligned columns in a code
  block, and text in brackets outside code becomes code (`f32[512, 128]` in backticks).
- `PLAINTEXT`: the client's hover takes no markdown (`contentFormat` without "markdown"): no markers at
  all, tables as aligned columns, a link as `text (url)`.

The input is the subset of markdown hover.py, cost_hover.py and communication.py write: paragraphs,
`**bold**`, `_italic_` lines, `` `code` ``, `[text](url)` links, `- ` lists, fenced code blocks and pipe
tables (a header, a `|---|` row, rows; `\\|` is a pipe inside a cell).
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

MARKDOWN = "markdown"
MARKDOWN_NO_TABLES = "markdown-no-tables"
PLAINTEXT = "plaintext"

_FENCE = "```"
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
# text in brackets that is not a link's text (a link is `[text](url)`): a tensor label `f32[8, 32]`,
# a shape `[2, 3]`, with the word it is glued to
_BRACKETED = re.compile(r"[\w.:]*\[[^\]\n`]*\](?!\()\w*")
_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]*)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC_LINE = re.compile(r"^_(.+)_$")


def hover_layout(content_formats: Optional[Sequence[str]], markdown_parser: Optional[str]) -> str:
    """The layout for a client whose hover takes `content_formats` (None or empty: markdown assumed) and
    whose `general.markdown.parser` is `markdown_parser`."""
    formats = [str(getattr(f, "value", f)) for f in content_formats or ()]
    if formats and MARKDOWN not in formats:
        return PLAINTEXT
    return MARKDOWN if markdown_parser else MARKDOWN_NO_TABLES


def lay_out(markdown: str, layout: str) -> str:
    if layout == MARKDOWN:
        return markdown
    out: list[str] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith(_FENCE):
            end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith(_FENCE)), len(lines))
            block = lines[index + 1 : end]
            out.extend([_FENCE, *block, _FENCE] if layout == MARKDOWN_NO_TABLES else block)
            index = end + 1
        elif _is_table_start(lines, index):
            end = index
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            rows = [_cells(row) for i, row in enumerate(lines[index:end]) if i != 1]  # not the |---| row
            columns = _columns(rows)
            out.extend([_FENCE, *columns, _FENCE] if layout == MARKDOWN_NO_TABLES else columns)
            index = end
        else:
            out.append(_protect_brackets(line) if layout == MARKDOWN_NO_TABLES else _plain(line))
            index += 1
    return "\n".join(out)


def _is_table_start(lines: list[str], index: int) -> bool:
    return (
        lines[index].startswith("|")
        and index + 1 < len(lines)
        and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[index + 1].strip()) is not None
    )


def _cells(row: str) -> list[str]:
    """The cells of `| a | b |` as plain text: no code markers, `\\|` a pipe."""
    parts = _CELL_SPLIT.split(row.strip())
    return [_plain(part.strip()).replace("\\|", "|") for part in parts[1:-1]]


def _columns(rows: list[list[str]]) -> list[str]:
    """Rows of cells as left-aligned columns two spaces apart."""
    count = max(len(row) for row in rows)
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(count)]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _outside_code(line: str, change) -> str:
    """`change` applied to the parts of `line` that are not code spans."""
    parts, at = [], 0
    for match in _CODE_SPAN.finditer(line):
        parts.append(change(line[at : match.start()]))
        parts.append(match.group(0))
        at = match.end()
    parts.append(change(line[at:]))
    return "".join(parts)


def _protect_brackets(line: str) -> str:
    return _outside_code(line, lambda text: _BRACKETED.sub(lambda m: f"`{m.group(0)}`", text))


def _plain(line: str) -> str:
    """A line without markdown markers: `**bold**`, `_line_`, `` `code` ``, `[text](url)` -> `text (url)`."""
    line = _ITALIC_LINE.sub(r"\1", line)

    def text(part: str) -> str:
        return _BOLD.sub(r"\1", _LINK.sub(r"\1 (\2)", part))

    return _CODE_SPAN.sub(r"\2", _outside_code(line, text))
