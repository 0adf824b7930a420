"""The quick fixes on offer and how they are applied: one place for the editor and the CLI.

The language server's code actions and `atenlens lint --fix` / `--diff` both take their edits
from `offered_fixes`, so the CLI applies exactly what the editor offers. Positions are a
finding's own (1-based line, 0-based column in str characters, lines split at "\\n" as the lint
and the server both split them).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from atenlens.lint.findings import Finding, Fix, TextEdit

MAX_PASSES = 10  # a fix that makes a new fixable finding gets another pass, as in ruff


def offered_fixes(
    findings: Sequence[Finding], first_line: Optional[int] = None, last_line: Optional[int] = None
) -> list[tuple[Finding, Fix]]:
    """The findings that offer a fix, with it; only those touching the 0-based lines
    [first_line, last_line] when a range is given (the editor asks for the lines under the
    cursor or selection)."""
    offered = []
    for finding in findings:
        if finding.fix is None or not finding.fix.edits:
            continue
        if (
            first_line is not None
            and last_line is not None
            and not (finding.line - 1 <= last_line and finding.end_line - 1 >= first_line)
        ):
            continue
        offered.append((finding, finding.fix))
    return offered


def _line_starts(source: str) -> list[int]:
    starts = [0]
    at = source.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = source.find("\n", at + 1)
    return starts


def _offset(starts: list[int], source: str, line: int, column: int) -> int:
    if line - 1 >= len(starts):
        return len(source)
    return min(starts[line - 1] + column, len(source))


def apply_edits(source: str, edits: Sequence[TextEdit]) -> str:
    """`source` with `edits` (non-overlapping, in any order) applied."""
    starts = _line_starts(source)
    spans = sorted(
        (
            (_offset(starts, source, e.line, e.column), _offset(starts, source, e.end_line, e.end_column), e.new_text)
            for e in edits
        ),
        reverse=True,
    )
    for start, end, text in spans:
        source = source[:start] + text + source[end:]
    return source


def apply_offered_fixes(source: str, findings: Sequence[Finding]) -> tuple[str, int]:
    """One pass: every offered fix whose edits do not overlap a fix already taken, applied
    together. Returns the new text and how many fixes were applied."""
    starts = _line_starts(source)
    taken: list[tuple[int, int]] = []
    edits: list[TextEdit] = []
    count = 0
    for _, fix in offered_fixes(findings):
        spans = [
            (_offset(starts, source, e.line, e.column), _offset(starts, source, e.end_line, e.end_column))
            for e in fix.edits
        ]
        if any((s < end and start < e) or s == start for s, e in spans for start, end in taken):
            continue  # overlaps an earlier fix: the next pass sees it again
        taken.extend(spans)
        edits.extend(fix.edits)
        count += 1
    return (apply_edits(source, edits) if edits else source), count


def fix_source(source: str, lint: Callable[[str], list[Finding]]) -> tuple[str, int, list[Finding]]:
    """Apply offered fixes until none is left (at most MAX_PASSES passes), re-linting between
    passes. Returns the fixed text, the number of fixes applied and the findings that remain."""
    findings = lint(source)
    fixed = 0
    for _ in range(MAX_PASSES):
        new_source, count = apply_offered_fixes(source, findings)
        if count == 0 or new_source == source:
            break
        source, fixed = new_source, fixed + count
        findings = lint(source)
    return source, fixed, findings
