"""The layering rules of docs/design (CONTRIBUTING.md), checked on the source: what each layer may
import, and where private torch APIs may be used. Static (the modules are parsed, not imported), so
an import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "atenlens"
# attributes of torch objects that are private (tensors' storages, autograd nodes, op overloads)
PRIVATE_TORCH_ATTRIBUTES = {
    "_cdata",
    "_sequence_nr",
    "_schema",
    "_opname",
    "_local_tensor",
    "_overloadpacket",
    "_orig_mod",
}
TORCH_COMPAT = "trace/torch_compat.py"


@cache
def modules() -> dict[str, Path]:
    """`atenlens.lsp.server` -> its file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("atenlens",) + path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@cache
def imports_of(module: str) -> frozenset[str]:
    """Every module `module` imports, anywhere in it (absolute names; `from a import b` gives `a`
    and, when `a.b` is a module of the package, `a.b`)."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules())
    return frozenset(names)


def reachable(module: str) -> dict[str, str]:
    """Every module `module` imports, directly or through modules of the package: name -> the
    package module that imports it."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        for name in imports_of(current):
            if name not in seen:
                seen[name] = current
                if name in modules():
                    todo.append(name)
    return seen


def forbidden(module: str, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{name} (imported by {by})"
        for name, by in reachable(module).items()
        if any(name == p or name.startswith(p + ".") for p in prefixes)
    )


def layer(prefix: str) -> list[str]:
    return [m for m in modules() if m == prefix or m.startswith(prefix + ".")]


def test_the_server_side_never_imports_torch_or_the_engine():
    server_side = layer("atenlens.lsp") + layer("atenlens.lint") + ["atenlens.worker.client", "atenlens.report"]
    assert len(server_side) > 40
    assert "atenlens.lint.source" in reachable("atenlens.lsp.server")  # the walk follows the package
    assert {m: forbidden(m, ("torch", "atenlens.trace")) for m in server_side} == {m: [] for m in server_side}


def test_the_engine_and_the_lint_never_import_the_protocol():
    layers = layer("atenlens.trace") + layer("atenlens.lint")
    assert {m: forbidden(m, ("pygls", "lsprotocol", "atenlens.lsp")) for m in layers} == {m: [] for m in layers}


def test_the_report_imports_nothing_of_the_package_but_its_codes():
    assert sorted(n for n in imports_of("atenlens.report") if n.startswith("atenlens")) == ["atenlens.codes"]
    assert sorted(n for n in imports_of("atenlens.codes") if n.startswith("atenlens")) == []


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def private_torch_uses(path: Path) -> list[str]:
    """`line: name` of each private torch module, name or attribute the file uses. Ops reached
    through `torch.ops` keep their dispatcher names (`aten._to_copy`): those are not Python APIs."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "torch" and _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            names = [f"{node.module}.{a.name}" for a in node.names if _private(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node) or ""
            if node.attr in PRIVATE_TORCH_ATTRIBUTES:
                names = [f".{node.attr}"]
            elif dotted.startswith("torch.") and not dotted.startswith("torch.ops.") and _private(dotted):
                names = [dotted]
        found += [f"{getattr(node, 'lineno', 0)}: {name}" for name in names]
    return found


def test_private_torch_apis_only_in_torch_compat():
    uses = {path.relative_to(PACKAGE).as_posix(): private_torch_uses(path) for path in modules().values()}
    assert uses.pop(TORCH_COMPAT)  # it does use them: the check sees them
    assert {file: found for file, found in uses.items() if found} == {}


def top_level_imports(module: str) -> set[str]:
    """The package modules `module` imports when it is imported (imports inside functions, which run
    later, left out)."""
    path, names = modules()[module], set[str]()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name in modules() and name != module}


def import_cycles() -> list[list[str]]:
    """The groups of modules that import each other in a circle (Tarjan's strongly connected components)."""
    graph = {module: top_level_imports(module) for module in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in graph:
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_itself_through_others():
    assert "atenlens.trace.attribution" in top_level_imports("atenlens.trace.gpu.tracker")
    assert import_cycles() == []


def test_no_source_file_holds_a_control_character() -> None:
    r"""A control character in the package's source is an escape written unescaped by an edit:
    `\b` in a regular expression turned into a backspace matches nothing that code contains (the
    lint's `accelerator` word test once did so, silently)."""
    control = [chr(c) for c in range(32) if chr(c) not in "\t\n\r"]
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in modules().values()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(c in line for c in control)
    ]
    assert found == []
