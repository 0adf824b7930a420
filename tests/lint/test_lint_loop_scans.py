"""AL100's scans of its loops (rules/sync_in_loop.py): the `if`/`while`/`assert` keywords,
subscripts, `%` formats and f-string prefixes are found from a literal (a keyword, a `[`, a quote), not by a
regular expression tried at every byte, and must be exactly the matches that scanning each loop
with the rule's pattern gives: the same places, the same match objects, in the same order."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

from atenlens.lint.context import LintContext
from atenlens.lint.rules import sync_in_loop
from atenlens.lint.source import SourceText

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "bench"))
from gen_corpus import generate  # noqa: E402

SAMPLE = """def f(xs, y):
    if xs[0]:
        pass
    for x in xs:
        if x[0] and y [1] and (x)[2] and [3][0]:
            print(f"{x}", rf'{y}', Rb"no", FR"{x}", u"no", "%d" % x)
        elif x if x else 2:
            pass
        while x: assert y
        elif_ = notif = 1
"""


def _subscripts(ctx: LintContext) -> Iterator["re.Match[bytes]"]:
    return sync_in_loop._matches_before_in_loops(ctx, sync_in_loop._SUBSCRIPT, b"[")


def _percents(ctx: LintContext) -> Iterator["re.Match[bytes]"]:
    return sync_in_loop._matches_before_in_loops(ctx, sync_in_loop._PERCENT, b"%")


SCANS = [
    (sync_in_loop._KEYWORDS, sync_in_loop._keywords_in_loops),
    (sync_in_loop._SUBSCRIPT, _subscripts),
    (sync_in_loop._FSTRING, sync_in_loop._fstring_prefixes_in_loops),
    (sync_in_loop._PERCENT, _percents),
]


def _found(source: str, scan: Callable[[LintContext], Iterator["re.Match[bytes]"]]) -> list[tuple[int, int, bytes]]:
    """(line, column, matched bytes) of each match, 1-based lines."""
    ctx = LintContext(SourceText(source), frozenset())
    data = ctx.source.data
    return [
        (data.count(b"\n", 0, m.start()) + 1, m.start() - (data.rfind(b"\n", 0, m.start()) + 1), m.group())
        for m in scan(ctx)
    ]


def test_the_loop_scans_find_keywords_subscripts_and_fstring_prefixes_only_inside_loops() -> None:
    # `if xs[0]` (line 2) is outside the loop; `elif_` and `notif` are no keywords
    assert _found(SAMPLE, sync_in_loop._keywords_in_loops) == [
        (5, 8, b"if"),
        (7, 8, b"elif"),
        (7, 15, b"if"),
        (9, 8, b"while"),
        (9, 17, b"assert"),
    ]
    # from the last byte before the bracket that is not a space; the tree later keeps subscripts
    assert _found(SAMPLE, _subscripts) == [
        (5, 11, b"x["),
        (5, 20, b"y ["),
        (5, 32, b")["),
        (5, 39, b"d ["),
        (5, 43, b"]["),
    ]
    assert _found(SAMPLE, sync_in_loop._fstring_prefixes_in_loops) == [(6, 18, b"f"), (6, 26, b"rf"), (6, 43, b"FR")]
    # from the opening quote of "%d" (the tree later finds which is the operator)
    assert _found(SAMPLE, _percents) == [(6, 59, b'"%'), (6, 62, b'" %')]


def _sources() -> list[tuple[str, str]]:
    real = sorted(p for folder in ("corpus_real", "corpus_heldout", "fixtures") for p in (HERE / folder).glob("*.py"))
    return [(p.name, p.read_text(encoding="utf-8")) for p in real] + [("generated", generate(5000)), ("sample", SAMPLE)]


@pytest.mark.parametrize("pattern, scan", SCANS, ids=["keywords", "subscripts", "fstrings", "percents"])
def test_each_loop_scan_gives_the_matches_of_its_pattern_in_each_loop(pattern, scan) -> None:
    total = 0
    for name, source in _sources():
        ctx = LintContext(SourceText(source), frozenset())
        expected = [(m.span(), m.regs) for m in sync_in_loop._matches_in_loops(ctx, pattern)]
        assert [(m.span(), m.regs) for m in scan(ctx)] == expected, name
        total += len(expected)
    assert total > 10  # the loops of the corpus hold real matches: the comparison proves something
