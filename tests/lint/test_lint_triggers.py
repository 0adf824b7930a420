"""Trigger bytes (lint/triggers.py): skipping the parse of files and definitions that no rule can
report on changes no finding. Every file of the labelled real corpus, every fixture and a
generated corpus is linted with and without the skipping, with all rules and with each rule on
its own (the selection decides what is skipped), and the findings must be identical; and the
skipping must really happen on that code, or the comparison would prove nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from atenlens.lint import RULES
from atenlens.lint.engine import lint_source_strict, select_rules
from atenlens.lint.source import SourceText, encode_source, line_starts, rows_left_open
from atenlens.lint.triggers import CODE_LOOP, Caseless, definitions, matches, skippable_definitions

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "bench"))
from gen_corpus import generate  # noqa: E402

REAL = sorted(
    p for folder in ("corpus_real", "corpus_heldout") for p in (HERE / folder).glob("*.py") if p.name != "conftest.py"
)
FIXTURES = sorted((HERE / "fixtures").glob("*.py"))


def _generated() -> list[tuple[str, str]]:
    """The generated corpus of bench/lint_tree.py --quick: 5,000 lines cut into 40 files (cut
    mid-construct, so some of them do not parse cleanly)."""
    rows = generate(5000).split("\n")
    return [(f"generated/m{i:02d}.py", "\n".join(rows[i * 125 : (i + 1) * 125]) + "\n") for i in range(40)]


SOURCES = (
    [(f"{p.parent.name}/{p.name}", p.read_text(encoding="utf-8")) for p in REAL]
    + [(f"fixtures/{p.name}", p.read_text(encoding="utf-8")) for p in FIXTURES]
    + _generated()
)
SELECTIONS = [None] + [[rule.code] for rule in RULES]


def _rows(source: str, select: list[str] | None, prefilter: bool) -> list[tuple]:
    return [
        (f.line, f.column, f.end_line, f.end_column, f.code, f.severity, f.message, f.fix)
        for f in lint_source_strict(source, select=select, prefilter=prefilter)
    ]


@pytest.mark.parametrize("select", SELECTIONS, ids=["all"] + [rule.code for rule in RULES])
def test_skipping_by_trigger_bytes_changes_no_finding(select: list[str] | None) -> None:
    found = 0
    for name, source in SOURCES:
        with_skipping = _rows(source, select, prefilter=True)
        assert with_skipping == _rows(source, select, prefilter=False), name
        found += len(with_skipping)
    if select is None:
        assert found > 100  # the comparison covers real findings, not only silence


def test_the_corpus_really_exercises_the_skipping() -> None:
    """Rules are left out of some files, and definitions are blanked in others."""
    rules_left_out = files_with_skipped_definitions = 0
    for _, source in SOURCES:
        data = encode_source(source)
        running = [rule for rule in select_rules() if matches(rule.triggers, data)]
        rules_left_out += len(RULES) - len(running)
        local = [rule.definition_triggers for rule in running]
        known = [groups for groups in local if groups is not None]
        if running and len(known) == len(local):
            skip = skippable_definitions(data, known)
            if skip and SourceText(source, skip=skip, original=data).skipped:
                files_with_skipped_definitions += 1
    assert rules_left_out > len(SOURCES)
    assert files_with_skipped_definitions >= 10


SAMPLE = """import torch


@torch.no_grad()
def evaluate(model, loader):
    for x in loader:
        print(model(x.cuda()).item())


def build(
    size: int,
) -> torch.Tensor:
    return torch.zeros(size)

LIMIT = 3
class Config:
    value = 1
"""


def test_definitions_are_found_with_their_decorators_up_to_the_next_top_level_statement() -> None:
    data = SAMPLE.encode()
    ranges = [data[start:end].decode() for start, end in definitions(data)]
    assert ranges == [
        "@torch.no_grad()\ndef evaluate(model, loader):\n    for x in loader:\n"
        "        print(model(x.cuda()).item())\n\n\n",
        "def build(\n    size: int,\n) -> torch.Tensor:\n    return torch.zeros(size)\n\n",
        "class Config:\n    value = 1\n",
    ]


def test_a_definition_without_a_loop_is_not_parsed_for_the_loop_rules() -> None:
    data = SAMPLE.encode()
    (al100,) = select_rules(["AL100"])
    assert al100.definition_triggers is not None
    skip = skippable_definitions(data, [al100.definition_triggers])
    assert [data[start:end].split(b"\n")[0] for start, end in skip] == [b"def build(", b"class Config:"]
    text = SourceText(SAMPLE, skip=skip, original=data)
    assert text.skipped == tuple(skip)
    assert [c.type for c in text.root.children] == ["import_statement", "decorated_definition", "expression_statement"]
    assert text.whole_data == data  # byte-level facts of the file still see all of it
    assert [(f.line, f.column, f.code) for f in lint_source_strict(SAMPLE, select=["AL100"])] == [(7, 30, "AL100")]


def test_a_definition_start_inside_a_string_falls_back_to_parsing_the_whole_file() -> None:
    source = 'EXAMPLE = """\ndef train(model, loader):\n    pass\n"""\nfor x in range(3):\n    pass\n'
    data = source.encode()
    skip = skippable_definitions(data, [((b"nothing matches this",),)])
    assert skip == [(data.index(b"def train"), data.index(b'"""\nfor'))]  # the string's end looks like code
    text = SourceText(source, skip=skip, original=data)
    assert text.skipped == () and text.data == data
    assert [c.type for c in text.root.children] == ["expression_statement", "for_statement"]


