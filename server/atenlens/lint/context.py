"""What a rule sees: the parsed source and, from one query over the tree, the calls it asked for."""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

from tree_sitter import Node, Query, QueryCursor

from atenlens.lint.dataflow import ScopeBindings, scope_for
from atenlens.lint.findings import Finding, Fix
from atenlens.lint.source import SourceText, python_language


@lru_cache(maxsize=1)
def _any_call_query() -> Query:
    return Query(python_language(), "(call) @call")


@lru_cache(maxsize=64)
def _calls_query(names: tuple[str, ...]) -> Query:
    quoted = " ".join('"' + n + '"' for n in names)
    pattern = (
        "(call function: [(identifier) @name (attribute attribute: (identifier) @name)]"
        f" (#any-of? @name {quoted})) @call"
    )
    return Query(python_language(), pattern)


class LintContext:
    def __init__(self, source: SourceText, call_names: frozenset[str]) -> None:
        self.source = source
        self._bindings: dict[int, ScopeBindings] = {}
        self._calls: dict[str, list[Node]] = {name: [] for name in call_names}
        if call_names:
            query = _calls_query(tuple(sorted(call_names)))
            # One pass over the tree, in C: every call whose callee ends in a name some rule wants.
            for _, captures in QueryCursor(query).matches(source.root):
                calls = captures.get("call")
                names = captures.get("name")
                if not calls or not names:
                    continue
                name = names[0].text.decode("utf-8", errors="replace") if names[0].text else ""
                if name in self._calls:
                    self._calls[name].append(calls[0])

    def calls(self, *names: str) -> list[Node]:
        """Calls whose callee is `name` or `<anything>.name`, in source order."""
        found: list[Node] = []
        for name in names:
            found.extend(self._calls.get(name, ()))
        if len(names) > 1:
            found.sort(key=lambda n: n.start_byte)
        return found

    def calls_between(self, start_byte: int, end_byte: int) -> list[Node]:
        """Every call that lies entirely within [start_byte, end_byte), in source order."""
        if end_byte <= start_byte:
            return []
        cursor = QueryCursor(_any_call_query())
        cursor.set_byte_range(start_byte, end_byte)
        found = cursor.captures(self.source.root).get("call", [])
        inside = [c for c in found if start_byte <= c.start_byte and c.end_byte <= end_byte]
        inside.sort(key=lambda n: n.start_byte)
        return inside

    def bindings(self, node: Node) -> ScopeBindings:
        """The bindings of the function (or module) that `node` runs in, collected once."""
        scope = scope_for(node)
        key = scope.id
        if key not in self._bindings:
            self._bindings[key] = ScopeBindings(scope)
        return self._bindings[key]

    def finding(self, code: str, message: str, node: Node, fix: Optional[Fix] = None,
                end: Optional[Node] = None) -> Finding:
        line, col = self.source.position(node.start_point)
        end_line, end_col = self.source.position((end or node).end_point)
        return Finding(code=code, message=message, line=line, column=col, end_line=end_line,
                       end_column=end_col, fix=fix)
