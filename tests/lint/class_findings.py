"""The findings of a small program, as the tests of error classes compare them: line, column
(0-based), code, severity and message, with the same findings required with and without the
prefilter (every definition parsed)."""

from __future__ import annotations

from atenlens.lint.engine import lint_source_strict

Row = tuple[int, int, str, str, str]


def findings(source: str) -> list[Row]:
    found = [(f.line, f.column, f.code, f.severity, f.message) for f in lint_source_strict(source)]
    unfiltered = [
        (f.line, f.column, f.code, f.severity, f.message) for f in lint_source_strict(source, prefilter=False)
    ]
    assert found == unfiltered
    return found
