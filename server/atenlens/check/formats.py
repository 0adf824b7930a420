"""`atenlens check --format`: text, json, github (workflow-command annotations, as the lint's) and
junit (one test case per function, for CI test-report viewers). Every problem is written at the
lines that caused it (the `.item()` line of a sync budget), with the budget or baseline figure and
the measured one."""

from __future__ import annotations

import json
import os
from typing import Sequence, TextIO
from xml.sax.saxutils import escape, quoteattr

from atenlens.check.command import FORMATS  # noqa: F401  (the list lives where argparse reads it)
from atenlens.check.compare import Problem
from atenlens.check.measure import Site
from atenlens.check.run import FunctionResult
from atenlens.lint.formats import _escape_data, _escape_property, _plural

UPDATE_HINT = "atenlens check --update-baseline records it"


def shown_path(path: str) -> str:
    """Relative to the current folder when inside it (as the lint shows paths), else absolute."""
    rel = os.path.relpath(path)
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def located(result: FunctionResult, problem: Problem) -> list[tuple[str, int, int, str]]:
    """(path, line, 1-based column, text) for each line of the problem; the function's `def` line
    when the problem has no line of its own (FLOPs, a trace that failed before any line)."""
    head = f"{result.function.target}: {problem.summary}"
    sites: Sequence[Site] = [s for s in problem.sites if s.file is not None and s.line is not None]
    if not sites:
        return [(shown_path(result.function.file), result.def_line, 1, head)]
    out = []
    for s in sites:
        assert s.file is not None and s.line is not None  # kept above
        detail = f"{s.code} {s.message}" if s.code else s.message
        if s.count > 1:
            detail += f" (x{s.count})"
        out.append((shown_path(s.file), s.line, s.column + 1, f"{head}: {detail}"))
    return out


def _totals(results: Sequence[FunctionResult]) -> str:
    untraced = sum(1 for r in results if r.measurement is None)
    over = sum(1 for r in results if not r.passed) - untraced
    parts = ([f"{over} over budget"] if over else []) + ([f"{untraced} not traced"] if untraced else [])
    return f"Checked {_plural(len(results), 'function')}: {', '.join(parts) or 'all within budget'}.\n"


def _improved(result: FunctionResult) -> list[str]:
    return [
        f"{result.function.target}: {i.key} improved, {i.before} -> {i.after} ({UPDATE_HINT})"
        for i in result.improvements
    ]


def write_text(results: Sequence[FunctionResult], out: TextIO) -> None:
    for r in results:
        for problem in r.problems:
            for path, line, column, text in located(r, problem):
                out.write(f"{path}:{line}:{column}: {text}\n")
        for text in _improved(r):
            out.write(text + "\n")
        for note in r.notes:
            out.write(f"{r.function.target}: {note}\n")
    out.write(_totals(results))


def json_result(r: FunctionResult) -> dict:
    m = r.measurement
    return {
        "target": r.function.target,
        "passed": r.passed,
        "status": r.report.status,
        "measured": None
        if m is None
        else {
            "syncs": m.syncs,
            "codes": m.codes,
            "peak_bytes": m.peak_bytes,
            "step_seconds": m.step_seconds,
            "flops": m.flops,
            "collective_bytes": m.collective_bytes,
            "gpu": m.gpu,
        },
        "problems": [
            {
                "key": p.key,
                "against": p.against,
                "limit": p.limit,
                "measured": p.measured,
                "locations": [
                    {"filename": os.path.abspath(path), "row": line, "column": column, "message": text}
                    for path, line, column, text in located(r, p)
                ],
            }
            for p in r.problems
        ],
        "improvements": [{"key": i.key, "before": i.before, "after": i.after} for i in r.improvements],
        "notes": list(r.notes),
    }


def write_json(results: Sequence[FunctionResult], out: TextIO) -> None:
    json.dump(
        {"passed": all(r.passed for r in results), "functions": [json_result(r) for r in results]},
        out,
        indent=2,
        ensure_ascii=False,
    )
    out.write("\n")


def write_github(results: Sequence[FunctionResult], out: TextIO) -> None:
    for r in results:
        for problem in r.problems:
            for path, line, column, text in located(r, problem):
                props = ",".join(
                    [
                        f"title={_escape_property(f'atenlens check ({problem.key})')}",
                        f"file={_escape_property(os.path.abspath(path))}",
                        f"line={line}",
                        f"col={column}",
                    ]
                )
                out.write(f"::error {props}::{_escape_data(f'{path}:{line}:{column}: {text}')}\n")
        for text in _improved(r):
            out.write(f"::notice title={_escape_property('atenlens check')}::{_escape_data(text)}\n")
    out.write(_totals(results))


def write_junit(results: Sequence[FunctionResult], out: TextIO) -> None:
    """JUnit XML as pytest's --junitxml writes it: a suite, one case per function, a <failure>
    with the offending lines."""
    failures = sum(1 for r in results if not r.passed)
    out.write('<?xml version="1.0" encoding="utf-8"?>\n')
    out.write(
        f'<testsuites><testsuite name="atenlens check" tests="{len(results)}" failures="{failures}" '
        f'errors="0" skipped="0">\n'
    )
    for r in results:
        attrs = (
            f'classname="atenlens.check" name={quoteattr(r.function.target)} '
            f'file={quoteattr(shown_path(r.function.file))} line="{r.def_line}"'
        )
        if r.passed:
            out.write(f"<testcase {attrs} />\n")
            continue
        lines = [f"{path}:{line}:{column}: {text}" for p in r.problems for path, line, column, text in located(r, p)]
        message = "; ".join(p.summary for p in r.problems)
        out.write(
            f"<testcase {attrs}><failure message={quoteattr(message)}>{escape(chr(10).join(lines))}"
            f"</failure></testcase>\n"
        )
    out.write("</testsuite></testsuites>\n")


WRITERS = {"text": write_text, "json": write_json, "github": write_github, "junit": write_junit}
