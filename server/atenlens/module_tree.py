"""Module trees of a report: what torchinfo shows for a model, per line that called one.

Pure functions of report data (no torch), shared by the terminal listing and the editor's hover.
A root module call (`output = model(images)`) and the module calls it made form a tree keyed by
qualified module names (`layer1.0.conv1`); calls of the same module at one line merge (a loop
calling the model three times gives one tree whose rows count x3). Numbered siblings that did the
same work (`h.0` ... `h.47`, the blocks of a transformer) fold into one node (`h.0-47`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from atenlens.report import TensorMeta, TraceReport


@dataclass
class ModuleNode:
    name: str  # qualified name, or a folded range (`layer1.1-2`); the root: its type
    type: str  # class name (empty for the root, whose name is its type)
    calls: int = 0  # module calls this node stands for
    ops: int = 0  # forward ops in the module and below, over all its calls
    flops: int = 0
    params: int = 0  # parameter elements of the module and below
    outputs: tuple[TensorMeta, ...] = ()
    children: list["ModuleNode"] = field(default_factory=list)
    path: str = ""  # qualified name of the (first) module

    def signature(self) -> tuple:
        """What must be equal for two siblings to fold into one node."""
        return (
            self.type,
            self.outputs,
            self.ops // max(self.calls, 1),
            self.flops // max(self.calls, 1),
            self.params,
            tuple(_relative(c.path, self.path) for c in self.children),
            tuple(c.signature() for c in self.children),
        )


def _relative(path: str, parent: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


def module_trees(report: TraceReport) -> dict[tuple[Optional[str], Optional[int]], list[ModuleNode]]:
    """(file, line) of the calling line -> the trees of the root modules called there, folded.
    Roots that called no other module (`criterion(logits, y)`) make no tree."""
    modules = report.modules
    if not modules:
        return {}
    own_ops = [0] * len(modules)
    own_flops = [0] * len(modules)
    count = len(modules)
    for event in report.events:
        index = event.module
        if index is not None and event.kind == "op" and 0 <= index < count:
            own_ops[index] += 1
            own_flops[index] += event.flops or 0

    root_of: list[int] = [0] * count
    nodes: list[Optional[ModuleNode]] = [None] * count
    roots: dict[tuple, ModuleNode] = {}  # (file, line, type) -> merged root
    by_path: dict[tuple, ModuleNode] = {}  # (file, line, type, path) -> merged node
    order: list[tuple] = []
    for index, call in enumerate(modules):
        parent = call.parent if call.parent is not None and 0 <= call.parent < index else None
        if parent is None:
            root_of[index] = index
            key = (call.file, call.line, call.type)
            node = roots.get(key)
            if node is None:
                node = roots[key] = ModuleNode(name=call.type, type="", path="")
                by_path[key + ("",)] = node
                order.append(key)
        else:
            root_of[index] = root_of[parent]
            top = modules[root_of[index]]
            key = (top.file, top.line, top.type)
            node = by_path.get(key + (call.path,))
            if node is None:
                node = by_path[key + (call.path,)] = ModuleNode(
                    name=call.path, type=call.type, path=call.path, params=call.params
                )
                parent_node = nodes[parent]
                assert parent_node is not None
                parent_node.children.append(node)
        if parent is None and not node.calls:
            node.params = call.params
        nodes[index] = node
        node.calls += 1
        node.ops += own_ops[index]
        node.flops += own_flops[index]
        if call.outputs:
            node.outputs = call.outputs

    trees: dict[tuple[Optional[str], Optional[int]], list[ModuleNode]] = {}
    for key in order:
        root = roots[key]
        if not root.children:
            continue
        _total(root)
        trees.setdefault((key[0], key[1]), []).append(fold(root))
    return trees


def _total(node: ModuleNode) -> None:
    """Own counts -> counts of the module and everything below it."""
    for child in node.children:
        _total(child)
        node.ops += child.ops
        node.flops += child.flops
        node.params += child.params


def _index_of(node: ModuleNode, parent: ModuleNode) -> Optional[int]:
    last = _relative(node.path, parent.path).rsplit(".", 1)[-1]
    return int(last) if last.isdigit() else None


def fold(node: ModuleNode) -> ModuleNode:
    """Fold runs of numbered siblings with equal signatures (`blocks.0`..`blocks.47`) into one node."""
    children = [fold(c) for c in node.children]
    folded: list[ModuleNode] = []
    run: list[ModuleNode] = []

    def flush() -> None:
        if len(run) > 1:
            folded.append(_merge(run, node))
        else:
            folded.extend(run)
        run.clear()

    for child in children:
        index = _index_of(child, node)
        previous = _index_of(run[-1], node) if run else None
        if previous is not None and index == previous + 1 and child.signature() == run[0].signature():
            run.append(child)
            continue
        flush()
        if index is not None:
            run.append(child)
        else:
            folded.append(child)
    flush()
    node.children = folded
    return node


def _merge(run: list[ModuleNode], parent: ModuleNode) -> ModuleNode:
    first, last = run[0], run[-1]
    name = f"{first.name}-{_relative(last.path, parent.path).rsplit('.', 1)[-1]}"
    return _combine(run, name)


def _combine(nodes: list[ModuleNode], name: str) -> ModuleNode:
    first = nodes[0]
    merged = ModuleNode(
        name=name,
        type=first.type,
        path=first.path,
        outputs=first.outputs,
        calls=sum(n.calls for n in nodes),
        ops=sum(n.ops for n in nodes),
        flops=sum(n.flops for n in nodes),
        params=sum(n.params for n in nodes),
    )
    for position, child in enumerate(first.children):
        merged.children.append(
            _combine([n.children[position] for n in nodes], f"{name}.{_relative(child.path, first.path)}")
        )
    return merged


def walk(node: ModuleNode, depth: int, level: int = 0) -> list[tuple[int, ModuleNode]]:
    """(level, node) in tree order, levels up to `depth` below the root."""
    rows = [(level, node)]
    if level < depth:
        for child in node.children:
            rows.extend(walk(child, depth, level + 1))
    return rows
