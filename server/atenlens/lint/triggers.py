"""Trigger bytes: what a file (or one definition in it) must contain for a rule to be able to fire.

Each rule declares, next to its logic, groups of byte patterns without which it cannot report
anything (`Rule.triggers`): the rule can fire only if every group has a match. `.item()` in a
loop on a CUDA tensor cannot be written without the bytes `for` or `while`, and without one of
the words that give a tensor a device. A file that holds none of the selected rules' triggers is
not parsed at all, and of the others only the rules whose triggers occur run. A pattern is either
bytes (a substring test, memchr speed) or a compiled regular expression of bytes; substrings are
tried first.

Definitions: a rule whose findings depend only on the top-level `def`/`class` they are in, the
module-level code and byte-level facts of the whole file (`Rule.definition_triggers` not None)
also says what one definition must contain. A definition's pattern may be an `InCode` one, matched
only outside comments and string literals (AL100's loop: the prose of docstrings says `for` in
most methods). When every rule that runs is of that kind, the
top-level definitions that hold none of their definition triggers are skipped, and in the
classes that are kept, the methods that hold none: tree-sitter parses only the kept byte ranges
(its included ranges), and the rules' byte scans read a copy with the skipped bytes blanked
(spaces, line breaks kept, so every offset and position stays valid). Module-level code and the
first statement of each class body are always kept (the bindings of a module-level loop live
there; a class keeps a body). The split is a line scan (a definition starts on a line that
begins with `def`, `class`, `async def` or `@`, and ends at the next line that begins with
anything but a space, a comment or a closing bracket; a method likewise at the indentation of
its class's body); `SourceText` checks the parse of the kept text and parses the whole file
instead when that parse has an error or a statement that crosses a skipped region (a split that
a string or a bracket fooled).

tests/lint/test_lint_triggers.py lints the labelled corpus, the fixtures and a generated corpus
with and without this skipping and requires identical findings.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import Iterable, Iterator, Optional, Sequence, Union

Pattern = Union[bytes, "re.Pattern[bytes]", "InCode", "Caseless"]
TriggerGroups = tuple[tuple[Pattern, ...], ...]

# A loop of any kind: `for` statements and comprehensions, `while`; as words (`forward`,
# `format` and `before` are no loops), though a digit may touch them (`[1for x in y]` is Python).
# One pattern per word, each starting with its literal: `re` then scans with a fast search.
LOOP = (re.compile(rb"for(?<![A-Za-z_]for)\b"), re.compile(rb"while(?<![A-Za-z_]while)\b"))


# The opening of a comment or a string literal: where prose may begin.
_PROSE_START = re.compile(rb"[#'\"]")
# A whole comment or string literal from its first character (re.S: a backslash escapes a line
# break too). A one-line string that meets a line break unclosed, or a triple-quoted one that
# never closes, does not match: the scan cannot tell prose from code after it. Possessive runs
# (`++`, `*+`) take a string's characters in one step and never backtrack: the same matches.
_PROSE = re.compile(
    rb"#[^\n]*+"
    rb"|'''(?:[^'\\]++|\\.|'(?!''))*+'''"
    rb'|"""(?:[^"\\]++|\\.|"(?!""))*+"""'
    rb"|'(?:[^'\\\n]++|\\.)*+'"
    rb'|"(?:[^"\\\n]++|\\.)*+"',
    re.S,
)
_FORMAT_PREFIX = frozenset(b"fFtT")  # f-strings (and 3.14's t-strings) hold code in their braces
_PREFIX_BYTES = frozenset(b"rRbBuUfFtT")


class InCode:
    """A pattern matched only outside comments and string literals (an f-string's text counts
    as code: its braces may hold a comprehension): `for` in a docstring is no loop. Scanned from
    the start of the range, which must be outside any string (the start of a definition's line).
    Where the scan cannot tell (a string left open), it answers a match: skipping is never
    decided on a guess. Cheap where the words are rare: only the prose that starts before the
    next match of the pattern is scanned. `rough` is the pattern anywhere, for a test of the
    whole file."""

    def __init__(self, patterns: Sequence["re.Pattern[bytes]"]) -> None:
        self.rough = patterns

    def search(self, data: bytes, start: int = 0, end: Optional[int] = None) -> Optional[object]:
        stop = len(data) if end is None else end
        at = start
        # Where each pattern next matches (-1: not searched yet; None: nowhere before `stop`),
        # searched again only once the scan has passed it: a word far away is not searched for
        # again after each string.
        ahead: list[Optional[int]] = [-1] * len(self.rough)
        while True:
            for index, pattern in enumerate(self.rough):
                where = ahead[index]
                if where is not None and where < at:
                    match = pattern.search(data, at, stop)
                    ahead[index] = None if match is None else match.start()
            found = [where for where in ahead if where is not None]
            if not found:
                return None
            word = min(found)
            prose = _PROSE_START.search(data, at, word)
            if prose is None:
                return True  # the word is in code
            token = _PROSE.match(data, prose.start(), stop)
            if token is None:
                return True  # a string left open: no guess
            if data[prose.start() : prose.start() + 1] != b"#" and _formatted(data, prose.start()):
                if any(p.search(data, prose.start(), token.end()) for p in self.rough):
                    return True
            at = token.end()


def _formatted(data: bytes, quote: int) -> bool:
    """Is the string whose quote is at `quote` an f-string (`f"`, `rf"`, `Fr"`)?"""
    at = quote
    while at > 0 and data[at - 1] in _PREFIX_BYTES:
        at -= 1
    return any(b in _FORMAT_PREFIX for b in data[at:quote])


# A loop written in code, for a definition's triggers.
CODE_LOOP = InCode(LOOP)


class Caseless:
    """Bytes in any ASCII case, as `(?i)` would match them: `re` tries such a pattern at every
    byte, while a lower-cased copy and a substring search cost about a sixth of that."""

    def __init__(self, word: bytes) -> None:
        self.word = word.lower()

    def search(self, data: bytes, start: int = 0, end: Optional[int] = None) -> Optional[object]:
        stop = len(data) if end is None else end
        return True if data[start:stop].lower().find(self.word) != -1 else None


class _LineStarts:
    """A pattern matched only where a line starts, as `^` with re.M, but searched as "\n" then
    the pattern (and tried once at the first line): `re` then finds candidates with a fast
    search for the line break instead of trying `^` at every byte, 4 to 9 times faster on
    real files. Yields (where the line starts, the match of the pattern there)."""

    def __init__(self, pattern: bytes) -> None:
        self._first = re.compile(pattern)
        self._next = re.compile(rb"\n" + pattern)

    def finditer(
        self, data: bytes, start: int = 0, end: Optional[int] = None
    ) -> Iterator[tuple[int, "re.Match[bytes]"]]:
        stop = len(data) if end is None else end
        if start == 0 or data[start - 1 : start] == b"\n":
            first = self._first.match(data, start, stop)
            if first is not None:
                yield start, first
        for match in self._next.finditer(data, start, stop):
            yield match.start() + 1, match

    def starts(self, data: bytes, start: int = 0, end: Optional[int] = None) -> list[int]:
        """Where the lines that `finditer` yields start, as one list (no generator step per line)."""
        stop = len(data) if end is None else end
        found = [match.start() + 1 for match in self._next.finditer(data, start, stop)]
        if (start == 0 or data[start - 1 : start] == b"\n") and self._first.match(data, start, stop) is not None:
            found.insert(0, start)
        return found

    def search(self, data: bytes, start: int = 0, end: Optional[int] = None) -> Optional[int]:
        return next((at for at, _ in self.finditer(data, start, end)), None)


_STATEMENT_LINE = _LineStarts(rb"[^\s#)\]}]")
_DEFINITION_LINE = _LineStarts(rb"(?:(?:def|class)\b|async\s+def\b|@)")


def group_matches(group: Sequence[Pattern], data: bytes, start: int = 0, end: int | None = None) -> bool:
    stop = len(data) if end is None else end
    for pattern in group:
        if isinstance(pattern, bytes) and data.find(pattern, start, stop) != -1:
            return True
    for pattern in group:
        if not isinstance(pattern, bytes) and pattern.search(data, start, stop) is not None:
            return True
    return False


def matches(groups: TriggerGroups, data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Does `data[start:end]` hold a match of every group (always, for no groups)?"""
    return all(group_matches(group, data, start, end) for group in groups)


def definitions(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of the top-level definitions, decorators included, each ending
    where the next top-level statement begins (or at the end of the file)."""
    return _spans(data, _DEFINITION_LINE.starts(data), _STATEMENT_LINE.starts(data), 0, len(data))


def _spans(data: bytes, heads: Iterable[int], statements: list[int], indent: int, end: int) -> list[tuple[int, int]]:
    """For each line in `heads` (a definition or its first decorator, indented by `indent`
    spaces), the range up to the next of `statements` (the starts of the lines that begin a
    statement at that level, ascending) after the decorated line, or up to `end`. One table of
    statement lines and a bisection per step: no search per definition."""
    found: list[tuple[int, int]] = []
    done = 0
    for start in heads:
        if start < done:
            continue  # the `def` of a decorated definition: already in it
        line = start
        while data.startswith(b"@", line + indent):
            # a decorator's line: the definition it decorates follows and belongs to it
            following = bisect_right(statements, line)
            if following == len(statements):
                break
            line = statements[following]
        following = bisect_right(statements, line)
        done = statements[following] if following < len(statements) else end
        found.append((start, done))
    return found


def _next_line(data: bytes, at: int) -> int:
    end = data.find(b"\n", at)
    return len(data) if end == -1 else end + 1


def skippable_definitions(data: bytes, groups: Sequence[TriggerGroups]) -> list[tuple[int, int]]:
    """The top-level definitions in which none of `groups` (one entry per rule) matches, and in
    the classes where some does, the methods in which none does (not the first statement of
    the class body: the class keeps a body)."""
    # Only the patterns that occur in the file can occur in one of its definitions: each absent
    # one would otherwise be searched for in every definition.
    present = [tuple(tuple(p for p in group if _occurs(p, data)) for group in rule_groups) for rule_groups in groups]
    groups = [rule_groups for rule_groups in present if all(rule_groups)]
    found: list[tuple[int, int]] = []
    for start, end in definitions(data):
        if not any(matches(rule_groups, data, start, end) for rule_groups in groups):
            found.append((start, end))
        else:
            header = _CLASS_LINE.search(data, start, end)  # after its decorators, if any
            if header is not None:
                methods = _methods(data, header, end)
                skipped = [m for m in methods if not any(matches(rule_groups, data, *m) for rule_groups in groups)]
                found.extend(_without_self_calls(data, (header, end), skipped))
    return _without_call_sites(data, found)


def _without_self_calls(data: bytes, holder: tuple[int, int], skipped: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`skipped` less the methods that call a kept method of their class (`self.get_pdf()` in
    `__init__`), and so on for the methods that call those: where a method's only callers are
    set-up or tests, its loops run rarely (sync_in_loop.py), so its callers are kept with it."""
    if not skipped:
        return skipped
    gaps = set(skipped)
    names = [
        b"self." + match.group(1)
        for at, match in _INDENTED_NAME.finditer(data, *holder)
        if not any(start <= at < end for start, end in skipped)
    ]
    while names and gaps:
        calling = [gap for gap in gaps if _mentions(data[gap[0] : gap[1]], names)]
        gaps.difference_update(calling)
        names = [b"self." + match.group(1) for gap in calling for _, match in _INDENTED_NAME.finditer(data, *gap)]
    return [gap for gap in skipped if gap in gaps]


def _mentions(text: bytes, words: list[bytes]) -> bool:
    return any(word in text for word in words)


_INDENTED_NAME = _LineStarts(rb"[ \t]*(?:async\s+)?def\s+(\w+)")


def _occurs(pattern: Pattern, data: bytes) -> bool:
    """Might `pattern` occur in some part of `data`? (An `InCode` pattern: its words occur.)"""
    if isinstance(pattern, InCode):
        return group_matches(pattern.rough, data)
    return group_matches((pattern,), data)


_FUNCTION_NAME = _LineStarts(rb"(?:async\s+)?def\s+(\w+)")
_IDENTIFIER_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _without_call_sites(data: bytes, skipped: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`skipped` less the ranges that mention a module-level function that is kept: the device
    of such a function's parameter is what every call in the file passes it (provenance.py), so
    the definitions holding its calls are kept too, and so on for the functions they define.
    Each name is looked for once, in the whole file (a few occurrences each), not once per range."""
    if not skipped:
        return []
    gaps = sorted(skipped)
    starts = [start for start, _ in gaps]
    kept = [False] * len(gaps)

    def gap_of(at: int) -> int:
        index = bisect_right(starts, at) - 1
        return index if index >= 0 and at < gaps[index][1] else -1

    pending = [m.group(1) for at, m in _FUNCTION_NAME.finditer(data) if gap_of(at) < 0]
    seen = set(pending)
    while pending:
        name = pending.pop()
        for at in _whole_words(data, name):
            index = gap_of(at)
            if index < 0 or kept[index]:
                continue
            kept[index] = True
            start, end = gaps[index]
            for _, match in _FUNCTION_NAME.finditer(data, start, end):
                if match.group(1) not in seen:
                    seen.add(match.group(1))
                    pending.append(match.group(1))
    dropped = {gaps[index] for index, keep in enumerate(kept) if keep}
    return [r for r in skipped if r not in dropped]


def _whole_words(data: bytes, word: bytes) -> Iterator[int]:
    """Where `word` is written as a whole word in `data`."""
    at = data.find(word)
    while at != -1:
        after = at + len(word)
        if (at == 0 or data[at - 1] not in _IDENTIFIER_BYTES) and (
            after >= len(data) or data[after] not in _IDENTIFIER_BYTES
        ):
            yield at
        at = data.find(word, at + 1)


_CLASS_LINE = _LineStarts(rb"class\b")
_INDENTED_DEFINITION = _LineStarts(rb"( +)(?:def\b|async\s+def\b|@)")


@lru_cache(maxsize=64)
def _statement_line(indent: int) -> _LineStarts:
    """A line that starts a statement indented by at most `indent` spaces."""
    return _LineStarts(rb" {0,%d}[^\s#)\]}]" % indent)


def _methods(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """The methods of the class in data[start:end] (decorators included, each up to the next
    statement of the class body), less the body's first statement. Indented with spaces only;
    a class indented otherwise gives none."""
    first_line = _next_line(data, start)
    starts = list(_INDENTED_DEFINITION.finditer(data, first_line, end))
    if not starts or data.find(b"\t", start, end) != -1:
        return []
    indent = min(len(match.group(1)) for _, match in starts)
    statements = _statement_line(indent).starts(data, first_line, end)
    heads = (at for at, match in starts if len(match.group(1)) == indent)
    return [span for span in _spans(data, heads, statements, indent, end) if not statements or span[0] != statements[0]]


_BLANK = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))


def blank(data: bytes, ranges: Sequence[tuple[int, int]]) -> bytes:
    """`data` with every byte of `ranges` but the line breaks replaced by a space."""
    if not ranges:
        return data
    out = bytearray(data)
    for start, end in ranges:
        out[start:end] = data[start:end].translate(_BLANK)
    return bytes(out)


__all__ = [
    "CODE_LOOP",
    "Caseless",
    "LOOP",
    "InCode",
    "Pattern",
    "TriggerGroups",
    "blank",
    "definitions",
    "group_matches",
    "matches",
    "skippable_definitions",
]
