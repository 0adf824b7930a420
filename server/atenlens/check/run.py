"""Tracing the configured functions in one warm worker and judging each against its budget and
the baseline. Torch-free; the output formats are in atenlens/check/formats.py."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

from atenlens.check.baseline import BaselineEntry
from atenlens.check.budgets import CheckConfig, CheckedFunction
from atenlens.check.compare import Improvement, Problem, check_baseline, check_budget
from atenlens.check.measure import Measurement, Site, measure
from atenlens.report import TraceReport, TraceRequest


@dataclass(frozen=True)
class FunctionResult:
    function: CheckedFunction
    def_line: int  # where a problem without a line of its own is shown
    report: TraceReport
    measurement: Optional[Measurement]  # None: the trace did not finish
    problems: tuple[Problem, ...] = ()
    improvements: tuple[Improvement, ...] = ()
    notes: tuple[str, ...] = ()
    seconds: float = 0.0  # wall time of its trace in the warm worker

    @property
    def passed(self) -> bool:
        return not self.problems


def request_for(function: CheckedFunction) -> TraceRequest:
    return TraceRequest(
        file=function.file,
        qualname=function.qualname,
        device=function.device,
        call=function.call,
        gpu=function.gpu,
        timeout_seconds=function.timeout,
        argv=function.argv,
        world_size=function.world_size,
        rank=function.rank,
        gpus_per_node=function.gpus_per_node,
    )


def def_line_of(function: CheckedFunction) -> int:
    """The `def` line of the function (1 when the file cannot be parsed or has no such function)."""
    import tokenize

    from atenlens.traceable import find_functions

    try:
        with tokenize.open(function.file) as f:
            infos = find_functions(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return 1
    return next((info.line for info in infos if info.qualname == function.qualname), 1)


def judge(
    function: CheckedFunction,
    report: TraceReport,
    config: Optional[CheckConfig],
    baseline: Optional[dict[str, BaselineEntry]],
    seconds: float = 0.0,
) -> FunctionResult:
    line = def_line_of(function)
    if report.status != "ok":
        sites = tuple(
            Site(d.file, d.line, d.column or 0, d.message)
            for d in report.diagnostics
            if d.severity == "error" and d.line is not None
        )
        problem = Problem("trace", "budget", "", f"{report.status}: {report.message}", sites)
        return FunctionResult(function, line, report, None, (problem,), seconds=seconds)
    m = measure(report)
    problems = check_budget(m, function.budget)
    improvements: list[Improvement] = []
    notes: list[str] = []
    if baseline is not None and config is not None:
        base = baseline.get(function.target)
        if base is None:
            notes.append("not in the baseline yet (atenlens check --update-baseline adds it)")
        else:
            regressions, improvements = check_baseline(m, base, config)
            problems += regressions
    return FunctionResult(function, line, report, m, tuple(problems), tuple(improvements), tuple(notes), seconds)


def trace_all(
    functions: tuple[CheckedFunction, ...],
    config: Optional[CheckConfig],
    baseline: Optional[dict[str, BaselineEntry]],
    on_result: Callable[[FunctionResult], None] = lambda result: None,
) -> list[FunctionResult]:
    """Every function traced in ONE warm worker, one after another (the worker's start and torch's
    import are paid once; each trace still runs in its own disposable child)."""
    from atenlens.worker.client import TraceWorker

    results = []
    with TraceWorker() as worker:
        for function in functions:
            started = time.perf_counter()
            report = worker.trace(request_for(function))
            result = judge(function, report, config, baseline, time.perf_counter() - started)
            on_result(result)
            results.append(result)
    return results
