"""The device a trace simulates: "cuda" (the default) or "cpu".

Contract used by the runner and the worker:
- `preload_before_torch(device)` runs in the worker process before `import torch` and returns notes
  for the report (e.g. why simulated CUDA is unavailable). On a CPU-only build of torch it builds
  (first use; cached) and loads the C++ shims of `atenlens.trace.gpu.shims`; on a CUDA build fake
  cuda tensors are native and it does nothing. Only the trace worker calls it: a process that serves
  the editor never loads the shims.
- `simulated_device(device)` is entered around each trace and yields a `DeviceSession`:
  `make_fake_mode()` gives the FakeTensorMode to enter first (innermost for dispatch, it always runs
  last); `extra_modes(sink)` gives the hazard modes, to enter next; the recorder's modes are entered
  after them: torch hands each op to the most recently entered mode first, so the recorder sees
  every op before the hazard modes answer it (with a placeholder where fakes know no value).
  While a "cuda" session is open, torch.cuda.* / torch.accelerator.* answer as one idle GPU. In
  every session optimizers and clip_grad_norm_ treat fake tensors as real ones when choosing their
  foreach path; everything is restored when the session closes.
- When simulated CUDA is impossible (no compiler, the build failed, torch imported before the
  shims), a "cuda" request is traced on cpu: `session.device` is "cpu", `session.notes` says why,
  and `extra_modes(sink)` adds an information diagnostic with code AL905 (Code.DEVICE_FALLBACK).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from atenlens.trace.diagnostics import DiagnosticSink


@dataclass
class DeviceSession:
    device: str                                   # what is simulated: "cpu" or "cuda"
    notes: tuple[str, ...] = ()
    make_fake_mode: Callable[..., Any] = None     # returns a FakeTensorMode for this device
    extra_modes: Callable[[DiagnosticSink], list] = field(default=lambda sink: [])
    # modes entered BEFORE (outside) the recorder's modes, after the fake mode (see above)


def preload_before_torch(device: str) -> tuple[str, ...]:
    if device != "cuda":
        return ()
    from atenlens.trace.gpu import shims

    status = shims.load_shims()
    return () if status.available else (_fallback_note(status.reason),)


def _fallback_note(reason: str) -> str:
    return f"simulated CUDA is unavailable ({reason}); traced on cpu instead"


def _cuda_unavailable_reason() -> Optional[str]:
    import torch

    if torch.backends.cuda.is_built():
        return None                                # a CUDA build: fake cuda is native
    from atenlens.trace.gpu import shims

    status = shims.loaded_status()
    if status is None:
        return "the CUDA shims were not loaded before torch was imported in this process"
    return None if status.available else status.reason


@contextlib.contextmanager
def simulated_device(device: str) -> Iterator[DeviceSession]:
    from atenlens.report import Code
    from atenlens.trace import torch_compat
    from atenlens.trace.gpu.cuda_api import ListenerSlot, simulated_cuda_api
    from atenlens.trace.gpu.modes import HazardDispatchMode, HazardFunctionMode, tolist_of_fake
    from atenlens.trace.gpu.tracker import HazardTracker

    reason = _cuda_unavailable_reason() if device == "cuda" else None
    notes = (_fallback_note(reason),) if reason is not None else ()
    simulating = device == "cuda" and reason is None
    slot = ListenerSlot()
    trackers: list[HazardTracker] = []

    def extra_modes(sink: DiagnosticSink) -> list:
        tracker = HazardTracker(sink)
        trackers.append(tracker)
        slot.listener = tracker                   # torch.cuda.synchronize() & co. report to this trace
        if reason is not None:
            sink.add("device-fallback", Code.DEVICE_FALLBACK, notes[0], severity="information", stack=())
        return [HazardFunctionMode(tracker), HazardDispatchMode(tracker)]

    def tolist(t: Any, original: Callable[[Any], Any]) -> Any:
        return tolist_of_fake(trackers[-1], t) if trackers else original(t)

    if not simulating:
        with torch_compat.foreach_optimizers_for_fake_tensors(), torch_compat.fake_tensor_tolist(tolist):
            yield DeviceSession(device="cpu", notes=notes, make_fake_mode=torch_compat.FakeTensorMode,
                                extra_modes=extra_modes)
        return
    with simulated_cuda_api(slot), torch_compat.foreach_optimizers_for_fake_tensors(), \
            torch_compat.fake_tensor_tolist(tolist):
        yield DeviceSession(device="cuda", notes=notes, make_fake_mode=torch_compat.NoDeviceInitFakeTensorMode,
                            extra_modes=extra_modes)
