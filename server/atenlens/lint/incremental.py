"""Re-lint only the top-level definition an edit lies in; reuse the other definitions' findings.

A keystroke in a 5,000-line file changes one function. Its findings can only change with the
text they depend on: the definition itself, the module-level code, and the module-wide facts
(lint/facts.py). So after a full lint the findings are kept per top-level statement ("unit"), and
the next version of the same document is compared with the last one unit by unit:

- every module-level statement and every definition but the edited ones is byte for byte the
  same (in the text and in the text the parser saw, see source.py's blanking), free of syntax
  errors and starts at column 0, and each edited one is still a definition at column 0 (its
  header may change: a definition's parameters and decorators matter only to itself and to
  the functions it calls, below);
- every module-wide fact has the value it had;
- no dotted name that a rule asked `attribute_assignments` about (`self.loader`) is written in an
  edited definition and elsewhere too (another definition may read what this one stores there);

then only the edited definitions are linted (`LintContext.narrow`), and every other unit's
findings are reused, moved by the lines inserted or deleted above it. Linted again too: a unit
defining a function whose uses a rule looked up (`LintContext.function_uses`: a parameter is
what the calls in loops pass it) when an edited definition names it, before or after the edit
(a call added, removed or changed there changes what that parameter is), and so on through the
bodies of those; and a moved unit whose findings write a number (a message that cites "line
12"). Anything else (an edit at module level, a new or deleted top-level statement, a changed
fact) is a full lint. The result is the full lint's, finding for finding
(tests/lint/test_lint_incremental.py). The language server lints this way
(`lint_source(..., incremental=True)`); the command line lints each file once, in full.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Hashable, Optional

from tree_sitter import Node

from atenlens.lint.context import DEFINITION_TYPES, LintContext
from atenlens.lint.facts import NAME_SET_FACTS, FactCache, module_facts
from atenlens.lint.findings import Finding, Fix, TextEdit
from atenlens.lint.registry import Rule
from atenlens.lint.source import CACHED_DOCUMENTS, SourceText

RunRules = Callable[[LintContext], list[Finding]]


@dataclass(frozen=True)
class _Unit:
    """One top-level statement of a linted version and the findings that start on its lines."""

    definition: bool
    original: bytes  # its text
    data: bytes  # the text the parser saw (blanked rows are spaces)
    first_row: int  # 0-based
    last_row: int
    clean: bool  # no syntax error in it, starts at column 0
    findings: tuple[Finding, ...]  # before noqa comments are applied


@dataclass(frozen=True)
class _State:
    rules: tuple[str, ...]
    units: tuple[_Unit, ...]
    facts: dict[str, Hashable]
    fact_shares: FactCache
    attribute_queries: frozenset[str]
    function_queries: frozenset[str]


# The states of each document's last HISTORY lints, newest first: an edit that breaks the file's
# top-level statements apart (`ifx step % 100 == 0:` in a loop) is linted in full, and the
# version that mends it is then linted from the one before.
HISTORY = 2
_states: "OrderedDict[str, tuple[_State, ...]]" = OrderedDict()
_lock = threading.Lock()
# How the last lint of each document went ("full" or "incremental"): for the tests and the bench.
last_mode: "OrderedDict[str, str]" = OrderedDict()
_DIGIT = re.compile(r"\d")


def lint_document(text: SourceText, rules: tuple[Rule, ...], document: str, run: RunRules) -> list[Finding]:
    """The findings (before `# noqa`) of `text`, version of `document`, linted incrementally from
    the document's last versions when that is safe, else in full. `run` runs the rules on a context."""
    codes = tuple(rule.code for rule in rules)
    names: frozenset[str] = frozenset().union(*(rule.calls for rule in rules))
    with _lock:
        history = _states.get(document, ())
    ctx = LintContext(text, frozenset())
    nodes = text.root.children
    facts, shares = module_facts(ctx, nodes, history[0].fact_shares if history else {})
    plan, previous = None, None
    for candidate in history:
        if candidate.rules == codes and _same_facts(candidate.facts, facts):
            plan = _plan(text, nodes, candidate, _names_changed(candidate.facts, facts))
            if plan is not None:
                previous = candidate
                break
    if plan is None:
        ctx.narrow(0, len(text.data), names)
        findings = run(ctx)
        assigned = _assign([_unit(text, node, ()) for node in nodes], findings)
        if assigned is None:
            forget(document)
            return findings
        units = assigned
        mode = "full"
    else:
        assert previous is not None  # a plan is made only from a previous state
        relint, shifts = plan
        units = []
        for index, node in enumerate(nodes):
            if index in relint:
                ctx.narrow(node.start_byte, node.end_byte, names)
                first, last = node.start_point[0] + 1, node.end_point[0] + 1
                found = tuple(f for f in run(ctx) if first <= f.line <= last)
                units.append(_unit(text, node, found))
            else:
                delta = shifts[index]
                old = previous.units[index].findings
                units.append(_unit(text, node, old if delta == 0 else tuple(_moved(f, delta) for f in old)))
        mode = "incremental"
    queries, functions = set(ctx.attribute_queries), set(ctx.function_queries)
    if mode == "incremental" and previous is not None:
        # what the reused units asked when they were linted still holds for them
        queries |= previous.attribute_queries
        functions |= previous.function_queries
    state = _State(codes, tuple(units), facts, shares, frozenset(queries), frozenset(functions))
    with _lock:
        _states[document] = (state, *_states.get(document, ())[: HISTORY - 1])
        _states.move_to_end(document)
        last_mode[document] = mode
        last_mode.move_to_end(document)
        while len(_states) > CACHED_DOCUMENTS:
            _states.popitem(last=False)
        while len(last_mode) > CACHED_DOCUMENTS:
            last_mode.popitem(last=False)
    return [f for unit in units for f in unit.findings]


