"""The trace report: plain, frozen data shared by the engine, the worker, the CLI and the server.

This module imports nothing of the package and nothing outside the standard library, so every
process (including the language server, which never imports torch) can read and write reports.
The JSON form is documented in docs/report-schema.md; `SCHEMA_VERSION` changes when a key's
meaning changes.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, get_args, get_origin, get_type_hints

SCHEMA_VERSION = 1

Phase = Literal["forward", "backward", "optimizer"]
Status = Literal["ok", "error", "timeout", "needs-inputs"]
Severity = Literal["error", "warning", "information", "hint"]
EventKind = Literal["op", "call"]


class Code:
    """Stable diagnostic codes. The static lint and the engine use the same code where both
    find the same thing (docs/diagnostics.md, docs/rules.md)."""

    SYNC = "AL100"                   # host waits for the GPU (.item(), .cpu(), nonzero, ...)
    SYNC_API = "AL101"               # torch.cuda.synchronize() / Event/Stream.synchronize()
    PAGEABLE_COPY = "AL200"          # non_blocking H2D copy from pageable memory
    UNSYNCED_D2H_READ = "AL201"      # non_blocking D2H result read before a synchronize
    EMPTY_CACHE_IN_LOOP = "AL300"    # torch.cuda.empty_cache() in a loop (lint only)
    UNSYNCED_TIMING = "AL301"        # wall-clock timing of CUDA work without a synchronize (lint only)
    CREATE_THEN_MOVE = "AL302"       # torch.randn(...).to(device) (lint only)
    EXCEPTION = "AL900"              # the traced code raised
    NEEDS_INPUTS = "AL901"           # the function needs arguments and has no example call
    TIMEOUT = "AL902"                # the trace ran past its time budget
    WORKER_DIED = "AL903"            # the process running the trace exited, crashed or ran out of memory
    LOAD_TIMEOUT = "AL904"           # the module's top level ran past its time budget
    DEVICE_FALLBACK = "AL905"        # simulated CUDA unavailable; traced on cpu instead


@dataclass(frozen=True)
class TensorMeta:
    dtype: str                       # torch's name without the prefix: "float32", "bfloat16"
    shape: tuple[int, ...]
    device: str                      # "cpu", "cuda:0"


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


@dataclass(frozen=True)
class Event:
    kind: EventKind                  # "op": an aten overload; "call": a public API call (function level)
    name: str                        # "aten.addmm.default", "torch.nn.functional.linear"
    phase: Phase
    file: Optional[str]              # innermost user frame (for backward ops: the forward line of its node)
    line: Optional[int]
    stack: tuple[Frame, ...] = ()    # user frames, outermost first
    outputs: tuple[TensorMeta, ...] = ()
    inputs: tuple[TensorMeta, ...] = ()
    flops: Optional[int] = None
    node: Optional[str] = None       # autograd node that ran a backward op ("AddmmBackward0")


@dataclass(frozen=True)
class Diagnostic:
    file: Optional[str]
    line: Optional[int]              # 1-based
    column: Optional[int]            # 0-based, or None when unknown
    severity: Severity
    code: str
    kind: str                        # "sync", "pageable-copy", "unsynced-d2h-read", "exception", ...
    message: str
    op: Optional[str] = None
    count: int = 1                   # how many times it happened during the trace
    stack: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class Target:
    file: str
    qualname: str


@dataclass(frozen=True)
class Summary:
    ops: dict[str, int] = field(default_factory=dict)     # phase -> aten op count
    calls: int = 0
    flops: int = 0
    syncs: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class TraceReport:
    target: Target
    status: Status
    device: str                      # what was simulated: "cpu" or "cuda"
    events: tuple[Event, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    summary: Summary = Summary()
    stdout: str = ""
    stderr: str = ""
    message: str = ""                # one line for humans when status is not "ok"
    call: Optional[str] = None       # the example call expression that was evaluated
    notes: tuple[str, ...] = ()      # e.g. why simulated CUDA fell back to cpu
    torch_version: Optional[str] = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(to_jsonable(self), **kwargs)

    @staticmethod
    def from_json(text: str) -> "TraceReport":
        return from_jsonable(TraceReport, json.loads(text))


@dataclass(frozen=True)
class TraceRequest:
    """What the caller (CLI, language server) asks the worker to trace."""

    file: str
    qualname: str
    device: Literal["cpu", "cuda"] = "cuda"
    call: Optional[str] = None       # overrides the `# atenlens:` directive
    timeout_seconds: float = 30.0
    source: Optional[str] = None     # unsaved editor text of `file`; None reads the file from disk

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self))

    @staticmethod
    def from_json(text: str) -> "TraceRequest":
        return from_jsonable(TraceRequest, json.loads(text))


def to_jsonable(value: Any) -> Any:
    """Dataclasses -> dicts, tuples -> lists, recursively (dataclasses.asdict keeps tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def from_jsonable(cls: Any, data: Any) -> Any:
    """The inverse of to_jsonable for the types in this module; unknown keys are ignored so that
    newer reports stay readable."""
    if data is None:
        return None
    origin = get_origin(cls)
    if origin is Optional or (origin is not None and type(None) in get_args(cls)):
        inner = [a for a in get_args(cls) if a is not type(None)]
        return from_jsonable(inner[0], data) if len(inner) == 1 else data
    if origin is tuple:
        args = get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in data)
        return tuple(data)
    if origin is dict:
        return dict(data)
    if dataclasses.is_dataclass(cls):
        hints = _HINTS.get(cls)
        if hints is None:
            hints = _HINTS[cls] = get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: from_jsonable(hints[k], v) for k, v in data.items() if k in names})
    return data
