"""The two torch modes that run the hazard handlers for one trace.

The runner enters them before (outside) the recorder's modes. Torch gives each op and API call to
the most recently entered mode first, so the recorder sees everything first and its own call then
reaches these modes, which may answer with a placeholder; FakeTensorMode, an infra mode, always
runs last. Inside a mode's handler the mode itself is off, so the function mode sees only the
outermost API call of the user's line (what `tracker.current_api` names in messages).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from atenlens.trace.gpu import copies, sdpa, syncs  # noqa: F401  (importing registers their handlers)
from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.tracker import HazardTracker, tensor_label
from atenlens.trace.torch_compat import TorchDispatchMode

aten = torch.ops.aten

# Ops that do not read a tensor's data: views, metadata, and ops that only write their first input.
_NOT_READS = frozenset({
    aten.detach.default, aten.alias.default, aten.is_pinned.default, aten.lift_fresh.default,
    aten.zero_.default, aten.fill_.Scalar, aten.fill_.Tensor, aten.set_.source_Storage,
    aten.set_.source_Storage_storage_offset, aten.empty_like.default,
})
_WRITES_FIRST_ONLY = frozenset({aten.copy_.default, aten.zero_.default, aten.fill_.Scalar})
_FUNCTION_READERS = {
    "numpy": "`.numpy()`", "tolist": "`.tolist()`", "__repr__": "printing", "__format__": "formatting",
    "__array__": "`numpy.asarray()`", "item": "`.item()`", "__float__": "`float()`", "__int__": "`int()`",
    "__bool__": "`bool()` / `if tensor:`",
}
_FUNCTION_LEVEL_READS = frozenset({"numpy", "tolist", "__repr__", "__format__", "__array__"})


def _unsynced_read_message(reader: str, label: str, line: Any) -> str:
    where = f" (line {line})" if line is not None else ""
    return (f"{reader} reads host tensor {label} while the non_blocking device-to-host copy into it{where} "
            "may still be in flight: with no event, stream or device synchronize in between, the host can "
            "read stale data, with no error")


def _check_reads(tracker: HazardTracker, tensors: list, reader: str, op: Any) -> None:
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type == "cpu":
            pending = tracker.take_pending(t)
            if pending is not None:
                tracker.unsynced_read(_unsynced_read_message(reader, tensor_label(t), pending.line), op)


class HazardDispatchMode(TorchDispatchMode):
    def __init__(self, tracker: HazardTracker) -> None:
        super().__init__()
        self.tracker = tracker

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        tracker = self.tracker
        if tracker.has_pending() and func not in _NOT_READS and func.namespace == "aten" and not func.is_view:
            read = tree_leaves((args[1:], kwargs) if func in _WRITES_FIRST_ONLY else (args, kwargs))
            reader = _FUNCTION_READERS.get(tracker.current_api or "", "an op")   # the op is named after the message
            _check_reads(tracker, read, reader, str(func))
        handler = DISPATCH_HANDLERS.lookup(func)
        if handler is None:
            out = func(*args, **kwargs)
        else:
            out = handler(InterceptedCall(func, args, kwargs, tracker, run=lambda: func(*args, **kwargs)))
        if kwargs.get("pin_memory") and isinstance(out, torch.Tensor) and out.device.type == "cpu":
            tracker.mark_pinned(out)    # torch.empty(..., pin_memory=True) and other factories
        return out


def tolist_of_fake(tracker: HazardTracker, t: torch.Tensor) -> Any:
    """What `FakeTensor.tolist` does while a trace runs (see torch_compat.fake_tensor_tolist)."""
    if tracker.has_pending():
        _check_reads(tracker, [t], "`.tolist()`", None)
    return syncs.fake_tolist(tracker, t)


class HazardFunctionMode(TorchFunctionMode):
    def __init__(self, tracker: HazardTracker) -> None:
        super().__init__()
        self.tracker = tracker

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        tracker = self.tracker
        name = getattr(func, "__name__", None)
        previous, tracker.current_api = tracker.current_api, name
        try:
            if name in _FUNCTION_LEVEL_READS and tracker.has_pending() and args:
                _check_reads(tracker, [args[0]], _FUNCTION_READERS[name], None)
            handler = FUNCTION_HANDLERS.lookup(func)
            if handler is None:
                return func(*args, **kwargs)
            return handler(InterceptedCall(func, args, kwargs, tracker, run=lambda: func(*args, **kwargs)))
        finally:
            tracker.current_api = previous
