"""The example call to propose for a function that needs inputs, and whether a directive is complete.

Torch-free and protocol-free. A directive is evaluated in the module's namespace as the trace imports
the module (not as `__main__`), so it is complete when every name it reads is bound at the module's top
level (outside `if __name__ == "__main__":`) or is a builtin.

For a module-level function the proposal reuses a call the file already makes when there is one: in
its `if __name__ == "__main__":` block first, then in another function. An argument that names a value the caller made
just before (`model, opt, x, y = setup()`, `x = torch.randn(8, 16)`) is replaced by what made it
(`*setup()`, `torch.randn(8, 16)`) when that reads only module-level names; the other names stay and are
the placeholders the user fills in. Without such a call, the parameters' names are the placeholders:
`train_step(model, opt, x, y)`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from atenlens.traceable import BUILTIN_NAMES, FunctionInfo, is_main_guard, missing_names, module_names, read_names


@dataclass(frozen=True)
class Proposal:
    expression: str  # the call, e.g. "train_step(*setup())"
    placeholders: tuple[str, ...]  # names in it the module does not define, in order of appearance
    reused_line: Optional[int]  # 1-based line of the call it was taken from, None: made from the parameters


def _callee_matches(call: ast.Call, info: FunctionInfo) -> bool:
    """A call of the module-level function `info` by its name. A method's calls are not reused: their
    receivers (`model.forward(x)`) name objects the module does not know."""
    return not info.is_method and isinstance(call.func, ast.Name) and call.func.id == info.name


def _calls_in(body: list[ast.stmt], info: FunctionInfo) -> list[tuple[ast.Call, list[ast.stmt]]]:
    """The calls of `info` in `body`, each with the statements of `body` (its scope) it was found in."""
    return [
        (node, body)
        for statement in body
        for node in ast.walk(statement)
        if isinstance(node, ast.Call) and _callee_matches(node, info)
    ]


def _assignments_before(scope: list[ast.stmt], line: int) -> dict[str, tuple[ast.Assign, int]]:
    """The last plain assignment to each name in `scope` (nested blocks too) before `line`: name ->
    (assignment, the name's position among its targets, -1 for a plain `name = ...`)."""
    found: dict[str, tuple[ast.Assign, int]] = {}
    nodes = sorted(
        (n for s in scope for n in ast.walk(s) if isinstance(n, ast.Assign) and n.lineno < line), key=lambda n: n.lineno
    )
    for node in nodes:
        if len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            found[target.id] = (node, -1)
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):  # all are (checked above)
                    found[element.id] = (node, index)
    return found


def _rewrite_arguments(call: ast.Call, scope: list[ast.stmt], source: str, defined: frozenset[str]) -> str:
    """The call's source with arguments made where the caller made them, when that reads module names only."""
    made = _assignments_before(scope, call.lineno)

    def readable(node: ast.AST) -> bool:
        return all(n in defined or n in BUILTIN_NAMES for n in read_names(node))

    def segment(node: ast.AST) -> str:
        return ast.get_source_segment(source, node) or ast.unparse(node)

    parts: list[str] = []
    args = list(call.args)
    index = 0
    while index < len(args):
        arg = args[index]
        if isinstance(arg, ast.Name) and arg.id in made:
            assignment, position = made[arg.id]
            if position == -1 and readable(assignment.value):
                parts.append(segment(assignment.value))
                index += 1
                continue
            if position == 0:
                names = [e.id for e in assignment.targets[0].elts]  # type: ignore[attr-defined]
                given = [a.id if isinstance(a, ast.Name) else None for a in args[index : index + len(names)]]
                if given == names and readable(assignment.value):
                    parts.append(f"*{segment(assignment.value)}")
                    index += len(names)
                    continue
        parts.append(segment(arg))
        index += 1
    for keyword in call.keywords:
        value = keyword.value
        if (
            isinstance(value, ast.Name)
            and value.id in made
            and made[value.id][1] == -1
            and readable(made[value.id][0].value)
        ):
            text = segment(made[value.id][0].value)
        else:
            text = segment(value)
        parts.append(f"{keyword.arg}={text}" if keyword.arg else f"**{text}")
    return f"{segment(call.func)}({', '.join(parts)})"


