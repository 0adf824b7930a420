"""Budgets asserted in Python (the pytest plugin's `atenlens_trace` fixture and marker use it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from atenlens.report import TraceReport


def budget_failures(report: TraceReport, **budget: Any) -> list[str]:
    """`path:line:col: FILE::FUNCTION: key measured (budget N): CODE message` for each line that
    breaks `budget` (the keys of a [tool.atenlens.check] entry: syncs=0, peak="70 GiB", AL100=0,
    ...); empty when the report is within it. A bad key or value raises ConfigError."""
    __tracebackhide__ = True
    from atenlens.check.budgets import _function
    from atenlens.check.formats import located, shown_path
    from atenlens.check.run import judge

    target = f"{shown_path(report.target.file)}::{report.target.qualname}"
    function = _function("atenlens budget", Path(os.getcwd()), target, dict(budget))
    result = judge(function, report, None, None)
    return [
        f"{path}:{line}:{column}: {text}" for p in result.problems for path, line, column, text in located(result, p)
    ]


def assert_within(report: TraceReport, **budget: Any) -> None:
    """Raises AssertionError listing the offending lines when `report` breaks `budget`."""
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this frame
    failures = budget_failures(report, **budget)
    if failures:
        raise AssertionError("atenlens budget broken:\n" + "\n".join(failures))
