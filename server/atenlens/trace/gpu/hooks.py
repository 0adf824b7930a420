"""The hazard handling of one trace, as the hooks the recorder's two torch modes call.

There is one TorchFunctionMode and one TorchDispatchMode per trace, the recorder's (every Python
mode on the stack costs each op a round trip through the dispatcher). They record what the user's
code does and hand every API call to `HazardHooks.call` and every aten op to `HazardHooks.op`,
which run it — through the registered handler when there is one (a dict lookup per op; handlers
only for the ops they concern), which may answer with a placeholder. Inside a mode's handler that
mode is off, so the ops a handler runs itself (placeholders, pinned copies) reach only the fake
mode and are not recorded, and the function hook sees only the outermost API call of the user's
line (what `tracker.current_api` names in messages).
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace.gpu import (  # noqa: F401  (importing registers their handlers)
    conv_layout,
    copies,
    ctc,
    grouped_mm,
    host_arguments,
    packed,
    quantized,
    rnn_cells,
    sdpa,
    sparse,
    strides,
    syncs,
)
from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.tracker import HazardTracker, tensor_label
from atenlens.trace.torch_compat import tree_leaves

aten = torch.ops.aten

# Ops that do not read a tensor's data: views, metadata, and ops that only write their first input.
_NOT_READS = frozenset(
    {
        aten.detach.default,
        aten.alias.default,
        aten.is_pinned.default,
        aten.lift_fresh.default,
        aten.zero_.default,
        aten.fill_.Scalar,
        aten.fill_.Tensor,
        aten.set_.source_Storage,
        aten.set_.source_Storage_storage_offset,
        aten.empty_like.default,
    }
)
_WRITES_FIRST_ONLY = frozenset({aten.copy_.default, aten.zero_.default, aten.fill_.Scalar})
_FUNCTION_READERS = {
    "numpy": "`.numpy()`",
    "tolist": "`.tolist()`",
    "__repr__": "printing",
    "__format__": "formatting",
    "__array__": "`numpy.asarray()`",
    "item": "`.item()`",
    "__float__": "`float()`",
    "__int__": "`int()`",
    "__bool__": "`bool()` / `if tensor:`",
}
_FUNCTION_LEVEL_READS = frozenset({"numpy", "tolist", "__repr__", "__format__", "__array__"})


def _unsynced_read_message(reader: str, label: str, line: Any) -> str:
    where = f" (line {line})" if line is not None else ""
    return (
        f"{reader} reads host tensor {label} while the non_blocking device-to-host copy into it{where} "
        "may still be in flight: with no event, stream or device synchronize in between, the host can "
        "read stale data, with no error"
    )


def _check_reads(tracker: HazardTracker, tensors: list, reader: str, op: Any) -> None:
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type == "cpu":
            pending = tracker.take_pending(t)
            if pending is not None:
                tracker.unsynced_read(_unsynced_read_message(reader, tensor_label(t), pending.line), op)


class NoFakeKernelError(NotImplementedError):
    """An op the trace cannot run on fake cuda tensors (see `_without_fake_kernel`)."""


def _without_fake_kernel(func: Any, error: NotImplementedError) -> NotImplementedError:
    """torch's error when an op has no meta kernel for its inputs (sparse kernels, mostly): the fake
    mode then runs the real CUDA kernel, which a CPU build of torch does not have, and torch's message
    ("Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend") names an op the
    program never called. Said instead: which op, and that the trace cannot simulate it."""
    text = str(error)
    if isinstance(error, NoFakeKernelError) or not (
        text.startswith("Could not run '") and "with arguments from the 'CUDA' backend" in text
    ):
        return error
    return NoFakeKernelError(
        f"`{func}` cannot be simulated on cuda for these inputs: torch has no meta kernel for it, and the trace "
        "has no CUDA kernels to run instead (docs/fidelity.md)"
    )


class HazardHooks:
    """Runs API calls and aten ops for the recorder's modes, finding hazards on the way (the
    `DeviceHooks` of trace/device.py)."""

    def __init__(self, tracker: HazardTracker) -> None:
        self.tracker = tracker
        self._op_handler = DISPATCH_HANDLERS.lookup
        self._call_handler = FUNCTION_HANDLERS.lookup

    def op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        tracker = self.tracker
        if tracker.waited_all:
            tracker.waited_all = False
        if tracker.has_pending() and func not in _NOT_READS and func.namespace == "aten" and not func.is_view:
            read = tree_leaves((args[1:], kwargs) if func in _WRITES_FIRST_ONLY else (args, kwargs))
            reader = _FUNCTION_READERS.get(tracker.current_api or "", "an op")  # the op is named after the message
            _check_reads(tracker, read, reader, str(func))
        capture = tracker.capture
        if capture.unreplayed and capture.active is None and not func.is_view:
            capture.read_before_replay(args, kwargs, str(func))
        if capture.replays.watched and capture.active is None and not func.is_view:
            capture.replays.op(func, args, kwargs)  # static tensors between replays (AL516, AL517)
        handler = self._op_handler(func)
        try:
            if handler is None:
                out = func(*args, **kwargs)
            else:
                out = handler(InterceptedCall(func, args, kwargs, tracker, run=lambda: func(*args, **kwargs)))
        except NotImplementedError as error:
            raise _without_fake_kernel(func, error) from error
        if kwargs and kwargs.get("pin_memory") and isinstance(out, torch.Tensor) and out.device.type == "cpu":
            tracker.mark_pinned(out)  # torch.empty(..., pin_memory=True) and other factories
        if capture.active is not None and not func.is_view:
            # inside a CUDA graph capture: recorded, not run on any stream (its replays run it)
            capture.op(func, args, kwargs, out)
        elif tracker.streams is not None and not func.is_view:  # a side stream has been used
            tracker.stream_op(func, args, kwargs, out)
        return out

    def finish(self) -> None:
        """The traced call returned or raised: findings that need the whole trace."""
        self.tracker.finish()

    def call(self, func: Any, args: tuple, kwargs: dict) -> Any:
        tracker = self.tracker
        name = getattr(func, "__name__", None)
        previous, tracker.current_api = tracker.current_api, name
        try:
            if name in _FUNCTION_LEVEL_READS and tracker.has_pending() and args:
                _check_reads(tracker, [args[0]], _FUNCTION_READERS[name], None)
            handler = self._call_handler(func)
            if handler is None:
                return func(*args, **kwargs)
            return handler(InterceptedCall(func, args, kwargs, tracker, run=lambda: func(*args, **kwargs)))
        finally:
            tracker.current_api = previous


def tolist_of_fake(tracker: HazardTracker, t: torch.Tensor) -> Any:
    """What `FakeTensor.tolist` does while a trace runs (see torch_compat.fake_tensor_tolist)."""
    if tracker.has_pending():
        _check_reads(tracker, [t], "`.tolist()`", None)
    return syncs.fake_tolist(tracker, t)
