"""`lsp_*` helpers: lint findings, trace diagnostics, functions and hints -> lsprotocol types.

Every column computed here goes through `text.column_to_units` in the negotiated position
encoding; `lines` is always the text the positions refer to (split by `text.split_lines`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from lsprotocol import types

from atenlens.lint.findings import Finding, Fix
from atenlens.lint.formats import TOOL_URL, rule_url
from atenlens.lint.noqa import NOQA
from atenlens.lint.rules import RULES
from atenlens.lsp.problems import Problem
from atenlens.lsp.text import column_to_units
from atenlens.report import Diagnostic
from atenlens.traceable import FunctionInfo

LINT_SOURCE = "atenlens"
TRACE_SOURCE = "atenlens trace"

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "info": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


_RULES = {rule.code: rule for rule in RULES}
DIAGNOSTICS_URL = f"{TOOL_URL}/blob/main/docs/diagnostics.md"
# GitHub's anchors of docs/diagnostics.md's sections of the codes only the trace reports (a test
# checks them against the headings)
TRACE_ANCHORS = {
    "AL400": "al400--out-of-memory-forecast",
    "AL900": "al900--exception",
    "AL901": "al901--needs-inputs",
    "AL902": "al902--timeout",
    "AL903": "al903--the-traces-process-ended-without-a-report",
    "AL904": "al904--load-timeout-kind-timeout",
    "AL905": "al905--device-fallback",
    "AL906": "al906--assumption-a-value-the-trace-could-not-know",
    "AL907": "al907--dataloader-workers",
    "AL908": "al908--simulated-ranks",
    "AL500": "al500--unordered-stream-read",
    "AL909": "al909--ddp-no-sync",
    "AL910": "al910--host-waits-for-collective",
    "AL911": "al911--per-parameter-collectives",
    "AL912": "al912--fsdp-root-only",
    "AL920": "al920--named-dims",
    "AL921": "al921--shape-guard",
    "AL501": "al501--unsynced-elapsed-time",
    "AL502": "al502--missing-record-stream",
    "AL503": "al503--unordered-stream-write",
    "AL600": "al600--graph-break",
    "AL601": "al601--compile",
    "AL602": "al602--cuda-graphs-skipped-under-reduce-overhead-kind-compile",
    "AL510": "al510--unsupported-in-capture-kind-capture",
    "AL511": "al511--cpu-tensor-in-capture-kind-capture",
    "AL512": "al512--capture-without-warm-up-kind-capture",
    "AL513": "al513--cuda-graph-summary-kind-capture",
    "AL514": "al514--unregistered-generator-in-capture-kind-capture",
    "AL515": "al515--captured-output-read-before-replay-kind-capture",
    "AL516": "al516--static-input-rebound-kind-capture",
    "AL517": "al517--static-output-kept-across-a-replay-kind-capture",
}


def code_description(code: Optional[str]) -> Optional[types.CodeDescription]:
    """The documentation of `code`: its rule in docs/rules.md, else its section of docs/diagnostics.md."""
    if not code:
        return None
    if code in _RULES:
        return types.CodeDescription(href=rule_url(_RULES[code]))
    if code in TRACE_ANCHORS:
        return types.CodeDescription(href=f"{DIAGNOSTICS_URL}#{TRACE_ANCHORS[code]}")
    return None


def _line(lines: Sequence[str], index: int) -> str:
    return lines[index] if 0 <= index < len(lines) else ""


def lsp_position(lines: Sequence[str], line: int, column: int, encoding: str) -> types.Position:
    """0-based line and str column -> an LSP position (clamped into the text)."""
    if not lines:
        return types.Position(line=0, character=0)
    if line >= len(lines):
        return types.Position(line=len(lines) - 1, character=column_to_units(lines[-1], len(lines[-1]), encoding))
    line = max(line, 0)
    return types.Position(line=line, character=column_to_units(lines[line], column, encoding))


def lsp_line_end(lines: Sequence[str], line: int, encoding: str) -> types.Position:
    return lsp_position(lines, line, len(_line(lines, line)), encoding)


def lsp_range(
    lines: Sequence[str], line: int, column: int, end_line: int, end_column: int, encoding: str
) -> types.Range:
    return types.Range(
        start=lsp_position(lines, line, column, encoding), end=lsp_position(lines, end_line, end_column, encoding)
    )


def lsp_line_range(lines: Sequence[str], line: int, encoding: str, column: Optional[int] = None) -> types.Range:
    """From `column` (default: the first non-blank character) to the end of the line."""
    text = _line(lines, line)
    start = column if column is not None else len(text) - len(text.lstrip())
    return lsp_range(lines, line, start, line, len(text), encoding)


def lsp_severity(severity: str) -> types.DiagnosticSeverity:
    return _SEVERITY.get(severity, types.DiagnosticSeverity.Warning)


def lsp_finding_diagnostic(finding: Finding, lines: Sequence[str], encoding: str) -> types.Diagnostic:
    return types.Diagnostic(
        range=lsp_range(lines, finding.line - 1, finding.column, finding.end_line - 1, finding.end_column, encoding),
        message=finding.message,
        severity=lsp_severity(finding.severity),
        code=finding.code,
        code_description=code_description(finding.code),
        source=LINT_SOURCE,
    )


def lsp_trace_diagnostic(line: int, diagnostic: Diagnostic, lines: Sequence[str], encoding: str) -> types.Diagnostic:
    message = diagnostic.message
    if diagnostic.count > 1:
        message += f" (×{diagnostic.count} in this trace)"
    related = None
    if diagnostic.cause is not None:
        # the library line that did it: the editor links to it (its text is not open: whole line 0..0)
        cause = diagnostic.cause
        position = types.Position(line=max(cause.line - 1, 0), character=0)
        related = [
            types.DiagnosticRelatedInformation(
                location=types.Location(uri=Path(cause.file).as_uri(), range=types.Range(start=position, end=position)),
                message=f"in {cause.function}, called from this line",
            )
        ]
    return types.Diagnostic(
        range=lsp_line_range(lines, line, encoding, diagnostic.column if diagnostic.line is not None else None),
        message=message,
        severity=lsp_severity(diagnostic.severity),
        code=diagnostic.code or None,
        code_description=code_description(diagnostic.code),
        source=TRACE_SOURCE,
        related_information=related,
    )


def lsp_problem_diagnostic(problem: Problem, lines: Sequence[str], encoding: str) -> types.Diagnostic:
    """One diagnostic per problem (lsp/problems.py): a trace's, at the lint's columns when the lint
    found it too."""
    if problem.trace is None:
        assert problem.finding is not None
        return lsp_finding_diagnostic(problem.finding, lines, encoding)
    diagnostic = lsp_trace_diagnostic(problem.line, problem.trace.diagnostic, lines, encoding)
    diagnostic.message = problem.trace.message
    diagnostic.severity = lsp_severity(problem.trace.severity)
    if problem.finding is not None:
        diagnostic.range = lsp_finding_diagnostic(problem.finding, lines, encoding).range
    return diagnostic


def lsp_fix_action(
    uri: str, fix: Fix, diagnostic: types.Diagnostic, lines: Sequence[str], encoding: str
) -> types.CodeAction:
    edits = [
        types.TextEdit(
            range=lsp_range(lines, e.line - 1, e.column, e.end_line - 1, e.end_column, encoding), new_text=e.new_text
        )
        for e in fix.edits
    ]
    return types.CodeAction(
        title=f"atenlens ({diagnostic.code}): {fix.title}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        is_preferred=True,
        edit=types.WorkspaceEdit(changes={uri: edits}),
    )


def lsp_noqa_action(
    uri: str, diagnostic: types.Diagnostic, lines: Sequence[str], encoding: str
) -> Optional[types.CodeAction]:
    """ "atenlens (AL100): Disable for this line": `  # noqa: AL100` at the end of the line, or the
    code added to the line's `# noqa: ...` (none for a bare `# noqa`, which silences all)."""
    line = diagnostic.range.start.line
    text, code = _line(lines, line), str(diagnostic.code)
    match = NOQA.search(text.encode("utf-8", "replace"))
    if match is None:
        at, new_text = len(text), f"  # noqa: {code}"
    elif match.group("codes") is None:
        return None
    else:
        at, new_text = len(text.encode("utf-8")[: match.end("codes")].decode("utf-8", "replace")), f", {code}"
    position = lsp_position(lines, line, at, encoding)
    return types.CodeAction(
        title=f"atenlens ({code}): Disable for this line",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(
            changes={uri: [types.TextEdit(range=types.Range(start=position, end=position), new_text=new_text)]}
        ),
    )