def _from_parameters(info: FunctionInfo, tree: ast.Module) -> str:
    node = _definition(tree, info)
    params = _required(node, info.is_method) if node is not None else []
    call = f"{info.name}({', '.join(params)})"
    if not info.is_method:
        return call
    owner = info.qualname.rsplit(".", 1)[0]
    init = _definition(
        tree,
        FunctionInfo(
            qualname=f"{owner}.__init__",
            name="__init__",
            line=0,
            column=0,
            first_line=0,
            end_line=0,
            needs_args=True,
            is_method=True,
            directive=None,
            directive_line=None,
        ),
    )
    receiver = f"{owner}({', '.join(_required(init, True))})" if init is not None else f"{owner}()"
    return f"{receiver}.{call}"


def _definition(tree: ast.Module, info: FunctionInfo) -> Optional[ast.FunctionDef | ast.AsyncFunctionDef]:
    body: list[ast.stmt] = tree.body
    *owners, name = info.qualname.split(".")
    for owner in owners:
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        if found is None:
            return None
        body = found.body
    return next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)


def _required(node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> list[str]:
    args = node.args
    positional = args.posonlyargs + args.args
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if is_method and positional and not static:
        positional = positional[1:]
    names = [a.arg for a in positional[: len(positional) - len(args.defaults)]]
    names += [f"{a.arg}={a.arg}" for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return names


def propose_call(source: str, info: FunctionInfo) -> Proposal:
    """The example call to insert above `info` (raises SyntaxError when `source` does not parse)."""
    tree = ast.parse(source)
    defined = module_names(tree)
    scopes: list[list[ast.stmt]] = [node.body for node in tree.body if isinstance(node, ast.If) and is_main_guard(node)]
    scopes += [
        node.body
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not (node.lineno >= info.line and (node.end_lineno or node.lineno) <= info.end_line)
    ]
    for scope in scopes:
        calls = _calls_in(scope, info)
        if calls:
            call, body = min(calls, key=lambda found: found[0].lineno)
            expression = _rewrite_arguments(call, body, source, defined)
            return Proposal(expression, missing_names(expression, defined), call.lineno)
    expression = _from_parameters(info, tree)
    return Proposal(expression, missing_names(expression, defined), None)


def snippet(expression: str, placeholders: tuple[str, ...]) -> str:
    """`expression` as an LSP snippet: each placeholder name a tab stop (`${1:model}`), the same name the
    same stop; `$`, `}` and `\\` escaped."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return _escape(expression)
    stops = {name: index + 1 for index, name in enumerate(placeholders)}
    # ast's columns count UTF-8 bytes
    data = expression.encode("utf-8")
    spans = sorted(
        (n.col_offset, n.end_col_offset or n.col_offset, n.id)
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id in stops and n.lineno == 1
    )
    out, at = [], 0
    for start, end, name in spans:
        out.append(_escape(data[at:start].decode("utf-8")))
        out.append(f"${{{stops[name]}:{name}}}")
        at = end
    out.append(_escape(data[at:].decode("utf-8")))
    return "".join(out)


def first_name_span(expression: str, names: tuple[str, ...]) -> tuple[int, int]:
    """The str columns of the first use of one of `names` in `expression` ((0, 0) when none is read)."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return 0, 0
    spans = sorted(
        (n.col_offset, n.end_col_offset or n.col_offset)
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id in names and n.lineno == 1
    )
    if not spans:
        return 0, 0
    data = expression.encode("utf-8")  # ast's columns count UTF-8 bytes
    start, end = spans[0]
    return len(data[:start].decode("utf-8")), len(data[:end].decode("utf-8"))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")
