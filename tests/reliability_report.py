"""Writes docs/reliability.md from the reliability tests' own outcomes (a pytest plugin, loaded by
tests/conftest.py), when asked to: a test run writes nothing tracked unless it is given
`--write-reliability-doc` (CONTRIBUTING.md, "Generated files"):

    pytest tests/test_reliability_*.py --write-reliability-doc

Each reliability test takes the `reliability` fixture and says what case it covers, what it tried
and what it measured; the outcome (passed / failed and why) comes from pytest itself. At the end
of a session that ran every test of every tests/test_reliability_*.py file (nothing deselected,
nothing left unrun), the table is rewritten; a partial run (one file, -k, -x stopping early)
leaves the document alone, so the file always shows one complete run.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import platform
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
DOCUMENT = TESTS.parent / "docs" / "reliability.md"
PREFIX = "test_reliability_"
WRITE_OPTION = "--write-reliability-doc"
WRITE_OPTION_DEST = "write_reliability_doc"


@dataclass
class CaseRecord:
    nodeid: str
    area: str = ""
    case: str = ""
    tried: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)
    outcome: str = "not run"
    failure: str = ""
    seconds: float = 0.0

    def record(self, area: str, case: str, tried: str) -> "CaseRecord":
        self.area, self.case, self.tried = area, case, tried
        return self

    def number(self, name: str, value: Any) -> None:
        self.numbers[name] = value


class ReliabilityReport:
    def __init__(self) -> None:
        self.records: dict[str, CaseRecord] = {}
        self.items: list[str] = []  # nodeids of collected reliability tests
        self.outcomes: dict[str, str] = {}
        self.deselected = False
        self.files_collected: set[str] = set()
        self.failures: dict[str, str] = {}  # nodeid -> the first line of its first failure

    @staticmethod
    def is_reliability(nodeid: str) -> bool:
        return pathlib.PurePath(nodeid.split("::")[0]).name.startswith(PREFIX)

    # -- pytest hooks ------------------------------------------------------------------------------

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if any(self.is_reliability(item.nodeid) for item in items):
            self.deselected = True

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.items = [item.nodeid for item in items if self.is_reliability(item.nodeid)]
        self.files_collected = {pathlib.Path(str(item.path)).name for item in items if self.is_reliability(item.nodeid)}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        outcome = yield
        report = outcome.get_result()
        if not self.is_reliability(item.nodeid):
            return
        previous = self.outcomes.get(item.nodeid, "passed")
        if report.failed:
            self.outcomes[item.nodeid] = "failed"
            self.failures.setdefault(
                item.nodeid, f"{report.when}: {_first_line(report)}" if report.when != "call" else _first_line(report)
            )
        elif report.skipped:
            self.outcomes[item.nodeid] = "skipped"
        elif report.when == "call" or item.nodeid not in self.outcomes:
            self.outcomes[item.nodeid] = previous
        if report.when == "call":
            record = self.records.get(item.nodeid)
            if record is not None:
                record.seconds = report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not session.config.getoption(WRITE_OPTION_DEST):
            return
        expected = {path.name for path in TESTS.glob(f"{PREFIX}*.py")}
        if not self.items or self.deselected or self.files_collected != expected:
            return
        if any(nodeid not in self.outcomes for nodeid in self.items):
            return  # interrupted or stopped early (-x)
        if session.config.getoption("collectonly", False):
            return
        for nodeid in self.items:
            if nodeid not in self.records:  # a reliability test that does not describe itself
                file, _, name = nodeid.partition("::")
                area = pathlib.PurePath(file).stem[len(PREFIX) :].replace("_", " ").capitalize()
                self.records[nodeid] = CaseRecord(nodeid, area=area, case=name)
        for nodeid, record in self.records.items():
            record.outcome = self.outcomes.get(nodeid, "not run")
            record.failure = self.failures.get(nodeid, "")
        DOCUMENT.parent.mkdir(parents=True, exist_ok=True)
        DOCUMENT.write_text(render(list(self.records.values()), self.outcomes), encoding="utf-8")


def _first_line(report: pytest.TestReport) -> str:
    text = str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("E ") and line.strip()[1:].strip()]
    return (lines[0][1:].strip() if lines else text.strip().splitlines()[-1] if text.strip() else "")[:200]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _numbers(numbers: dict[str, Any]) -> str:
    return "; ".join(f"{name}: {value}" for name, value in numbers.items())


def render(records: list[CaseRecord], outcomes: dict[str, str]) -> str:
    passed = sum(1 for r in records if r.outcome == "passed")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Reliability report",
        "",
        "Generated by the test suite (`tests/test_reliability_*.py`, written by `tests/reliability_report.py`)",
        "at the end of the last complete run given `--write-reliability-doc`",
        "(`pytest tests/test_reliability_*.py --write-reliability-doc`); do not edit by hand.",
        "Every case drives the real language server",
        "process (`python -m atenlens serve` over stdio, raw JSON-RPC) or the real `atenlens` command.",
        "",
        f"Last run: {now}; Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {passed} of {len(records)} cases passed.",
        "",
        "| Area | Case | What was tried | Result | Numbers |",
        "|---|---|---|---|---|",
    ]
    order = {nodeid: index for index, nodeid in enumerate(outcomes)}
    for record in sorted(records, key=lambda r: (r.area, order.get(r.nodeid, 0))):
        result = record.outcome if record.outcome != "failed" else f"FAILED: {record.failure}"
        numbers = _numbers({**record.numbers, "test seconds": f"{record.seconds:.1f}"})
        lines.append(
            f"| {_cell(record.area)} | {_cell(record.case or record.nodeid)} | {_cell(record.tried)} "
            f"| {_cell(result)} | {_cell(numbers)} |"
        )
    lines.append("")
    return "\n".join(lines)


_report: Optional[ReliabilityReport] = None


def add_options(parser: pytest.Parser) -> None:
    parser.addoption(
        WRITE_OPTION,
        action="store_true",
        dest=WRITE_OPTION_DEST,
        help="rewrite docs/reliability.md after a complete run of the reliability tests",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _report
    _report = ReliabilityReport()
    config.pluginmanager.register(_report, "atenlens-reliability-report")


@pytest.fixture
def reliability(request: pytest.FixtureRequest) -> CaseRecord:
    """What this reliability case covers and measured; its row in docs/reliability.md."""
    assert _report is not None
    record = CaseRecord(request.node.nodeid)
    _report.records[request.node.nodeid] = record
    return record


__all__ = ["CaseRecord", "pytest_configure", "reliability"]
