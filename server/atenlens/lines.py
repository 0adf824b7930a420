"""Where a line ends, for every line number atenlens computes: at "\\n", "\\r\\n" or a lone "\\r",
as Python's tokenizer counts (so the line numbers of `ast` and of tracebacks) and as LSP clients
count. Not `str.splitlines()`, which also breaks at \\v, \\f (a form feed, found in real Python
files), \\x1c-\\x1e, \\x85, \\u2028 and \\u2029: a directive below such a character was looked up one
line off and went unseen.

Imports nothing: the engine, the linter's callers, the server and the CLI all use it.
"""

from __future__ import annotations

import re

_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_WITH_END = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """The lines of `text` without their ends; a text ending in a line end has an empty last line
    (as `text.split("\\n")`)."""
    if "\r" not in text:
        return text.split("\n")  # the common case, and the fast one
    return _BREAK.split(text)


def lines_with_ends(text: str) -> tuple[str, ...]:
    """`text.splitlines(keepends=True)` under the same rule."""
    return tuple(_LINE_WITH_END.findall(text))
