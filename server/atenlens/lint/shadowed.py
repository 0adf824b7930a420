"""Top-level functions that a later definition of the same name replaces before anything uses them.

Research scripts are edited by copying: `def test_export(...)` is written twice, and the second
definition replaces the first when the module runs. The first one never runs unless something uses
its name between the two definitions, so findings inside it are dropped (engine.py), whichever rule
made them. Read off the bytes (triggers.definitions), so the answer does not depend on which
definitions were parsed.
"""

from __future__ import annotations

import re

from atenlens.lint.triggers import definitions

_DEF_NAME = re.compile(rb"(?:@[^\n]*\n(?:[ \t]*(?:#[^\n]*)?\n)*)*(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(")


def shadowed_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of the top-level `def`s (decorators included) that a later top-level `def` of
    the same name replaces, with no use of the name in between."""
    if data.count(b"\ndef ") + data.count(b"\nasync def ") < 2:
        return []
    named: dict[bytes, list[tuple[int, int]]] = {}
    for start, end in definitions(data):
        head = _DEF_NAME.match(data, start)
        if head is not None:
            named.setdefault(head.group(1), []).append((start, end))
    shadowed = []
    for name, spans in named.items():
        if len(spans) < 2:
            continue
        used = re.compile(rb"(?<![\w.])" + re.escape(name) + rb"\b")
        for (start, end), (following, _) in zip(spans, spans[1:]):
            if used.search(data, end, following) is None:
                shadowed.append((start, end))
    return shadowed


def shadowed_rows(data: bytes) -> list[tuple[int, int]]:
    """(first row, last row), 0-based, of each shadowed definition."""
    return [
        (data.count(b"\n", 0, start), data.count(b"\n", 0, max(start, end - 1))) for start, end in shadowed_spans(data)
    ]
