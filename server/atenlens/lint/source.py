"""One parse of one source text, shared by every rule.

The parser is tree-sitter's Python grammar (docs/lint.md, "Parser"): it never fails, it marks the
broken region of a half-typed line with ERROR nodes and keeps the rest of the tree intact, and it
parses a 5,000-line file in milliseconds. Tree-sitter counts columns in UTF-8 bytes; findings count
Python str characters, so every position goes through `SourceText.position`.

Recovery: tree-sitter's own recovery is good for most damage, but an unclosed bracket or
triple-quoted string (the typical half-typed line, `y = x.to(`) can swallow everything after it
into one ERROR node, or make the whole file one. So before parsing, every line that leaves a
bracket or a triple-quoted string open (a regular-expression scan, only when the counts of
brackets or triple quotes do not match) is blanked: replaced by spaces of the same byte length, so
every offset and position stays valid. When the text still has a syntax error, it is mended inside
the top-level definitions that hold the damage (`SourceText._mend`): the text is cut into chunks
at the lines that start a top-level statement, each chunk that does not parse on its own has the
rows of its errors blanked until it does, and the mended text, error-free, is parsed incrementally.
Only when that fails is the text parsed fresh and, while an ERROR node still spans several lines,
the line it starts on blanked and the text re-parsed incrementally: up to 16 times, fewer for
files over ~200 KB (the bytes re-parsed are bounded). Rules then see the code around the damage
as written.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Iterator, Optional, Sequence

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Point, Range, Tree

from atenlens.lint.triggers import blank


@lru_cache(maxsize=1)
def python_language() -> Language:
    return Language(tree_sitter_python.language())


MAX_REPAIRS = 16
# Each repair re-parses the damaged file; bound the bytes re-parsed in all so that a huge file
# with damage everywhere costs a few parses, not sixteen (16 repairs up to ~200 KB, 5,000 lines).
REPAIR_BYTES_BUDGET = 16 * 200_000
CACHED_DOCUMENTS = 16
_parse_lock = threading.Lock()  # a tree-sitter Parser is not safe to share between threads


@dataclass(frozen=True)
class _Parsed:
    """What one lint run of a document parsed: its text, the text with blanked rows and the tree
    of the latter (never edited once cached)."""

    original: bytes
    data: bytes
    tree: Tree
    blanked_rows: tuple[int, ...]
    # What the next version's parse starts from: (data, tree), or for a mended text (`_mend`) its
    # text before the damage was blanked and that text's tree (an edit of a line that is not
    # blanked there costs an edit; from the mended tree, putting the line back cost a fresh parse).
    parse_from: Optional[tuple[bytes, Tree]] = None


_last_parse: "OrderedDict[str, _Parsed]" = OrderedDict()


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(python_language())


@lru_cache(maxsize=1)
def _kept_parser() -> Parser:
    """A second parser for parses of kept ranges only (its `included_ranges` change per parse;
    the first one always reads everything)."""
    return Parser(python_language())


def line_starts(data: bytes) -> list[int]:
    """Byte offset of each row's start (rows split at "\n"), computed in C: a file of 5,000
    lines would cost 5,000 Python steps in a loop."""
    return list(accumulate(map((1).__add__, map(len, data.split(b"\n")[:-1])), initial=0))


def encode_source(text: str) -> bytes:
    # Lone surrogates are legal in a Python str (an editor buffer may hold one mid-edit) but not
    # in UTF-8; surrogatepass keeps one str character per code point so positions map back.
    return text.encode("utf-8", errors="surrogatepass")


def _parse(data: bytes, previous: Optional[tuple[bytes, Tree]] = None) -> Tree:
    """Parse `data`, incrementally from `previous` (bytes and their tree, left untouched) when
    given: only the changed byte range is re-parsed, which is what makes linting on every
    keystroke cheap."""
    with _parse_lock:
        if previous is None:
            return _parser().parse(data)
        old_data, old_tree = previous
        tree = old_tree.copy()
        _apply_edit(tree, old_data, data)
        return _parser().parse(data, tree)


def _cached(document: Optional[str]) -> Optional[_Parsed]:
    if document is None:
        return None
    with _parse_lock:
        return _last_parse.get(document)


def _remember(document: Optional[str], parsed: _Parsed) -> None:
    if document is None:
        return
    with _parse_lock:
        _last_parse[document] = parsed
        _last_parse.move_to_end(document)
        while len(_last_parse) > CACHED_DOCUMENTS:
            _last_parse.popitem(last=False)


def _apply_edit(tree: Tree, old: bytes, new: bytes) -> None:
    """Tell `tree` (parsed from `old`) which byte range changed to give `new`."""
    limit = min(len(old), len(new))
    prefix = _common_length(old, new, limit, from_end=False)
    suffix = _common_length(old, new, limit - prefix, from_end=True)
    old_end, new_end = len(old) - suffix, len(new) - suffix
    tree.edit(
        start_byte=prefix,
        old_end_byte=old_end,
        new_end_byte=new_end,
        start_point=_point(old, prefix),
        old_end_point=_point(old, old_end),
        new_end_point=_point(new, new_end),
    )


def _common_length(a: bytes, b: bytes, limit: int, from_end: bool) -> int:
    """Length of the common prefix (or suffix) of a and b, at most `limit`: a binary search of
    slice comparisons, each a memcmp."""
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        same = a[len(a) - mid :] == b[len(b) - mid :] if from_end else a[:mid] == b[:mid]
        if same:
            low = mid
        else:
            high = mid - 1
    return low


def _point(data: bytes, offset: int) -> Point:
    row = data.count(b"\n", 0, offset)
    return Point(row, offset - (data.rfind(b"\n", 0, offset) + 1))


class SourceText:
    """The text, its UTF-8 bytes and the tree of one lint run."""

    def __init__(
        self,
        text: str,
        document: Optional[str] = None,
        skip: Sequence[tuple[int, int]] = (),
        original: Optional[bytes] = None,
    ) -> None:
        """`skip`: byte ranges of top-level definitions no selected rule needs (triggers.py),
        blanked before the parse of a file that is not kept for incremental re-parsing
        (`document` None); ignored when the file has damage to repair or the kept text does
        not parse cleanly on its own. `original`: `text` already encoded."""
        self.text = text
        self.original = encode_source(text) if original is None else original
        self._parse_from: Optional[tuple[bytes, Tree]] = None
        self.skipped: tuple[tuple[int, int], ...] = ()
        # Tree-sitter rows split at "\n" only (a lone "\r" is not a row break for it), so the
        # line table does the same.
        self._line_starts = line_starts(self.original)
        cached = _cached(document)
        if document is None and skip and self._parse_kept(skip):
            pass
        elif cached is not None and cached.original == self.original:
            self.data, self.tree, self.blanked_rows = cached.data, cached.tree, list(cached.blanked_rows)
        else:
            self._parse(None if cached is None else cached.parse_from or (cached.data, cached.tree))
            _remember(
                document, _Parsed(self.original, self.data, self.tree, tuple(self.blanked_rows), self._parse_from)
            )
        self.root: Node = self.tree.root_node

    @property
    def whole_data(self) -> bytes:
        """`data` without the skipped definitions blanked: what byte-level facts about the whole
        file (does it mention a device anywhere?) read. (Definitions are skipped only in a file
        with no rows blanked, so that is the original text then.)"""
        return self.original if self.skipped else self.data

    def _parse_kept(self, skip: Sequence[tuple[int, int]]) -> bool:
        """Parse the text with the `skip` ranges blanked; False (nothing set) when that cannot
        stand for the whole file: rows to blank (the damage's repair needs the whole text), an
        error in the kept text, or a statement that is not inside one kept range (a class spans the
        methods skipped in it, each of its own statements may not)."""
        if rows_left_open(self.original, self._line_starts):
            return False
        data = blank(self.original, skip)  # what the rules' byte scans read: nothing in a gap
        kept = _kept_ranges(skip, len(data))
        ranges = [Range(self._point(start), self._point(end), start, end) for start, end in kept]
        if not ranges:
            return False
        with _parse_lock:
            # Tree-sitter reads only the kept ranges: the skipped bytes cost nothing at all.
            parser = _kept_parser()
            parser.included_ranges = ranges
            tree = parser.parse(data)
        root = tree.root_node
        if root.has_error:
            return False
        starts = [start for start, _ in kept]
        if not all(_fits(statement, kept, starts) for statement in root.children):
            return False
        self.data, self.tree, self.blanked_rows, self.skipped = data, tree, [], tuple(skip)
        return True

    def _parse(self, previous: Optional[tuple[bytes, Tree]]) -> None:
        """Set `data` (the original with blanked rows), `tree` and `blanked_rows`.

        First every line that leaves a bracket or a triple-quoted string open is blanked: the
        line being typed. Left in, tree-sitter's recovery may mark innocent lines far from it
        (or make the whole file one ERROR), and parsing the text around it costs a full parse
        on every keystroke; blanked, the re-parse is incremental like any other edit.

        The result depends on the text alone, never on the versions parsed before it: an
        error-free tree is the same however it was reached, but error recovery depends on the
        tree a re-parse starts from, so a text that still has errors is mended by rows that its
        text alone decides (`_mend`), or else parsed fresh before its damage is examined."""
        rows = rows_left_open(self.original, self._line_starts)
        self.blanked_rows = rows
        self.data = self._blanked(rows) if rows else self.original
        tree = _parse(self.data, previous)
        if tree.root_node.has_error and not self._mend(tree):
            if previous is not None:
                tree = _parse(self.data)  # a fresh parse: recovery depends on the tree it starts from
            self.tree = tree
            if tree.root_node.has_error:
                self._recover()
        elif not tree.root_node.has_error:
            self.tree = tree

    def _mend(self, damaged: Tree) -> bool:
        """Blank the rows of the damage of a text with a syntax error, inside the top-level
        definitions that hold it, and parse the rest: True (`data`, `tree`, `blanked_rows` set) if
        that gives an error-free text. The text is cut into top-level chunks at the lines that
        start a statement at column 0 (a rule on the text, no tree); a chunk that does not parse
        cleanly on its own is parsed alone again, the first line of its first error blanked each
        round, until it does (`_mending_rows`). The text with those rows blanked has no error, so its tree is the
        same however it is reached: it is parsed incrementally from `damaged` (any tree of this
        text, at the cost of an edit), and the other definitions are linted as written. False
        when a chunk cannot be mended that way or the mended text still has an error (the caller
        parses fresh and recovers with `_recover`)."""
        rows: list[int] = []
        for start, end in top_level_chunks(self.data):
            mending = _mending_rows(self.data[start:end])
            if mending is None:
                return False
            first = bisect_right(self._line_starts, start) - 1
            rows.extend(first + row for row in mending)
        if not rows:
            return False
        ranges = [(self._line_starts[row], self._line_end(row)) for row in rows]
        mended = blank(self.data, ranges)
        tree = _parse(mended, (self.data, damaged))
        if tree.root_node.has_error:
            return False
        self._parse_from = (self.data, damaged)
        self.data, self.tree = mended, tree
        self.blanked_rows = sorted(set(self.blanked_rows) | set(rows))
        return True

    def _point(self, offset: int) -> Point:
        row = bisect_right(self._line_starts, offset) - 1
        return Point(row, offset - self._line_starts[row])

    def _blanked(self, rows: list[int]) -> bytes:
        data = bytearray(self.original)
        for row in rows:
            start, end = self._line_starts[row], self._line_end(row)
            data[start:end] = b" " * (end - start)
        return bytes(data)

    def _blank(self, rows: list[int]) -> None:
        """Replace `rows` by spaces of the same byte length (every offset and position stays
        valid) and re-parse incrementally."""
        data = bytearray(self.data)
        for row in rows:
            start = self._line_starts[row]
            end = self._line_end(row)
            data[start:end] = b" " * (end - start)
            width = end - start
            self.tree.edit(
                start_byte=start,
                old_end_byte=end,
                new_end_byte=end,
                start_point=Point(row, 0),
                old_end_point=Point(row, width),
                new_end_point=Point(row, width),
            )
        self.data = bytes(data)
        self.blanked_rows = sorted(set(self.blanked_rows) | set(rows))
        with _parse_lock:
            self.tree = _parser().parse(self.data, self.tree)

    def _recover(self) -> None:
        """Blank the first line of damage that spreads over several lines, re-parse, repeat."""
        repairs = max(1, min(MAX_REPAIRS, REPAIR_BYTES_BUDGET // max(1, len(self.data))))
        for _ in range(repairs):
            row = self._first_spreading_error_row(set(self.blanked_rows))
            if row is None:
                break
            self._blank([row])

    def _first_spreading_error_row(self, blanked: set[int]) -> Optional[int]:
        """Where the first damage that spreads over several lines starts: for an ERROR node, the
        statement it sits in (a half-typed `y = x.to(` can turn the next lines into its
        arguments, so the ERROR shows up lines below the bracket that caused it). Returns that
        statement's first non-blank line not yet blanked."""
        for error in _error_nodes(self.tree.root_node):
            statement = _statement_of(error)
            first = min(statement.start_point.row, error.start_point.row)
            last = max(statement.end_point.row, error.end_point.row)
            if last == first:
                continue
            rows = [
                row
                for row in range(first, min(last, self.line_count - 1) + 1)
                if row not in blanked and self.data[self._line_starts[row] : self._line_end(row)].strip()
            ]
            # The line that leaves a bracket open is the usual culprit; else the first line.
            for row in rows:
                if _opens_bracket(self.data[self._line_starts[row] : self._line_end(row)]):
                    return row
            if rows:
                return rows[0]
        return None

    def _line_end(self, row: int) -> int:
        end = self._line_starts[row + 1] - 1 if row + 1 < len(self._line_starts) else len(self.original)
        if end > self._line_starts[row] and self.original[end - 1 : end] == b"\r":
            end -= 1
        return end

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_bytes(self, row: int) -> bytes:
        """Row `row` (0-based) without its line break."""
        if row < 0 or row >= len(self._line_starts):
            return b""
        start = self._line_starts[row]
        end = self._line_starts[row + 1] - 1 if row + 1 < len(self._line_starts) else len(self.original)
        return self.original[start:end]

    def position(self, point: tuple[int, int]) -> tuple[int, int]:
        """Tree-sitter (row, byte column) -> (1-based line, 0-based str column)."""
        row, byte_col = point
        line = self.line_bytes(row)
        head = line[:byte_col]
        if head.isascii():
            return row + 1, len(head)
        return row + 1, len(head.decode("utf-8", errors="surrogatepass"))


_STATEMENT_PARENTS = frozenset({"block", "module"})
_COMPOUND = frozenset(
    {
        "function_definition",
        "class_definition",
        "decorated_definition",
        "if_statement",
        "for_statement",
        "while_statement",
        "with_statement",
        "try_statement",
        "match_statement",
        "elif_clause",
        "else_clause",
        "except_clause",
        "finally_clause",
        "case_clause",
    }
)
_OPEN, _CLOSE = b"([{", b")]}"


def _opens_bracket(line: bytes) -> bool:
    """Does this line leave a bracket open at its end (strings and comments skipped, roughly)?"""
    depth = 0
    quote = 0
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if quote:
            if ch == 0x5C:  # backslash escapes the next byte
                i += 1
            elif ch == quote:
                quote = 0
        elif ch in (0x22, 0x27):
            quote = ch
        elif ch == 0x23:  # '#': a comment runs to the end of the line
            break
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        i += 1
    return depth > 0


# One token per match: a comment, a whole string (triple-quoted first), a quote that never
# closes, or a bracket; a regular expression scans the bytes at C speed.
_BRACKET_TOKENS = re.compile(
    rb"""#[^\n]*"""
    rb'''|"""(?:[^"\\]|\\.|"(?!""))*"""'''
    rb"""|'''(?:[^'\\]|\\.|'(?!''))*'''"""
    rb'''|"""|\'\'\''''
    rb"""|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*\'"""
    rb"""|["'()\[\]{}]""",
    re.DOTALL,
)
_TRIPLE_QUOTES = (b'"""', b"'''")


def rows_left_open(data: bytes, line_starts: list[int]) -> list[int]:
    """`unclosed_rows`, or nothing at once when every kind of bracket is written as often opened
    as closed and triple quotes come in pairs (the scan is only needed when they do not)."""
    brackets = data.translate(None, _NOT_BRACKETS)  # one pass over the text, then six short counts
    if (
        brackets.count(b"(") == brackets.count(b")")
        and brackets.count(b"[") == brackets.count(b"]")
        and brackets.count(b"{") == brackets.count(b"}")
        and data.count(b'"""') % 2 == 0
        and data.count(b"'''") % 2 == 0
    ):
        return []
    if _nested_properly(data):
        return []
    return unclosed_rows(data, line_starts)


# The tokens of _BRACKET_TOKENS but the brackets and lone quotes, in the same order (so the
# same strings and comments are found); a triple quote that never closes is group 1. Possessive
# runs (`++`, `*+`) consume a string's characters in one step and never backtrack: the same
# matches, faster.
_STRINGS_AND_COMMENTS = re.compile(
    rb"""#[^\n]*+"""
    rb'''|"""(?:[^"\\]++|\\.|"(?!""))*+"""'''
    rb"""|'''(?:[^'\\]++|\\.|'(?!''))*+'''"""
    rb'''|("""|\'\'\')'''
    rb"""|"(?:[^"\\\n]++|\\.)*+"|'(?:[^'\\\n]++|\\.)*+\'""",
    re.DOTALL,
)
_TO_PARENS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"()[]{}")


