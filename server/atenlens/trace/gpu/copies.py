"""Handlers for copies between host and device, and the pinned host memory they depend on.

- Host-to-device with `non_blocking=True` is asynchronous only from pinned (page-locked) memory;
  from pageable memory the driver stages it through a pinned buffer while the host waits
  (kind "pageable-copy"). A blocking copy is what it says and is not reported.
- Device-to-host: a blocking copy is a sync. `non_blocking=True` into pinned memory (what
  `.to("cpu", non_blocking=True)` allocates) returns before the data has landed: the host tensor is
  "pending" until an event recorded after the copy, its stream or the device is synchronized, and
  reading it before that can see stale data (kind "unsynced-d2h-read", found by the modes on the
  first read). `non_blocking=True` into pageable memory is synchronous: a sync.
- Fake tensors have no pinned state (`pin_memory()` is not implemented for them, `is_pinned()` is
  always False), so the tracker keeps it per storage: views of a pinned tensor are pinned too.
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.syncs import WAITS
from atenlens.trace.gpu.tracker import is_cpu, is_cuda, tensor_label
from atenlens.trace.torch_compat import FakeTensor

aten = torch.ops.aten

_TO_CPU = '`.to("cpu")`'
_PIN_ADVICE = "pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`) or drop non_blocking"


def _pageable_message(api: str, src: torch.Tensor) -> str:
    return (
        f"{api} with non_blocking=True copies {tensor_label(src)} from pageable (unpinned) host memory: "
        f"the driver stages it through a pinned buffer and the host waits, so the copy does not overlap "
        f"with GPU work; {_PIN_ADVICE}"
    )


def _api_name(call: InterceptedCall, default: str) -> str:
    api = call.tracker.current_api
    return {"to": "`.to()`", "cuda": "`.cuda()`", "cpu": "`.cpu()`", "copy_": "`copy_()`"}.get(api or "", default)


@DISPATCH_HANDLERS.register(aten._to_copy.default)
def to_copy(call: InterceptedCall) -> Any:
    src = call.args[0]
    device = call.kwargs.get("device")
    non_blocking = bool(call.kwargs.get("non_blocking", False))
    target = device.type if device is not None else src.device.type
    tracker = call.tracker
    if is_cuda(src) and target == "cpu":
        if not non_blocking:
            tracker.sync(
                f"{_api_name(call, _TO_CPU)} copies cuda {tensor_label(src)} to the host and blocks: {WAITS}",
                str(call.target),
            )
            return call.run()
        host = call.run()
        tracker.mark_pinned(host)  # torch allocates the destination of a non_blocking D2H pinned
        tracker.copy_issued(host)
        return host
    if is_cpu(src) and target == "cuda" and non_blocking and not tracker.is_pinned(src):
        tracker.pageable_copy(_pageable_message(_api_name(call, "`.to()`"), src), str(call.target))
    return call.run()


@DISPATCH_HANDLERS.register(aten.copy_.default)
def copy_into(call: InterceptedCall) -> Any:
    dst, src = call.args[0], call.args[1]
    non_blocking = bool(call.arg(2, "non_blocking", False))
    tracker = call.tracker
    if is_cpu(dst) and is_cuda(src):
        if non_blocking and tracker.is_pinned(dst):
            result = call.run()
            tracker.copy_issued(dst)
            return result
        how = "into pageable host memory is synchronous despite non_blocking=True" if non_blocking else "blocks"
        tracker.sync(f"`copy_()` of cuda {tensor_label(src)} {how}: {WAITS}", str(call.target))
    elif is_cuda(dst) and is_cpu(src) and non_blocking and not tracker.is_pinned(src):
        tracker.pageable_copy(_pageable_message("`copy_()`", src), str(call.target))
    return call.run()


@DISPATCH_HANDLERS.register(aten._pin_memory.default)
def pin_memory(call: InterceptedCall) -> Any:
    src = call.args[0]
    if not isinstance(src, FakeTensor):
        return call.run()
    pinned = aten.clone.default(src)  # fake tensors cannot pin (NYI); a pinned copy is a clone
    call.tracker.mark_pinned(pinned)
    return pinned


@DISPATCH_HANDLERS.register(aten.is_pinned.default)
def is_pinned(call: InterceptedCall) -> Any:
    t = call.args[0]
    if not isinstance(t, FakeTensor):
        return call.run()
    return call.tracker.is_pinned(t)


@FUNCTION_HANDLERS.register(torch.Tensor.record_stream)
def record_stream_call(call: InterceptedCall) -> Any:
    """The function level still has the user's stream object (the aten op gets a copy whose id is
    0 for every simulated stream): stream ordering's AL502 needs which stream was named."""
    call.tracker.stream_record_stream(call.arg(0, "self"), call.arg(1, "stream"))
    return call.run()


@DISPATCH_HANDLERS.register(aten.record_stream.default)
def record_stream(call: InterceptedCall) -> Any:
    """Tells the caching allocator that another stream uses the tensor; there is no allocator and
    one queue in the trace (fake tensors have no kernel for it)."""
    if not isinstance(call.args[0], FakeTensor):
        return call.run()
    return None
