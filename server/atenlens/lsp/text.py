"""Lines, columns and line shifts of an editor buffer, independent of the protocol library.

Columns inside the server count Python str characters (as lint findings do); the editor counts in
the position encoding negotiated at `initialize` (UTF-16 code units unless the client offers
another). `units` converts. Lines split at "\\n", "\\r\\n" and "\\r" (`atenlens.lines`, the one rule:
Python's tokenizer and LSP clients count lines so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from atenlens.lines import split_lines  # noqa: F401 - the server's lines are these

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"


def units(text: str, encoding: str) -> int:
    """Length of `text` in code units of `encoding` ("utf-8", "utf-16" or "utf-32")."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def column_to_units(line: str, column: int, encoding: str) -> int:
    """A str column on `line` -> code units (clamped to the line's end)."""
    return units(line[: max(column, 0)], encoding)


def column_from_units(line: str, character: int, encoding: str) -> int:
    """Code units on `line` -> a str column (clamped to the line's end)."""
    if encoding == UTF32 or line.isascii():
        return min(max(character, 0), len(line))
    count = 0
    for index, char in enumerate(line):
        if count >= character:
            return index
        count += units(char, encoding)
    return len(line)


@dataclass(frozen=True)
class LineShift:
    """How one incremental change moves line numbers (0-based, numbering before the change).

    Lines before `start` keep their number, lines after `end` move by `delta`. Of the touched
    lines, `start` stays (its text left of the change is intact) and `end` follows the change
    when the change ends at its column 0 (its whole text is intact and moves); lines strictly
    between are gone. Whether a kept line's text really is unchanged is checked by the caller
    against the new text (`TracedLines.revalidate`)."""

    start: int
    end: int
    end_at_column_zero: bool
    delta: int
    inserts_lines_only: bool = False  # whole lines inserted before `start`; no old line edited
    full: bool = False  # the whole text was replaced: nothing keeps its place

    @staticmethod
    def of_change(start_line: int, end_line: int, end_character: int, text: str) -> "LineShift":
        return LineShift(
            start=start_line,
            end=end_line,
            end_at_column_zero=end_character == 0,
            delta=text.count("\n") - (end_line - start_line),
            inserts_lines_only=(start_line == end_line and end_character == 0 and text.endswith("\n")),
        )

    @staticmethod
    def whole_text() -> "LineShift":
        return LineShift(start=0, end=0, end_at_column_zero=False, delta=0, full=True)

    def map(self, line: int) -> Optional[int]:
        if self.full:
            return None
        if line < self.start:
            return line
        if line > self.end:
            return line + self.delta
        if line == self.end and self.end_at_column_zero and line > self.start:
            return line + self.delta
        if line == self.start:
            if self.end_at_column_zero and self.start == self.end:
                return line + self.delta
            return line
        return None

    def touches(self, first: int, last: int) -> bool:
        """Whether the change overlaps lines first..last (0-based, inclusive)."""
        if self.full:
            return True
        if self.inserts_lines_only:  # new lines between two of the span's lines edit it
            return first < self.start <= last
        end = self.end - 1 if self.end_at_column_zero and self.end > self.start else self.end
        return self.start <= last and end >= first


def map_line(line: int, shifts: Iterable[LineShift]) -> Optional[int]:
    current: Optional[int] = line
    for shift in shifts:
        if current is None:
            return None
        current = shift.map(current)
    return current
