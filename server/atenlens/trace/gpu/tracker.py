"""What the hazard handlers of one trace share: pinned storages, pending device-to-host copies,
the API call in progress, and how a finding becomes a diagnostic (code, severity, location).

Severity of syncs and copy hazards (docs/diagnostics.md says the same):
- "warning" when the site runs inside a loop — any user frame on its stack is inside a `for`,
  `while` or comprehension — or on every call of the traced step (the default: the traced function
  is the step, and a program calls its step over and over);
- "information" when it runs once, outside any loop, while the user's module loads (its outermost
  user frame is the module's top level) or while the example call's arguments are built (the
  runner's frame evaluating the `# atenlens:` expression is on the stack).
"""

from __future__ import annotations

import dis
import itertools
import linecache
import sys
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, Callable, Optional

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from atenlens import vocabulary
from atenlens.report import Code, Severity
from atenlens.trace import torch_compat as tc
from atenlens.trace.attribution import EXAMPLE_CALL_FILENAME, is_user_file, library_cause, user_frames, user_stack
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.gpu.capture import CaptureTracker
from atenlens.trace.gpu.streams import StreamOrder, Write
from atenlens.trace.values import Values


def tensor_label(t: torch.Tensor) -> str:
    """`f32[8, 32]`, the logging_tensor vocabulary."""
    return vocabulary.tensor_label(str(t.dtype).removeprefix("torch."), t.shape)


def is_cuda(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cuda"


def is_cpu(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cpu"


# -- loops ---------------------------------------------------------------------------------------

_BACKWARD_JUMPS = frozenset(name for name in dis.opmap if "BACKWARD" in name and "NO_INTERRUPT" not in name)
_loop_spans: dict[CodeType, tuple[tuple[int, int], ...]] = {}


def _spans(code: CodeType) -> tuple[tuple[int, int], ...]:
    """Bytecode offset ranges that a backward jump repeats: the bodies of the loops of `code`.
    Bytecode rather than the source, so unsaved editor text and comprehensions need nothing else."""
    spans = _loop_spans.get(code)
    if spans is None:
        spans = tuple(
            (ins.argval, ins.offset)
            for ins in dis.get_instructions(code)
            if ins.opname in _BACKWARD_JUMPS and isinstance(ins.argval, int)
        )
        _loop_spans[code] = spans
    return spans


def frame_in_loop(frame: FrameType) -> bool:
    offset = frame.f_lasti
    return any(start <= offset <= end for start, end in _spans(frame.f_code))


def _column(frame: FrameType) -> Optional[int]:
    try:
        positions = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None))
    except StopIteration:
        return None
    return positions[2]


def _in_example_call_setup(frame: Optional[FrameType]) -> bool:
    while frame is not None:
        if frame.f_code.co_filename == EXAMPLE_CALL_FILENAME:
            return True
        frame = frame.f_back
    return False


def _severity(frame: FrameType, user_frames: list[FrameType]) -> Severity:
    if any(frame_in_loop(f) for f in user_frames):
        return "warning"
    loading = bool(user_frames) and user_frames[-1].f_code.co_name == "<module>"
    return "information" if loading or _in_example_call_setup(frame) else "warning"


# -- pending copies --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingCopy:
    storage: StorageWeakRef
    sequence: int  # order among device-to-host copies (events cover lower numbers)
    line: Optional[int]  # where the copy was issued, for the message


def storage_key(t: torch.Tensor) -> Optional[int]:
    try:
        return tc.storage_id(t.untyped_storage())
    except (RuntimeError, NotImplementedError):
        return None


_aten = torch.ops.aten
# ops that take a tensor for its shape, dtype and device only: no read of its data on any stream
_SHAPE_ONLY = frozenset(
    {
        _aten.empty_like.default,
        _aten.zeros_like.default,
        _aten.ones_like.default,
        _aten.full_like.default,
        _aten.rand_like.default,
        _aten.randn_like.default,
        _aten.randint_like.default,
        _aten.new_empty.default,
        _aten.new_zeros.default,
        _aten.new_ones.default,
        _aten.new_full.default,
        _aten.new_empty_strided.default,
    }
)