CLASS_SAMPLE = '''import torch


@register
class Trainer:
    """Trains."""

    def forward(self, x):
        return x.cuda()

    @torch.no_grad()
    def evaluate(self, loader):
        for x in loader:
            print(x.cuda().item())

    def format(self, before):
        return str(before)
'''


def test_in_a_class_the_methods_without_a_loop_are_left_out_and_the_class_keeps_its_body() -> None:
    data = CLASS_SAMPLE.encode()
    (al100,) = select_rules(["AL100"])
    assert al100.definition_triggers is not None
    skip = skippable_definitions(data, [al100.definition_triggers])
    # `forward`, `format` and `before` are no loop words; the docstring is the body's first statement
    assert [data[start:end].split(b"\n")[0].strip() for start, end in skip] == [
        b"def forward(self, x):",
        b"def format(self, before):",
    ]
    text = SourceText(CLASS_SAMPLE, skip=skip, original=data)
    assert text.skipped == tuple(skip)
    (decorated,) = [c for c in text.root.children if c.type == "decorated_definition"]
    body = decorated.child_by_field_name("definition").child_by_field_name("body")
    assert [c.type for c in body.named_children] == ["expression_statement", "decorated_definition"]
    assert [(f.line, f.column, f.code) for f in lint_source_strict(CLASS_SAMPLE, select=["AL100"])] == [
        (14, 27, "AL100")
    ]


CALLER_SAMPLE = """import torch


def accuracy(output, target):
    for k in range(3):
        print(output.argmax().item())


def evaluate(model, x):
    return accuracy(model(x.cuda()), x)


def unrelated(x):
    return x
"""


def test_a_definition_that_calls_a_kept_function_is_kept_too() -> None:
    """A parameter's device is what every call in the file passes it: the caller without a
    loop is parsed because `accuracy`, which has one, is."""
    data = CALLER_SAMPLE.encode()
    (al100,) = select_rules(["AL100"])
    assert al100.definition_triggers is not None
    skip = skippable_definitions(data, [al100.definition_triggers])
    assert [data[start:end].split(b"\n")[0] for start, end in skip] == [b"def unrelated(x):"]
    assert [(f.line, f.column, f.code) for f in lint_source_strict(CALLER_SAMPLE, select=["AL100"])] == [
        (f.line, f.column, f.code) for f in lint_source_strict(CALLER_SAMPLE, select=["AL100"], prefilter=False)
    ]


def test_a_definition_on_the_first_line_is_found_as_on_any_other() -> None:
    source = "@torch.no_grad()\ndef first(x):\n    return x\nclass Second:\n    def method(self):\n        pass\n"
    data = source.encode()
    second = data.index(b"class")
    assert definitions(data) == [(0, second), (second, len(data))]


def test_a_triple_quote_that_never_closes_is_the_row_left_open() -> None:
    # `"""` then `"` on the same line: read as `""` and `"..."`, a scan would find nothing open.
    data = b'import torch\n"""Model configuration"\nx = (1)\n'
    assert rows_left_open(data, line_starts(data)) == [1]
    assert rows_left_open(b'"""Docstring."""\nx = (1)\n', line_starts(b'"""Docstring."""\nx = (1)\n')) == []


LOOP_WORDS_SAMPLE = '''import torch


def documented(model, x):
    """Runs the model for every batch; while it runs, nothing is read."""
    # for each batch: no loop here either
    label = "for x in range(3)" + 'while True'
    return model(x.cuda()), label


def in_an_fstring(model, xs):
    return f"{[model(x.cuda()).item() for x in xs]}"


def after_a_docstring(model, loader):
    """One pass for the epoch."""
    for x in loader:
        print(model(x.cuda()).item())


def after_a_comment(model, loader):
    # don't read "the loss" here
    while loader:
        print(model(loader.pop().cuda()).item())


def after_a_hash_in_a_string(model, xs, sep="#"):
    return [model(x.cuda()).item() for x in xs]


def after_nested_quotes(model, xs, d):
    name = f"{d["k"]}"
    return [model(x.cuda()).item() for x in xs]


def moved(n, device):
    a = torch.zeros(n).to(device)
    b = (torch.ones(n)  # the ones
         .to(device))
    c = torch . \\
        randn(n).cuda()
    return a, b, c


def parenthesized(n, device):
    return (torch.eye(n)).to(device)


def moved_elsewhere(n, x):
    y = torch.zeros(n)
    return x.to(y.device), y.cuda()
'''


