"""Libraries see a plain eager run: what they check to detect tracing answers as in eager mode.

Some libraries take another path when they think a graph is being traced, and on fake tensors they
would think so: transformers' `is_tracing(tensor)` counts a FakeTensor as compile-time tracing, so
its attention-mask code skips the `padding_mask.all()` check that syncs on every eager forward,
and materialises a mask where an eager GPU run passes `is_causal=True` to sdpa. The trace must show
the eager run. (`torch.compiler.is_compiling()`, `torch._dynamo.is_compiling()`,
`torch.compiler.is_exporting()` and `torch.jit.is_tracing()` are already False under fake tensors.)

Each entry names a module, one of its functions and the eager answer. The function is replaced
while a trace runs: at once when the module is already imported, else as soon as it is imported
(a `sys.meta_path` hook), and restored afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Callable, Iterator, Optional, Sequence

# (module, function, eager replacement)
EAGER_VIEWS: tuple[tuple[str, str, Callable[..., Any]], ...] = (
    # transformers.utils.import_utils.is_tracing() ORs is_fake_tensor(tensor) into its answer
    ("transformers.utils.import_utils", "is_fake_tensor", lambda tensor: False),
)


class _Patches:
    def __init__(self, views: Sequence[tuple[str, str, Callable[..., Any]]]) -> None:
        self.views = views
        self.saved: list[tuple[types.ModuleType, str, Any]] = []

    def apply(self, module: types.ModuleType) -> None:
        for name, attribute, replacement in self.views:
            if name == module.__name__ and hasattr(module, attribute):
                self.saved.append((module, attribute, getattr(module, attribute)))
                setattr(module, attribute, replacement)

    def restore(self) -> None:
        for module, attribute, original in reversed(self.saved):
            setattr(module, attribute, original)
        self.saved.clear()


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, then the patches."""

    def __init__(self, loader: Any, patches: _Patches) -> None:
        self.loader = loader
        self.patches = patches

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        self.patches.apply(module)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the modules named, it wraps the loader the other finders return so
    the patches apply right after the module's code has run."""

    def __init__(self, patches: _Patches) -> None:
        self.patches = patches
        self.names = {name for name, _, _ in patches.views}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _PatchingLoader(spec.loader, self.patches)
                return spec
            if spec is not None:
                return spec
        return None


@contextlib.contextmanager
def eager_views_for_libraries(views: Sequence[tuple[str, str, Callable[..., Any]]] = EAGER_VIEWS) -> Iterator[None]:
    patches = _Patches(views)
    for name, _, _ in views:
        module = sys.modules.get(name)
        if module is not None:
            patches.apply(module)
    hook = _PatchOnImport(patches)
    sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
        patches.restore()
