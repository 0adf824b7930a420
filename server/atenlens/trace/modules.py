"""The module tree of a trace: which `nn.Module` call each forward op ran inside.

Global module forward hooks (`torch.nn.modules.module.register_module_forward_pre_hook` and
`register_module_forward_hook`, public API) see every module call, library code included: a call
into torchvision's resnet50 or a Hugging Face model becomes `layer1.0.conv1  Conv2d  f32[...]`
instead of one line with 500 ops. The hooks are installed only while the traced call runs.

A module's qualified name is its name under the root module (the module the user's code called
while no other module was running), from the root's `named_modules()`, as torchinfo shows it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Callable, Optional

import torch

from atenlens.report import Frame, ModuleCall, TensorMeta

# A loop of many steps over a big model calls modules without end: past this many calls the tree
# keeps what it has (ops of later calls carry no module).
MAX_MODULE_CALLS = 20_000


class _Call:
    """A module call being recorded (mutable until the trace ends)."""

    __slots__ = ("path", "type", "parent", "file", "line", "outputs", "params", "module")

    def __init__(
        self,
        path: str,
        type_name: str,
        parent: Optional[int],
        file: Optional[str],
        line: Optional[int],
        params: int,
        module: Any,
    ) -> None:
        self.path, self.type, self.parent, self.file, self.line = path, type_name, parent, file, line
        self.outputs: tuple[TensorMeta, ...] = ()
        self.params = params
        self.module = module


class ModuleTracker:
    """Keeps the stack of running module calls. `current` is the index of the innermost one."""

    def __init__(
        self, user_stack: Callable[[Any], tuple[Frame, ...]], metas: Callable[[Any], tuple[TensorMeta, ...]]
    ) -> None:
        self._user_stack = user_stack
        self._metas = metas
        self.calls: list[_Call] = []
        self.dropped = 0
        self._stack: list[int] = []
        self.current: Optional[int] = None
        self._names: dict[int, tuple[Any, dict[int, str]]] = {}  # id(root) -> (root, id(module) -> path)
        self._params: dict[int, tuple[Any, int]] = {}
        self._handles: list[Any] = []

    def install(self) -> None:
        hooks = torch.nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._pre),
            hooks.register_module_forward_hook(self._post, always_call=True),
        ]

    def uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._stack.clear()
        self.current = None

    def _path(self, module: Any, parent: Optional[int]) -> str:
        if parent is None:
            return ""
        root = self.calls[self._root_of(parent)].module
        known = self._names.get(id(root))
        if known is None:
            names = {id(m): name for name, m in root.named_modules(remove_duplicate=False)}
            known = self._names[id(root)] = (root, names)
        path = known[1].get(id(module))
        if path is not None:
            return path
        outer = self.calls[parent].path  # a module that is not registered under the root
        return f"{outer}.{type(module).__name__}" if outer else type(module).__name__

    def _root_of(self, index: int) -> int:
        calls = self.calls
        while calls[index].parent is not None:
            index = calls[index].parent  # type: ignore[assignment]
        return index

    def _own_params(self, module: Any) -> int:
        found = self._params.get(id(module))
        if found is None:
            count = 0
            for p in module.parameters(recurse=False):
                count += p.numel()
            found = self._params[id(module)] = (module, count)
        return found[1]

    def _pre(self, module: Any, args: Any) -> None:
        if len(self.calls) >= MAX_MODULE_CALLS:
            self.dropped += 1
            self._stack.append(-1)
            return
        parent = self.current
        stack = self._user_stack(sys._getframe(1))
        file, line = (stack[-1].file, stack[-1].line) if stack else (None, None)
        index = len(self.calls)
        self.calls.append(
            _Call(
                self._path(module, parent), type(module).__name__, parent, file, line, self._own_params(module), module
            )
        )
        self._stack.append(index)
        self.current = index

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self._stack:
            return
        index = self._stack.pop()
        if index >= 0 and output is not None:
            self.calls[index].outputs = self._metas(_tensors_in(output))
        previous = [i for i in self._stack if i >= 0]
        self.current = previous[-1] if previous else None

    def module_calls(self) -> tuple[ModuleCall, ...]:
        return tuple(
            ModuleCall(
                path=c.path, type=c.type, parent=c.parent, file=c.file, line=c.line, outputs=c.outputs, params=c.params
            )
            for c in self.calls
        )


def _tensors_in(value: Any, limit: int = 16) -> list[Any]:
    """The tensors of a forward's result: a tensor, or those in (nested) tuples, lists and dicts
    (Hugging Face's ModelOutput is a dict), in order, at most `limit`."""
    found: list[Any] = []
    _visit(value, 0, found, limit)
    return found


def _visit(v: Any, depth: int, found: list[Any], limit: int) -> None:
    # a plain function, not a closure: a recursive closure is a reference cycle (the function holds
    # its own cell), which would keep every module's output alive until the garbage collector runs,
    # and the memory model would see those storages freed late, at a moment that differs run to run
    if len(found) >= limit or depth > 3:
        return
    if isinstance(v, torch.Tensor):
        found.append(v)
    elif isinstance(v, (tuple, list)):
        for w in v:
            _visit(w, depth + 1, found, limit)
    elif isinstance(v, Mapping):
        for w in v.values():
            _visit(w, depth + 1, found, limit)
