"""Which names a function binds, where, and to what: just enough flow to follow a tensor from
`x = batch.pin_memory()` to `x.to(device, non_blocking=True)` within one function.

Bindings are collected once per scope (a `def`, `lambda` or the module; nested scopes are not
entered) and looked up by name and position: the binding that applies at a point is the last one
that starts before it. That is textual order, the order the code usually runs in; loops that
rebind a name late in the body are read as written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.lint.source import walk
from atenlens.lint.syntax import SCOPE_TYPES, text

NESTED_SCOPE_TYPES = frozenset({"function_definition", "lambda", "class_definition"})


@dataclass(frozen=True)
class Binding:
    name: str
    at: int                        # start byte of the binding statement
    value: Optional[Node]          # `name = value`: the value; None when unknown
    loop: Optional[Node] = None    # `for ... in ...`: the for statement / for_in_clause
    path: tuple[int, ...] = ()     # position of the name inside the loop target (`for i, (x, y) in`)


class ScopeBindings:
    def __init__(self, scope: Node) -> None:
        self.scope = scope
        self.by_name: dict[str, list[Binding]] = {}
        for node in scope_nodes(scope):
            kind = node.type
            if kind == "assignment":
                self._assignment(node)
            elif kind == "named_expression":
                name = node.child_by_field_name("name")
                if name is not None and name.type == "identifier":
                    self._add(Binding(text(name), node.start_byte, node.child_by_field_name("value")))
            elif kind == "augmented_assignment":
                left = node.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    self._add(Binding(text(left), node.start_byte, None))
            elif kind in ("for_statement", "for_in_clause"):
                target = node.child_by_field_name("left")
                # A comprehension's element is written before its `for` clause but runs after it.
                at = node.parent.start_byte if kind == "for_in_clause" and node.parent is not None else node.start_byte
                if target is not None:
                    for name, path in _target_names(target):
                        self._add(Binding(name, at, None, loop=node, path=path))
            elif kind in ("parameters", "lambda_parameters"):
                for param in node.named_children:
                    ident = param if param.type == "identifier" else next(
                        (c for c in param.named_children if c.type == "identifier"), None)
                    if ident is not None:
                        self._add(Binding(text(ident), node.start_byte, None))

    def _assignment(self, node: Node) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is None:
            return
        if left.type == "identifier":
            value = right
            # `a = b = value`: the right side is itself an assignment.
            while value is not None and value.type == "assignment":
                inner_left = value.child_by_field_name("left")
                if inner_left is not None and inner_left.type == "identifier":
                    self._add(Binding(text(inner_left), node.start_byte, value.child_by_field_name("right")))
                value = value.child_by_field_name("right")
            self._add(Binding(text(left), node.start_byte, value))
        else:
            for name, _ in _target_names(left):
                self._add(Binding(name, node.start_byte, None))

    def _add(self, binding: Binding) -> None:
        self.by_name.setdefault(binding.name, []).append(binding)

    def at(self, name: str, position: int) -> Optional[Binding]:
        """The binding of `name` in effect at byte `position` (None: not bound in this scope)."""
        found = None
        for binding in self.by_name.get(name, ()):
            if binding.at < position and (found is None or binding.at >= found.at):
                # `>=`: of two bindings at one place (`for x in ...` then the comprehension's own),
                # the later collected, which is the inner one, wins.
                found = binding
        return found


def scope_nodes(scope: Node) -> Iterator[Node]:
    """Every node of `scope` that runs in it: nested defs, lambdas and classes are skipped (their
    parameters too); the scope's own parameters are included."""
    cursor = scope.walk()
    depth = 0
    while True:
        node = cursor.node
        nested = node is None or (depth > 0 and node.type in NESTED_SCOPE_TYPES)
        if not nested:
            yield node  # type: ignore[misc]
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


def _target_names(target: Node) -> list[tuple[str, tuple[int, ...]]]:
    """Names bound by a loop or assignment target with their index path: `i, (x, y)` ->
    [("i", (0,)), ("x", (1, 0)), ("y", (1, 1))]."""
    out: list[tuple[str, tuple[int, ...]]] = []
    stack: list[tuple[Node, tuple[int, ...]]] = [(target, ())]
    while stack:
        node, path = stack.pop()
        if node.type == "identifier":
            out.append((text(node), path))
        elif node.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple", "list",
                           "parenthesized_expression"):
            children = [c for c in node.named_children if c.type != "comment"]
            if node.type == "parenthesized_expression":
                stack.extend((c, path) for c in children)
            else:
                stack.extend((c, path + (i,)) for i, c in enumerate(children))
    return out


def scope_for(node: Node) -> Node:
    parent = node.parent
    while parent is not None:
        if parent.type in SCOPE_TYPES:
            return parent
        parent = parent.parent
    return node
