"""The server's copy of a document after incremental changes: the text the editor has, and its lines
as LSP counts them (\\n, \\r\\n, \\r), after every change. The server splices each change in at its
offsets and splits only the lines around it again (lsp/protocol.py); these cases are the ones where
a line end is made, joined or split at the change's edge."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace import TextDocument

from atenlens.lsp.protocol import LspTextDocument, lsp_lines


def change(start: tuple[int, int], end: tuple[int, int], text: str) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(*start), types.Position(*end)), text=text
    )


def applied(source: str, *changes: types.TextDocumentContentChangePartial) -> LspTextDocument:
    document = LspTextDocument("file:///t.py", source)
    for each in changes:
        document.apply_change(each)
    return document


def test_a_letter_typed_and_deleted():
    document = applied("a = 1\nb = 2\nc = 3\n", change((1, 1), (1, 1), "x"))
    assert document.source == "a = 1\nbx = 2\nc = 3\n"
    assert document.lines == ("a = 1\n", "bx = 2\n", "c = 3\n")
    document.apply_change(change((1, 1), (1, 2), ""))
    assert document.source == "a = 1\nb = 2\nc = 3\n"
    assert document.lines == ("a = 1\n", "b = 2\n", "c = 3\n")


def test_a_newline_typed_after_a_lone_cr_joins_it_into_one_line_end():
    document = applied("a\rb\n", change((1, 0), (1, 0), "\n"))
    assert document.source == "a\r\nb\n"
    assert document.lines == ("a\r\n", "b\n")
    document.apply_change(change((1, 1), (1, 1), "!"))  # lands on the line after the CRLF
    assert document.source == "a\r\nb!\n"


def test_a_cr_typed_before_a_newline_joins_it_into_one_line_end():
    document = applied("a\nb\n", change((0, 1), (0, 1), "\r"))
    assert document.source == "a\r\nb\n"
    assert document.lines == ("a\r\n", "b\n")


def test_text_between_a_cr_and_a_newline_splits_them():
    document = applied("a\r\nb", change((0, 1), (0, 1), "x"))
    assert document.source == "ax\r\nb"
    document = applied("a\rb\nc", change((1, 0), (1, 1), ""))  # b deleted: \r and \n now meet
    assert document.source == "a\r\nc"
    assert document.lines == ("a\r\n", "c")


def test_lines_joined_and_split_across_the_change():
    document = applied("one\ntwo\nthree\nfour\n", change((1, 1), (2, 2), "X\nY\nZ"))
    assert document.source == "one\ntX\nY\nZree\nfour\n"
    assert document.lines == ("one\n", "tX\n", "Y\n", "Zree\n", "four\n")


def test_typing_at_the_end_of_the_file_and_past_it():
    document = applied("x = 1\n", change((1, 0), (1, 0), "y = 2"))
    assert document.source == "x = 1\ny = 2"
    assert document.lines == ("x = 1\n", "y = 2")
    document = applied("", change((0, 0), (0, 0), "a\n"))
    assert document.source == "a\n"


def test_characters_python_counts_as_line_breaks_do_not_end_lines():
    document = applied("a\x0cb\nc\u2028d\n", change((1, 3), (1, 3), "!"))
    assert document.source == "a\x0cb\nc\u2028d!\n"
    assert document.lines == ("a\x0cb\n", "c\u2028d!\n")


def test_positions_count_utf16_units():
    document = applied("s = '🚀x'\n", change((0, 7), (0, 8), "y"))  # 🚀 is two UTF-16 units
    assert document.source == "s = '🚀y'\n"


PIECES = st.sampled_from(["a", "b c", "\n", "\r", "\r\n", "\t", "形", "🚀", "\x0c", "\u2028", "def f():\n"])
TEXTS = st.lists(PIECES, max_size=12).map("".join)


@st.composite
def edits(draw):
    source = draw(TEXTS)
    ranges = []
    for _ in range(draw(st.integers(1, 6))):
        points = sorted(
            (draw(st.integers(0, source.count("\n") + source.count("\r") + 1)), draw(st.integers(0, 6)))
            for _ in range(2)
        )
        ranges.append((points[0], points[1], draw(TEXTS)))
    return source, ranges


class PyglsDocument(TextDocument):
    """pygls's own change (the reference for the text), with LSP's line ends."""

    @property
    def lines(self):
        return lsp_lines(self.source)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(case=edits())
def test_the_text_and_lines_are_pyglss_after_any_changes(case):
    source, ranges = case
    ours, reference = LspTextDocument("file:///t.py", source), PyglsDocument("file:///t.py", source)
    for start, end, text in ranges:
        ours.apply_change(change(start, end, text))
        reference.apply_change(change(start, end, text))
        assert ours.source == reference.source
        assert ours.lines == lsp_lines(ours.source)


FUNCTIONS = """import torch


def first(x):
    return x + 1


# atenlens: second(torch.ones(2))
def second(x):
    return x * 2
"""


def function_lines(state) -> list[tuple[str, int, int, int, object]]:
    return [(f.qualname, f.first_line, f.line, f.end_line, f.directive_line) for f in state._functions]


def test_functions_keep_or_move_their_lines_with_each_change():
    from atenlens.lsp.documents import DocumentState
    from atenlens.lsp.text import LineShift

    state = DocumentState("file:///t.py")
    state.functions(FUNCTIONS)
    assert function_lines(state) == [("first", 4, 4, 5, None), ("second", 9, 9, 10, 8)]
    state.shift(LineShift.of_change(4, 4, 5, "y"))  # a letter typed in first's body
    assert function_lines(state) == [("first", 4, 4, 5, None), ("second", 9, 9, 10, 8)]
    state.shift(LineShift.of_change(5, 5, 0, "\n"))  # Enter below first: second moves down
    assert function_lines(state) == [("first", 4, 4, 5, None), ("second", 10, 10, 11, 9)]
    state.shift(LineShift.of_change(1, 3, 0, ""))  # the two blank lines above first deleted
    assert function_lines(state) == [("first", 2, 2, 3, None), ("second", 8, 8, 9, 7)]
    state.shift(LineShift.whole_text())
    assert function_lines(state) == []
