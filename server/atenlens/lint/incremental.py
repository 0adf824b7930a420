"""Re-lint only the top-level definition an edit lies in; reuse the other definitions' findings.

A keystroke in a 5,000-line file changes one function. Its findings can only change with the
text they depend on: the definition itself, the module-level code, and the module-wide facts
(lint/facts.py). So after a full lint the findings are kept per top-level statement ("unit"), and
the next version of the same document is compared with the last one unit by unit:

- every module-level statement and every definition but the edited ones is byte for byte the
  same (in the text and in the text the parser saw, see source.py's blanking), free of syntax
  errors and starts at column 0; the edited definitions keep their header (decorators, name,
  parameters, bases);
- every module-wide fact has the value it had;
- no dotted name that a rule asked `attribute_assignments` about (`self.loader`) is written in an
  edited definition and elsewhere too (another definition may read what this one stores there);

then only the edited definitions are linted (`LintContext.narrow`), and every other unit's
findings are reused, moved by the lines inserted or deleted above it. A moved unit whose
findings write a number (a message that cites "line 12") is linted again. Anything else (an
edit at module level, a new or deleted definition, a changed header or fact) is a full lint.
The result is the full lint's, finding for finding (tests/lint/test_lint_incremental.py).
Used only when asked (`lint_source(..., incremental=True)`): docs/lint.md says why the language
server does not ask yet.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable, Optional

from tree_sitter import Node

from atenlens.lint.context import DEFINITION_TYPES, LintContext
from atenlens.lint.facts import FactCache, module_facts
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
    header: bytes  # a definition's text up to its body; b"" otherwise
    first_row: int  # 0-based
    last_row: int
    clean: bool  # no syntax error in it, starts at column 0
    findings: tuple[Finding, ...]  # before `# noqa` is applied


@dataclass(frozen=True)
class _State:
    rules: tuple[str, ...]
    units: tuple[_Unit, ...]
    facts: tuple[Hashable, ...]
    fact_shares: FactCache
    attribute_queries: frozenset[str]


_states: "OrderedDict[str, _State]" = OrderedDict()
_lock = threading.Lock()
# How the last lint of each document went ("full" or "incremental"): for the tests and the bench.
last_mode: "OrderedDict[str, str]" = OrderedDict()
_DIGIT = re.compile(r"\d")


def lint_document(text: SourceText, rules: tuple[Rule, ...], document: str, run: RunRules) -> list[Finding]:
    """The findings (before `# noqa`) of `text`, version of `document`, linted incrementally from
    the document's last version when that is safe, else in full. `run` runs the rules on a context."""
    codes = tuple(rule.code for rule in rules)
    names: frozenset[str] = frozenset().union(*(rule.calls for rule in rules))
    with _lock:
        previous = _states.get(document)
    ctx = LintContext(text, frozenset())
    nodes = text.root.children
    facts, shares = module_facts(ctx, nodes, previous.fact_shares if previous is not None else {})
    plan = None
    if previous is not None and previous.rules == codes and previous.facts == facts:
        plan = _plan(text, nodes, previous)
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
    queries = set(ctx.attribute_queries)
    if mode == "incremental" and previous is not None:
        queries |= previous.attribute_queries
    state = _State(codes, tuple(units), facts, shares, frozenset(queries))
    with _lock:
        _states[document] = state
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


def _plan(text: SourceText, nodes: list[Node], previous: _State) -> Optional[tuple[set[int], list[int]]]:
    """(indexes of the units to lint, each unit's line shift) or None for a full lint."""
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
        if not definition or _header(text, node) != old.header or node.start_point[1] != 0:
            return None
        relint.add(index)
    for index in relint:
        node, old = nodes[index], previous.units[index]
        for dotted in previous.attribute_queries:
            word = dotted.encode()
            if word in old.original or word in text.original[node.start_byte : node.end_byte]:
                if text.original.find(word, 0, node.start_byte) != -1 or text.original.find(word, node.end_byte) != -1:
                    return None
    for index, old in enumerate(previous.units):
        if index not in relint and shifts[index] != 0 and any(_cites_number(f) for f in old.findings):
            relint.add(index)  # "since the clock read on line 12": the number moves too
    return relint, shifts


def _clean(node: Node) -> bool:
    return not node.has_error and node.start_point[1] == 0


def _header(text: SourceText, node: Node) -> bytes:
    definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
    body = definition.child_by_field_name("body") if definition is not None else None
    end = body.start_byte if body is not None else node.end_byte
    return text.original[node.start_byte : end]


def _unit(text: SourceText, node: Node, findings: tuple[Finding, ...]) -> _Unit:
    definition = node.type in DEFINITION_TYPES
    return _Unit(
        definition,
        text.original[node.start_byte : node.end_byte],
        text.data[node.start_byte : node.end_byte],
        _header(text, node) if definition else b"",
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
