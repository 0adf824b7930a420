"""Fuzzing the static lint: the example programs and the rule fixtures, cut, truncated and spliced
with random text: 10,000 cases in all (8,500 mangled programs, 1,500 documents edited
keystroke by keystroke, 1 to 6 edits each). `lint_source` must never raise and every finding (and
every quick-fix edit) must point inside the text it was given.

Each test is a row of docs/reliability.md (the `reliability` fixture of tests/reliability_report.py):
how many cases ran, how many findings they produced, and that none raised.

The rules run strictly here (`lint_source_strict` lets a rule's exception through): the public
`lint_source` would log and hide it, and a hidden bug is still a bug.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atenlens.lint import Finding
from atenlens.lint.engine import lint_source_strict
from reliability_report import CaseRecord

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted(
    p.read_text(encoding="utf-8")
    for p in [*ROOT.glob("examples/*.py"), *(ROOT / "tests" / "lint" / "fixtures").glob("*.py")]
)
SNIPPETS = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    "\n",
    "\r\n",
    "\r",
    "    ",
    "\t",
    "'",
    '"',
    '"""',
    "#",
    "\\",
    "\x00",
    "\ud800",
    "形状",
    "🚀",
    "for x in loader:\n    ",
    "while True:\n",
    "def f(",
    "lambda: ",
    "class C:\n",
    ".item()",
    ".to(device, non_blocking=True)",
    ".cpu(non_blocking=True)",
    "torch.cuda.synchronize()",
    "time.perf_counter()",
    "torch.randn(3).to(",
    ".pin_memory()",
    "pin_memory=True",
    "= ",
    "async ",
    "await ",
    "# noqa: AL100",
    "# noqa",
    "return ",
    "yield ",
    "if x:\n",
    "else:\n",
    "match x:\n    case 1:\n",
]

# The `reliability` record is shared by all examples of a test on purpose (it counts them).
settings.register_profile(
    "lint-fuzz",
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

MANGLED_CASES = 8_500
EDITED_DOCUMENTS = 1_500


def check_positions(text: str, findings: list[Finding]) -> None:
    lines = text.split("\n")  # the lint's rows, like tree-sitter's, end at "\n" only
    assert findings == sorted(findings, key=lambda f: (f.line, f.column, f.code, f.end_line, f.end_column))
    for f in findings:
        assert 1 <= f.line <= f.end_line <= len(lines), f
        assert 0 <= f.column <= len(lines[f.line - 1]), f
        assert 0 <= f.end_column <= len(lines[f.end_line - 1]), f
        assert (f.line, f.column) <= (f.end_line, f.end_column), f
        if f.fix is not None:
            for e in f.fix.edits:
                assert 1 <= e.line <= e.end_line <= len(lines), f
                assert 0 <= e.column <= len(lines[e.line - 1]) and 0 <= e.end_column <= len(lines[e.end_line - 1])


RANDOM_CHARACTERS = "abcxyz_019 .,:;=()[]{}'\"#\\\n\t\r\x00\x0c\ud800\u00e9\u5f62\U0001f680"


def mangle(text: str, rng: random.Random) -> str:
    """1 to 4 random truncations, deletions and insertions (snippets or random characters)."""
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("truncate", "delete", "insert", "insert-random"))
        at = rng.randint(0, len(text))
        if kind == "truncate":
            text = text[:at]
        elif kind == "delete":
            text = text[:at] + text[at + rng.randint(1, 80) :]
        elif kind == "insert":
            text = text[:at] + rng.choice(SNIPPETS) + text[at:]
        else:
            text = text[:at] + "".join(rng.choice(RANDOM_CHARACTERS) for _ in range(rng.randint(1, 12))) + text[at:]
    return text


def counted(record: CaseRecord, name: str, amount: int = 1) -> None:
    record.number(name, record.numbers.get(name, 0) + amount)


# Hypothesis drives the choices (one controlled Random per case: cheap to generate, and a
# failure is replayed and shrunk like any other draw).
@settings(settings.get_profile("lint-fuzz"), max_examples=MANGLED_CASES)
@given(program=st.sampled_from(PROGRAMS), rng=st.randoms(use_true_random=False))
def test_mangled_programs_never_raise_and_findings_stay_inside_the_text(
    reliability: CaseRecord, program: str, rng: random.Random
) -> None:
    reliability.record(
        "Fuzzing",
        "static lint on mangled programs",
        f"the {len(PROGRAMS)} example and fixture programs, each cut, truncated and spliced with "
        "snippets or random characters (NUL, lone surrogates, CR, brackets, quotes) 1-4 times",
    )
    text = mangle(program, rng)
    findings = lint_source_strict(text)
    check_positions(text, findings)
    counted(reliability, "cases")
    counted(reliability, "findings", len(findings))
    reliability.number("exceptions", 0)


@settings(settings.get_profile("lint-fuzz"), max_examples=EDITED_DOCUMENTS)
@given(text=st.sampled_from(PROGRAMS), rng=st.randoms(use_true_random=False))
def test_a_document_edited_keystroke_by_keystroke_lints_like_a_fresh_parse(
    reliability: CaseRecord, text: str, rng: random.Random
) -> None:
    """Up to 6 small edits of one document: linted as the language server lints it (its previous
    tree re-parsed incrementally, only the changed top-level definitions linted again, see
    lint/incremental.py) it gives exactly what a full lint of a fresh parse gives. The document
    keeps its name from one example to the next, so a new example is a whole new text under the
    name of the last one (a branch switch)."""
    reliability.record(
        "Fuzzing",
        "static lint on a document edited keystroke by keystroke",
        "1-6 random snippet edits per document, each linted incrementally and compared with a full lint of a fresh parse",
    )
    document = "fuzz://edited.py"
    lint_source_strict(text, path=document, incremental=True)
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(SNIPPETS) + text[at + rng.randint(0, 20) :]
        incremental = lint_source_strict(text, path=document, incremental=True)
        check_positions(text, incremental)
        # the reference parses every definition, as the editor does: the command line's skipping of
        # definitions without a trigger (docs/lint.md, "Speed") can differ on a text with a syntax
        # error inside a skipped definition, whose recovery then never touches the others
        assert incremental == lint_source_strict(text, prefilter=False)
        counted(reliability, "edits")
    counted(reliability, "documents")
    reliability.number("differences from a fresh parse", 0)


def test_the_fuzz_corpus_holds_the_examples_and_every_fixture(reliability: CaseRecord) -> None:
    reliability.record("Fuzzing", "static lint fuzz corpus", "examples/*.py and tests/lint/fixtures/*.py")
    reliability.number("programs", len(PROGRAMS))
    assert len(PROGRAMS) >= 16
    assert any("def train_step" in p for p in PROGRAMS)
