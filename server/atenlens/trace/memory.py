"""The memory model of one trace: every storage on the simulated device, when it lives, and what it is.

Fed by the recorder (no torch mode of its own): the dispatch mode hands it each op's outputs, and a
storage it has not seen is an allocation. A weak reference to the storage's Python object (torch keeps
one object per storage for as long as the storage lives) tells when it is freed. Sizes are rounded as
CUDA's caching allocator rounds a block: up to a multiple of 512 bytes, at least 512, 0 for an empty
storage; what `torch.cuda.memory_allocated()` counts. The allocator's segments
(`memory_reserved()`) are replayed over these blocks once the call has returned: trace/allocator.py.

What a storage is, decided once the step is over (each from a public torch hook):
- parameters: storages of `nn.Parameter`s (seen created, found in an optimizer's param_groups) and buffers
  are not told apart from other inputs; a DTensor parameter's (FSDP2's sharded ones) is its local shard;
- unsharded_parameters, unsharded_gradients, communication: FSDP2's gathered parameters (while
  gathered), their full gradients before the reduce-scatter, and its all-gather outputs and
  reduce-scatter inputs (told by torch_compat.fsdp2_storage_roles);
- gradients: a parameter's `.grad` (looked at after each `backward()` and before/after each optimizer step);
- optimizer_state: a tensor in an optimizer's `state` after its `step()` (torch.optim's global step hooks);
- activations: forward storages that autograd freed during backward: a node releases what it saved once
  it has run, so the node running when the storage dies (`torch._C._current_autograd_node()`) is the one
  that saved it, and the line that created that node is where it was saved. (A saved_tensors_hooks pack
  hook would say the same earlier, but registering one changes the ops autograd dispatches, detach ops
  move from forward to backward, and the trace must show the ops a run without it shows.) A storage the
  program still references when backward is done is not an activation but a temporary;
- inputs: anything else already on the device when the traced call started;
- temporaries: anything else the call allocated.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Iterator, Optional

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from atenlens.report import (
    Frame,
    Holding,
    MemoryHolder,
    MemoryLine,
    MemorySummary,
    MemoryTimeline,
    PeakCategories,
)
from atenlens.trace import allocator
from atenlens.trace import torch_compat as tc

BLOCK = 512  # CUDA caching allocator: kMinBlockSize
MAX_TIMELINE_POINTS = 2048
CATEGORIES = (
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "inputs",
    "unsharded_parameters",
    "unsharded_gradients",
    "communication",
)
ROLES = frozenset({"unsharded_parameters", "unsharded_gradients", "communication"})

_Tensor = torch.Tensor
_tensor_device = tc.tensor_device
_current_node = tc.current_autograd_node
_no_function_modes = tc.no_function_modes


def rounded(nbytes: int) -> int:
    """Bytes the CUDA caching allocator hands out for a request of `nbytes`."""
    if nbytes <= 0:
        return 0
    return -(-nbytes // BLOCK) * BLOCK


class _Storage:
    __slots__ = (
        "nbytes",
        "alloc_tick",
        "free_tick",
        "op_index",
        "phase",
        "file",
        "line",
        "in_trace",
        "parameter",
        "gradient",
        "optimizer_state",
        "saved_by",
        "ref",
        "role",
        "previous",
    )

    def __init__(
        self,
        nbytes: int,
        tick: int,
        op_index: int,
        phase: str,
        file: Optional[str],
        line: Optional[int],
        in_trace: bool,
    ) -> None:
        self.nbytes = nbytes
        self.alloc_tick = tick
        self.free_tick: Optional[int] = None
        self.op_index = op_index  # the op that allocated it (-1 before the traced call)
        self.phase = phase
        self.file = file
        self.line = line
        self.in_trace = in_trace
        self.parameter = False
        self.gradient = False
        self.optimizer_state = False
        self.saved_by: Optional[int] = None  # autograd sequence number of the node that saved it
        self.ref: Any = None
        self.role: Optional[str] = None  # one of ROLES, for all of the storage's sizes
        self.previous: Optional[_Storage] = None  # the same storage before a resize

    def category(self) -> str:
        if self.role is not None:
            return self.role
        if self.parameter:
            return "parameters"
        if self.gradient:
            return "gradients"
        if self.optimizer_state:
            return "optimizer_state"
        if not self.in_trace:
            return "inputs"
        if self.saved_by is not None:
            return "activations"
        return "temporaries"


class NoMemoryModel:
    """Stands in for MemoryModel when a trace is asked for no cost forecast (TraceRequest.cost)."""

    device_type = "cuda"
    live_bytes = max_live_bytes = 0
    node_names: dict[int, str] = {}

    def outputs(self, out: Any, phase: str, file: Optional[str] = None, line: Optional[int] = None) -> int:
        return 0

    def op_started(self, file: Optional[str], line: Optional[int]) -> None:
        pass

    def op_finished(self) -> None:
        pass

    def parameter_created(self, t: Any) -> None:
        pass

    def mark(self, t: Any, category: str) -> None:
        pass

    def is_parameter(self, t: Any) -> bool:
        return False

    def scan_parameters(self) -> None:
        pass

    def reset_peak(self) -> None:
        pass

    def watching(self, roots: Any = ()) -> Any:
        return contextlib.nullcontext()


class MemoryModel:
    """Live device memory of one trace. `device_type`: the simulated device ("cuda"; "cpu" when traced on cpu)."""

    def __init__(self, device_type: str = "cuda") -> None:
        self.device_type = device_type
        self.live: dict[int, _Storage] = {}  # storage _cdata -> record, while alive
        self.storages: list[_Storage] = []
        self.tick = 0
        self.live_bytes = 0
        self.max_live_bytes = 0  # since the process's start or reset_peak(): max_memory_allocated()
        self.recording = False
        self.op_index = 0  # ops of the traced call so far
        self.live_after_op: list[int] = []  # live bytes after each op of the traced call
        self.op_start_tick: list[int] = []
        self.op_lines: list[Optional[tuple[str, Optional[int]]]] = []
        self.peak_bytes = 0
        self.peak_tick = -1
        self.end_tick: Optional[int] = None  # when the traced call returned
        self.peak_where: tuple[Optional[str], Optional[int], str] = (None, None, "forward")
        self.start_bytes = 0
        # parameters reachable from the traced call (its arguments, the module's globals) or an optimizer:
        # held strongly for the call (they are alive anyway); a weak reference would make torch refuse
        # `module.to()` (swap_tensors rejects tensors with weak references)
        self._parameters: dict[int, Any] = {}
        self.node_names: dict[int, str] = {}  # autograd sequence nr -> node name (filled by the recorder)
        self._last_phase = "forward"  # of the latest op (a resize between ops counts in it)

    # -- allocations and frees ------------------------------------------------------------------
    def _record(self, t: _Tensor, phase: str, file: Optional[str], line: Optional[int]) -> int:
        try:
            storage = t.untyped_storage()
        except Exception:  # sparse, nested and wrapper-subclass tensors have no storage of their own
            return 0
        key = tc.storage_id(storage)
        if key in self.live:
            return 0
        if _tensor_device(t).type != self.device_type:
            return 0
        nbytes = rounded(storage.nbytes())
        record = _Storage(nbytes, self.tick, self.op_index if self.recording else -1, phase, file, line, self.recording)
        self.tick += 1
        record.ref = weakref.ref(storage, self._freer(key))
        self.live[key] = record
        self.storages.append(record)
        self.live_bytes += nbytes
        self._count_peak(record)
        return nbytes

    def _count_peak(self, record: _Storage) -> None:
        if self.live_bytes > self.max_live_bytes:
            self.max_live_bytes = self.live_bytes
        if self.recording and self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            self.peak_tick = record.alloc_tick
            self.peak_where = (record.file, record.line, record.phase)

    def _freer(self, key: int) -> Callable[[Any], None]:
        def freed(ref: Any) -> None:
            record = self.live.get(key)
            if record is None or record.ref is not ref:  # resized to 0 (not live), or already gone
                return
            del self.live[key]
            if record.phase == "forward" and record.in_trace:
                # a forward storage freed while an autograd node runs: the node released it after
                # using it, i.e. it was saved for backward by that node
                node = _current_node()
                if node is not None:
                    record.saved_by = tc.node_sequence_nr(node)
                    self.node_names.setdefault(record.saved_by, node.name().removeprefix("torch::autograd::"))
            record.free_tick = self.tick
            self.tick += 1
            self.live_bytes -= record.nbytes

        return freed

    def resized(self, storage: Any) -> None:
        """`storage.resize_()` ran: its old block is freed and a block of the new size allocated (FSDP2
        frees a gathered parameter by resizing its storage to 0, and re-allocates it so before the next
        all-gather). The new size counts from the latest op's line and phase."""
        key = tc.storage_id(storage)
        old = self.live.get(key)
        nbytes = rounded(storage.nbytes())
        if old is None or nbytes == old.nbytes:
            return
        old.free_tick = self.tick
        self.tick += 1
        self.live_bytes -= old.nbytes
        file, line = self.op_lines[-1] if self.recording and self.op_lines and self.op_lines[-1] else (None, None)
        new = _Storage(
            nbytes, self.tick, self.op_index if self.recording else -1, self._last_phase, file, line, old.in_trace
        )
        self.tick += 1
        new.ref, new.previous, new.role = old.ref, old, old.role
        new.parameter, new.gradient, new.optimizer_state = old.parameter, old.gradient, old.optimizer_state
        self.live[key] = new
        self.storages.append(new)
        self.live_bytes += nbytes
        self._count_peak(new)

    def outputs(self, out: Any, phase: str, file: Optional[str] = None, line: Optional[int] = None) -> int:
        """Record the storages an op's outputs live in; returns the bytes this op allocated."""
        self._last_phase = phase
        if isinstance(out, _Tensor):
            allocated = self._record(out, phase, file, line)
        elif isinstance(out, (tuple, list)):
            allocated = 0
            for t in out:
                if isinstance(t, _Tensor):
                    allocated += self._record(t, phase, file, line)
        else:
            allocated = 0
        return allocated

    def op_started(self, file: Optional[str], line: Optional[int]) -> None:
        self.op_start_tick.append(self.tick)
        self.op_lines.append((file, line) if file is not None else None)

    def op_finished(self) -> None:
        self.live_after_op.append(self.live_bytes)
        self.op_index += 1

    def reset_peak(self) -> None:
        self.max_live_bytes = self.live_bytes

    # -- what storages are ------------------------------------------------------------------------
    def _find(self, t: Any) -> Optional[_Storage]:
        if not isinstance(t, _Tensor):
            return None
        try:
            return self.live.get(tc.storage_id(tc.local_tensor(t).untyped_storage()))
        except Exception:
            return None

    def is_parameter(self, t: Any) -> bool:
        """Is `t` (the storage of) a parameter or a parameter's gradient, as known so far?"""
        record = self._find(t)
        return record is not None and (record.parameter or record.gradient)

    def mark(self, t: Any, category: str) -> None:
        """`t`'s storage is one of ROLES, at every size it has had."""
        record = self._find(t)
        while record is not None:
            record.role = category
            record = record.previous

    def parameter_created(self, t: Any) -> None:
        if isinstance(t, _Tensor):
            with _no_function_modes():
                record = self._find(t)
            if record is not None:
                record.parameter = True

    def _add_parameter(self, p: Any) -> None:
        if isinstance(p, _Tensor) and id(p) not in self._parameters:
            self._parameters[id(p)] = p

    def _mark_parameter(self, p: _Tensor) -> None:
        record = self._find(p)
        if record is not None:
            record.parameter = True
        grad = p.grad
        if grad is not None:
            record = self._find(grad)
            if record is not None:
                record.gradient = True

    def scan_parameters(self) -> None:
        """Parameters may have moved (`module.to()` swaps their storage) and gained `.grad`s."""
        with _no_function_modes():
            for p in self._parameters.values():
                self._mark_parameter(p)

    def find_parameters(self, roots: Any) -> None:
        """The parameters and buffers of the modules and optimizers among `roots` (one level into tuples,
        lists and dicts)."""
        stack = list(roots)
        seen: set[int] = set()
        while stack:
            value = stack.pop()
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, torch.nn.Module):
                for p in value.parameters():
                    self._add_parameter(p)
                for b in value.buffers():
                    self._add_parameter(b)
            elif isinstance(value, torch.optim.Optimizer):
                for group in value.param_groups:
                    for p in group["params"]:
                        self._add_parameter(p)
            elif isinstance(value, (tuple, list)) and len(seen) < 10_000:
                stack.extend(value)
            elif isinstance(value, dict) and len(seen) < 10_000:
                stack.extend(value.values())

    def _optimizer_step(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        with _no_function_modes():
            self._optimizer_tensors(optimizer)

    def _optimizer_tensors(self, optimizer: Any) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                self._add_parameter(p)
                self._mark_parameter(p)
        for state in optimizer.state.values():
            for value in state.values():
                record = self._find(value)
                if record is not None:
                    record.optimizer_state = True

    @contextlib.contextmanager
    def watching(self, roots: Any = ()) -> Iterator[None]:
        """Around the traced call: saved-tensor and optimizer-step hooks, and peak tracking from here on.
        `roots`: where to look for modules and optimizers (the call's arguments, the module's globals)."""
        self.find_parameters(roots)
        self.scan_parameters()
        self.recording = True
        self.peak_bytes = self.start_bytes = self.live_bytes
        self.peak_tick = self.tick
        handles = (
            register_optimizer_step_pre_hook(self._optimizer_step),
            register_optimizer_step_post_hook(self._optimizer_step),
        )
        # A storage's resize is no op the dispatcher sees (torch's MemTracker patches it the same way).
        resize = torch.UntypedStorage.resize_

        def resize_(storage: Any, size: int) -> Any:
            out = resize(storage, size)
            self.resized(storage)
            return out

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            torch.UntypedStorage.resize_ = resize  # type: ignore[method-assign]
            for handle in handles:
                handle.remove()
            self.recording = False
            self.end_tick = self.tick
            self.scan_parameters()
            self._parameters.clear()

    # -- the summary --------------------------------------------------------------------------------
    def summary(self, device_bytes: int, site_of_node: dict[int, tuple[Frame, ...]]) -> MemorySummary:
        at_peak = dict.fromkeys(CATEGORIES, 0)
        holders: dict[tuple, int] = {}
        peak_tick = self.peak_tick
        for record in self.storages:
            if record.alloc_tick > peak_tick or (record.free_tick is not None and record.free_tick <= peak_tick):
                continue
            category = record.category()
            at_peak[category] += record.nbytes
            file, line, node = self._holder(record, category, site_of_node)
            key = (category, file, line, node)
            holders[key] = holders.get(key, 0) + record.nbytes
        top = sorted(holders.items(), key=lambda item: -item[1])[:10]
        file, line, phase = self.peak_where
        end = self.end_tick if self.end_tick is not None else self.tick
        reserved = allocator.replay(self.storages, peak_tick, device_bytes, until=end)
        return MemorySummary(
            peak_bytes=self.peak_bytes,
            peak_file=file,
            peak_line=line,
            peak_phase=phase,  # type: ignore[arg-type]
            at_peak=PeakCategories(**at_peak),
            device_bytes=device_bytes,
            start_bytes=self.start_bytes,
            reserved_peak_bytes=reserved.peak_bytes,
            reserved_at_peak_bytes=reserved.at_peak_bytes,
            end_bytes=self.live_bytes,
            holders=tuple(
                MemoryHolder(category=c, file=f, line=n_line, node=n, bytes=b) for (c, f, n_line, n), b in top
            ),
            lines=self._lines(site_of_node),
            timeline=self._timeline(),
        )

    def _holder(
        self, record: _Storage, category: str, site_of_node: dict[int, tuple[Frame, ...]]
    ) -> tuple[Optional[str], Optional[int], Optional[str]]:
        if category == "activations" and record.saved_by is not None:
            stack = site_of_node.get(record.saved_by)
            node = self.node_names.get(record.saved_by)
            if stack:
                return stack[-1].file, stack[-1].line, node
            return record.file, record.line, node
        if category in ("parameters", "gradients", "optimizer_state", "inputs"):
            return None, None, None
        return record.file, record.line, None

    def _lines(self, site_of_node: dict[int, tuple[Frame, ...]]) -> tuple[MemoryLine, ...]:
        """Per line of the traced call: bytes its ops allocated, and how much of it was still held when
        the line's run of ops ended (the next op came from another line), by whom."""
        ends: list[int] = []
        count = len(self.op_start_tick)
        end_tick = self.tick
        for index in range(count - 1, -1, -1):  # run end of each op: the start of the next line's op
            if index + 1 < count and self.op_lines[index + 1] != self.op_lines[index]:
                end_tick = self.op_start_tick[index + 1]
            ends.append(end_tick)
        ends.reverse()
        per_line: dict[tuple[str, int], list] = {}
        for record in self.storages:
            if not record.in_trace or record.file is None or record.line is None or record.op_index >= count:
                continue
            entry = per_line.setdefault((record.file, record.line), [0, 0, {}])
            entry[0] += record.nbytes
            if record.free_tick is None or record.free_tick > ends[record.op_index]:
                entry[1] += record.nbytes
                category = record.category()
                if record.saved_by is not None and category == "activations":
                    who = f"saved by {self.node_names.get(record.saved_by, 'autograd')}"
                elif category == "temporaries":
                    who = "referenced by the program"
                else:
                    who = category.replace("_", " ")
                entry[2][who] = entry[2].get(who, 0) + record.nbytes
        return tuple(
            MemoryLine(
                file=file,
                line=line,
                bytes_allocated=allocated,
                bytes_held=held,
                held_by=tuple(Holding(w, b) for w, b in sorted(who.items(), key=lambda item: -item[1])),
            )
            for (file, line), (allocated, held, who) in per_line.items()
        )

    def _timeline(self) -> MemoryTimeline:
        """Live bytes after each op, at most MAX_TIMELINE_POINTS of them (the largest of each bucket)."""
        values = self.live_after_op
        step = max(1, -(-len(values) // MAX_TIMELINE_POINTS))
        ops: list[int] = []
        live: list[int] = []
        for start in range(0, len(values), step):
            bucket = values[start : start + step]
            best = max(range(len(bucket)), key=bucket.__getitem__)
            ops.append(start + best)
            live.append(bucket[best])
        return MemoryTimeline(op_index=tuple(ops), live_bytes=tuple(live))
