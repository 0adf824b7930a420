"""Each fixture under fixtures/ is linted and compared line for line with its `.expected` file
(`line:col CODE message`, col 1-based as in ruff's output). `<CODE>_clean.py` fixtures expect
nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from atenlens.lint import RULES
from atenlens.lint.engine import lint_source_strict

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = sorted(FIXTURES.glob("AL*.py"))


def render(source: str) -> list[str]:
    return [f"{f.line}:{f.column + 1} {f.code} {f.message}" for f in lint_source_strict(source)]


@pytest.mark.parametrize("fixture", SOURCES, ids=[p.stem for p in SOURCES])
def test_fixture_gives_exactly_the_expected_findings(fixture: Path) -> None:
    expected = fixture.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    assert render(fixture.read_text(encoding="utf-8")) == expected


def test_every_rule_has_a_positive_and_a_clean_fixture() -> None:
    for rule in RULES:
        positives = [p for p in SOURCES if p.stem.startswith(rule.code + "_") and not p.stem.endswith("_clean")]
        assert positives, rule.code
        assert any(rule.code in line for p in positives for line in p.with_suffix(".expected").read_text().splitlines())
        clean = FIXTURES / f"{rule.code}_clean.py"
        assert clean.exists(), rule.code
        assert clean.with_suffix(".expected").read_text() == ""
