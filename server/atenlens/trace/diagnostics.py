"""Collects the diagnostics a trace raises (syncs, copy hazards, exceptions).

Anything in the engine that finds a problem calls `DiagnosticSink.add`; the sink locates it at
the innermost user frame (unless given a stack) and folds repeats of the same problem at the
same place into one diagnostic with a count, so a `.item()` in a 1,000-step loop is one warning
that says 1,000, not 1,000 warnings.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Optional

from atenlens.report import Diagnostic, Frame, Severity
from atenlens.trace.attribution import user_stack


class DiagnosticSink:
    def __init__(self) -> None:
        self._by_key: dict[tuple, Diagnostic] = {}

    def add(
        self,
        kind: str,
        code: str,
        message: str,
        *,
        op: Optional[str] = None,
        severity: Severity = "warning",
        stack: Optional[tuple[Frame, ...]] = None,
        column: Optional[int] = None,
        cause: Optional[Frame] = None,
    ) -> Diagnostic:
        if stack is None:
            stack = user_stack(sys._getframe(1))
        inner = stack[-1] if stack else None
        key = (inner.file if inner else None, inner.line if inner else None, code, op, message)
        previous = self._by_key.get(key)
        if previous is not None:
            updated = replace(previous, count=previous.count + 1)
            self._by_key[key] = updated
            return updated
        diagnostic = Diagnostic(
            file=inner.file if inner else None,
            line=inner.line if inner else None,
            column=column,
            severity=severity,
            code=code,
            kind=kind,
            message=message,
            op=op,
            stack=stack,
            cause=cause,
        )
        self._by_key[key] = diagnostic
        return diagnostic

    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(self._by_key.values())
