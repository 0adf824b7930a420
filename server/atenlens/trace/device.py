"""The device a trace simulates. (Placeholder: cpu only. Simulated CUDA replaces this module.)

Contract used by the runner and the worker:
- `preload_before_torch(device)` runs in the worker process before `import torch` and returns
  notes for the report (e.g. why simulated CUDA is unavailable).
- `simulated_device(device)` is entered around each trace; it yields a `DeviceSession`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from atenlens.trace.diagnostics import DiagnosticSink


@dataclass
class DeviceSession:
    device: str                                   # what is simulated: "cpu" or "cuda"
    notes: tuple[str, ...] = ()
    make_fake_mode: Callable[[], Any] = None      # returns a FakeTensorMode for this device
    extra_modes: Callable[[DiagnosticSink], list] = field(default=lambda sink: [])
    # modes entered INSIDE the recorder's modes (the recorder sees each op first)


def preload_before_torch(device: str) -> tuple[str, ...]:
    return ()


@contextlib.contextmanager
def simulated_device(device: str) -> Iterator[DeviceSession]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    notes = () if device == "cpu" else ("simulated CUDA is not available yet; traced on cpu",)
    yield DeviceSession(device="cpu", notes=notes, make_fake_mode=FakeTensorMode)
