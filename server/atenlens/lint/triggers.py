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
also says what one definition must contain. When every rule that runs is of that kind, the
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
from typing import Sequence, Union

Pattern = Union[bytes, "re.Pattern[bytes]"]
TriggerGroups = tuple[tuple[Pattern, ...], ...]

# A loop of any kind: `for` statements and comprehensions, `while`; as words (`forward`,
# `format` and `before` are no loops), though a digit may touch them (`[1for x in y]` is Python).
# One pattern per word, each starting with its literal: `re` then scans with a fast search.
LOOP = (re.compile(rb"for(?<![A-Za-z_]for)\b"), re.compile(rb"while(?<![A-Za-z_]while)\b"))

_STATEMENT_LINE = re.compile(rb"^[^\s#)\]}]", re.M)
_DEFINITION_LINE = re.compile(rb"^(?:(?:def|class)\b|async\s+def\b|@)", re.M)


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
    found: list[tuple[int, int]] = []
    done = 0
    for match in _DEFINITION_LINE.finditer(data):
        start = match.start()
        if start < done:
            continue  # the `def` of a decorated definition: already in it
        line = start
        while data.startswith(b"@", line):
            # a decorator's line: the definition it decorates follows and belongs to it
            following = _STATEMENT_LINE.search(data, _next_line(data, line))
            if following is None:
                break
            line = following.start()
        following = _STATEMENT_LINE.search(data, _next_line(data, line))
        done = following.start() if following is not None else len(data)
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
    present = [
        tuple(tuple(p for p in group if group_matches((p,), data)) for group in rule_groups) for rule_groups in groups
    ]
    groups = [rule_groups for rule_groups in present if all(rule_groups)]
    found: list[tuple[int, int]] = []
    for start, end in definitions(data):
        if not any(matches(rule_groups, data, start, end) for rule_groups in groups):
            found.append((start, end))
        else:
            header = _CLASS_LINE.search(data, start, end)  # after its decorators, if any
            if header is not None:
                found.extend(
                    method
                    for method in _methods(data, header.start(), end)
                    if not any(matches(rule_groups, data, *method) for rule_groups in groups)
                )
    return _without_call_sites(data, found)


_FUNCTION_NAME = re.compile(rb"^(?:async\s+)?def\s+(\w+)", re.M)
_IDENTIFIER_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _without_call_sites(data: bytes, skipped: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`skipped` less the ranges that mention a module-level function that is kept: the device
    of such a function's parameter is what every call in the file passes it (provenance.py), so
    the definitions holding its calls are kept too, and so on for the functions they define."""
    skipped = list(skipped)
    gaps = sorted(skipped)
    starts = [start for start, _ in gaps]
    names = set()
    for match in _FUNCTION_NAME.finditer(data):
        at = bisect_right(starts, match.start()) - 1
        if at < 0 or match.start() >= gaps[at][1]:
            names.add(match.group(1))
    while names and skipped:
        kept_now = [r for r in skipped if any(_mentions(data, name, *r) for name in names)]
        if not kept_now:
            break
        skipped = [r for r in skipped if r not in kept_now]
        names = {m.group(1) for start, end in kept_now for m in _FUNCTION_NAME.finditer(data, start, end)}
    return skipped


def _mentions(data: bytes, word: bytes, start: int, end: int) -> bool:
    """Is `word` written as a whole word within [start, end)?"""
    at = data.find(word, start, end)
    while at != -1:
        after = at + len(word)
        if (at == 0 or data[at - 1] not in _IDENTIFIER_BYTES) and (
            after >= len(data) or data[after] not in _IDENTIFIER_BYTES
        ):
            return True
        at = data.find(word, at + 1, end)
    return False


_CLASS_LINE = re.compile(rb"^class\b", re.M)
_INDENTED_DEFINITION = re.compile(rb"^( +)(?:def\b|async\s+def\b|@)", re.M)


@lru_cache(maxsize=64)
def _statement_line(indent: int) -> "re.Pattern[bytes]":
    """A line that starts a statement indented by at most `indent` spaces."""
    return re.compile(rb"^ {0,%d}[^\s#)\]}]" % indent, re.M)


def _methods(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """The methods of the class in data[start:end] (decorators included, each up to the next
    statement of the class body), less the body's first statement. Indented with spaces only;
    a class indented otherwise gives none."""
    first_line = _next_line(data, start)
    starts = list(_INDENTED_DEFINITION.finditer(data, first_line, end))
    if not starts or data.find(b"\t", start, end) != -1:
        return []
    indent = min(len(match.group(1)) for match in starts)
    statement = _statement_line(indent)
    body_first = statement.search(data, first_line, end)
    found: list[tuple[int, int]] = []
    done = 0
    for match in starts:
        at = match.start()
        if len(match.group(1)) != indent or at < done:
            continue
        line = at
        while data.startswith(b"@", line + indent):
            following = statement.search(data, _next_line(data, line), end)
            if following is None:
                break
            line = following.start()
        following = statement.search(data, _next_line(data, line), end)
        done = following.start() if following is not None else end
        if body_first is None or at != body_first.start():
            found.append((at, done))
    return found


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
    "LOOP",
    "Pattern",
    "TriggerGroups",
    "blank",
    "definitions",
    "group_matches",
    "matches",
    "skippable_definitions",
]
