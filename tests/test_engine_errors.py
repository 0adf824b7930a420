"""User code that raises, exits, or runs too long: a report, never a crash."""

from __future__ import annotations

import time
from pathlib import Path

from atenlens.report import Code
from engine_helpers import names, ops, trace, write
from source_lines import line_of

SOURCE = """
import sys
import torch


def mismatch():
    a = torch.randn(8, 16)
    h = a.relu()
    w = torch.randn(32, 4)
    return h @ w


def helper(t):
    return t.missing_attribute


def calls_helper():
    x = torch.ones(3)
    y = x * 2
    return helper(y)


def exits():
    torch.zeros(2)
    sys.exit(3)


def spins():
    x = torch.ones(2)
    while True:
        x = x + 1
"""


def test_shape_mismatch_is_an_error_at_the_raising_line_and_keeps_earlier_events(tmp_path: Path) -> None:
    path = write(tmp_path, "errors.py", SOURCE)
    report = trace(path, "mismatch")
    assert report.status == "error"
    [diagnostic] = report.diagnostics
    assert (diagnostic.kind, diagnostic.code, diagnostic.severity) == ("exception", Code.EXCEPTION, "error")
    assert diagnostic.line == line_of(path, "return h @ w")
    assert diagnostic.column == 11  # the `h @ w` expression
    assert diagnostic.message.startswith("RuntimeError: ")
    assert "[8, 16] X [32, 4]" in diagnostic.message
    assert report.message == diagnostic.message
    assert [e.name for e in ops(report)] == ["aten.randn.default", "aten.relu.default", "aten.randn.default"]
    assert report.summary.ops["forward"] == 3


def test_exception_in_a_called_function_points_at_its_line_with_the_stack(tmp_path: Path) -> None:
    path = write(tmp_path, "errors.py", SOURCE)
    report = trace(path, "calls_helper")
    assert report.status == "error"
    [diagnostic] = report.diagnostics
    assert diagnostic.line == line_of(path, "return t.missing_attribute")
    assert diagnostic.message.startswith("AttributeError: ") and "'missing_attribute'" in diagnostic.message
    assert [(f.function, f.line) for f in diagnostic.stack] == [
        ("calls_helper", line_of(path, "return helper(y)")),
        ("helper", diagnostic.line),
    ]
    assert names(ops(report)) == ["aten.ones.default", "aten.mul.Tensor"]


def test_system_exit_is_an_error_not_an_exit(tmp_path: Path) -> None:
    path = write(tmp_path, "errors.py", SOURCE)
    report = trace(path, "exits")
    assert report.status == "error"
    [diagnostic] = report.diagnostics
    assert diagnostic.code == Code.EXCEPTION and diagnostic.line == line_of(path, "sys.exit(3)")
    assert "SystemExit(3)" in diagnostic.message
    assert names(ops(report)) == ["aten.zeros.default"]


def test_running_past_the_budget_is_a_timeout_at_the_executing_line(tmp_path: Path) -> None:
    path = write(tmp_path, "errors.py", SOURCE)
    # (3 s, not 1: loading a new file and setting up the trace can take most of a second on a
    # loaded machine, and a budget that runs out while loading is AL904, the next test's case)
    report = trace(path, "spins", timeout=3.0)
    assert report.status == "timeout"
    [diagnostic] = report.diagnostics
    assert diagnostic.code == Code.TIMEOUT and diagnostic.kind == "timeout"
    assert diagnostic.line in (line_of(path, "while True:"), line_of(path, "x = x + 1"))
    assert len(ops(report)) > 1  # events so far are kept
    assert {e.name for e in ops(report)[1:]} == {"aten.add.Tensor"}


SWALLOWS = """
import time

import torch


def swallows_the_first_timeout():
    x = torch.ones(2)
    started = time.monotonic()
    swallowed = 0
    while time.monotonic() - started < 20:  # (a safety: without a second timeout this returns)
        try:
            while time.monotonic() - started < 20:
                x = x + 1
        except BaseException:
            swallowed += 1  # once, as a weakref callback or a library's `except BaseException:` would
            if swallowed > 1:
                raise
    return x
"""


def test_a_timeout_that_the_code_swallows_is_raised_again(tmp_path: Path) -> None:
    """Where the budget's signal lands may swallow it (a weakref callback, a `__del__`, a library's
    `except BaseException:`); the timeout comes again a second later, so the trace still ends as a
    timeout with its events, not at the worker's hard kill with none."""
    path = write(tmp_path, "swallows.py", SWALLOWS)
    started = time.monotonic()
    report = trace(path, "swallows_the_first_timeout", timeout=3.0)
    assert report.status == "timeout"
    assert time.monotonic() - started < 15
    [diagnostic] = report.diagnostics
    assert diagnostic.code == Code.TIMEOUT
    assert {e.name for e in ops(report)[1:]} == {"aten.add.Tensor"}


CLEANUP_FAILS = """
import torch


def cleanup_fails_when_interrupted():
    x = torch.ones(2)
    try:
        while True:
            x = x + 1
    finally:
        raise RuntimeError("the cleanup found a half-finished state")
"""


def test_a_cleanup_that_fails_after_the_timeout_is_still_a_timeout(tmp_path: Path) -> None:
    """The budget's signal can land while a `finally:` or a mode's `__exit__` runs; what that cleanup
    then raises (a fake mode left half-exited says "Attempted to unset FakeTensorMode") is raised
    while handling the timeout. The trace ended because it ran out of time, and says so."""
    path = write(tmp_path, "cleanup.py", CLEANUP_FAILS)
    report = trace(path, "cleanup_fails_when_interrupted", timeout=3.0)
    assert report.status == "timeout", report.message
    assert report.message == "the trace ran past its 3 s budget; events so far are kept"
    [diagnostic] = report.diagnostics
    assert diagnostic.code == Code.TIMEOUT
    assert diagnostic.line in (line_of(path, "while True:"), line_of(path, "x = x + 1"))
    assert {e.name for e in ops(report)[1:]} == {"aten.add.Tensor"}


def test_module_top_level_past_the_budget_suggests_a_main_guard(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "script.py",
        """
        import torch


        def f():
            return torch.ones(2)


        while True:
            pass
    """,
    )
    report = trace(path, "f", timeout=1.0)
    assert report.status == "timeout"
    [diagnostic] = report.diagnostics
    assert diagnostic.code == Code.LOAD_TIMEOUT
    assert diagnostic.line in (line_of(path, "while True:"), line_of(path, "pass"))
    assert 'if __name__ == "__main__":' in diagnostic.message
    assert report.events == ()


def test_module_is_imported_not_run_as_main(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "guarded.py",
        """
        import torch

        LOADED_AS = __name__


        def f():
            assert LOADED_AS != "__main__"
            return torch.ones(2)


        if __name__ == "__main__":
            raise SystemExit("script code ran")
    """,
    )
    report = trace(path, "f")
    assert report.status == "ok", report.message
    assert names(ops(report)) == ["aten.ones.default"]


def test_syntax_error_is_reported_at_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.py",
        """
        import torch


        def f():
            return torch.ones(2) +
    """,
    )
    report = trace(path, "f")
    assert report.status == "error"
    [diagnostic] = report.diagnostics
    assert diagnostic.message.startswith("SyntaxError: ")
    assert diagnostic.line == line_of(path, "return torch.ones(2) +")
