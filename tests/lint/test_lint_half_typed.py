"""A construct the user is still typing (an unclosed bracket or string, `def f(`, `for x in`)
anywhere in a file, at its very end included, leaves the findings of the rest of the file.

fixtures/half_typed/base.py is a complete file; each variant below is base.py with one half-typed
line appended (`end_*`) or inserted as the first line of `train`'s body (`middle_*`). Each is
compared line for line with its `fixtures/half_typed/<name>.expected` file, and every one of them
must report what base.py reports (shifted down one line after an inserted line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from atenlens.lint.engine import lint_source_strict
from atenlens.lint.source import SourceText

FIXTURES = Path(__file__).parent / "fixtures" / "half_typed"
BASE = FIXTURES / "base.py"
INSERTED_AT = 17  # 1-based line of the `middle_*` variants' inserted line
# name -> the half-typed text: appended to base.py (end_*) or inserted at INSERTED_AT (middle_*)
VARIANTS = {
    "end_dangling_def": "def f(",
    "end_for_in": "    for x in",
    "end_fstring_brace": '    s = f"loss {',
    "end_triple_quoted_string": '    s = """abc\n',
    "end_unclosed_call": "    y = model(",
    "end_unclosed_call_newline": "    y = model(\n",
    "end_unclosed_list": "    y = [",
    "end_unclosed_string": "    s = 'abc",
    "end_while_paren": "    while (",
    "middle_dangling_def": "def f(\n",
    "middle_for_in": "    for x in\n",
    "middle_stray_close": "    y = x)\n",
    "middle_unclosed_call": "    y = x.to(\n",
    "middle_unclosed_list": "    y = [\n",
}


def variant_text(name: str) -> str:
    base = BASE.read_text(encoding="utf-8")
    if name.startswith("end_"):
        return base + VARIANTS[name]
    lines = base.splitlines(keepends=True)
    return "".join(lines[: INSERTED_AT - 1] + [VARIANTS[name]] + lines[INSERTED_AT - 1 :])


def render(source: str) -> list[str]:
    return [f"{f.line}:{f.column + 1} {f.code} {f.message}" for f in lint_source_strict(source)]


def base_findings_shifted(after: int) -> list[tuple[int, int, str]]:
    return [(f.line + (f.line >= after), f.column, f.code) for f in lint_source_strict(BASE.read_text())]


def test_the_base_file_has_findings_in_every_function() -> None:
    assert [line.split(" ")[:2] for line in render(BASE.read_text())] == [
        ["7:37", "AL302"],
        ["8:28", "AL302"],
        ["9:13", "AL302"],
        ["21:20", "AL100"],
        ["22:9", "AL300"],
    ]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_half_typed_fixture_gives_exactly_the_expected_findings(name: str) -> None:
    text = variant_text(name)
    assert render(text) == (FIXTURES / f"{name}.expected").read_text(encoding="utf-8").splitlines()
    after = INSERTED_AT if name.startswith("middle_") else 10**6
    if after < 10**6:
        assert text.splitlines()[INSERTED_AT - 2] == "def train(loader, model, opt):"
    found = [(f.line, f.column, f.code) for f in lint_source_strict(text)]
    assert found == base_findings_shifted(after)


ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted([*ROOT.glob("examples/*.py"), *(ROOT / "tests" / "lint" / "fixtures").glob("AL*.py")])
HALF_TYPED_TAILS = [
    "y = model(",
    "    y = [",
    "    while (",
    "def g(",
    "for x in",
    's = """abc\n',
    'x = f"{',
    "    z = {1: (",
    "class C(",
    ")",
]


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
    typed = 'y = torch.from_numpy(x).to("cuda", non_blocking=True)[0]\n'
    document = "test://half-typed/keystrokes.py"
    lint_source_strict("".join(lines), path=document)
    kept = base_findings_shifted(INSERTED_AT)
    for end in range(1, len(typed) + 1):
        line = "    " + typed[:end].rstrip("\n") + "\n"
        text = "".join(lines[: INSERTED_AT - 1] + [line] + lines[INSERTED_AT - 1 :])
        edited = [(f.line, f.column, f.code) for f in lint_source_strict(text, path=document)]
        assert edited == [(f.line, f.column, f.code) for f in lint_source_strict(text)], typed[:end]
        assert set(kept) <= set(edited), typed[:end]
    column = len("    " + typed[: typed.index("non_blocking")])
    assert edited == sorted(kept + [(INSERTED_AT, column, "AL200")])


def test_a_syntax_error_inside_a_definition_costs_findings_in_that_definition_only() -> None:
    """`for x, y in loader:` typed over as `foyield x, y in loader:` in fit(): the damage is mended
    inside fit() (two of its rows blanked, nothing else), so update()'s finding above it stays, and the
    command line (which leaves fit() out of its parse: no loop written in code) and the editor's
    parse of every definition, incremental or fresh, report the same."""
    fixture = Path(__file__).parent / "fixtures" / "AL100_training_step_in_a_file_without_a_device.py"
    good = fixture.read_text(encoding="utf-8")
    broken = good.replace(
        "    for x, y in loader:\n        loss = loss_fn", "    foyield x, y in loader:\n        loss = loss_fn"
    )
    assert broken != good
    assert [(f.line, f.column + 1, f.code) for f in lint_source_strict(good)][0] == (13, 37, "AL100")
    fit = good.splitlines().index("def fit(model, loader, optimizer, loss_fn):")
    text = SourceText(broken)
    assert text.blanked_rows == [fit, fit + 1] and not text.root.has_error  # its `def` and the broken line
    expected = [(13, 37, "AL100")]
    assert [(f.line, f.column + 1, f.code) for f in lint_source_strict(broken)] == expected
    assert [(f.line, f.column + 1, f.code) for f in lint_source_strict(broken, prefilter=False)] == expected
    document = "test://half-typed/foyield.py"
    lint_source_strict(good, path=document, incremental=True)
    assert [(f.line, f.column + 1, f.code) for f in lint_source_strict(broken, path=document, incremental=True)] == (
        expected
    )
