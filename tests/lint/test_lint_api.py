"""`lint_source` as the language server uses it: broken code, odd text, selection, suppression."""

from __future__ import annotations

import re
from pathlib import Path

from atenlens.lint import RULES, Finding, lint_source
from atenlens.lint.docs import document, rule_markdown, sections
from atenlens.report import Code

ROOT = Path(__file__).resolve().parents[2]

LOOP_WITH_ITEM = "def train(loader, model, device):\n    for x in loader:\n        total = model(x).item()\n"


def positions(findings: list[Finding]) -> list[tuple[int, int, str]]:
    return [(f.line, f.column, f.code) for f in findings]


def test_a_half_typed_line_leaves_the_rest_of_the_file_linted() -> None:
    source = (
        "import torch\n"
        "def typing_now(x):\n"
        "    y = x.to(\n" + LOOP_WITH_ITEM + "def other():\n"
        "    for _ in range(3):\n"
        "        torch.cuda.synchronize()\n"
    )
    assert positions(lint_source(source)) == [(6, 25, "AL100"), (9, 8, "AL101")]


def test_a_syntax_error_elsewhere_leaves_the_rest_of_the_file_linted() -> None:
    source = "import torch\ndef broken(:\n    return )\n" + LOOP_WITH_ITEM + "x = torch.randn(3).to(device)\n"
    assert positions(lint_source(source)) == [(6, 25, "AL100"), (7, 19, "AL302")]


def test_an_unclosed_string_above_does_not_hide_later_findings() -> None:
    source = "s = 'unterminated\n" + LOOP_WITH_ITEM
    assert positions(lint_source(source)) == [(4, 25, "AL100")]


def test_columns_count_str_characters_not_bytes() -> None:
    source = 'for x in xs.cuda():\n    s = "形状 🚀"; v = x.item()\n'
    (finding,) = lint_source(source)
    assert (finding.line, finding.column, finding.end_column) == (2, 22, 28)
    assert source.splitlines()[1][finding.column : finding.end_column] == "item()"


def test_odd_text_gives_findings_or_nothing_but_never_raises() -> None:
    for source in [
        "",
        "\x00",
        "for x in y:\n\x00  x.item()\n",
        "\ud800 = 1\nfor x in y: x.item()\n",
        "for x in y:\r\n    x.item()\r\n",
        "(" * 5000,
        "[" * 3000 + "x.item() for x in y" + "]" * 3000,
        "\ufeffimport torch\n",
        "def f(:\n" * 500,
    ]:
        result = lint_source(source)
        assert isinstance(result, list)
    assert positions(lint_source("for x in y.cuda():\r\n    x.item()\r\n")) == [(2, 6, "AL100")]
    assert positions(lint_source("\ud800 = 1\nfor x in y.cuda(): x.item()\n")) == [(2, 21, "AL100")]


def test_findings_are_sorted_by_position() -> None:
    source = Path(ROOT / "tests/lint/fixtures/AL302_create_then_move.py").read_text()
    found = lint_source(source)
    assert [(f.line, f.column) for f in found] == sorted((f.line, f.column) for f in found)
    assert len(found) == 17


def test_select_and_ignore_take_codes_and_prefixes() -> None:
    source = LOOP_WITH_ITEM + "        torch.cuda.synchronize()\n"
    assert [f.code for f in lint_source(source)] == ["AL100", "AL101"]
    assert [f.code for f in lint_source(source, select=["AL101"])] == ["AL101"]
    assert [f.code for f in lint_source(source, select=["AL1"])] == ["AL100", "AL101"]
    assert [f.code for f in lint_source(source, ignore=["al100"])] == ["AL101"]
    assert lint_source(source, select=["AL2"]) == []
    assert lint_source(source, select=["AL1"], ignore=["AL1"]) == []


