"""What a rule sees: the parsed source, the calls it asked for, bindings and name occurrences.

Finding things: a regular expression over the source bytes (C speed) finds where a wanted name
is written, and the tree confirms what stands there (a call's callee, an assignment target, a
read). Rules never walk the whole tree in Python, so a 5,000-line file lints in milliseconds.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import Iterable, Iterator, Optional

from tree_sitter import Node

from atenlens.lint.dataflow import ScopeBindings, scope_for
from atenlens.lint.findings import Finding, Fix
from atenlens.lint.source import SourceText
from atenlens.lint.triggers import LOOP


@lru_cache(maxsize=512)
def _word_end_pattern(name: str) -> "re.Pattern[bytes]":
    # A plain literal at the start lets `re` scan with a fast literal search; the character
    # before the match is checked by hand (a lookbehind would turn that search off).
    return re.compile(re.escape(name.encode()) + rb"(?!\w)")


_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _word_starts(data: bytes, word: bytes, start: int, stop: int) -> Iterator[int]:
    """Where `word` is written as a whole word within [start, stop) (a word ending at `stop`
    counts). Names of one or two letters are found by a regular expression, which skips their
    many occurrences inside longer words in C; longer names by a substring search: compiling a
    pattern per name costs about a millisecond, and a whole-tree run meets thousands of names
    in each process."""
    if len(word) <= 2:
        for match in _word_end_pattern(word.decode()).finditer(data, start, stop):
            at = match.start()
            if at == 0 or data[at - 1] not in _WORD_BYTES:
                yield at
        return
    size = len(word)
    find = data.find
    at = find(word, start, stop)
    while at != -1:
        end = at + size
        if (at == 0 or data[at - 1] not in _WORD_BYTES) and (end == stop or data[end] not in _WORD_BYTES):
            yield at
        at = find(word, at + 1, stop)


_LOOP_TYPES = frozenset(
    {
        "for_statement",
        "while_statement",
        "list_comprehension",
        "set_comprehension",
        "dictionary_comprehension",
        "generator_expression",
    }
)
_CALL_PAREN = re.compile(rb"[\w)\]}\"']\s*(\()")


def _called_name(ident: Node) -> Optional[Node]:
    """The call whose callee is `ident` or `<expr>.ident`."""
    parent = ident.parent
    if parent is None:
        return None
    if parent.type == "call" and parent.child_by_field_name("function") == ident:
        return parent
    if parent.type == "attribute" and parent.child_by_field_name("attribute") == ident:
        call = parent.parent
        if call is not None and call.type == "call" and call.child_by_field_name("function") == parent:
            return call
    return None


DEFINITION_TYPES = frozenset({"function_definition", "class_definition", "decorated_definition"})


class LintContext:
    """`span` is the byte range the rules look at: the whole file, or one top-level definition when
    an edit is linted incrementally (see `narrow` and lint/incremental.py). Answers about the file
    (bindings, attribute assignments, the module-wide facts of lint/facts.py) never depend on it."""

    # file-wide answers cached by the modules that compute them (provenance.py, waits.py); unset
    # until first asked
    _mentions_device: bool
    _cpu_only_file: bool
    _framework_moves_batches: bool
    _calls_backward: bool
    _host_loss_functions: frozenset[str]
    _seeding_functions: frozenset[str]
    _host_imported: frozenset[str]
    _collated_lists: frozenset[str]
    _torch_cuda_imports: frozenset[str]
    _device_attributes: frozenset[str]
    _module_classes: frozenset[str]
    _may_page: bool
    _sync_aliases: frozenset[str]
    _names_from_time: frozenset[str]
    _torch_aliases: frozenset[str]
    _waiting_function_calls: tuple[tuple[int, int], list[Node]]

    def __init__(self, source: SourceText, call_names: frozenset[str]) -> None:
        self.source = source
        self.span: tuple[int, int] = (0, len(source.data))
        self._bindings: dict[int, ScopeBindings] = {}
        self._scope_of: dict[int, Node] = {}
        self._attribute_values: dict[str, list[Node]] = {}
        self._call_names = call_names
        self._loops: Optional[list[tuple[int, int]]] = None
        self._loop_starts: list[int] = []
        self._calls: dict[str, list[Node]] = {}  # found on first request: most rules ask for few
        self._loop_calls: dict[str, list[Node]] = {}
        self._module_calls: dict[str, list[Node]] = {}
        # The dotted names asked of `attribute_assignments` and the functions asked of
        # `function_uses`: the ways a rule reads another definition's text besides the facts
        # (lint/incremental.py checks them).
        self.attribute_queries: set[str] = set()
        self.function_queries: set[str] = set()
        # Module-wide facts (lint/facts.py) by name, when computed or handed in from the last lint.
        self.memo: dict[str, object] = {}

    def calls_named(self, names: Iterable[str], start: int, end: int) -> list[Node]:
        """Calls whose callee is `name` or `<anything>.name` within [start, end), in source order."""
        return [call for call in map(_called_name, self.identifiers(names, start, end)) if call is not None]

    def narrow(self, start: int, end: int, call_names: frozenset[str]) -> None:
        """Look at [start, end) only from now on: `calls` answers with the calls written there
        (of `call_names`), `loop_ranges` with the loops there, `span` is that range.
        `module_calls` still answers for the whole file."""
        self.span = (start, end)
        self._call_names = call_names
        self._calls = {}
        self._loop_calls = {}
        self._loops = None

    def module_calls(self, *names: str) -> list[Node]:
        """`calls` for the whole file whatever the span: what a module-wide fact asks."""
        found: list[Node] = []
        for name in names:
            calls = self._module_calls.get(name)
            if calls is None:
                calls = self._module_calls[name] = self.calls_named((name,), 0, len(self.source.data))
            found.extend(calls)
        if len(names) > 1:
            found.sort(key=lambda n: n.start_byte)
        return found

    def definition_of(self, node: Node) -> Optional[Node]:
        """The top-level `def` / `class` (with its decorators) that `node` is in; None at module level."""
        top = node
        parent = node.parent
        while parent is not None and parent.parent is not None:
            top, parent = parent, parent.parent
        return top if parent is not None and top.type in DEFINITION_TYPES else None

    def identifiers(self, names: Iterable[str], start: int = 0, end: Optional[int] = None) -> Iterator[Node]:
        """Identifier nodes spelled as one of `names` within [start, end), in source order
        (occurrences in strings and comments are not identifiers and are skipped)."""
        data = self.source.data
        root = self.source.root
        stop = len(data) if end is None else end
        if isinstance(names, tuple) and len(names) == 1:
            # one name (the bindings of a variable, the calls of one method): no merge needed
            word = names[0].encode()
            size = len(word)
            for at in _word_starts(data, word, start, stop):
                node = root.descendant_for_byte_range(at, at + size)
                if (
                    node is not None
                    and node.type == "identifier"
                    and node.start_byte == at
                    and node.end_byte == at + size
                ):
                    yield node
            return
        starts: list[int] = []
        lengths: dict[int, int] = {}
        for name in set(names):
            word = name.encode()
            size = len(word)
            for at in _word_starts(data, word, start, stop):
                starts.append(at)
                lengths[at] = size
        starts.sort()
        for at in starts:
            node = root.descendant_for_byte_range(at, at + lengths[at])
            if (
                node is not None
                and node.type == "identifier"
                and node.start_byte == at
                and node.end_byte == at + lengths[at]
            ):
                yield node

    def calls_within(self, start: int, end: int) -> Iterator[Node]:
        """Every call whose argument list opens within [start, end), in source order (lazily:
        a rule that needs the first one pays for one)."""
        root = self.source.root
        for match in _CALL_PAREN.finditer(self.source.data, start, end):
            paren = root.descendant_for_byte_range(match.start(1), match.end(1))
            args = paren.parent if paren is not None and paren.type == "(" else None
            call = args.parent if args is not None else None
            if (
                call is not None
                and call.type == "call"
                and call.child_by_field_name("arguments") == args
                and call.start_byte >= start
                and call.end_byte <= end
            ):
                yield call

    def loop_ranges(self) -> list[tuple[int, int]]:
        """Byte ranges [start, end) of the outermost loops (`for`, `while`, comprehensions), in
        source order: a rule about code inside loops scans only these (a node outside them is
        never repeated by a loop)."""
        if self._loops is None:
            root = self.source.root
            spans = []
            for match in (m for pattern in LOOP for m in pattern.finditer(self.source.data, *self.span)):
                keyword = root.descendant_for_byte_range(match.start(), match.end())
                parent = keyword.parent if keyword is not None and keyword.type == match.group().decode() else None
                if parent is not None and parent.type == "for_in_clause":
                    parent = parent.parent
                if parent is not None and parent.type in _LOOP_TYPES:
                    spans.append((parent.start_byte, parent.end_byte))
            merged: list[tuple[int, int]] = []
            for start, end in sorted(spans):
                if merged and start < merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
                else:
                    merged.append((start, end))
            self._loops = merged
            self._loop_starts = [start for start, _ in merged]
        return self._loops

    def in_loop(self, node: Node) -> bool:
        """Is `node` within one of `loop_ranges` (a cheap test before any analysis of it)?"""
        loops = self.loop_ranges()
        at = bisect_right(self._loop_starts, node.start_byte) - 1
        return at >= 0 and node.end_byte <= loops[at][1]

    def writes_in_arguments(self, call: Node, word: bytes) -> bool:
        """Is `word` written anywhere in `call`'s argument list? A byte search: a cheap test
        that rules out most calls before their arguments are looked at (`non_blocking=True`
        cannot be passed without writing `non_blocking`)."""
        args = call.child_by_field_name("arguments")
        return args is not None and self.source.data.find(word, args.start_byte, args.end_byte) != -1

    def calls(self, *names: str) -> list[Node]:
        """Calls whose callee is `name` or `<anything>.name` within the span, in source order.
        What a rule checks call by call; a question about the whole file asks `module_calls`."""
        found: list[Node] = []
        for name in names:
            if name not in self._call_names:
                continue
            calls = self._calls.get(name)
            if calls is None:
                calls = self._calls[name] = self.calls_named((name,), *self.span)
            found.extend(calls)
        if len(names) > 1:
            found.sort(key=lambda n: n.start_byte)
        return found

    def calls_in_loops(self, *names: str) -> list[Node]:
        """`calls`, less those outside `loop_ranges`: the same calls in the same order, found by
        reading only the loops' bytes (a rule about loops then skips the many `int(` and `str(`
        of the rest of the file without looking at each). A call whose callee is written in a
        loop is inside that loop: the loop is an ancestor of the callee's name, and the call is
        its parent or grandparent."""
        found: list[Node] = []
        for name in names:
            if name not in self._call_names:
                continue
            calls = self._loop_calls.get(name)
            if calls is None:
                full = self._calls.get(name)
                if full is None:
                    full = [c for c in map(_called_name, self._identifiers_in_loops(name)) if c is not None]
                calls = self._loop_calls[name] = [call for call in full if self.in_loop(call)]
            found.extend(calls)
        if len(names) > 1:
            found.sort(key=lambda n: n.start_byte)
        return found

    def _identifiers_in_loops(self, name: str) -> Iterator[Node]:
        """`identifiers((name,))` within the span, less those outside `loop_ranges`, which are
        left out before the tree is asked what stands there (one search of the span for the
        word; most of its occurrences are outside the loops)."""
        loops = self.loop_ranges()
        starts = self._loop_starts
        data = self.source.data
        root = self.source.root
        word = name.encode()
        size = len(word)
        for at in _word_starts(data, word, *self.span):
            index = bisect_right(starts, at) - 1
            if index < 0 or at + size > loops[index][1]:
                continue
            node = root.descendant_for_byte_range(at, at + size)
            if node is not None and node.type == "identifier" and node.start_byte == at and node.end_byte == at + size:
                yield node

    def bindings(self, node: Node) -> ScopeBindings:
        """The bindings of the function (or module) that `node` runs in."""
        # The provenance layer asks for the scope of the same nodes many times over: the walk up
        # to the enclosing scope is remembered per node.
        scopes = self._scope_of
        scope = scopes.get(node.id)
        if scope is None:
            scope = scopes[node.id] = scope_for(node)
        key = scope.id
        if key not in self._bindings:
            self._bindings[key] = ScopeBindings(scope, self)
        return self._bindings[key]

    def function_uses(self, name: str) -> Iterator[Node]:
        """Where the module-level function `name` is written anywhere in the file (its calls
        elsewhere tell what its parameters are), in source order."""
        self.function_queries.add(name)
        return self.identifiers((name,))

    def attribute_assignments(self, dotted: str) -> list[Node]:
        """The values assigned to `dotted` (`self.loader`) or to its items (`self.states[i] = ...`)
        anywhere in the module, in source order: an attribute set in `__init__` is read in the
        other methods."""
        self.attribute_queries.add(dotted)
        if dotted not in self._attribute_values:
            last = dotted.rsplit(".", 1)[-1]
            values = []
            for ident in self.identifiers((last,)):
                target = ident.parent
                if (
                    target is None
                    or target.type != "attribute"
                    or self.source.data[target.start_byte : target.end_byte].decode(errors="replace") != dotted
                ):
                    continue
                parent = target.parent
                if parent is not None and parent.type == "subscript" and parent.child_by_field_name("value") == target:
                    target, parent = parent, parent.parent  # `self.states[i] = value`
                if parent is not None and parent.type == "assignment" and parent.child_by_field_name("left") == target:
                    value = parent.child_by_field_name("right")
                    if value is not None:
                        values.append(value)
            self._attribute_values[dotted] = values
        return self._attribute_values[dotted]

    def finding(
        self,
        code: str,
        message: str,
        node: Node,
        fix: Optional[Fix] = None,
        end: Optional[Node] = None,
        severity: str = "warning",
    ) -> Finding:
        line, col = self.source.position(node.start_point)
        end_line, end_col = self.source.position((end or node).end_point)
        return Finding(
            code=code,
            message=message,
            line=line,
            column=col,
            end_line=end_line,
            end_column=end_col,
            fix=fix,
            severity=severity,
        )