def test_a_loop_word_in_a_docstring_comment_or_string_keeps_no_definition_a_loop_in_code_does() -> None:
    """AL100's definitions need a loop written in code (triggers.CODE_LOOP): `documented` says
    `for` and `while` only in its docstring, a comment and strings, and is left out; every other
    definition has a loop the scan must not miss: in an f-string's braces, after a docstring, a
    comment with a quote, a string holding `#`, an f-string with nested quotes. AL302's
    definitions need `torch.<factory>` and a `.to`/`.cuda` attribute right after a closing
    bracket (the move's receiver is the factory's call, maybe in brackets), spaces, comments and
    backslashes between the tokens allowed (`moved`, `parenthesized`); `moved_elsewhere` moves
    other tensors and is left out. A move written on another line than its factory is reported
    on the factory's line."""
    data = LOOP_WORDS_SAMPLE.encode()
    (al100,) = select_rules(["AL100"])
    assert al100.definition_triggers is not None
    skip = skippable_definitions(data, [al100.definition_triggers])
    assert [data[start:end].split(b"\n")[0] for start, end in skip] == [
        b"def documented(model, x):",
        b"def moved(n, device):",
        b"def parenthesized(n, device):",
        b"def moved_elsewhere(n, x):",
    ]
    expected = [
        (12, 31, "AL100"),
        (18, 30, "AL100"),
        (24, 41, "AL100"),
        (28, 28, "AL100"),
        (33, 28, "AL100"),
        (37, 23, "AL302"),
        (38, 9, "AL302"),
        (40, 8, "AL302"),
        (46, 26, "AL302"),
    ]
    assert [(f.line, f.column, f.code) for f in lint_source_strict(LOOP_WORDS_SAMPLE)] == expected
    assert [(f.line, f.column, f.code) for f in lint_source_strict(LOOP_WORDS_SAMPLE, prefilter=False)] == expected
    (al302,) = select_rules(["AL302"])
    assert al302.definition_triggers is not None
    assert [
        data[start:end].split(b"\n")[0] for start, end in skippable_definitions(data, [al302.definition_triggers])
    ] == [
        b"def documented(model, x):",
        b"def in_an_fstring(model, xs):",
        b"def after_a_docstring(model, loader):",
        b"def after_a_comment(model, loader):",
        b'def after_a_hash_in_a_string(model, xs, sep="#"):',
        b"def after_nested_quotes(model, xs, d):",
        b"def moved_elsewhere(n, x):",
    ]


def test_the_code_loop_scan_answers_a_loop_where_it_cannot_tell() -> None:
    """A string left open (a line being typed) or never closed: what follows may be code."""
    assert CODE_LOOP.search(b'def f(xs):\n    s = "open\n    return [x for x in xs]\n') is not None
    assert CODE_LOOP.search(b'def f(xs):\n    s = """never closed\n    for x in xs: pass\n') is not None
    assert CODE_LOOP.search(b'def f(xs):\n    s = rb"for" + b"while" + r"\\\\"  # for\n    return s\n') is None
    assert CODE_LOOP.search(b'def f(xs):\n    s = rf"{[x for x in xs]}"\n') is not None


def test_a_caseless_trigger_matches_any_case_as_re_ignorecase_would() -> None:
    """AL100's GradScaler trigger (`scaler` in any case): a file whose only evidence is an
    upper-case name still runs the rule."""
    scaler = Caseless(b"scaler")
    assert scaler.search(b"AMP_SCALER.step(opt)") is not None
    assert scaler.search(b"grad_Scaler") is not None
    assert scaler.search(b"scale r") is None
    assert scaler.search(b"SCALER = 1", 1) is None  # only the range is searched
    (al100,) = select_rules(["AL100"])
    assert matches(al100.triggers, b"for x in y:\n    AMP_SCALER.step(opt)\n")
    assert not matches(al100.triggers, b"for x in y:\n    step(opt)\n")


TRAINING_STEP_WITHOUT_A_LOOP = """import torch


class Learner:
    def update_critic(self, batch):
        loss = self.critic(batch).pow(2).mean()
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()
        return loss.item()
"""


def test_a_function_that_takes_a_training_step_is_linted_in_a_file_without_a_loop() -> None:
    """AL100 reports the reads of a function that takes a training step outside its loops (it is
    called once per step, often from another module): its file triggers must not ask for a loop
    in the file, nor for `optim` in the optimizer's name (`self.critic_opt.step()`)."""
    expected = [
        (
            10,
            20,
            10,
            26,
            "AL100",
            "warning",
            "`.item()` in `update_critic`, which takes a training step: the host waits for the GPU on every "
            "training step",
            None,
        )
    ]
    assert _rows(TRAINING_STEP_WITHOUT_A_LOOP, None, prefilter=True) == expected
    assert _rows(TRAINING_STEP_WITHOUT_A_LOOP, None, prefilter=False) == expected
    lint_source_strict(TRAINING_STEP_WITHOUT_A_LOOP.replace(".item()", ""), path="fuzz://step.py", incremental=True)
    incremental = lint_source_strict(TRAINING_STEP_WITHOUT_A_LOOP, path="fuzz://step.py", incremental=True)
    assert [(f.line, f.column, f.code) for f in incremental] == [(10, 20, "AL100")]