def forget(document: str) -> None:
    """Drop what is kept of `document` (closed in the editor)."""
    with _lock:
        _states.pop(document, None)
        last_mode.pop(document, None)


def _same_facts(old: dict[str, Hashable], new: dict[str, Hashable]) -> bool:
    return old.keys() == new.keys() and all(old[name] == new[name] for name in new if name not in NAME_SET_FACTS)


def _names_changed(old: dict[str, Hashable], new: dict[str, Hashable]) -> frozenset[str]:
    """The names that came into or went out of a NAME_SET_FACTS fact."""
    changed: set[str] = set()
    for name in NAME_SET_FACTS:
        changed |= old[name] ^ new[name]  # type: ignore[operator]
    return frozenset(changed)


def _plan(
    text: SourceText, nodes: list[Node], previous: _State, names_changed: frozenset[str]
) -> Optional[tuple[set[int], list[int]]]:
    """(indexes of the units to lint, each unit's line shift) or None for a full lint.
    `names_changed`: the function names whose calls now wait, or no longer do."""
    if len(nodes) != len(previous.units):
        return None
    relint: set[int] = set()
    shifts: list[int] = []
    for index, (node, old) in enumerate(zip(nodes, previous.units)):
        original = text.original[node.start_byte : node.end_byte]
        data = text.data[node.start_byte : node.end_byte]
        definition = node.type in DEFINITION_TYPES
        shifts.append(node.start_point[0] - old.first_row)
        if definition != old.definition:
            return None
        if original == old.original and data == old.data:
            if not (old.clean and _clean(node)):
                return None
            continue
        if not definition or node.start_point[1] != 0:
            return None
        relint.add(index)
    for index in relint:
        node, old = nodes[index], previous.units[index]
        for dotted in previous.attribute_queries:
            word = dotted.encode()
            if word in old.original or word in text.original[node.start_byte : node.end_byte]:
                if text.original.find(word, 0, node.start_byte) != -1 or text.original.find(word, node.end_byte) != -1:
                    return None
    relint |= _callees(text, nodes, previous, relint)
    relint |= _naming(text, nodes, names_changed)
    for index, old in enumerate(previous.units):
        if index not in relint and shifts[index] != 0 and any(_cites_number(f) for f in old.findings):
            relint.add(index)  # "since the clock read on line 12": the number moves too
    return relint, shifts


