"""The trace report: plain, frozen data shared by the engine, the worker, the CLI and the server.

This module imports nothing of the package but its codes (atenlens/codes.py, which imports
nothing) and nothing outside the standard library, so every process (including the language
server, which never imports torch) can read and write reports.
The JSON form is documented in docs/report-schema.md; `SCHEMA_VERSION` changes when a key's
meaning changes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional, get_args, get_origin, get_type_hints

from atenlens.codes import Code  # noqa: F401 - the report's codes: atenlens.report.Code is their name too

SCHEMA_VERSION = 3

Phase = Literal["forward", "backward", "optimizer"]
Status = Literal["ok", "error", "timeout", "needs-inputs"]
Severity = Literal["error", "warning", "information", "hint"]
EventKind = Literal["op", "call", "collective"]


@dataclass(frozen=True)
class TensorMeta:
    dtype: str  # torch's name without the prefix: "float32", "bfloat16"
    shape: tuple[int, ...]
    device: str  # "cpu", "cuda:0"
    # a DTensor's local shard (tensor parallel, FSDP2): how it is laid out over the mesh, one per mesh
    # dimension ("Shard(2)", "Replicate()", "Partial(sum)"), and the global tensor's shape
    placements: Optional[str] = None
    global_shape: Optional[tuple[int, ...]] = None
    # with named dims (`dims: B=8 T=1024`): each dimension as the user names it ("B", "B*T", "768");
    # `shape` keeps the concrete sizes
    dims: Optional[tuple[str, ...]] = None
    # True: a plain tensor that holds only this rank's shard of such a DTensor, handed back by its
    # `to_local()` (tensor parallel's `use_local_output=True`), or made from one by a shape-keeping op
    # or a view that keeps its sharded dimension (trace/ranks.py shard_through_view)
    local: Optional[bool] = None


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


@dataclass(frozen=True)
class Event:
    kind: EventKind  # "op": an aten overload; "call": a public API call (function level);
    #                                  "collective": a c10d / functional collective (docs/distributed.md)
    name: str  # "aten.addmm.default", "torch.nn.functional.linear", "all_gather_into_tensor"
    phase: Phase
    file: Optional[str]  # innermost user frame (for backward ops: the forward line of its node)
    line: Optional[int]
    stack: tuple[Frame, ...] = ()  # user frames, outermost first
    outputs: tuple[TensorMeta, ...] = ()
    inputs: tuple[TensorMeta, ...] = ()
    flops: Optional[int] = None
    node: Optional[str] = None  # autograd node that ran a backward op ("AddmmBackward0")
    module: Optional[int] = None  # index in TraceReport.modules of the innermost module call running a forward op
    bytes_allocated: int = 0  # device bytes this op allocated (caching-allocator rounding)
    bytes_moved: int = 0  # device memory bytes the op reads and writes (0 for views)
    estimate_seconds: float = 0.0  # roofline estimate on the selected GPU (collectives: the ring and tree model)
    group_size: Optional[int] = None  # collectives: ranks in the process group
    group: Optional[str] = None  # collectives: the group's description ("mesh_dp", "default_pg"), if any
    link: Optional[str] = None  # collectives: "nvlink", "pcie" (within a node) or "network" (across nodes)
    bytes: int = 0  # collectives: bytes per rank (all-gather: its output; others: their input)
    exposed_seconds: float = 0.0  # collectives: the part of estimate_seconds compute waits for (trace/overlap.py)


@dataclass(frozen=True)
class ModuleCall:
    """One call of an `nn.Module` (its forward) during the traced call: the module tree torchinfo shows."""

    path: str  # qualified name under the root module: "layer1.0.conv1"; "" for the root
    type: str  # the module's class name: "Conv2d"
    parent: Optional[int]  # index in TraceReport.modules of the call it ran inside; None for a root
    file: Optional[str]  # innermost user frame when the call began (for a root: the line calling it)
    line: Optional[int]
    outputs: tuple[TensorMeta, ...] = ()  # the tensors it returned (tuples, lists, dicts flattened)
    params: int = 0  # elements of the parameters the module holds itself (not its children's)


@dataclass(frozen=True)
class Diagnostic:
    file: Optional[str]
    line: Optional[int]  # 1-based
    column: Optional[int]  # 0-based, or None when unknown
    severity: Severity
    code: str
    kind: str  # "sync", "pageable-copy", "unsynced-d2h-read", "exception", ...
    message: str
    op: Optional[str] = None
    count: int = 1  # how many times it happened during the trace
    stack: tuple[Frame, ...] = ()
    cause: Optional[Frame] = None  # the library frame where it happened, when not in the user's code


@dataclass(frozen=True)
class NamedLine:
    """One line's FLOPs and bytes moved as formulas in the named dims (trace/shapes.py), with their
    values at the given sizes."""

    file: str
    line: int
    flops: Optional[str] = None  # "4718592*B*T"
    flops_value: int = 0
    bytes: Optional[str] = None
    bytes_value: int = 0


@dataclass(frozen=True)
class NamedShapes:
    """The directive's named dims and what the symbolic trace made of them."""

    dims: tuple[str, ...]  # ("B=8", "T=1024")
    symbolic: bool  # False: the symbolic trace failed or was not possible; an AL920 says why
    lines: tuple[NamedLine, ...] = ()
    inferred: bool = False  # True: read from the example call's variables (atenlens/call_dims.py), no `dims:`


