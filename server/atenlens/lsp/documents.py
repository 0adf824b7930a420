"""What the server remembers about each open document besides its text (pygls keeps the text):
the functions of its last good parse, its lint results, its traces. Protocol-free."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from atenlens.lint.findings import Finding
from atenlens.lsp.document_traces import DocumentTraces
from atenlens.lsp.large import LARGE_DOCUMENT_CHARS
from atenlens.lsp.text import LineShift, split_lines
from atenlens.traceable import FunctionInfo, find_functions_by_chunk


def shift_function(info: FunctionInfo, change: LineShift) -> Optional[FunctionInfo]:
    """The function's 1-based lines after `change`, or None when its `def` line went away."""
    line = change.map(info.line - 1)
    if line is None:
        return None
    first = change.map(info.first_line - 1)
    end = change.map(info.end_line - 1)
    directive = change.map(info.directive_line - 1) if info.directive_line is not None else None
    return dataclasses.replace(
        info,
        line=line + 1,
        first_line=(first if first is not None else line) + 1,
        end_line=max(end if end is not None else line, line) + 1,
        directive_line=directive + 1 if directive is not None else None,
        directive=info.directive if directive is not None else None,
    )


@dataclass
class LintResult:
    version: Optional[int]
    lines: list[str]
    findings: list[Finding]


@dataclass
class DocumentState:
    uri: str
    traces: DocumentTraces = field(default_factory=DocumentTraces)
    lint: Optional[LintResult] = None
    _functions: list[FunctionInfo] = field(default_factory=list)
    _functions_source: Optional[str] = None
    large: bool = False  # it has been over LARGE_DOCUMENT_CHARS
    lens_cap_logged: bool = False
    _lines: list[str] = field(default_factory=list)
    _lines_source: Optional[str] = None
    finding_diagnostics: dict = field(default_factory=dict)  # Finding -> the LSP diagnostic published for it
    # The lint diagnostics of the last publication and their JSON, by what each depends on
    # (server.py `_diagnostic_key`): reused by the next publication for the findings it keeps.
    published: dict = field(default_factory=dict)

    def functions(self, source: str) -> list[FunctionInfo]:
        """The functions of `source`; while it does not parse (mid-edit), those of the last text
        that did, moved along with the edits since. A large document is never parsed here: its
        functions come with its lint (`found_functions`), and until then are those of the last
        analysis, moved along with the edits."""
        if source != self._functions_source and len(source) > LARGE_DOCUMENT_CHARS:
            return self._functions
        if source != self._functions_source:
            try:
                self._functions = find_functions_by_chunk(source, check_directives=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass  # mid-edit: the last good parse's functions stay
            self._functions_source = source
        return self._functions

    def found_functions(self, source: str, functions: Optional[list[FunctionInfo]]) -> bool:
        """Takes the functions found elsewhere for `source` (None: it does not parse); returns
        whether they differ from those known so far."""
        before = self._functions
        if functions is not None:
            self._functions = functions
        self._functions_source = source
        return self._functions != before

    def lines(self, source: str) -> list[str]:
        """`split_lines(source)`, kept while the text is the same object (a large document's
        requests would each split it again)."""
        if source is not self._lines_source:
            self._lines, self._lines_source = split_lines(source), source
            self.large = self.large or len(source) > LARGE_DOCUMENT_CHARS
        return self._lines

    def shift(self, change: LineShift) -> None:
        self.traces.shift(change)
        # Only the functions at or below the change move: a keystroke in a file of 481 functions
        # re-made every one of them (16 ms a change, for each change of a burst).
        same_lines = not change.full and change.delta == 0 and change.start == change.end
        kept = []
        for info in self._functions:
            if same_lines or (not change.full and max(info.end_line, info.directive_line or 0) - 1 < change.start):
                kept.append(info)  # every line of it keeps its number
            elif (moved := shift_function(info, change)) is not None:
                kept.append(moved)
        self._functions = kept
        # the cached parse no longer belongs to the current text
        if self._functions_source is not None:
            self._functions_source = None