def _nested_properly(data: bytes) -> bool:
    """True when `unclosed_rows` would find nothing: with strings and comments removed (C
    speed), every bracket closes one opened before it and no triple quote is left. False means
    "maybe not": `unclosed_rows` then scans token by token. Real code often writes more `(`
    than `)` in its docstrings, so the counts alone send most large files to the slow scan."""
    pieces = _STRINGS_AND_COMMENTS.split(data)  # code, group 1, code, ...: no Python call per token
    if any(pieces[1::2]):
        return False
    code = b"".join(pieces[0::2])
    brackets = code.translate(_TO_PARENS, _NOT_BRACKETS)
    for _ in range(64):  # each pass removes the innermost pairs: depth passes
        if b"()" not in brackets:
            break
        brackets = brackets.replace(b"()", b"")
    return not brackets


def unclosed_rows(data: bytes, line_starts: list[int]) -> list[int]:
    """Rows (0-based, ascending) holding a bracket that is never closed, a closing bracket that
    closes nothing, or a triple-quoted string that never ends: the lines a user is still typing.
    Brackets inside strings and comments do not count."""
    opened: list[int] = []
    culprits: set[int] = set()
    for match in _BRACKET_TOKENS.finditer(data):
        at = match.start()
        first = data[at]
        if first in _OPEN:
            opened.append(at)
        elif first in _CLOSE:
            if opened:
                opened.pop()
            else:
                culprits.add(at)
        elif match.end() - at == 3 and data[at : at + 3] in _TRIPLE_QUOTES:
            culprits.add(at)  # no later triple quote closes it
    culprits.update(opened)
    return sorted({bisect_right(line_starts, at) - 1 for at in culprits})