@dataclass(frozen=True)
class Target:
    file: str
    qualname: str


@dataclass(frozen=True)
class PeakCategories:
    """Device bytes live at the peak, by what they are (docs/cost.md)."""

    parameters: int = 0
    gradients: int = 0
    optimizer_state: int = 0
    activations: int = 0
    temporaries: int = 0
    inputs: int = 0
    unsharded_parameters: int = 0  # FSDP2: parameters gathered from all ranks' shards, while gathered
    unsharded_gradients: int = 0  # FSDP2: their full gradients, until reduce-scattered
    communication: int = 0  # FSDP2: all-gather outputs and reduce-scatter inputs


@dataclass(frozen=True)
class MemoryHolder:
    category: str  # one of PeakCategories' fields
    file: Optional[str]  # the line that allocated (activations: that saved) it; None for parameters & co.
    line: Optional[int]
    node: Optional[str]  # activations: the autograd node that saved them
    bytes: int


@dataclass(frozen=True)
class Holding:
    who: str  # "saved by AddmmBackward0", "referenced by the program", "gradients"
    bytes: int


@dataclass(frozen=True)
class MemoryLine:
    file: str
    line: int
    bytes_allocated: int  # by the line's own ops, over the whole call
    bytes_held: int  # of those, still live when each run of the line's ops ended
    held_by: tuple[Holding, ...] = ()


@dataclass(frozen=True)
class MemoryTimeline:
    op_index: tuple[int, ...] = ()  # n-th op of the traced call (counting ops not kept in events)
    live_bytes: tuple[int, ...] = ()  # device bytes live after that op


@dataclass(frozen=True)
class MemorySummary:
    peak_bytes: int
    peak_file: Optional[str]
    peak_line: Optional[int]
    peak_phase: Phase
    at_peak: PeakCategories
    device_bytes: int  # the selected GPU's memory
    start_bytes: int = 0  # live when the traced call started (parameters, inputs, ...)
    # CUDA's caching allocator replayed over the same blocks (trace/allocator.py): its segments
    reserved_peak_bytes: int = 0  # the most reserved at once
    reserved_at_peak_bytes: int = 0  # reserved when the live bytes peaked
    end_bytes: int = 0  # live when it returned
    holders: tuple[MemoryHolder, ...] = ()
    lines: tuple[MemoryLine, ...] = ()
    timeline: MemoryTimeline = MemoryTimeline()
    assumptions: str = ""


@dataclass(frozen=True)
class TimeSummary:
    gpu: str  # the table's key: "h100-sxm" (atenlens/gpus.py)
    step_seconds: float  # sum of the ops' estimate_seconds
    mfu_bound: float  # model FLOPs / (step_seconds x peak FLOPS of the step's main dtype)
    by_phase: dict[str, float] = field(default_factory=dict)
    compute_efficiency: float = 0.0
    memory_efficiency: float = 0.0
    launch_seconds: float = 0.0  # the least an op that launches a kernel is estimated to take
    fp32_matmul_as_tf32: bool = False
    assumptions: str = ""


@dataclass(frozen=True)
class Summary:
    ops: dict[str, int] = field(default_factory=dict)  # phase -> aten op count
    calls: int = 0
    flops: int = 0
    syncs: int = 0
    seconds: float = 0.0
    memory: Optional[MemorySummary] = None
    time: Optional[TimeSummary] = None
    assumptions: int = 0  # values the trace assumed (diagnostics of kind "assumption", with counts)
    world_size: int = 1  # simulated ranks (docs/distributed.md); 1: a single-process run
    rank: int = 0  # the rank this trace ran as
    gpus_per_node: int = 8
    collectives: int = 0  # collective events (kept or not)
    communication_seconds: float = 0.0  # their summed estimates (not part of time.step_seconds)
    exposed_communication_seconds: float = 0.0  # of it, what compute waits for on two streams (trace/overlap.py)


