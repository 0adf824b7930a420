"""What a rule sees: the parsed source and, from one query over the tree, the calls it asked for."""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

from tree_sitter import Node, Query, QueryCursor

from atenlens.lint.findings import Finding, Fix
from atenlens.lint.source import SourceText, python_language


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

    def finding(self, code: str, message: str, node: Node, fix: Optional[Fix] = None,
                end: Optional[Node] = None) -> Finding:
        line, col = self.source.position(node.start_point)
        end_line, end_col = self.source.position((end or node).end_point)
        return Finding(code=code, message=message, line=line, column=col, end_line=end_line,
                       end_column=end_col, fix=fix)