def test_noqa_suppresses_the_named_codes_or_all_on_its_line() -> None:
    body = "for x in y.cuda():\n    torch.cuda.synchronize(); x.item()  {}\n"
    assert [f.code for f in lint_source(body.format(""))] == ["AL101", "AL100"]
    assert [f.code for f in lint_source(body.format("# noqa: AL100"))] == ["AL101"]
    assert [f.code for f in lint_source(body.format("# noqa:AL101,AL100"))] == []
    assert [f.code for f in lint_source(body.format("# noqa"))] == []
    assert [f.code for f in lint_source(body.format("# noqa: AL300"))] == ["AL101", "AL100"]


def test_rule_codes_are_unique_and_come_from_the_shared_code_table() -> None:
    codes = [rule.code for rule in RULES]
    assert len(codes) == len(set(codes)) == 7
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    shared = {value for key, value in vars(Code).items() if key.isupper()}
    assert set(codes) <= shared
    assert {Code.SYNC, Code.SYNC_API, Code.PAGEABLE_COPY, Code.UNSYNCED_D2H_READ} <= set(codes)


def test_every_rule_docstring_has_the_fixed_sections() -> None:
    for rule in RULES:
        headings = re.findall(r"^(What it does|Why it matters|Example|Fix):$", rule.doc, flags=re.M)
        assert headings == ["What it does", "Why it matters", "Example", "Fix"], rule.code


def test_docs_rules_md_is_what_the_generator_makes_from_the_docstrings() -> None:
    # One source: the rules' docstrings. `python -m atenlens.lint.docs > docs/rules.md` regenerates.
    committed = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == document(), "docs/rules.md is stale: python -m atenlens.lint.docs > docs/rules.md"


def test_each_rule_section_carries_its_docstring_sections_in_order() -> None:
    for rule in RULES:
        section = rule_markdown(rule)
        assert section.startswith(f"## {rule.code} `{rule.name}`\n\n")
        assert re.findall(r"^\*\*(.+)\*\*$", section, flags=re.M) == [
            "What it does",
            "Why it matters",
            "Example",
            "Fix",
        ], rule.code
        example = sections(rule)["Example"]
        assert f"**Example**\n\n```python\n{example}\n```\n" in section
        assert example and not example.startswith(" ")


def test_lint_source_strict_takes_the_arguments_of_lint_source_in_the_same_order() -> None:
    from atenlens.lint.engine import lint_source_strict

    source = LOOP_WITH_ITEM + "def other():\n    for _ in range(3):\n        torch.cuda.synchronize()\n"
    # positionally: source, path, select, ignore
    assert positions(lint_source_strict(source, "mem://a.py", ["AL1"], ["AL101"])) == [(3, 25, "AL100")]
    assert positions(lint_source(source, "mem://b.py", ["AL1"], ["AL101"])) == [(3, 25, "AL100")]


def test_calls_in_loops_are_the_calls_inside_loops_in_the_order_calls_gives() -> None:
    from atenlens.lint.context import LintContext
    from atenlens.lint.source import SourceText

    source = (
        "def f(xs, t):\n"
        "    n = int(t)\n"
        "    for x in xs:\n"
        "        y = x.float().int()\n"
        "        print([str(v) for v in y], float(x))\n"
        "    total = sum(int(v) for v in xs)\n"
        "    while n:\n"
        "        n = int(n) - 1\n"
        "    return str(n)\n"
    )
    names = ("float", "int", "bool", "str", "print")
    ctx = LintContext(SourceText(source), frozenset(names))
    shown = [(c.start_point[0] + 1, c.start_point[1], c.text.decode()) for c in ctx.calls_in_loops(*names[:4])]
    assert shown == [
        (4, 12, "x.float()"),
        (4, 12, "x.float().int()"),
        (5, 15, "str(v)"),
        (5, 35, "float(x)"),
        (6, 16, "int(v)"),
        (8, 12, "int(n)"),
    ]
    assert ctx.calls_in_loops(*names[:4]) == [c for c in ctx.calls(*names[:4]) if ctx.in_loop(c)]
    assert [c.start_point[0] + 1 for c in ctx.calls_in_loops("print")] == [5]
