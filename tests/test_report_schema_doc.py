"""docs/report-schema.md documents exactly the keys and codes of server/atenlens/report.py."""

from __future__ import annotations

import dataclasses
import re

import pytest

from atenlens import report
from engine_helpers import REPO

DOC = (REPO / "docs" / "report-schema.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", DOC, re.S | re.M)
    assert match, f"no section {title}"
    return match.group(1)


def first_column(text: str) -> list[str]:
    return re.findall(r"^\| `([^`]+)` \|", text, re.M)


@pytest.mark.parametrize(
    "cls",
    [
        report.TraceReport,
        report.Target,
        report.Event,
        report.ModuleCall,
        report.Frame,
        report.TensorMeta,
        report.Diagnostic,
        report.Summary,
        report.MemorySummary,
        report.PeakCategories,
        report.MemoryHolder,
        report.MemoryLine,
        report.Holding,
        report.MemoryTimeline,
        report.TimeSummary,
        report.NamedShapes,
        report.NamedLine,
        report.TraceRequest,
    ],
)
def test_every_field_is_documented_and_nothing_else(cls) -> None:
    documented = first_column(section(cls.__name__))
    assert documented == [f.name for f in dataclasses.fields(cls)]


def test_diagnostic_codes_table_matches_code() -> None:
    rows = re.findall(r"^\| `(AL\d+)` \| `([A-Z0-9_]+)` \|", section("Diagnostic codes"), re.M)
    codes = {name: value for name, value in vars(report.Code).items() if name.isupper()}
    assert {name: code for code, name in rows} == codes


def test_schema_version_is_the_documented_one() -> None:
    assert f"`schema_version` {report.SCHEMA_VERSION}" in DOC
