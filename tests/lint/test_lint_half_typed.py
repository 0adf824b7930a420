"""A construct the user is still typing (an unclosed bracket or string, `def f(`, `for x in`)
anywhere in a file, at its very end included, leaves the findings of the rest of the file.

fixtures/half_typed/base.py is a complete file; every other fixture there is base.py with one
half-typed line appended (`end_*`) or inserted as the first line of `train`'s body (`middle_*`).
Each is compared line for line with its `.expected` file, and every one of them must report what
base.py reports (shifted down one line after an inserted line)."""
from __future__ import annotations

from pathlib import Path

import pytest

from atenlens.lint.engine import lint_source_strict

FIXTURES = Path(__file__).parent / "fixtures" / "half_typed"
BASE = FIXTURES / "base.py"
VARIANTS = sorted(p for p in FIXTURES.glob("*.py") if p != BASE)
INSERTED_AT = 17   # 1-based line of the `middle_*` fixtures' inserted line


def render(source: str) -> list[str]:
    return [f"{f.line}:{f.column + 1} {f.code} {f.message}" for f in lint_source_strict(source)]


def base_findings_shifted(after: int) -> list[tuple[int, int, str]]:
    return [(f.line + (f.line >= after), f.column, f.code) for f in lint_source_strict(BASE.read_text())]


def test_the_base_file_has_findings_in_every_function() -> None:
    assert [line.split(" ")[:2] for line in render(BASE.read_text())] == [
        ["7:37", "AL302"], ["8:28", "AL302"], ["12:7", "AL302"], ["21:20", "AL100"], ["22:9", "AL300"]]


@pytest.mark.parametrize("fixture", VARIANTS, ids=[p.stem for p in VARIANTS])
def test_half_typed_fixture_gives_exactly_the_expected_findings(fixture: Path) -> None:
    text = fixture.read_text(encoding="utf-8")
    assert render(text) == fixture.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    after = INSERTED_AT if fixture.stem.startswith("middle_") else 10 ** 6
    if after < 10 ** 6:
        assert text.splitlines()[INSERTED_AT - 2] == "def train(loader, model, opt):"
    found = [(f.line, f.column, f.code) for f in lint_source_strict(text)]
    assert found == base_findings_shifted(after)


ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted([*ROOT.glob("examples/*.py"), *(ROOT / "tests" / "lint" / "fixtures").glob("AL*.py")])
HALF_TYPED_TAILS = ["y = model(", "    y = [", "    while (", "def g(", "for x in", 's = """abc\n',
                    'x = f"{', "    z = {1: (", "class C(", ")"]


def top_level_starts(lines: list[str]) -> list[int]:
    """0-based rows where a top-level `def`, `class` or decorator begins."""
    return [i for i, line in enumerate(lines) if line.startswith(("def ", "class ", "@", "async def "))]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_cutting_a_file_and_half_typing_a_line_keeps_the_findings_above(program: Path) -> None:
    """Cut the file before any top-level definition and type a half-finished line there (the end
    of the file, as while writing it top to bottom): everything found above the cut is still
    found, exactly as in the cut file alone."""
    lines = program.read_text(encoding="utf-8").splitlines(keepends=True)
    cuts = top_level_starts(lines) + [len(lines)]
    checked = 0
    for cut in cuts:
        prefix = "".join(lines[:cut])
        if prefix and not prefix.endswith("\n"):
            prefix += "\n"
        above = [(f.line, f.column, f.code) for f in lint_source_strict(prefix)]
        for tail in HALF_TYPED_TAILS:
            found = [(f.line, f.column, f.code) for f in lint_source_strict(prefix + tail) if f.line <= cut]
            assert found == above, (cut, tail)
            checked += len(above)
    assert checked > 0 or not any(lint_source_strict("".join(lines)))


def test_typing_a_line_keystroke_by_keystroke_lints_each_version_like_a_fresh_parse() -> None:
    """In the editor each version is re-parsed from the previous one (a half-typed version
    included); the findings must be those of the text alone, and the rest of the file keeps its
    findings at every keystroke."""
    lines = BASE.read_text().splitlines(keepends=True)
    typed = 'y = x.to("cuda", non_blocking=True)[0]\n'
    document = "test://half-typed/keystrokes.py"
    lint_source_strict("".join(lines), path=document)
    kept = base_findings_shifted(INSERTED_AT)
    for end in range(1, len(typed) + 1):
        line = "    " + typed[:end].rstrip("\n") + "\n"
        text = "".join(lines[:INSERTED_AT - 1] + [line] + lines[INSERTED_AT - 1:])
        edited = [(f.line, f.column, f.code) for f in lint_source_strict(text, path=document)]
        assert edited == [(f.line, f.column, f.code) for f in lint_source_strict(text)], typed[:end]
        assert set(kept) <= set(edited), typed[:end]
    column = len("    " + typed[:typed.index("non_blocking")])
    assert edited == sorted(kept + [(INSERTED_AT, column, "AL200")])
