"""One parse of one source text, shared by every rule.

The parser is tree-sitter's Python grammar (docs/rules.md, "Parser"): it never fails, it marks the
broken region of a half-typed line with ERROR nodes and keeps the rest of the tree intact, and it
parses a 5,000-line file in milliseconds. Tree-sitter counts columns in UTF-8 bytes; findings count
Python str characters, so every position goes through `SourceText.position`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Optional

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Tree


@lru_cache(maxsize=1)
def python_language() -> Language:
    return Language(tree_sitter_python.language())


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(python_language())


def encode_source(text: str) -> bytes:
    # Lone surrogates are legal in a Python str (an editor buffer may hold one mid-edit) but not
    # in UTF-8; surrogatepass keeps one str character per code point so positions map back.
    return text.encode("utf-8", errors="surrogatepass")


class SourceText:
    """The text, its UTF-8 bytes and the tree of one lint run."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = encode_source(text)
        self.tree: Tree = _parser().parse(self.data)
        self.root: Node = self.tree.root_node
        # Tree-sitter rows split at "\n" only (a lone "\r" is not a row break for it), so the
        # line table does the same.
        self._line_starts = [0]
        find = self.data.find
        at = find(b"\n")
        while at != -1:
            self._line_starts.append(at + 1)
            at = find(b"\n", at + 1)

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_bytes(self, row: int) -> bytes:
        """Row `row` (0-based) without its line break."""
        if row < 0 or row >= len(self._line_starts):
            return b""
        start = self._line_starts[row]
        end = self._line_starts[row + 1] - 1 if row + 1 < len(self._line_starts) else len(self.data)
        return self.data[start:end]

    def position(self, point: tuple[int, int]) -> tuple[int, int]:
        """Tree-sitter (row, byte column) -> (1-based line, 0-based str column)."""
        row, byte_col = point
        line = self.line_bytes(row)
        head = line[:byte_col]
        if head.isascii():
            return row + 1, len(head)
        return row + 1, len(head.decode("utf-8", errors="surrogatepass"))

    def node_text(self, node: Node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

    def span(self, node: Node) -> tuple[int, int, int, int]:
        line, col = self.position(node.start_point)
        end_line, end_col = self.position(node.end_point)
        return line, col, end_line, end_col


def ancestors(node: Node) -> Iterator[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def walk(node: Node) -> Iterator[Node]:
    """Pre-order walk of `node`'s subtree (named and anonymous nodes), iterative so that deeply
    nested input cannot exhaust the Python stack."""
    cursor = node.walk()
    depth = 0
    while True:
        yield cursor.node  # type: ignore[misc]
        if cursor.goto_first_child():
            depth += 1
            continue
        while True:
            if depth == 0:
                return
            if cursor.goto_next_sibling():
                break
            cursor.goto_parent()
            depth -= 1
