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
        self._steps: dict[tuple, set[int]] = {}  # key -> optimizer steps completed at each occurrence

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
        step: Optional[int] = None,
    ) -> Diagnostic:
        """`step`: how many optimizer steps the traced call had made when this happened (for the
        per-step frequency that `diagnostics(steps=...)` adds to messages)."""
        if stack is None:
            stack = user_stack(sys._getframe(1))
        inner = stack[-1] if stack else None
        key = (inner.file if inner else None, inner.line if inner else None, code, op, message)
        if step is not None:
            self._steps.setdefault(key, set()).add(step)
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

    def annotate(self, file: str, line: int, code: str, suffix: str) -> None:
        """Adds `suffix` to the message of each `code` diagnostic at `file:line` (once)."""
        for key, d in self._by_key.items():
            if d.file == file and d.line == line and d.code == code and not d.message.endswith(suffix):
                self._by_key[key] = replace(d, message=d.message + suffix)

    def diagnostics(self, steps: int = 0) -> tuple[Diagnostic, ...]:
        """All diagnostics; with `steps` (optimizer steps the traced call made) of 2 or more, the
        message of each one that knows when it happened says whether it happens every step or once."""
        if steps < 2:
            return tuple(self._by_key.values())
        return tuple(
            replace(d, message=d.message + _frequency(self._steps[key], d.count, steps)) if key in self._steps else d
            for key, d in self._by_key.items()
        )


def _frequency(intervals: set[int], count: int, steps: int) -> str:
    """Interval k: after k optimizer steps. Every step's work falls in 0..steps-1 (before each
    step's update) or 1..steps (inside or after it); work once per run in one interval only."""
    if set(range(steps)) <= intervals or set(range(1, steps + 1)) <= intervals:
        per = count / steps
        times = f"{per:g} times" if per != 1 else "once"
        return f" — {times} per optimizer step ({steps} steps)"
    if intervals == {steps}:
        return f" — after the last of {steps} optimizer steps (teardown, not per step)"
    if intervals == {0}:
        return f" — before the first of {steps} optimizer steps (setup, not per step)"
    return f" — in {len(intervals)} of the {steps + 1} stretches around {steps} optimizer steps, not every step"
