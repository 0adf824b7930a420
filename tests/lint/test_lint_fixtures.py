"""Each fixture under fixtures/ is linted and compared line for line with its `.expected` file:
`line:col CODE message` (col 1-based as in ruff's output), and under a finding that offers a fix,
the fix's title and the lines it changes (`- old`, `+ new`), as ruff's snapshots show the diff.
`<CODE>_clean.py` fixtures expect nothing.

After a deliberate change of a rule's findings or fixes, regenerate the snapshots and review the diff:

    pytest tests/lint/test_lint_fixtures.py --update-lint-snapshots
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from atenlens.lint import RULES
from atenlens.lint.engine import lint_source_strict
from atenlens.lint.findings import Finding
from atenlens.lint.fixes import apply_edits

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = sorted(FIXTURES.glob("AL*.py"))


def fix_lines(source: str, finding: Finding) -> list[str]:
    """The fix of `finding`, alone, as its title and the lines it removes and adds."""
    if finding.fix is None or not finding.fix.edits:
        return []
    before, after = source.split("\n"), apply_edits(source, finding.fix.edits).split("\n")
    changed = [
        line
        for line in difflib.unified_diff(before, after, n=0, lineterm="")
        if line[:1] in "-+" and not line.startswith(("---", "+++"))
    ]
    return [f"  fix: {finding.fix.title}"] + [f"  {line[0]} {line[1:]}".rstrip() for line in changed]


def render(source: str) -> list[str]:
    lines = []
    for finding in lint_source_strict(source):
        lines.append(f"{finding.line}:{finding.column + 1} {finding.code} {finding.message}")
        lines += fix_lines(source, finding)
    return lines


@pytest.mark.parametrize("fixture", SOURCES, ids=[p.stem for p in SOURCES])
def test_fixture_gives_exactly_the_expected_findings(fixture: Path, request: pytest.FixtureRequest) -> None:
    found = render(fixture.read_text(encoding="utf-8"))
    snapshot = fixture.with_suffix(".expected")
    if request.config.getoption("update_lint_snapshots"):
        snapshot.write_text("".join(f"{line}\n" for line in found), encoding="utf-8")
    assert found == snapshot.read_text(encoding="utf-8").splitlines()


def test_every_rule_has_a_positive_and_a_clean_fixture() -> None:
    for rule in RULES:
        positives = [p for p in SOURCES if p.stem.startswith(rule.code + "_") and not p.stem.endswith("_clean")]
        assert positives, rule.code
        assert any(rule.code in line for p in positives for line in p.with_suffix(".expected").read_text().splitlines())
        clean = FIXTURES / f"{rule.code}_clean.py"
        assert clean.exists(), rule.code
        assert clean.with_suffix(".expected").read_text() == ""
