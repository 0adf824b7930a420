"""Which names a function binds, where, and to what: just enough flow to follow a tensor from
`x = batch.pin_memory()` to `x.to(device, non_blocking=True)` within one function.

Bindings of a name are found on demand (where the name is written in the scope, then what the
tree says stands there) and looked up by position: the binding that applies at a point is the
last one that took effect before it (an assignment after its right side, a loop variable from
its `for`). That is textual order, the order the code usually runs in; loops
that rebind a name late in the body are read as written. A binding in one branch of an
`if`/`elif`/`else` does not apply in a later branch of the same statement (`in_other_branch`). Nested `def`/`lambda`/`class` scopes
are separate; comprehensions belong to the function around them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from tree_sitter import Node

from atenlens.lint.syntax import SCOPE_TYPES, text

if TYPE_CHECKING:
    from atenlens.lint.context import LintContext

PATTERN_TYPES = frozenset(
    {"pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple", "list", "parenthesized_expression"}
)


@dataclass(frozen=True)
class Binding:
    name: str
    at: int  # byte where the binding takes effect (after an assignment's right side)
    value: Optional[Node]  # `name = value`: the value; None when unknown
    loop: Optional[Node] = None  # `for ... in ...`: the for statement / for_in_clause
    path: tuple[int, ...] = ()  # position of the name inside the loop or assignment target (`for i, (x, y) in`)
    unpacked_from: Optional[Node] = None  # `a, b = value`: the value unpacked (then `value` is None)
    augmented: bool = False  # `x += y`: the same object as the binding before, updated in place
    start: int = 0  # where the binding's statement starts (the binding before applies there)
    site: Optional[Node] = None  # the name where it is written


def binding_of(ident: Node, name: Optional[str] = None) -> Optional[Binding]:
    """The binding made where `ident` is written, None when `ident` is not a binding target
    (parameters, imports, `with ... as` are not followed: their value is unknown either way).
    `name`: the identifier's text when the caller knows it (most identifiers are reads, and
    decoding each one's text to answer None costs more than the rest of the test)."""
    if name is None:
        name = text(ident)
    child, parent = ident, ident.parent
    path: list[int] = []
    while parent is not None and parent.type in PATTERN_TYPES:
        if parent.type != "parenthesized_expression":
            path.insert(0, [c for c in parent.named_children if c.type != "comment"].index(child))
        child, parent = parent, parent.parent
    if parent is None:
        return None
    kind = parent.type
    if kind == "assignment" and parent.child_by_field_name("left") == child:
        # The name is bound once the right side has run: `x = x.to(...)` reads the old `x`.
        outer = parent
        while outer.parent is not None and outer.parent.type == "assignment":
            outer = outer.parent
        value = parent.child_by_field_name("right")
        while value is not None and value.type == "assignment":  # `a = b = value`
            value = value.child_by_field_name("right")
        if child != ident:
            return Binding(name, outer.end_byte, None, path=tuple(path), unpacked_from=value, site=ident)
        return Binding(name, outer.end_byte, value, site=ident)
    if kind in ("for_statement", "for_in_clause") and parent.child_by_field_name("left") == child:
        # A comprehension's element is written before its `for` clause but runs after it.
        at = parent.parent.start_byte if kind == "for_in_clause" and parent.parent is not None else parent.start_byte
        return Binding(name, at, None, loop=parent, path=tuple(path), site=ident)
    if kind == "named_expression" and parent.child_by_field_name("name") == child:
        return Binding(name, parent.end_byte, parent.child_by_field_name("value"), site=ident)
    if kind == "augmented_assignment" and parent.child_by_field_name("left") == child:
        return Binding(name, parent.end_byte, None, augmented=True, start=parent.start_byte, site=ident)
    return None


class ScopeBindings:
    def __init__(self, scope: Node, ctx: "LintContext") -> None:
        self.scope = scope
        self._ctx = ctx
        self._by_name: dict[str, list[Binding]] = {}

    def of(self, name: str) -> list[Binding]:
        if name not in self._by_name:
            found = []
            for ident in self._ctx.identifiers((name,), self.scope.start_byte, self.scope.end_byte):
                binding = binding_of(ident, name)  # `identifiers` found exactly `name` there
                if binding is not None and scope_for(ident) == self.scope:
                    found.append(binding)
            self._by_name[name] = found
        return self._by_name[name]

    def at(self, name: str, position: int) -> Optional[Binding]:
        """The binding of `name` in effect at byte `position` (None: not bound in this scope)."""
        found = None
        for binding in self.of(name):
            # `>=`: of two bindings at one place (a comprehension's clauses), the later written wins.
            if (
                binding.at <= position
                and (found is None or binding.at >= found.at)
                and not in_other_branch(binding.site, position)
            ):
                found = binding
        return found

    def branch_alternatives(self, name: str, position: int, found: Binding) -> list[Binding]:
        """When `found` (the binding in effect at `position`) is made in one branch of an
        `if`/`elif`/`else` that ended before `position`, the bindings the other branches leave
        (the one before the `if` where there is no `else`): in `if a: loss = out.loss else:
        loss = dict()`, a read after the statement may see either."""
        statement, taken = _enclosing_branch(found.site)
        if statement is None or taken is None or position < statement.end_byte:
            return []
        branches = [statement.child_by_field_name("consequence")]
        branches += [c for c in statement.children if c.type in ("elif_clause", "else_clause")]
        others: list[Binding] = []
        for branch in branches:
            if branch is None or branch == taken:
                continue
            last = None
            for binding in self.of(name):
                site = binding.site
                if site is not None and branch.start_byte <= site.start_byte < branch.end_byte:
                    if last is None or binding.at >= last.at:
                        last = binding
            if last is not None:
                others.append(last)
        if not any(c.type == "else_clause" for c in statement.children):
            before = self.at(name, statement.start_byte)
            if before is not None:
                others.append(before)
        return others


def _enclosing_branch(site: Optional[Node]) -> tuple[Optional[Node], Optional[Node]]:
    """The innermost `if` statement whose branch holds `site`, and that branch."""
    child = site
    parent = site.parent if site is not None else None
    while parent is not None and parent.type not in SCOPE_TYPES:
        if parent.type == "if_statement" and child is not None and child == parent.child_by_field_name("consequence"):
            return parent, child
        if parent.type in ("elif_clause", "else_clause") and parent.parent is not None:
            return parent.parent, parent
        child, parent = parent, parent.parent
    return None, None


def in_other_branch(site: Optional[Node], position: int) -> bool:
    """Is `site` in one branch of an `if`/`elif`/`else` and `position` in a later branch of the
    same statement? Then the binding never reaches it: in `if a: x = f(x) else: x = g(x)`, the
    `else` reads the `x` from before the `if`."""
    child = site
    parent = site.parent if site is not None else None
    while parent is not None and parent.type not in SCOPE_TYPES:
        branch = None
        if parent.type == "if_statement" and child is not None and child == parent.child_by_field_name("consequence"):
            branch = child
        elif parent.type in ("elif_clause", "else_clause") and parent.parent is not None:
            branch, parent = parent, parent.parent
        if branch is not None and branch.end_byte <= position < parent.end_byte:
            return True
        child, parent = parent, parent.parent
    return False


def scope_for(node: Node) -> Node:
    """The innermost `def`, `lambda`, `class` or module around `node`."""
    parent = node.parent
    while parent is not None:
        if parent.type in SCOPE_TYPES:
            return parent
        parent = parent.parent
    return node
