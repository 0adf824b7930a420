"""One problem, one diagnostic: the lint's findings and the traces' diagnostics of a document,
put together the way the editor shows them. Protocol-free; lines here are 0-based.

- Several traces that found the same code at the same line are one problem (their counts, or
  their messages where those differ, are labelled with the function each trace was of).
- A lint finding the trace confirms (same line, same code, one of `CONFIRMABLE`) is one problem:
  the trace's message (it has the facts: shape, count), the lint's columns and fix.
- A lint finding of those codes on a line that a current trace on simulated CUDA ran without
  finding it (e.g. the loader does pin memory) is dropped while that trace holds; a stale trace
  (edited since it ran) or one traced on cpu neither confirms nor refutes anything.
- `# noqa: AL100` (or a bare `# noqa`) on a line silences the trace's AL100 there as the lint's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from atenlens.lint.findings import Finding
from atenlens.lint.noqa import is_suppressed, suppressed_codes
from atenlens.lsp.document_traces import DocumentTraces
from atenlens.report import Code, Diagnostic

# the hazards both the lint and the trace report under the same code
CONFIRMABLE = frozenset({Code.SYNC, Code.SYNC_API, Code.PAGEABLE_COPY, Code.UNSYNCED_D2H_READ})

_SEVERITY_ORDER = {"error": 0, "warning": 1, "information": 2, "info": 2, "hint": 3}


@dataclass(frozen=True)
class TraceProblem:
    line: int
    diagnostic: Diagnostic  # the first trace's (its code, column, cause)
    message: str  # merged over the traces that found it, with counts
    severity: str
    traces: tuple[str, ...]  # qualnames of the traces that found it


@dataclass(frozen=True)
class Problem:
    line: int
    finding: Optional[Finding] = None  # the lint's, when it found it too (its columns and fix)
    trace: Optional[TraceProblem] = None

    @property
    def code(self) -> str:
        if self.trace is not None:
            return self.trace.diagnostic.code
        assert self.finding is not None
        return self.finding.code


def _count(diagnostic: Diagnostic) -> str:
    return f"×{diagnostic.count}"


def merge_trace_problems(found: Sequence[tuple[str, int, Diagnostic]]) -> list[TraceProblem]:
    """(qualname, line, diagnostic) of every current trace -> one problem per line and code."""
    groups: dict[tuple[int, str], list[tuple[str, Diagnostic]]] = {}
    for qualname, line, diagnostic in found:
        groups.setdefault((line, diagnostic.code or diagnostic.kind), []).append((qualname, diagnostic))
    problems = []
    for (line, _), entries in groups.items():
        first = entries[0][1]
        messages = {d.message for _, d in entries}
        if len(entries) == 1:
            message = first.message + (f" ({_count(first)} in this trace)" if first.count > 1 else "")
        elif len(messages) == 1:
            counts = {d.count for _, d in entries}
            if counts == {1}:
                message = first.message
            elif len(counts) == 1:
                message = (
                    first.message
                    + f" ({_count(first)} in each of the traces of "
                    + ", ".join(q for q, _ in entries)
                    + ")"
                )
            else:
                message = first.message + " (" + ", ".join(f"{_count(d)} in the trace of {q}" for q, d in entries) + ")"
        else:  # the traces saw different things here: say which saw what
            message = "\n".join(f"{q}: {d.message}" + (f" ({_count(d)})" if d.count > 1 else "") for q, d in entries)
        severity = min((d.severity for _, d in entries), key=lambda s: _SEVERITY_ORDER.get(s, 1))
        problems.append(
            TraceProblem(
                line=line, diagnostic=first, message=message, severity=severity, traces=tuple(q for q, _ in entries)
            )
        )
    return problems


def _silenced(problem: TraceProblem, lines: Sequence[str]) -> bool:
    if not 0 <= problem.line < len(lines) or not problem.diagnostic.code:
        return False
    return is_suppressed(problem.diagnostic.code, suppressed_codes(lines[problem.line].encode("utf-8", "replace")))


def document_problems(findings: Sequence[Finding], traces: DocumentTraces, lines: Sequence[str]) -> list[Problem]:
    """The problems to publish, lint findings first (in their order), then the trace's own
    (`lines`: the text the lint findings are about, for `# noqa`)."""
    trace_problems = [p for p in merge_trace_problems(traces.labelled_diagnostics()) if not _silenced(p, lines)]
    confirming = {(p.line, p.diagnostic.code): p for p in trace_problems if p.diagnostic.code in CONFIRMABLE}
    ran = traces.lines_run_on_cuda()
    problems: list[Problem] = []
    confirmed: set[tuple[int, str]] = set()
    for finding in findings:
        line = finding.line - 1
        key = (line, finding.code)
        if finding.code in CONFIRMABLE:
            if key in confirming:
                if key not in confirmed:  # two findings of one code on one line: one problem
                    confirmed.add(key)
                    problems.append(Problem(line=line, finding=finding, trace=confirming[key]))
                continue
            if line in ran:
                continue  # the trace ran this line and found no such hazard
        problems.append(Problem(line=line, finding=finding))
    problems.extend(
        Problem(line=p.line, trace=p) for p in trace_problems if (p.line, p.diagnostic.code) not in confirmed
    )
    return problems
