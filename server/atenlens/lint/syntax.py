"""Small questions about tree-sitter Python nodes that several rules ask: what a call calls, its
arguments, whether it runs once per loop iteration, which function it belongs to.

Everything here is iterative (no recursion on the tree) and tolerant of ERROR nodes: a field that
a half-typed line left missing is simply None.
"""

from __future__ import annotations

from typing import Optional

from tree_sitter import Node

from atenlens.lint.source import ancestors

FUNCTION_TYPES = frozenset({"function_definition", "lambda"})
SCOPE_TYPES = frozenset({"function_definition", "lambda", "class_definition", "module"})
COMPREHENSION_TYPES = frozenset(
    {"list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"}
)
DEFINITION_TYPES = frozenset({"function_definition", "class_definition", "decorated_definition"})
LITERAL_TYPES = frozenset(
    {
        "integer",
        "float",
        "string",
        "concatenated_string",
        "true",
        "false",
        "none",
        "list",
        "tuple",
        "dictionary",
        "set",
        "list_comprehension",
        "set_comprehension",
        "dictionary_comprehension",
    }
)


def text(node: Optional[Node]) -> str:
    data = node.text if node is not None else None  # `Node.text` slices the source on each access
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace")


def dotted_name(node: Optional[Node]) -> Optional[str]:
    """`torch.cuda.synchronize` for an identifier/attribute chain, None for anything else."""
    parts: list[str] = []
    while node is not None and node.type == "attribute":
        attr = node.child_by_field_name("attribute")
        if attr is None or attr.type != "identifier":
            return None
        parts.append(text(attr))
        node = node.child_by_field_name("object")
    if node is None or node.type != "identifier":
        return None
    parts.append(text(node))
    return ".".join(reversed(parts))


def strip_parens(node: Node) -> Node:
    """`x` of `((x))`."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def callee(call: Node) -> Optional[Node]:
    return call.child_by_field_name("function")


def method_name(call: Node) -> Optional[str]:
    """`item` for `x.item()`; None when the callee is not an attribute."""
    fn = callee(call)
    if fn is None or fn.type != "attribute":
        return None
    attr = fn.child_by_field_name("attribute")
    return text(attr) if attr is not None else None


def receiver(call: Node) -> Optional[Node]:
    """`x` for `x.item()`."""
    fn = callee(call)
    if fn is None or fn.type != "attribute":
        return None
    return fn.child_by_field_name("object")


def arguments(call: Node) -> tuple[list[Node], dict[str, Node]]:
    """Positional argument nodes and keyword name -> value node (`*a`/`**k` are skipped)."""
    positional: list[Node] = []
    keywords: dict[str, Node] = {}
    args = call.child_by_field_name("arguments")
    if args is None or args.type != "argument_list":
        return positional, keywords
    for child in args.named_children:
        if child.type == "keyword_argument":
            name = child.child_by_field_name("name")
            value = child.child_by_field_name("value")
            if name is not None and value is not None:
                keywords[text(name)] = value
        elif child.type in ("list_splat", "dictionary_splat", "comment", "ERROR"):
            continue
        else:
            positional.append(child)
    return positional, keywords


def has_splat(call: Node) -> bool:
    args = call.child_by_field_name("arguments")
    return args is not None and any(c.type in ("list_splat", "dictionary_splat") for c in args.named_children)


def is_true(node: Optional[Node]) -> bool:
    return node is not None and node.type == "true"


def is_false(node: Optional[Node]) -> bool:
    return node is not None and node.type == "false"


def module_code(node: Node) -> list[Node]:
    """The statements of the module around `node` that are no definitions: its own code (imports,
    constants, a `__main__` block), which the prefilter always parses, unlike the definitions it
    may leave out (lint/triggers.py)."""
    module = node
    while module.parent is not None:
        module = module.parent
    return [c for c in module.named_children if c.type not in DEFINITION_TYPES]


def repeating_loop(node: Node) -> Optional[Node]:
    """The innermost loop that runs `node` once per iteration, within its own function.

    Per iteration means: a `for` or `while` body, a `while` condition, or the element, conditions
    and inner iterables of a comprehension. A `for` loop's iterable and `else` clause, and the
    first iterable of a comprehension, run once. A `def`, `lambda` or `class` inside a loop
    stops the search: its body runs when it is called, not when the loop runs.
    """
    child = node
    for parent in ancestors(node):
        kind = parent.type
        if kind in SCOPE_TYPES:
            return None
        if kind == "for_statement":
            if parent.child_by_field_name("body") == child:
                return parent
        elif kind == "while_statement":
            if child != parent.child_by_field_name("alternative"):
                return parent
        elif kind in COMPREHENSION_TYPES:
            first = next((c for c in parent.named_children if c.type == "for_in_clause"), None)
            once = first.child_by_field_name("right") if first is not None else None
            if child != first or once is None or not within(node, once):
                return parent
        child = parent
    return None


def within(node: Node, outer: Node) -> bool:
    """Do `node`'s bytes lie inside `outer`'s?"""
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def definition_holder(definition: Node) -> Optional[Node]:
    """What a `def` (or `class`) is written in, past its decorators: the `class_definition` whose
    body holds it (a method), the `module`, or the statement of another block (a function, an
    `if`)."""
    node = definition.parent
    if node is not None and node.type == "decorated_definition":
        node = node.parent
    return node.parent if node is not None and node.type == "block" else node


def decorators(definition: Node) -> list[str]:
    """The decorators of a `def` (or `class`) as written, without the `@`: `["pytest.fixture"]`."""
    holder = definition.parent
    if holder is None or holder.type != "decorated_definition":
        return []
    return [text(d).lstrip("@").strip() for d in holder.named_children if d.type == "decorator"]


def statement_of(node: Node) -> Node:
    """The statement of its block (or of the module) that holds `node`."""
    statement = node
    while statement.parent is not None and statement.parent.type not in ("block", "module"):
        statement = statement.parent
    return statement


def neighbour_statement(statement: Optional[Node], forward: bool = True) -> Optional[Node]:
    """The statement right after (or before) `statement` in its block, comments skipped."""
    node = statement
    while node is not None:
        node = node.next_named_sibling if forward else node.prev_named_sibling
        if node is None or node.type != "comment":
            return node
    return None