def _callees(text: SourceText, nodes: list[Node], previous: _State, edited: set[int]) -> set[int]:
    """The units defining a function whose uses a rule looked up (`function_uses`) and that is
    used in an edited definition's body (before or after the edit), and so on through their
    bodies: what a parameter of theirs is comes from those calls (`accuracy(logits, y)` in a
    loop makes `output` a CUDA tensor), so their findings may change with the edit."""
    names = previous.function_queries
    if not names:
        return set()
    defining: dict[str, list[int]] = {}
    for index, node in enumerate(nodes):
        title = _function_title(node)
        if title in names:
            defining.setdefault(title, []).append(index)
    found: set[int] = set()
    todo: list[tuple[bytes, ...]] = []
    for index in edited:
        # the whole definition, header too: what its parameters are decides what it passes on
        todo.append((previous.units[index].original, text.original[nodes[index].start_byte : nodes[index].end_byte]))
    while todo:
        bodies = todo.pop()
        for name, indexes in defining.items():
            if not any(_word(name).search(body) for body in bodies):
                continue
            for index in indexes:
                if index not in found and index not in edited:
                    found.add(index)
                    todo.append((text.original[nodes[index].start_byte : nodes[index].end_byte],))
    return found


def _naming(text: SourceText, nodes: list[Node], names: frozenset[str]) -> set[int]:
    """The units in which one of `names` is written."""
    starts = [node.start_byte for node in nodes]
    found: set[int] = set()
    for name in names:
        for match in _word(name).finditer(text.original):
            index = bisect_right(starts, match.start()) - 1
            if index >= 0 and match.start() < nodes[index].end_byte:
                found.add(index)
    return found


def _function_title(node: Node) -> Optional[str]:
    definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
    if definition is None or definition.type != "function_definition":
        return None
    name = definition.child_by_field_name("name")
    return name.text.decode(errors="replace") if name is not None and name.text is not None else None


@lru_cache(maxsize=256)
def _word(name: str) -> "re.Pattern[bytes]":
    return re.compile(rb"(?<!\w)" + re.escape(name.encode()) + rb"(?!\w)")


def _clean(node: Node) -> bool:
    return not node.has_error and node.start_point[1] == 0


def _unit(text: SourceText, node: Node, findings: tuple[Finding, ...]) -> _Unit:
    definition = node.type in DEFINITION_TYPES
    return _Unit(
        definition,
        text.original[node.start_byte : node.end_byte],
        text.data[node.start_byte : node.end_byte],
        node.start_point[0],
        node.end_point[0],
        _clean(node),
        findings,
    )


def _assign(units: list[_Unit], findings: list[Finding]) -> Optional[list[_Unit]]:
    """Give each finding of a full lint to the first unit whose lines hold its start (None when
    one starts outside every unit: nothing can be reused then)."""
    by_unit: list[list[Finding]] = [[] for _ in units]
    firsts = [unit.first_row for unit in units]
    for finding in findings:
        row = finding.line - 1
        index = bisect_right(firsts, row) - 1
        while index > 0 and units[index - 1].first_row <= row <= units[index - 1].last_row:
            index -= 1  # `a = 1; b = 2`: two statements on one line, the first takes it
        if index < 0 or row > units[index].last_row:
            return None
        by_unit[index].append(finding)
    return [dataclasses.replace(unit, findings=tuple(found)) for unit, found in zip(units, by_unit)]


def _cites_number(finding: Finding) -> bool:
    return bool(_DIGIT.search(finding.message)) or (finding.fix is not None and bool(_DIGIT.search(finding.fix.title)))


def _moved(finding: Finding, delta: int) -> Finding:
    fix = finding.fix
    if fix is not None:
        fix = Fix(
            fix.title,
            tuple(TextEdit(e.line + delta, e.column, e.end_line + delta, e.end_column, e.new_text) for e in fix.edits),
        )
    return dataclasses.replace(finding, line=finding.line + delta, end_line=finding.end_line + delta, fix=fix)