@dataclass(frozen=True)
class TraceReport:
    target: Target
    status: Status
    device: str  # what was simulated: "cpu" or "cuda"
    events: tuple[Event, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    summary: Summary = Summary()
    stdout: str = ""
    stderr: str = ""
    message: str = ""  # one line for humans when status is not "ok"
    call: Optional[str] = None  # the example call expression that was evaluated
    notes: tuple[str, ...] = ()  # e.g. why simulated CUDA fell back to cpu
    torch_version: Optional[str] = None
    modules: tuple[ModuleCall, ...] = ()  # module calls in the order they began (Event.module indexes them)
    bookkeeping_ops: tuple[str, ...] = ()  # ops of `events` that allocate and compute nothing (views, detach)
    named_shapes: Optional[NamedShapes] = None  # with a directive's `dims:`
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
    call: Optional[str] = None  # overrides the `# atenlens:` directive
    gpu: str = "h100-sxm"  # the GPU memory and time are forecast for (atenlens/gpus.py)
    cost: bool = True  # False: no memory or time forecast (bench/trace_cost.py measures its cost)
    timeout_seconds: float = 30.0
    source: Optional[str] = None  # unsaved editor text of `file`; None reads the file from disk
    argv: Optional[tuple[str, ...]] = None  # the program's arguments (sys.argv[1:]); None: the file's
    #                                          `# atenlens-argv:` comment, else none
    world_size: Optional[int] = None  # simulated ranks (docs/distributed.md); None: the file's
    #                                   `# atenlens-ranks:` comment, else a single-process run
    rank: Optional[int] = None  # None: 0
    gpus_per_node: Optional[int] = None  # None: 8
    compile: bool = False  # run Dynamo on the traced function as if it were torch.compile'd (AL600, AL601)

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self))

    @staticmethod
    def from_json(text: str) -> "TraceRequest":
        return from_jsonable(TraceRequest, json.loads(text))


def to_jsonable(value: Any) -> Any:
    """Dataclasses -> dicts, tuples -> lists, recursively (dataclasses.asdict keeps tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encoder(type(value))(value)
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


_ENCODERS: dict[type, Callable[[Any], dict]] = {}
_PLAIN = (str, int, float, bool, type(None))


def _is_plain(hint: Any) -> bool:
    """A JSON scalar type: str/int/float/bool/None, a Literal of those, or an Optional of those."""
    if hint in _PLAIN:
        return True
    origin = get_origin(hint)
    if origin is Literal:
        return True
    if origin is not None and origin is not tuple and origin is not dict:
        return all(_is_plain(a) for a in get_args(hint))
    return False


def _encoder(cls: type) -> Callable[[Any], dict]:
    """An encoder per dataclass, built once from its type hints (reports hold thousands of events)."""
    encoder = _ENCODERS.get(cls)
    if encoder is None:
        hints = get_type_hints(cls)
        simple = [n for n in _field_names(cls) if _is_plain(hints[n])]
        nested = [n for n in _field_names(cls) if n not in simple]

        omitted = _OMITTED_WHEN_NONE.get(cls, ())

        def encoder(value: Any) -> dict:
            out = {n: getattr(value, n) for n in simple}
            for n in nested:
                out[n] = to_jsonable(getattr(value, n))
            return {n: out[n] for n in _field_names(cls) if not (n in omitted and out[n] is None)}

        _ENCODERS[cls] = encoder
    return encoder


# keys left out of the JSON while None: a report holds thousands of tensor metas, few of them DTensors'
_OMITTED_WHEN_NONE: dict[type, tuple[str, ...]] = {
    TensorMeta: ("placements", "global_shape", "dims", "local"),
    NamedLine: ("flops", "bytes"),
}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_DECODERS: dict[Any, Callable[[Any], Any]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def from_jsonable(cls: Any, data: Any) -> Any:
    """The inverse of to_jsonable for the types in this module; unknown keys are ignored so that
    newer reports stay readable."""
    return _decoder(cls)(data)


def _identity(data: Any) -> Any:
    return data


def _decoder(cls: Any) -> Callable[[Any], Any]:
    """A decoder per type, built once: reports hold thousands of events, and resolving type
    hints per value made decoding the slowest part of a trace round trip."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = _build_decoder(cls)
    return decoder


def _build_decoder(cls: Any) -> Callable[[Any], Any]:
    origin = get_origin(cls)
    args = get_args(cls)
    if origin is not None and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            return _identity
        decode_inner = _decoder(inner[0])
        return lambda data: None if data is None else decode_inner(data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            if item is _identity:
                return tuple
            return lambda data: tuple(item(v) for v in data)
        return tuple
    if origin is dict:
        return dict
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        hints = get_type_hints(cls)
        fields = {name: _decoder(hints[name]) for name in _field_names(cls)}
        if cls is Frame:  # stacks repeat the same frames over and over
            interned: dict[tuple, Frame] = {}

            def decode_frame(data: dict) -> Frame:
                key: tuple[Any, Any, Any] = (data.get("file"), data.get("line"), data.get("function"))
                frame = interned.get(key)
                if frame is None:
                    frame = interned[key] = Frame(*key)
                return frame

            return decode_frame

        def decode(data: Any) -> Any:
            if data is None:
                return None
            if any(name not in data for name in fields):
                return cls(**{k: fields[k](v) for k, v in data.items() if k in fields})
            # Every field present: skip the frozen __init__ (object.__setattr__ per field).
            obj = object.__new__(cls)
            obj.__dict__.update({k: decode_field(data[k]) for k, decode_field in fields.items()})
            return obj

        return decode
    return _identity
