"""The atenlens pytest plugin (registered as a `pytest11` entry point; docs/check.md).

- `atenlens_trace("train.py::train_step", call=None, gpu="h100", device="cuda")` (a fixture) traces the
  function and returns its TraceReport for assertions; `atenlens.check.assertions.assert_within(report,
  syncs=0)` fails with the offending lines.
- `@pytest.mark.atenlens("train.py::train_step", syncs=0, peak="70 GiB")` traces the function after the
  test body has passed and fails the test at the lines that break the budget.

Paths are relative to pytest's rootdir. All traces of a session share one warm trace worker, started
on first use. Importing this module costs nothing: no torch, no worker.
"""

from __future__ import annotations

from typing import Any

import pytest

from atenlens.report import TraceReport

_TRACE_OPTIONS = ("call", "gpu", "device", "timeout", "argv", "world_size", "rank", "gpus_per_node")
_worker_key = pytest.StashKey[Any]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "atenlens(target, **budget): trace FILE::FUNCTION after the test and fail "
        "when it breaks the budget (syncs=0, peak='70 GiB', ...; docs/check.md)",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    worker = config.stash.get(_worker_key, None)
    if worker is not None:
        worker.close()


def _worker(config: pytest.Config) -> Any:
    worker = config.stash.get(_worker_key, None)
    if worker is None:
        from atenlens.worker.client import TraceWorker

        worker = config.stash[_worker_key] = TraceWorker()
    return worker


def trace_target(config: pytest.Config, target: str, **options: Any) -> TraceReport:
    """The report of FILE::FUNCTION (FILE relative to the rootdir); options as a budget entry's."""
    from atenlens.check.budgets import _function
    from atenlens.check.run import request_for
    from atenlens.lint.config import ConfigError

    unknown = sorted(set(options) - set(_TRACE_OPTIONS))
    if unknown:
        raise TypeError(f"atenlens_trace: unknown option {unknown[0]!r} (known: {', '.join(_TRACE_OPTIONS)})")
    try:
        function = _function(f"atenlens_trace({target!r})", config.rootpath, target, options)
    except ConfigError as error:
        raise pytest.UsageError(str(error)) from None
    return _worker(config).trace(request_for(function))


@pytest.fixture
def atenlens_trace(request: pytest.FixtureRequest):
    """Call it with "FILE::FUNCTION" (and call=, gpu=, device=, ...): the function's TraceReport."""

    def trace(target: str, **options: Any) -> TraceReport:
        return trace_target(request.config, target, **options)

    return trace


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield
    for mark in item.iter_markers("atenlens"):
        if len(mark.args) != 1 or not isinstance(mark.args[0], str):
            raise pytest.UsageError(f'{item.nodeid}: @pytest.mark.atenlens takes one "FILE::FUNCTION" and budgets')
        options = {k: v for k, v in mark.kwargs.items() if k in _TRACE_OPTIONS}
        budget = {k: v for k, v in mark.kwargs.items() if k not in _TRACE_OPTIONS}
        report = trace_target(item.config, mark.args[0], **options)
        from atenlens.check.assertions import budget_failures

        failures = budget_failures(report, **budget)
        if failures:  # the lines alone: the hook's own frames say nothing about the user's code
            pytest.fail("atenlens budget broken:\n" + "\n".join(failures), pytrace=False)
    return result
