"""The device a trace simulates: "cuda" (the default) or "cpu".

Contract used by the runner and the worker:
- `preload_before_torch(device)` runs in the worker process before `import torch` and returns notes
  for the report (e.g. why simulated CUDA is unavailable). On a CPU-only build of torch it builds
  (first use; cached) and loads the C++ shims of `atenlens.trace.gpu.shims`; on a CUDA build fake
  cuda tensors are native and it does nothing. Only the trace worker calls it: a process that serves
  the editor never loads the shims.
- A process that ran a backward on (simulated or real) cuda tensors leaves with `os._exit` after
  flushing, as the worker's children do, never through a normal interpreter exit: torch's autograd
  device thread may still hold the last reference to the finished graph task, whose captured
  thread-local state holds Python objects (the FakeTensorMode); if the interpreter is finalizing
  when that thread asks for the GIL, the thread is unwound through a noexcept destructor and the
  process aborts ("terminate called without an active exception").
- `simulated_device(device)` is entered around each trace and yields a `DeviceSession`:
  `make_fake_mode()` gives the FakeTensorMode to enter first; `hooks(sink, values)` gives the
  `DeviceHooks` of one trace, which the recorder's two modes (entered next, around loading, the example call's
  arguments and the traced call) call for every API call (`call`) and every aten op (`op`): the
  hooks run it, find the device's hazards (syncs, copies, pinned memory) and may answer with a
  placeholder where fakes know no value; the recorder records what the user's code issued. The
  device adds no torch mode of its own: each Python mode costs every op a trip through it.
  While a "cuda" session is open, torch.cuda.* / torch.accelerator.* answer as one idle GPU. In
  every session optimizers and clip_grad_norm_ treat fake tensors as real ones when choosing their
  foreach path, and host factories that wrap existing memory (`torch.frombuffer`) return fakes;
  everything is restored when the session closes.
- When simulated CUDA is impossible (no compiler, the build failed, torch imported before the
  shims), a "cuda" request is traced on cpu: `session.device` is "cpu", `session.notes` says why,
  and `hooks(sink)` adds an information diagnostic with code AL905 (Code.DEVICE_FALLBACK).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Protocol

from atenlens.trace.diagnostics import DiagnosticSink


class DeviceHooks(Protocol):
    """How the device takes part in one trace: the recorder's modes hand it each API call and op to run."""

    def call(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run an API call (torch function level) and return what the program sees."""

    def op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run an aten op (dispatch level, below autograd) and return what the program sees."""


class PlainHooks:
    """No device behaviour: run everything as it is."""

    @staticmethod
    def call(func: Any, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    @staticmethod
    def op(func: Any, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)


@dataclass
class DeviceSession:
    device: str  # what is simulated: "cpu" or "cuda"
    notes: tuple[str, ...] = ()
    make_fake_mode: Callable[..., Any] = None  # type: ignore[assignment]  # returns a FakeTensorMode; every session has one
    hooks: Callable[..., DeviceHooks] = field(default=lambda sink, values=None: PlainHooks())
    # hooks(sink, values): the hooks of one trace, reporting to `sink`, asking the trace's `Values`
    # (trace/values.py) for every value the host reads (see above)
    use_memory: Callable[[Any, int], None] = field(default=lambda memory, total_bytes: None)
    # torch.cuda.memory_allocated() & co. answer from `memory` (trace/memory.py), mem_get_info() from total_bytes


def preload_before_torch(device: str) -> tuple[str, ...]:
    if device != "cuda":
        return ()
    from atenlens.trace.gpu import shims

    status = shims.load_shims()
    return status.notes + (() if status.available else (_fallback_note(status.reason),))


def _fallback_note(reason: str) -> str:
    return f"simulated CUDA is unavailable ({reason}); traced on cpu instead"


def _cuda_unavailable_reason() -> Optional[str]:
    import torch

    if torch.backends.cuda.is_built():
        return None  # a CUDA build: fake cuda is native
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
    from atenlens.trace.gpu.factories import host_factories_return_fakes
    from atenlens.trace.gpu.hooks import HazardHooks, tolist_of_fake
    from atenlens.trace.gpu.tracker import HazardTracker

    reason = _cuda_unavailable_reason() if device == "cuda" else None
    notes: tuple[str, ...] = (_fallback_note(reason),) if reason is not None else ()
    simulating = device == "cuda" and reason is None
    slot = ListenerSlot()
    trackers: list[HazardTracker] = []

    def hooks(sink: DiagnosticSink, values: Any = None) -> DeviceHooks:
        tracker = HazardTracker(sink, values)
        trackers.append(tracker)
        slot.listener = tracker  # torch.cuda.synchronize() & co. report to this trace
        tracker.stream_api = slot  # which stream is current, for stream ordering
        if reason is not None:
            sink.add("device-fallback", Code.DEVICE_FALLBACK, notes[0], severity="information", stack=())
        return HazardHooks(tracker)

    def use_memory(memory: Any, total_bytes: int) -> None:
        slot.memory = memory
        slot.total_memory = total_bytes

    def tolist(t: Any, original: Callable[[Any], Any]) -> Any:
        return tolist_of_fake(trackers[-1], t) if trackers else original(t)

    if not simulating:
        with (
            torch_compat.foreach_optimizers_for_fake_tensors(),
            torch_compat.fake_tensor_tolist(tolist),
            host_factories_return_fakes(),
        ):
            yield DeviceSession(
                device="cpu",
                notes=notes,
                make_fake_mode=torch_compat.FakeTensorMode,
                hooks=hooks,
                use_memory=use_memory,
            )
        return
    with (
        simulated_cuda_api(slot),
        torch_compat.foreach_optimizers_for_fake_tensors(),
        torch_compat.fake_tensor_tolist(tolist),
        host_factories_return_fakes(),
    ):
        yield DeviceSession(
            device="cuda",
            notes=notes,
            make_fake_mode=torch_compat.NoDeviceInitFakeTensorMode,
            hooks=hooks,
            use_memory=use_memory,
        )