# A line that starts a top-level statement: code at column 0 that does not continue the statement
# above (`else:`, `except`, a closing bracket, a decorated definition's `def`).
_TOP_LEVEL_LINE = re.compile(rb"^(?![\s#)\]}]|(?:else|elif|except|finally)\b)", re.M)
_CHUNK_CACHE: "OrderedDict[bytes, Optional[tuple[int, ...]]]" = OrderedDict()
_CHUNK_CACHE_SIZE = 4096


def top_level_chunks(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges that cover `data`, each from a line that starts a top-level statement to the
    next (comments and blank lines go with the statement above). By the text alone: a line at
    column 0 inside a triple-quoted string does not start one, nor `else:`, `except`, a closing
    bracket, or the definition below a decorator."""
    strings = _triple_quoted(data)
    string_starts = [start for start, _ in strings]
    cuts = [0]
    decorated = False
    for match in _TOP_LEVEL_LINE.finditer(data):
        at = match.start()
        if at == len(data):
            continue
        inside = bisect_right(string_starts, at) - 1
        if inside >= 0 and at < strings[inside][1]:
            continue
        if not decorated and at:
            cuts.append(at)
        decorated = data[at] == 0x40  # "@": the definition it decorates follows
    cuts.append(len(data))
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if a < b]


_TRIPLE_QUOTE = re.compile(rb"\"\"\"|'''")


def _triple_quoted(data: bytes) -> list[tuple[int, int]]:
    """The spans of triple-quoted strings, each triple quote closed by the next of its kind (one
    in a comment or a one-line string can pair wrongly: the chunks are then cut less well, the
    tree is the same)."""
    spans = []
    at = 0
    while (match := _TRIPLE_QUOTE.search(data, at)) is not None:
        end = data.find(match.group(), match.end())
        if end == -1:
            break
        spans.append((match.start(), end + 3))
        at = end + 3
    return spans


MAX_MENDING_PARSES = 16


def _mending_rows(chunk: bytes) -> Optional[tuple[int, ...]]:
    """The rows (0-based, in `chunk`) to blank for `chunk` to parse without an error on its own:
    () when it does, None when 16 rounds of blanking the first line of its first error do not get there.
    Remembered by text: a keystroke leaves all other chunks as they were."""
    with _parse_lock:
        if chunk in _CHUNK_CACHE:
            _CHUNK_CACHE.move_to_end(chunk)
            return _CHUNK_CACHE[chunk]
    rows: set[int] = set()
    lines = chunk.split(b"\n")
    text = chunk
    found: Optional[tuple[int, ...]] = None
    for _ in range(MAX_MENDING_PARSES):
        with _parse_lock:
            root = _parser().parse(text).root_node
        if not root.has_error:
            found = tuple(sorted(rows))
            break
        # The first line of the first damage not blank yet, as a rule the one typed over; one a
        # round (the lines after it are often damaged only by it).
        damage = next(
            (
                row
                for first, last in _damage(root, text)
                for row in range(first, min(last, len(lines) - 1) + 1)
                if row not in rows and lines[row].strip()
            ),
            None,
        )
        if damage is None:
            break
        rows.add(damage)
        text = b"\n".join(line.translate(_SPACES) if row in rows else line for row, line in enumerate(lines))
    with _parse_lock:
        _CHUNK_CACHE[chunk] = found
        while len(_CHUNK_CACHE) > _CHUNK_CACHE_SIZE:
            _CHUNK_CACHE.popitem(last=False)
    return found


_SPACES = bytes.maketrans(bytes(range(256)), b" " * 256)


def _damage(root: Node, text: bytes) -> Iterator[tuple[int, int]]:
    """The rows (first, last) of the ERROR and MISSING nodes under `root`, visiting only subtrees
    that have an error; where a node has an error but none of its children does (a token skipped
    between them: `probs = x.softmax(-1)v`), the rows of the text between its children that is
    not blank (else the node's)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            # from the start of the statement it interrupts: `for x in` typed above `for x in
            # loader:` reads as `for x <ERROR: for> in x in loader:`, the ERROR a line too low
            parent = node.parent
            inside = parent is not None and parent.type not in _STATEMENT_PARENTS
            yield (
                (parent.start_point.row if inside and parent is not None else node.start_point.row),
                node.end_point.row,
            )
            continue
        erring = [c for c in node.children if c.has_error]
        if erring:
            stack.extend(reversed(erring))  # document order
            continue
        at, point, found = node.start_byte, node.start_point, False
        for child in [*node.children, None]:
            end = child.start_byte if child is not None else node.end_byte
            if text[at:end].strip():
                found = True
                yield point.row, (child.start_point if child is not None else node.end_point).row
            if child is not None:
                at, point = child.end_byte, child.end_point
        if not found:
            yield node.start_point.row, node.end_point.row


def _fits(node: Node, kept: list[tuple[int, int]], starts: list[int]) -> bool:
    """Is `node` inside one kept range, or a class (decorated or not) whose own tokens and body
    statements each are (its skipped methods are the gaps it spans)?"""
    at = bisect_right(starts, node.start_byte) - 1
    if at >= 0 and node.end_byte <= kept[at][1]:
        return True
    if node.type in ("class_definition", "decorated_definition", "block"):
        return all(_fits(child, kept, starts) for child in node.children)
    return False


def _kept_ranges(skip: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The complement of the sorted, disjoint `skip` ranges within [0, size)."""
    kept, at = [], 0
    for start, end in skip:
        if start > at:
            kept.append((at, start))
        at = max(at, end)
    if at < size:
        kept.append((at, size))
    return kept


def _statement_of(node: Node) -> Node:
    """The innermost simple or compound statement around `node` (itself if it is one)."""
    current = node
    parent = node.parent
    while parent is not None and parent.type not in _STATEMENT_PARENTS and parent.type not in _COMPOUND:
        if parent.type == "ERROR" and parent.parent is None:
            break
        current, parent = parent, parent.parent
    return current


def _error_nodes(root: Node) -> Iterator[Node]:
    """ERROR nodes in document order, outermost first, visiting only subtrees that have an error
    (a query would walk the whole tree)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR":
            yield node
        stack.extend(reversed([c for c in node.children if c.has_error]))


def ancestors(node: Node) -> Iterator[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def indented_block(data: bytes, start: int) -> bytes:
    """The text of the definition whose first line starts at byte `start` of `data`: up to the
    next line, not blank, not a comment and not a closing bracket (the `):` or `) -> int:` that
    ends a header written over several lines), indented no deeper than that first line."""
    end = data.find(b"\n", start)
    first = data[start : end if end >= 0 else len(data)]
    indent = len(first) - len(first.lstrip())
    while end >= 0:
        following = data.find(b"\n", end + 1)
        line = data[end + 1 : following if following >= 0 else len(data)]
        stripped = line.strip()
        if stripped and stripped[:1] not in b"#)]}" and len(line) - len(line.lstrip()) <= indent:
            break
        end = following
    return data[start : end if end >= 0 else len(data)]


def definition_text(data: bytes, name: str) -> Optional[bytes]:
    """The text of the first `def <name>(` in `data` (a whole file or a block), None when there
    is none. Read off bytes, so the answer does not depend on which definitions were parsed."""
    head = re.search(rb"^[ \t]*def[ \t]+" + re.escape(name.encode()) + rb"[ \t]*\(", data, re.M)
    return indented_block(data, head.start()) if head is not None else None


def names_imported_from(data: bytes, modules: bytes) -> frozenset[str]:
    """The names that module-level `from <module> import a, b as c` statements bind, for modules
    matching the regular expression `modules` (`rb"torch\\.cuda"`): `{"a", "c"}`. Read off bytes
    (top-level imports are in every parse)."""
    # (a literal start, `from`, and the line start checked after: `re` then searches for the word
    # instead of trying `^` at every byte, a tenth of the time on a large file)
    statement = re.compile(rb"from[ \t]+(?:" + modules + rb")[ \t]+import[ \t]+(?:\(([\w \t,\n]+)\)|([\w \t,]+))")
    found = set()
    for match in statement.finditer(data):
        if match.start() > 0 and data[match.start() - 1] != 0x0A:
            continue  # (not at a line's start: indented, or in the middle of a line)
        for part in (match.group(1) or match.group(2)).split(b","):
            words = part.split()
            if words:
                found.add(words[-1].decode(errors="replace"))  # (`x as y`: the name bound is `y`)
    return frozenset(found)
