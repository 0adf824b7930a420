"""torch.cuda.* and torch.accelerator.* answering as one idle CUDA GPU, for device-agnostic code.

Programs choose their device with `torch.cuda.is_available()`, size batches from
`get_device_properties().total_memory`, time with `torch.cuda.Event`, and call
`torch.cuda.synchronize()`. On a machine without a GPU these raise or answer "no"; patched, the
program takes its GPU branch. The synchronizing calls (`synchronize`, `Event.synchronize`,
`Stream.synchronize`) tell the hazard tracker (`SyncListener`) so it can report them and mark
pending device-to-host copies as landed. Patches are applied for one trace and undone after it.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Protocol

import torch

from atenlens.trace import torch_compat as tc

DEVICE_COUNT = 1  # the same count the C++ shims report
# What a CUDA build of torch 2.13 from PyPI reports: CUDA 13.0 with cuDNN 9 (code such as torchao's
# float8 checks `torch.version.cuda` beside the compute capability before taking its GPU path).
CUDA_VERSION = "13.0"
CUDNN_VERSION = 91300


@dataclass(frozen=True)
class SimulatedDeviceProperties:
    """The answers of `torch.cuda.get_device_properties()`: an H100 SXM, the usual training GPU."""

    name: str = "NVIDIA H100 80GB HBM3 (simulated by atenlens)"
    major: int = 9
    minor: int = 0
    total_memory: int = 80 * 2**30
    multi_processor_count: int = 132
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    warp_size: int = 32
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 227 * 1024
    shared_memory_per_multiprocessor: int = 228 * 1024
    L2_cache_size: int = 50 * 2**20
    gcnArchName: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "00000000-0000-0000-0000-000000000000"
    pci_bus_id: int = 0
    pci_device_id: int = 0
    pci_domain_id: int = 0


PROPERTIES = SimulatedDeviceProperties()


class SyncListener(Protocol):
    def api_sync(self, name: str, event: Optional["torch.Event"] = None) -> None: ...
    def event_recorded(self, event: "torch.Event") -> None: ...


class MemoryCounters(Protocol):
    live_bytes: int
    max_live_bytes: int

    def reset_peak(self) -> None: ...


class ListenerSlot:
    """The hazard tracker of the trace that is running, if any (set by the hazard modes), and its
    memory model (trace/memory.py), which `torch.cuda.memory_allocated()` & co. answer from."""

    def __init__(self) -> None:
        self.listener: Optional[SyncListener] = None
        self.memory: Optional[MemoryCounters] = None
        self.total_memory: int = PROPERTIES.total_memory
        self.current_stream: Callable[[], Any] = lambda: None  # set by simulated_cuda_api
        self.default_stream: Any = None

    def allocated(self, *args: Any, **kwargs: Any) -> int:
        return self.memory.live_bytes if self.memory is not None else 0

    def max_allocated(self, *args: Any, **kwargs: Any) -> int:
        return self.memory.max_live_bytes if self.memory is not None else 0

    def reset_peak(self, *args: Any, **kwargs: Any) -> None:
        if self.memory is not None:
            self.memory.reset_peak()

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return max(self.total_memory - self.allocated(), 0), self.total_memory

    def api_sync(self, name: str, event: Any = None) -> None:
        if self.listener is not None:
            self.listener.api_sync(name, event)

    def event_recorded(self, event: Any) -> None:
        if self.listener is not None:
            self.listener.event_recorded(event)

    # CUDA graph capture (trace/gpu/capture.py): "begin", "end", "replay", "register_generator"
    def capture(self, kind: str, graph: Any, *more: Any) -> None:
        handler = getattr(self.listener, "capture_" + kind, None)
        if handler is not None:
            handler(graph, *more)

    def capturing(self) -> bool:
        capture = getattr(self.listener, "capture", None)
        return capture is not None and capture.is_capturing()

    # stream ordering (trace/gpu/streams.py): the listener may lack these (a plain SyncListener)
    def stream_ordering(self, kind: str, *args: Any) -> None:
        handler = getattr(self.listener, "stream_" + kind, None)
        if handler is not None:
            handler(*args)


def _device(device: Any) -> torch.device:
    if device is None:
        return torch.device("cuda", 0)
    if isinstance(device, int):
        return torch.device("cuda", device)
    resolved = torch.device(device)
    return resolved if resolved.index is not None else torch.device("cuda", 0)


def _make_stream_and_event_types(slot: ListenerSlot) -> tuple[type, type]:
    class Event(torch.Event):
        def __new__(
            cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, external: bool = False
        ):
            return super().__new__(
                cls, device="cuda", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
            )

        def record(self, stream: Any = None) -> None:
            slot.event_recorded(self)
            slot.stream_ordering("recorded", self, stream)

        def synchronize(self) -> None:
            slot.api_sync("torch.cuda.Event.synchronize", self)

        def query(self) -> bool:
            slot.stream_ordering("queried", self)
            return True

        def wait(self, stream: Any = None) -> None:
            slot.stream_ordering("waits_event", stream, self)  # orders device work; the host does not wait

        def elapsed_time(self, end_event: Any) -> float:
            slot.stream_ordering("elapsed", self, end_event)
            return 0.0

    class Stream(torch.Stream):
        def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any):
            stream = super().__new__(cls, device=_device(device), priority=priority)
            slot.stream_ordering("created", stream)
            return stream

        def synchronize(self) -> None:
            slot.api_sync("torch.cuda.Stream.synchronize")
            slot.stream_ordering("host_waited", self)

        def query(self) -> bool:
            return True

        def wait_event(self, event: Any) -> None:
            slot.stream_ordering("waits_event", self, event)

        def wait_stream(self, stream: Any) -> None:
            slot.stream_ordering("waits_stream", self, stream)

        def record_event(self, event: Any = None) -> Any:
            event = event if event is not None else Event()
            event.record(self)
            return event

    return Stream, Event


def _make_graph_type(slot: ListenerSlot) -> type:
    class CUDAGraph:
        """torch.cuda.CUDAGraph on the simulated GPU: capture runs the work once (recorded at its
        lines); replay runs nothing and is counted (trace/gpu/capture.py)."""

        def __init__(self, keep_graph: bool = False) -> None:
            self._pool = ("atenlens-graph-pool", id(self))

        def capture_begin(
            self, pool: Any = None, capture_error_mode: str = "global", check_input_liveness: bool = False
        ) -> None:
            slot.capture("begin", self)

        def capture_end(self) -> None:
            slot.capture("end", self)

        def instantiate(self) -> None:
            return None

        def replay(self) -> None:
            slot.capture("replay", self)

        def reset(self) -> None:
            return None

        def pool(self) -> Any:
            return self._pool

        def enable_debug_mode(self) -> None:
            return None

        def debug_dump(self, debug_path: str) -> None:
            return None

        def register_generator_state(self, generator: Any) -> None:
            slot.capture("register_generator", self, generator)

    return CUDAGraph


class _CurrentStream:
    """The current stream, shared by all threads: autograd runs backward ops on its own threads,
    where a thread-local stream would always be the default one; on a GPU each backward op runs on
    the stream of its forward op, which is the stream current when `backward()` was called in the
    usual case (forward and backward under the same stream)."""

    stream: Optional[Any] = None


@contextlib.contextmanager
def simulated_cuda_api(slot: ListenerSlot) -> Iterator[None]:
    """Patch torch.cuda / torch.accelerator for the duration of one trace."""
    # FakeTensorMode imports dynamo, and dynamo's import indexes every torch.cuda function once
    # (and rejects one function object under two names): let it index the real ones.
    tc.import_dynamo()

    Stream, Event = _make_stream_and_event_types(slot)
    default_stream = Stream()
    current = _CurrentStream()
    slot.current_stream = lambda: current.stream if current.stream is not None else default_stream
    slot.default_stream = default_stream

    def current_stream(device: Any = None) -> Any:
        return current.stream if current.stream is not None else default_stream

    def set_stream(stream: Any) -> None:
        current.stream = stream
        slot.stream_ordering("current", current_stream())

    @contextlib.contextmanager
    def stream(s: Any) -> Iterator[None]:
        previous, current.stream = current.stream, s if s is not None else current.stream
        slot.stream_ordering("current", current_stream())
        try:
            yield
        finally:
            current.stream = previous
            slot.stream_ordering("current", current_stream())

    @contextlib.contextmanager
    def device(d: Any) -> Iterator[None]:
        yield

    def synchronize(device: Any = None) -> None:
        slot.api_sync("torch.cuda.synchronize")

    def accelerator_synchronize(device: Any = None) -> None:
        slot.api_sync("torch.accelerator.synchronize")

    def zero(*args: Any, **kwargs: Any) -> int:
        return 0

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    def rng_state(device: Any = "cuda") -> torch.Tensor:
        # the Philox state of a CUDA generator: seed and offset, 16 bytes, held on the host
        return torch.zeros(16, dtype=torch.uint8)

    sync_debug_mode = [0]

    def set_sync_debug_mode(debug_mode: Any) -> None:
        # accepted and remembered; the trace reports syncs itself, whatever the mode
        names = {"default": 0, "warn": 1, "error": 2}
        sync_debug_mode[0] = names[debug_mode] if isinstance(debug_mode, str) else int(debug_mode)

    @contextlib.contextmanager
    def nvtx_range(msg: str, *args: Any, **kwargs: Any) -> Iterator[None]:
        yield

    cuda = torch.cuda
    CUDAGraph = _make_graph_type(slot)
    pool_handles = iter(range(1, 1 << 62))
    patches: list[tuple[Any, str, Any]] = [
        (cuda, "CUDAGraph", CUDAGraph),
        (cuda.graphs, "CUDAGraph", CUDAGraph),
        (cuda, "graph_pool_handle", lambda: ("atenlens-graph-pool", next(pool_handles))),
        (cuda.graphs, "graph_pool_handle", lambda: ("atenlens-graph-pool", next(pool_handles))),
        # torch.cuda.graph keeps its capture stream on the class: one per trace, not one from an earlier trace
        (cuda.graphs.graph, "default_capture_stream", None),
        (cuda, "is_available", lambda: True),
        (cuda, "device_count", lambda: DEVICE_COUNT),
        (cuda, tc.CUDA_LAZY_INIT, nothing),
        (cuda, "current_device", lambda: 0),
        (cuda, "set_device", nothing),
        (cuda, "device", device),
        (cuda, "get_device_properties", lambda device=None: PROPERTIES),
        (cuda, "get_device_capability", lambda device=None: (PROPERTIES.major, PROPERTIES.minor)),
        (cuda, "get_device_name", lambda device=None: PROPERTIES.name),
        (cuda, "get_arch_list", lambda: ["sm_80", "sm_90"]),
        (cuda, "is_bf16_supported", lambda including_emulation=True: True),
        (cuda, "synchronize", synchronize),
        (cuda, "Stream", Stream),
        (cuda, "Event", Event),
        (cuda, "current_stream", current_stream),
        (cuda, "default_stream", lambda device=None: default_stream),
        (cuda, "set_stream", set_stream),
        (cuda, "stream", stream),
        # memory answers from the trace's memory model; reserved = allocated (segments are not modelled)
        (cuda, "memory_allocated", slot.allocated),
        (cuda, "max_memory_allocated", slot.max_allocated),
        (cuda, "memory_reserved", slot.allocated),
        (cuda, "max_memory_reserved", slot.max_allocated),
        (cuda, "memory_stats", lambda device=None: OrderedDict()),
        (cuda, "mem_get_info", slot.mem_get_info),
        (cuda, "reset_peak_memory_stats", slot.reset_peak),
        (cuda, "reset_accumulated_memory_stats", nothing),
        (cuda, "empty_cache", nothing),
        (cuda, "get_rng_state", rng_state),
        (cuda, "get_rng_state_all", lambda: [rng_state() for _ in range(DEVICE_COUNT)]),
        (cuda, "set_rng_state", nothing),
        (cuda, "set_rng_state_all", nothing),
        (cuda, "initial_seed", zero),
        (cuda, "set_sync_debug_mode", set_sync_debug_mode),
        (cuda, "get_sync_debug_mode", lambda: sync_debug_mode[0]),
        (
            cuda,
            "memory_summary",
            lambda device=None, abbreviated=False: (
                f"(atenlens memory model) allocated {slot.allocated()} B, peak {slot.max_allocated()} B"
            ),
        ),
        (cuda, "ipc_collect", nothing),
        (cuda, "can_device_access_peer", lambda device, peer_device: False),
        (cuda, "is_current_stream_capturing", slot.capturing),
        (cuda, "get_allocator_backend", lambda: "native"),
        (cuda, "current_blas_handle", zero),
        (cuda.graphs, "is_current_stream_capturing", slot.capturing),
        (cuda.nvtx, "range_push", zero),
        (cuda.nvtx, "range_pop", zero),
        (cuda.nvtx, "range_start", zero),
        (cuda.nvtx, "range_end", nothing),
        (cuda.nvtx, "mark", nothing),
        (cuda.nvtx, "range", nvtx_range),
        (torch.accelerator, "synchronize", accelerator_synchronize),
        # its own function object: Dynamo keys a handler table by function and refuses one object twice
        (torch.accelerator, "current_stream", lambda device=None: current_stream(device)),
        (torch.accelerator, "set_stream", set_stream),
        (torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda")),
        (torch.accelerator, "device_count", lambda: DEVICE_COUNT),
        (torch.accelerator, "is_available", lambda: True),
    ]
    patches += tc.missing_host_empty_cache(nothing)
    if torch.version.cuda is None:  # a CPU build; a CUDA build keeps its own answers
        patches += [
            (torch.version, "cuda", CUDA_VERSION),
            (torch.backends.cudnn, "is_available", lambda: True),
            (torch.backends.cudnn, "version", lambda: CUDNN_VERSION),
            # cuDNN kernels are not simulated: torch's Python code asks this before calling one
            # (RNN weight flattening) and takes the native path, as fidelity.md says
            (torch.backends.cudnn, "is_acceptable", lambda tensor: False),
        ]
    memory = getattr(torch.accelerator, "memory", None)
    if memory is not None:
        for name, answer in (
            ("memory_allocated", slot.allocated),
            ("max_memory_allocated", slot.max_allocated),
            ("memory_reserved", slot.allocated),
            ("max_memory_reserved", slot.max_allocated),
        ):
            patches.append((memory, name, answer))
        patches += [
            (memory, "empty_cache", nothing),
            (memory, "reset_peak_memory_stats", slot.reset_peak),
            (memory, "memory_stats", lambda device_index=None: OrderedDict()),
        ]
    for module in (torch.cuda.memory,):
        answers: tuple[tuple[str, Callable[..., Any]], ...] = (
            ("memory_allocated", slot.allocated),
            ("max_memory_allocated", slot.max_allocated),
            ("memory_reserved", slot.allocated),
            ("max_memory_reserved", slot.max_allocated),
            ("mem_get_info", slot.mem_get_info),
            ("reset_peak_memory_stats", slot.reset_peak),
        )
        for name, answer in answers:
            patches.append((module, name, answer))
    originals = [(obj, name, obj.__dict__.get(name, _MISSING)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    try:
        yield
    finally:
        for obj, name, value in reversed(originals):
            if value is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, value)


_MISSING = object()