def lsp_fix_all_action(uri: str, fixed: str, lines: Sequence[str], encoding: str) -> types.CodeAction:
    """ "atenlens: Fix all auto-fixable problems" (source.fixAll): the whole text, fixed."""
    last = max(len(lines) - 1, 0)
    whole = types.Range(start=types.Position(line=0, character=0), end=lsp_line_end(lines, last, encoding))
    return types.CodeAction(
        title="atenlens: Fix all auto-fixable problems",
        kind=types.CodeActionKind.SourceFixAll,
        edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=whole, new_text=fixed)]}),
    )


def lsp_directive_edit(
    uri: str,
    info: FunctionInfo,
    template: str,
    lines: Sequence[str],
    encoding: str,
    snippet: Optional[str] = None,
    version: Optional[int] = None,
) -> types.WorkspaceEdit:
    """Insert `template` on its own line above the function (above its decorators), indented
    like the `def`; with `snippet` (the same line with tab stops, for a client that declares
    `workspace.workspaceEdit.snippetEditSupport`) as a SnippetTextEdit instead."""
    line = info.first_line - 1
    indent = _line(lines, info.line - 1)[: info.column]
    position = lsp_position(lines, line, 0, encoding)
    where = types.Range(start=position, end=position)
    if snippet is not None:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                    edits=[types.SnippetTextEdit(range=where, snippet=types.StringValue(value=f"{indent}{snippet}\n"))],
                )
            ]
        )
    return types.WorkspaceEdit(changes={uri: [types.TextEdit(range=where, new_text=f"{indent}{template}\n")]})


def lsp_snippet_edit(
    uri: str,
    version: Optional[int],
    line: int,
    start: int,
    end: int,
    snippet: str,
    lines: Sequence[str],
    encoding: str,
) -> types.WorkspaceEdit:
    """Replace str columns `start`..`end` of `line` with `snippet` (a SnippetTextEdit, LSP 3.18)."""
    where = types.Range(start=lsp_position(lines, line, start, encoding), end=lsp_position(lines, line, end, encoding))
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=[types.SnippetTextEdit(range=where, snippet=types.StringValue(value=snippet))],
            )
        ]
    )


def lsp_function_range(info: FunctionInfo, lines: Sequence[str], encoding: str) -> types.Range:
    return lsp_line_range(lines, info.line - 1, encoding, info.column)


def lsp_inlay_hint(
    line: int, label: str, lines: Sequence[str], encoding: str, tooltip: Optional[str] = None
) -> types.InlayHint:
    return types.InlayHint(
        position=lsp_line_end(lines, line, encoding),
        label=label,
        kind=types.InlayHintKind.Type,
        padding_left=True,
        tooltip=tooltip,
    )