class HazardTracker:
    def __init__(self, sink: DiagnosticSink, values: Optional[Values] = None) -> None:
        self.sink = sink
        self.values = values if values is not None else Values(sink)  # decides what the host reads
        self.current_api: Optional[str] = None  # the API call the function-level mode is running
        # the user stack of the forward line whose backward is running (set by the recorder)
        self.backward_site: Optional[Callable[[], tuple]] = None
        self.steps_so_far: Optional[Callable[[], int]] = None  # optimizer steps made (set by the recorder)
        self._pinned: dict[int, StorageWeakRef] = {}
        self._pending: dict[int, PendingCopy] = {}
        self._sequence = 0
        self._event_marks: dict[int, int] = {}  # id(event) -> copies issued before its last record()
        # stream ordering (streams.py): None until a side stream is used; the simulated API (set by
        # trace/device.py) says which stream is current
        self.streams: Optional[StreamOrder] = None
        self.stream_api: Any = None
        self._stream_lines: dict[int, tuple[Any, Optional[int], bool]] = {}  # id -> (stream, line, made by a library)
        self._library_streams: set[int] = set()
        self._events_before_streams: set[int] = set()
        # event timing (AL501): record() order, and how many records the host has waited for
        self._records = 0
        self._event_records: dict[int, tuple[int, Optional[int]]] = {}  # id(event) -> (record number, line)
        self._records_waited = 0
        self.waited_all = False  # the host waited for all work and no op ran since
        # CUDA graph capture (capture.py): what a capture in progress must not do
        self.capture = CaptureTracker(self._report, sink.add, self._current_stream, self._describe_stream)

    # -- reporting --------------------------------------------------------------------------------
    def _report(
        self,
        kind: str,
        code: str,
        message: str,
        op: Optional[str],
        severity: Optional[Severity] = None,
        name_library: bool = True,
    ) -> None:
        """`name_library`: name the library line that did it (off where the message already says
        what the library does, as for torch.cuda.graph's own calls)."""
        if op is not None:  # the message names the op too, for plain-text readers
            message = f"{message} [{op.removesuffix('.default')}]"
        frame = sys._getframe(1)
        frames = user_frames(frame)
        found = library_cause(frame) if name_library else None
        cause = None
        if found is not None:  # a library did it: say where, for plain-text readers too
            cause, relative = found
            source = linecache.getline(cause.file, cause.line).strip()
            source = source if len(source) <= 80 else source[:77] + "..."
            message = (
                f"{message}, inside {relative}:{cause.line}"
                + (f" `{source}`" if source else "")
                + (", called from this line" if frames else "")
            )
        stack = None
        if not frames and self.backward_site is not None:
            # backward runs on autograd's device thread, where no user frame exists: the forward
            # line whose autograd node is running is where it happens
            stack = self.backward_site() or None
        self.sink.add(
            kind,
            code,
            message,
            op=op,
            severity=severity or _severity(frame, frames),
            column=_column(frames[0]) if frames else None,
            cause=cause,
            stack=stack,
            # a capture's hazards are about the capture, which happens where it is written: not
            # counted against the optimizer steps around it
            step=self.steps_so_far() if self.steps_so_far is not None and kind != "capture" else None,
        )

    def sync(self, message: str, op: Optional[str]) -> None:
        """A wait for the GPU (AL100). The wait drains the stream, so every device-to-host copy
        issued before it has landed (the trace models one stream for copies)."""
        if self.capture.active is not None:  # inside a CUDA graph capture a GPU raises instead of waiting
            self.capture.sync(message, op)
            return
        self._report("sync", Code.SYNC, message, op)
        self._pending.clear()
        self._records_waited = self._records
        if self.streams is not None:  # the host waited for the current stream's work
            self.streams.host_waited(
                dict(self.streams.stream_clock(self._stream_number(self.stream_api.current_stream())))
            )

    def _host_waited_all(self) -> None:
        """The host waited for all queued work (a device synchronize)."""
        self._pending.clear()
        self._records_waited = self._records
        if self.streams is not None:
            self.streams.host_waited(None)
        else:
            self.waited_all = True  # until the next op: see _side()

    def pageable_copy(self, message: str, op: Optional[str]) -> None:
        self._report("pageable-copy", Code.PAGEABLE_COPY, message, op)

    def unsynced_read(self, message: str, op: Optional[str]) -> None:
        self._report("unsynced-d2h-read", Code.UNSYNCED_D2H_READ, message, op)

    # -- pinned host memory -----------------------------------------------------------------------
    def mark_pinned(self, t: torch.Tensor) -> None:
        key = storage_key(t)
        if key is not None:
            self._pinned[key] = StorageWeakRef(t.untyped_storage())

    def is_pinned(self, t: torch.Tensor) -> bool:
        key = storage_key(t)
        if key is None:
            return False
        ref = self._pinned.get(key)
        if ref is None:
            return False
        if ref.expired():  # freed: its address may now be another storage's
            del self._pinned[key]
            return False
        return True

    # -- device-to-host copies that may still be in flight ------------------------------------------
    def copy_issued(self, host: torch.Tensor) -> None:
        key = storage_key(host)
        if key is None:
            return
        self._sequence += 1
        frames = user_frames(sys._getframe(1))
        self._pending[key] = PendingCopy(
            StorageWeakRef(host.untyped_storage()), self._sequence, frames[0].f_lineno if frames else None
        )

    def has_pending(self) -> bool:
        return bool(self._pending)

    def take_pending(self, t: torch.Tensor) -> Optional[PendingCopy]:
        """The in-flight copy `t` belongs to, forgotten once read (the first read is the finding)."""
        key = storage_key(t)
        pending = self._pending.pop(key, None) if key is not None else None
        if pending is not None and pending.storage.expired():
            return None
        return pending

    def event_recorded(self, event: Any) -> None:
        self._event_marks[id(event)] = self._sequence
        self._records += 1
        frames = user_frames(sys._getframe(1))
        self._event_records[id(event)] = (self._records, frames[0].f_lineno if frames else None)

    def api_sync(self, name: str, event: Any = None) -> None:
        """`torch.cuda.synchronize()` and friends: a sync, and copies issued before it have landed."""
        if self.capture.active is not None:
            self.capture.sync(f"`{name}()` waits for the GPU", None)
            return
        found = library_cause(sys._getframe(1))
        if found is not None and found[1] == "torch/cuda/graphs.py":
            # torch.cuda.graph waits for the GPU before each capture, by design (capture once, replay
            # many times): the capture's summary (AL513) says so instead of a sync the user cannot remove
            self.capture.library_synced = True
            self._host_waited_all()
            return
        self._report(
            "sync",
            Code.SYNC_API,
            f"`{name}()` blocks the host until the GPU has finished "
            + ("the work recorded before this event" if event is not None else "all queued work"),
            None,
        )
        if event is None:
            if name == "torch.cuda.Stream.synchronize":
                self._pending.clear()
                self._records_waited = self._records
            else:
                self._host_waited_all()
            return
        self._event_waited(event)
        if self.streams is not None:
            clock = self.streams.event_clock(event)
            if clock is not None:
                self.streams.host_waited(clock)
        covered = self._event_marks.get(id(event))
        if covered is not None:
            self._pending = {k: p for k, p in self._pending.items() if p.sequence > covered}

    # -- stream ordering (streams.py) --------------------------------------------------------------
    def _side(self, stream: Any) -> bool:
        """Whether `stream` is a side stream, starting the stream bookkeeping if it is."""
        if stream is None or self.stream_api is None or stream is self.stream_api.default_stream:
            return self.streams is not None
        if self.streams is None:
            self.streams = StreamOrder(self.stream_api.default_stream)
            if self.waited_all:  # no op ran since the host waited for everything
                self.streams.host_waited(None)
        return True

    def stream_created(self, stream: Any) -> None:
        frames = user_frames(sys._getframe(1))
        creator = sys._getframe(3)  # past the slot and the simulated Stream.__new__
        self._stream_lines[id(stream)] = (
            stream,
            frames[0].f_lineno if frames else None,
            not is_user_file(creator.f_code.co_filename),
        )

    def _stream_number(self, stream: Any) -> int:
        assert self.streams is not None
        kept = self._stream_lines.get(id(stream))
        number = self.streams.number(stream, kept[1] if kept is not None else None)
        if kept is not None and kept[2] and number != self.streams.default:
            self._library_streams.add(number)
        return number

    @property
    def _order(self) -> StreamOrder:
        """The stream bookkeeping, once `_side` has started it."""
        assert self.streams is not None
        return self.streams

    def stream_current(self, stream: Any) -> None:
        self._side(stream)

    def _current_stream(self) -> Any:
        return self.stream_api.current_stream() if self.stream_api is not None else None

    def _describe_stream(self, stream: Any) -> str:
        if stream is None or self.stream_api is None or stream is self.stream_api.default_stream:
            return "the default stream"
        return self._order.describe(self._stream_number(stream)) if self._side(stream) else "a side stream"

    def stream_waits_stream(self, waiter: Any, other: Any) -> None:
        self.capture.stream_waits(waiter, id(other))
        if self._side(waiter) | self._side(other):
            self._order.wait_stream(self._stream_number(waiter), self._stream_number(other))

    def stream_recorded(self, event: Any, stream: Any) -> None:
        stream = stream if stream is not None else self.stream_api.current_stream()
        self.capture.event_recorded(event, stream)
        if self._side(stream):
            self._order.record_event(event, self._stream_number(stream))
        else:
            self._events_before_streams.add(id(event))

    def stream_waits_event(self, waiter: Any, event: Any) -> None:
        waiter = waiter if waiter is not None else self.stream_api.current_stream()
        self.capture.stream_waits(waiter, self.capture.event_stream(event))
        if not self._side(waiter):
            return
        order = self._order
        if order.event_clock(event) is None and id(event) in self._events_before_streams:
            # recorded on the default stream before any side stream: it covers every untracked write
            order._event_clocks[id(event)] = {order.default: 1}
        order.wait_event(self._stream_number(waiter), event)

    def stream_host_waited(self, stream: Any) -> None:
        if self.streams is not None:
            self.streams.host_waited(dict(self.streams.stream_clock(self._stream_number(stream))))

    def stream_op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """One aten op queued on the current stream: report reads of writes made on another stream
        that this one has not waited for (AL500)."""
        streams = self.streams
        assert streams is not None
        frames = user_frames(sys._getframe(1))
        stream = self._stream_number(self.stream_api.current_stream())
        self.capture.stream_work(stream != streams.default)
        if func in _SHAPE_ONLY:  # `empty_like(x)` reads x's shape, not its data
            args, kwargs = (), {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}
        line = frames[0].f_lineno if frames else None
        if line is None and self.backward_site is not None:
            # a backward op on autograd's thread: its forward line, marked negative for the message
            site = self.backward_site()
            line = -site[-1].line if site else None
        unordered, foreign, overwrites = streams.op(stream, args, kwargs, out, line)
        for t, write in unordered:
            self._report_unordered(t, write, stream, str(func))
        for t, reader, read_line in overwrites:
            read = f"read on {streams.describe(reader)}" + (
                f" at line {read_line}" if read_line and read_line > 0 else ""
            )
            self._report(
                "unordered-stream-write",
                Code.UNORDERED_STREAM_WRITE,
                f"{tensor_label(t)} {read} is overwritten on {streams.describe(stream)} with no `wait_stream` "
                "or `wait_event` ordering the write after that read: the write can land before the read has "
                "run, and the read then sees the new data, with no error",
                str(func),
            )
        if foreign:
            # a library's own streams (FSDP2's all-gather streams) keep their tensors alive with
            # events and references rather than record_stream(): only the user's streams, used by
            # the user's code, are held to it
            if library_cause(sys._getframe()) is not None or stream in self._library_streams:
                foreign = []
            else:
                foreign = [f for f in foreign if f[2] not in self._library_streams]
        for t, key, allocated in foreign:
            # reported when the trace ends, if no record_stream() names this stream by then
            streams.cross_uses[(key, stream)] = (
                f"{tensor_label(t)} allocated on {streams.describe(allocated)} is used on "
                f"{streams.describe(stream)} with no `record_stream()` naming that stream: once it is freed, "
                f"the caching allocator can give its memory to a new tensor on {streams.describe(allocated)} "
                f"while {streams.describe(stream)} may still be using it [{str(func).removesuffix('.default')}]",
                str(func),
                user_stack(sys._getframe()),
                _column(frames[0]) if frames else None,
                _severity(sys._getframe(), frames),
            )

    # -- CUDA graph capture (capture.py), from the simulated CUDAGraph -----------------------------
    def capture_begin(self, graph: Any) -> None:
        stream = self.stream_api.current_stream()
        self.capture.begin(graph, on_default_stream=stream is None or stream is self.stream_api.default_stream)

    def capture_end(self, graph: Any) -> None:
        self.capture.end(graph)

    def capture_register_generator(self, graph: Any, generator: Any) -> None:
        self.capture.register_generator(graph, generator)

    def capture_replay(self, graph: Any) -> None:
        rewritten = self.capture.replayed(graph)
        stream = self.stream_api.current_stream()
        if rewritten and self._side(stream):
            frames = user_frames(sys._getframe(1))
            self._order.op(
                self._stream_number(stream), (), {}, tuple(rewritten), frames[0].f_lineno if frames else None
            )

    def stream_record_stream(self, t: Any, stream: Any) -> None:
        """`t.record_stream(stream)` (a function-level call: the aten op loses the stream's identity)."""
        if isinstance(t, torch.Tensor) and stream is not None and self._side(stream):
            self._order.record_stream(t, self._stream_number(stream))

    def finish(self) -> None:
        """The trace ended: uses on another stream that no record_stream() covered (AL502), and the
        summary of each CUDA graph capture."""
        self.capture.finish()
        if self.streams is None:
            return
        for message, op, stack, column, severity in self.streams.unsafe_cross_uses():
            self.sink.add(
                "missing-record-stream",
                Code.MISSING_RECORD_STREAM,
                message,
                op=op,
                severity=severity,
                stack=stack,
                column=column,
            )

    def _report_unordered(self, t: torch.Tensor, write: Write, reader: int, op: str) -> None:
        streams = self.streams
        assert streams is not None
        if write.line is not None and write.line < 0:  # see stream_op: a backward op's write
            written = (
                f"written by the backward of line {-write.line} on {streams.describe(write.stream)} "
                "(backward ops run on the stream current at `backward()`)"
            )
        elif write.line is not None:
            written = f"written on {streams.describe(write.stream)} at line {write.line}"
        elif write.stream != streams.default:
            written = f"written on {streams.describe(write.stream)}"
        else:
            written = (
                f"written on {streams.describe(write.stream)} before any side stream was used "
                "(the trace assumes it was still queued there)"
            )
        self._report(
            "unordered-stream-read",
            Code.UNORDERED_STREAM_READ,
            f"{tensor_label(t)} {written} is read on {streams.describe(reader)} with no "
            f"`wait_stream` or `wait_event` ordering the two: the read can run before the write "
            f"finishes and see stale data, with no error",
            op,
        )

    # -- event timing -----------------------------------------------------------------------------
    def _event_waited(self, event: Any) -> None:
        recorded = self._event_records.get(id(event))
        if recorded is not None and recorded[0] > self._records_waited:
            self._records_waited = recorded[0]  # one queue: the records before it are done too

    def stream_queried(self, event: Any) -> None:
        """`Event.query()` answered True: the host saw the event complete (a polling loop)."""
        self._event_waited(event)

    def stream_elapsed(self, start: Any, end: Any) -> None:
        """`start.elapsed_time(end)` (AL501): on a GPU it raises while `end` has not completed."""
        recorded = self._event_records.get(id(end))
        if recorded is None or recorded[0] <= self._records_waited:
            return
        where = f" at line {recorded[1]}" if recorded[1] is not None else ""
        self._report(
            "unsynced-elapsed-time",
            Code.UNSYNCED_ELAPSED_TIME,
            f"`elapsed_time()` reads the end event recorded{where} before the host waited for it "
            "(no `end.synchronize()`, stream or device synchronize since its `record()`): on a GPU "
            "it raises `CUDA error: device not ready` while the timed work still runs (the trace "
            "returns 0.0)",
            None,
            severity="error",
        )
