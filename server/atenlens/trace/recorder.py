"""Records what a function does under fake tensors: public API calls and the aten ops they dispatch.

Two torch modes work together:
- `_CallRecorder` (a TorchFunctionMode) sees the public API as written (`torch.nn.functional.linear`,
  `torch.Tensor.backward`): events of kind "call".
- `_OpRecorder` (a TorchDispatchMode) sees every aten overload below autograd (`aten.addmm.default`),
  forward and backward: events of kind "op", with input/output metadata and FLOPs.

Attribution. A forward op belongs to the user stack at the moment it runs. A backward op runs later,
possibly on autograd's device thread where no user frame exists, so it is attributed through the
autograd node that runs it: when a forward op creates a node, the thread-local sequence counter has
risen by the time the op reaches the dispatch mode, and `counter - 1` is that node's sequence number;
in backward, the current node's sequence number finds the forward stack again. AccumulateGrad nodes
(no forward op) go to the `backward()` call; ops bracketed by torch.optim's `Optimizer.*`
record_function belong to phase "optimizer", except those of a closure passed to `step()`, which
are forward and backward work like any other.

Device. These are the only Python modes of a trace (each mode on the stack costs every op a trip
through the dispatcher): the recorder records, and hands each call and op to the device's hooks
(trace/device.py `DeviceHooks`) to run, which find hazards and may answer with a placeholder. Inside
a mode's handler that mode is off, so what the hooks run themselves is not recorded: the recorder
sees each op as the user's code issued it.

The recorder stays installed while the user's module loads and while the example call's arguments
are built, with recording off: those ops run (on fakes, with the same device behaviour) but are not
the traced function's work and are not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import types
from typing import Any, Callable, Iterator, Optional

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils.flop_counter import flop_registry
from torch.utils.weak import WeakIdKeyDictionary

from atenlens.cost import op_seconds
from atenlens.gpus import GPU, find_gpu
from atenlens.report import Event, Frame, TensorMeta
from atenlens.trace import torch_compat as tc
from atenlens.trace.attribution import UserStacks
from atenlens.trace.collectives import NAMESPACES as _COLLECTIVE_NAMESPACES
from atenlens.trace.device import DeviceHooks, PlainHooks
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.dist_hazards import DistributedHazards
from atenlens.trace.memory import MemoryModel, NoMemoryModel
from atenlens.trace.modules import ModuleTracker
from atenlens.trace.ranks import shard_through_view
from atenlens.trace.roofline import bytes_moved
from atenlens.trace.values import Values

_getframe = sys._getframe
_current_node = tc.current_autograd_node
_sequence_nr = tc.sequence_nr
_node_sequence_nr = tc.node_sequence_nr
_thread_id = threading.get_ident  # sequence numbers count per thread
tree_leaves = tc.tree_leaves
_tensor_device = tc.tensor_device
_PRIM_DEVICE = tc.PRIM_DEVICE
_fake_device_answer = tc.fake_device_answer
_Tensor = torch.Tensor
_FakeTensor = tc.FakeTensor
_Parameter = torch.nn.Parameter
_BACKWARD_CALLS = (torch.Tensor.backward, torch.autograd.backward)
# nn.Parameter(fake) takes torch's "custom tensor" path, `data.detach().requires_grad_()`, which a
# real tensor never runs (it uses _make_subclass): bookkeeping of fakes, not the user's program.
_PARAMETER_NEW_CODE = torch.nn.Parameter.__new__.__code__

# Tensor methods that only read metadata (no op, nothing a performance engineer looks for): not
# recorded as calls. Property getters (`x.shape`, `x.T`) are skipped by type instead.
_METADATA_METHODS = frozenset(
    {
        "size",
        "dim",
        "ndimension",
        "stride",
        "numel",
        "nelement",
        "element_size",
        "data_ptr",
        "storage_offset",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "is_signed",
        "get_device",
        "untyped_storage",
        "storage",
        "dim_order",
        "is_pinned",
        "is_shared",
        "has_names",
        "__len__",
        "__format__",
        "__repr__",
        "__str__",
        "__hash__",
        "__setstate__",
        "__reduce_ex__",
        "__deepcopy__",
        "__array__",
        "__dlpack__",
        "__dlpack_device__",
        "__contains__",
        "__torch_function__",
    }
)
_DESCRIPTOR_WRAPPERS = (types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType)


# A report is read by an editor: past this many events (a long training loop, a loop spinning until
# its time budget), the rest are counted in the summary but not kept. ~300 bytes of JSON each, so a
# report stays under ~6 MB: a timed-out trace writes it well within the worker's grace period, and
# the server reads it without stalling.
MAX_EVENTS = 20_000


class Recorder:
    """The events of one trace. Enter `modes()` (outermost first) around the user's code; set
    `recording` to True only while the traced function itself runs."""

    # torch's FLOP formulas by op packet, looked up once per overload
    flop_formulas: Any = flop_registry
    # called for each recorded op before its event is kept, with the index the event gets
    op_extras: Optional[Callable[[int, Any, tuple, dict, Any], None]] = None

    def __init__(
        self,
        sink: DiagnosticSink,
        max_events: int = MAX_EVENTS,
        device_hooks: Optional[DeviceHooks] = None,
        gpu: Optional[GPU] = None,
        device_type: str = "cuda",
        cost: bool = True,
    ) -> None:
        self.sink = sink
        # cost: the memory model sees every op's outputs; each op is priced on `gpu` (trace/memory.py,
        # trace/roofline.py, atenlens/cost.py)
        self.gpu = gpu if gpu is not None else find_gpu(None)
        self.cost = cost
        self.memory = MemoryModel(device_type) if cost else NoMemoryModel()
        self.device_type = device_type
        self.values = Values(sink)  # every data-dependent value of this trace
        self._tracker: Any = None  # the device hooks' tracker: which stream is current
        self.use_device_hooks(device_hooks if device_hooks is not None else PlainHooks())
        self.events: list[Event] = []
        self.max_events = max_events
        self.dropped_ops: dict[str, int] = {}  # phase -> ops counted but not kept
        self.dropped_calls = 0
        self.dropped_flops = 0
        self.estimate_seconds: dict[str, float] = {}  # phase -> summed roofline estimates (kept events or not)
        self.collectives: Any = None  # trace/collectives.py Collectives: c10d ops become events
        self.overlap: Any = None  # trace/overlap.py Overlap, on simulated ranks: exposed communication
        self._overlap_events: list[Optional[int]] = []  # per collective: its index in events, if kept
        self._written: dict[Any, tuple[tuple[int, ...], tuple[str, ...]]] = {}  # op -> arguments it writes
        self.hazards = DistributedHazards(sink, self.memory.is_parameter)  # AL910, AL911, AL912
        self.hazards.last_collective_stack = lambda: self.collectives.last_stack if self.collectives else ()
        self.recording = False
        self._hidden = 0  # inside torch's own bookkeeping ops (hidden())
        self._in_backward = 0
        self._record_functions: list[bool] = []  # open profiler regions: is each an Optimizer.* one?
        self._optimizer_depth = 0
        self._closure_hook: Any = None  # torch.optim pre-hook while recording
        self.optimizer_steps = 0  # Optimizer.step calls while recording
        self._backward_stack: tuple[Frame, ...] = ()
        self._site_of_node: dict[int, tuple[Frame, ...]] = {}  # autograd sequence nr -> forward user stack
        # (thread, sequence nr) of a node made by a backward op (create_graph=True) -> that op's stack
        self._site_of_backward_node: dict[tuple[int, int], tuple[Frame, ...]] = {}
        self._last_backward_nr: dict[int, int] = {}  # thread -> its sequence nr after its last backward op
        self._last_sequence_nr = tc.sequence_nr()
        self._op_names: dict[Any, str] = {}
        self.bookkeeping_ops: set[str] = set()  # names of recorded ops that are views/detach
        self._call_names: dict[Any, Optional[str]] = {}
        self._metas: dict[tuple, TensorMeta] = {}
        # plain tensors that hold only this rank's shard of a DTensor (handed_back): their TensorMeta
        self._local_shards: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._handed_back = False  # a plain bool: the per-op test on the common path
        self._described: dict[Any, tuple[str, Any]] = {}  # op overload -> (name, torch's FLOP formula or None)
        self._user_stacks = UserStacks()
        # User frames from a frame outwards, outermost first, up to the code that started the trace
        self.user_stack: Callable[[Any], tuple[Frame, ...]] = self._user_stacks.stack
        self.modules = ModuleTracker(self.user_stack, self.metas)
        self._call_mode = _CallRecorder(self)
        self._op_mode = _OpRecorder(self)

    def set_device(self, device_type: str) -> None:
        """The device the trace simulates ("cuda", or "cpu"): its storages are the memory model's."""
        self.device_type = self.memory.device_type = device_type

    @contextlib.contextmanager
    def hidden(self) -> Iterator[None]:
        """Ops that run here are torch's bookkeeping, not the program's (DTensor's sharding propagation,
        torch_compat.sharding_propagation_through): no events, no memory."""
        self._hidden += 1
        try:
            yield
        finally:
            self._hidden -= 1

    def modes(self) -> list[Any]:
        """The torch modes to enter, in this order, after the fake mode."""
        return [self._call_mode, self._op_mode]

    def recompute_under_modes(self) -> Any:
        """A context in which activation checkpointing's recompute in backward runs under the call mode,
        as the forward did (torch_compat.checkpoint_recompute_under)."""
        return tc.checkpoint_recompute_under(self._call_mode)

    def use_device_hooks(self, hooks: DeviceHooks) -> None:
        """Run calls and ops through `hooks` from now on."""
        self.run_call = hooks.call
        self.run_op = hooks.op
        tracker = self._tracker = getattr(hooks, "tracker", None)
        if tracker is not None:
            tracker.backward_site = self.backward_site
            tracker.steps_so_far = lambda: self.optimizer_steps

    def backward_site(self) -> tuple[Frame, ...]:
        """The forward user stack of the autograd node running now (empty outside backward)."""
        node = _current_node()
        if node is None:
            return ()
        sequence_nr = _node_sequence_nr(node)
        if sequence_nr == tc.ACCUMULATE_GRAD_SEQUENCE_NR:
            return self._backward_stack
        return self._site_of_node.get(sequence_nr, ())

    def on_side_stream(self) -> bool:
        """Whether the current simulated CUDA stream is not the default one (FSDP2's copy-in streams)."""
        api = getattr(self._tracker, "stream_api", None)
        return api is not None and api.current_stream() is not api.default_stream

    def scheduled(self, func: Any, event: Event, args: tuple, kwargs: dict, out: Any) -> None:
        """Put an op that runs a kernel, a collective or a wait on the two-stream schedule."""
        collective = event.kind == "collective"
        written = self._written.get(func)
        if written is None:  # the arguments the op writes, by its schema: decided once per overload
            written = self._written[func] = tc.written_arguments(func)
        writes = [out, [args[i] for i in written[0] if i < len(args)], [kwargs[k] for k in written[1] if k in kwargs]]
        index = self.overlap.op(event.estimate_seconds, (args, kwargs), writes, collective, self.on_side_stream())
        if index is not None:
            self._overlap_events.append(len(self.events) if len(self.events) < self.max_events else None)

    def overlap_finished(self) -> None:
        """End the schedule: each kept collective event gets its exposed time."""
        if self.overlap is None:
            return
        self.overlap.finish()
        for position, exposed in zip(self._overlap_events, self.overlap.exposed):
            if position is not None:
                self.events[position] = dataclasses.replace(self.events[position], exposed_seconds=exposed)

    def keep(self, event: Event) -> None:
        if event.estimate_seconds and event.kind == "op":  # communication is summed apart
            self.estimate_seconds[event.phase] = self.estimate_seconds.get(event.phase, 0.0) + event.estimate_seconds
        if len(self.events) < self.max_events:
            self.events.append(event)
        elif event.kind == "op":
            self.dropped_ops[event.phase] = self.dropped_ops.get(event.phase, 0) + 1
            self.dropped_flops += event.flops or 0
        elif event.kind == "call":  # collectives keep their own count
            self.dropped_calls += 1

    @property
    def dropped(self) -> int:
        return sum(self.dropped_ops.values()) + self.dropped_calls

    def start(self, boundary: Any = None) -> None:
        """Record from now on. `boundary`: the code object of the frame making the traced call."""
        self._user_stacks.boundary = boundary
        self.recording = True
        self._last_sequence_nr = tc.sequence_nr()
        self.modules.install()
        if self._closure_hook is None:
            self._closure_hook = register_optimizer_step_pre_hook(self._closures_as_written)

    def stop(self) -> None:
        self.recording = False
        self.hazards.finish()
        self.modules.uninstall()
        if self._closure_hook is not None:
            self._closure_hook.remove()
            self._closure_hook = None

    def _closures_as_written(self, optimizer: Any, args: tuple, kwargs: dict) -> Optional[tuple[tuple, dict]]:
        """`optimizer.step(closure)` (LBFGS, Lightning's automatic optimization) runs the forward and
        backward inside the Optimizer.step region: the closure's ops are phase forward/backward,
        as they would be outside it, and only the update itself is phase optimizer."""
        if callable(kwargs.get("closure")):
            return args, {**kwargs, "closure": self._outside_optimizer(kwargs["closure"])}
        if len(args) > 1 and callable(args[1]):
            return (args[0], self._outside_optimizer(args[1]), *args[2:]), kwargs
        return None

    def _outside_optimizer(self, closure: Any) -> Any:
        def closure_outside_optimizer(*args: Any, **kwargs: Any) -> Any:
            depth, self._optimizer_depth = self._optimizer_depth, 0
            try:
                return closure(*args, **kwargs)
            finally:
                self._optimizer_depth = depth

        return closure_outside_optimizer

    # -- phase ---------------------------------------------------------------------------------
    def _current_phase(self) -> str:
        if self._optimizer_depth:
            return "optimizer"
        if self._in_backward:
            return "backward"
        return "forward"

    # -- names and metadata (cached: the same few ops and shapes repeat thousands of times) ----------
    def op_name(self, func: Any) -> str:
        name = self._op_names.get(func)
        if name is None:
            name = self._op_names[func] = str(func)
            if tc.is_bookkeeping_op(func):
                self.bookkeeping_ops.add(name)
        return name

    def call_name(self, func: Any) -> Optional[str]:
        """The public name of an API call, or None when it is not worth recording."""
        try:
            return self._call_names[func]
        except KeyError:
            pass
        except TypeError:  # unhashable callables: name them each time
            return self._compute_call_name(func)
        name = self._call_names[func] = self._compute_call_name(func)
        return name

    @staticmethod
    def _compute_call_name(func: Any) -> Optional[str]:
        if isinstance(func, tc.OP_OBJECT_TYPES):
            # An op object called from Python is torch's own plumbing (prim.device from FakeTensor's
            # device checks of `_foreach_*` ops inside the dispatch mode, profiler ops of
            # record_function): the dispatch mode records real ops, and these are no API call.
            return None
        if isinstance(func, _DESCRIPTOR_WRAPPERS) and getattr(func, "__name__", "") in ("__get__", "__set__"):
            return None
        try:
            name = resolve_name(func)
        except Exception:
            name = None
        if name is None:
            name = f"{getattr(func, '__module__', None) or 'torch'}.{getattr(func, '__qualname__', repr(func))}"
        last = name.rsplit(".", 1)[-1]
        if last in _METADATA_METHODS or last in ("__get__", "__set__"):
            return None
        if last.startswith("_") and not last.startswith("__"):
            return None  # private helpers (Tensor._version, ...)
        return name

    def meta(self, t: torch.Tensor) -> TensorMeta:
        key = (t.dtype, t.shape, _tensor_device(t))
        found = self._metas.get(key)
        if found is None:
            found = self._metas[key] = TensorMeta(str(key[0])[6:], tuple(key[1]), str(key[2]))
        return found

    def placed(self, start: int, out: Any) -> None:
        """A call returned `out`: when it is a DTensor, the latest op since event `start` that made its
        local shard says how the shard lies on the mesh (placements, global shape)."""
        layout = tc.dtensor_layout(out)
        if layout is None:
            return
        local, placements, global_shape = layout
        meta = self.meta(local)
        events = self.events
        for index in range(len(events) - 1, start - 1, -1):
            event = events[index]
            if event.kind == "op" and event.outputs and event.outputs[0] == meta:
                placed = dataclasses.replace(meta, placements=placements, global_shape=global_shape)
                events[index] = dataclasses.replace(event, outputs=(placed,) + event.outputs[1:])
                return

    def handed_back(self, local: Any, dtensor: Any) -> None:
        """`dtensor.to_local()` returned `local`, a plain tensor holding only this rank's shard: it, the
        view that made it, and what shape-keeping ops make from it show as `local` shards."""
        layout = tc.dtensor_layout(dtensor)
        if layout is None or not isinstance(local, _Tensor):
            return
        _, placements, global_shape = layout
        plain = self.meta(local)
        shard = dataclasses.replace(plain, placements=placements, global_shape=global_shape, local=True)
        self._local_shards[local] = shard
        self._handed_back = True
        events = self.events
        for index in range(len(events) - 1, max(len(events) - 4, -1), -1):  # to_local's view, its last op
            event = events[index]
            if event.kind == "op" and event.outputs and event.outputs[0] == plain:
                events[index] = dataclasses.replace(event, outputs=(shard,) + event.outputs[1:])
                return

    def _local_shard_of(self, args: tuple, out: Any, meta: TensorMeta) -> Optional[TensorMeta]:
        """`out`'s meta as a local shard when an input is one of the same shape (relu of a column-parallel
        output is a shard too), or `out` is a view of one whose sharded dimension the view keeps or
        splits (trace/ranks.py shard_through_view: heads out of a column-parallel output); None otherwise."""
        for value in args:
            if isinstance(value, _Tensor):
                shard = self._local_shards.get(value)
                if shard is None or shard.placements is None or shard.global_shape is None:
                    continue
                placements, global_shape = shard.placements, shard.global_shape
                if shard.shape != meta.shape:
                    if tc.storage_key(value) != tc.storage_key(out):  # not a view: its own shape only
                        continue
                    through = shard_through_view(
                        placements, global_shape, tuple(value.shape), value.stride(), tuple(out.shape), out.stride()
                    )
                    if through is None:
                        continue
                    placements, global_shape = through
                placed = dataclasses.replace(meta, placements=placements, global_shape=global_shape, local=True)
                self._local_shards[out] = placed
                return placed
        return None

    def metas(self, values: Any) -> tuple[TensorMeta, ...]:
        found: list[TensorMeta] = []
        for v in values:
            if isinstance(v, _Tensor):
                found.append(self.meta(v))
            elif isinstance(v, (list, tuple)):
                for w in v:
                    if isinstance(w, _Tensor):
                        found.append(self.meta(w))
        return tuple(found)


# Event is a frozen dataclass: its generated __init__ sets each of its 19 fields through
# object.__setattr__ (about 3 µs an event on a quiet machine, 6x a dict), and a trace makes one per
# op and per call. `_event` makes the same object directly: the fields in declaration order, the
# defaults of those not given (tests/test_cost_overhead.py compares it with Event(...)).
_EVENT_FIELDS = {f.name: f.default for f in dataclasses.fields(Event)}
_object_new = object.__new__
_object_setattr = object.__setattr__


def _event(fields: dict[str, Any]) -> Event:
    values = _EVENT_FIELDS.copy()
    values.update(fields)
    event = _object_new(Event)
    _object_setattr(event, "__dict__", values)
    return event


def _innermost(stack: Optional[tuple[Frame, ...]]) -> tuple[Optional[str], Optional[int]]:
    if stack:
        inner = stack[-1]
        return inner.file, inner.line
    return None, None


def _apply_formula(formula: Any, args: tuple, kwargs: dict, out: Any) -> Optional[int]:
    if formula is None:
        return None
    try:
        return int(formula(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not cover this overload's arguments
        return None


def _estimate(
    rec: Recorder, flops: Optional[int], moved: int, inputs: tuple[TensorMeta, ...], outputs: tuple[TensorMeta, ...]
) -> float:
    """The op's roofline time on the selected GPU (atenlens/cost.py). Ops that touch no tensor of the
    trace's device cost nothing there; a copy between host and device moves its bytes over PCIe."""
    device_type = rec.device_type
    on_device = on_host = False
    dtype = None
    for meta in inputs + outputs:
        if meta.device.startswith(device_type):
            on_device = True
        else:
            on_host = True
        if dtype is None and meta.dtype.startswith(("float", "bfloat")):
            dtype = meta.dtype
    if not on_device:
        return 0.0
    dtype = dtype or "float32"
    tf32 = bool(flops) and dtype == "float32" and torch.backends.cuda.matmul.allow_tf32
    return op_seconds(rec.gpu, flops, moved, dtype, tf32, host_copy=on_host and device_type != "cpu")


def _run(rec: Recorder, func: Any, args: tuple, kwargs: dict) -> Any:
    try:
        out = rec.run_op(func, args, kwargs)
    except tc.DataDependentOutputException:
        # `.item()`, `bool(t)`, `float(t)` on a fake tensor have no value. The device's sync handling
        # (run_op) answers them on simulated CUDA; anywhere else the trace's values do.
        if func is torch.ops.aten._local_scalar_dense.default:
            known, value = rec.values.scalar(args[0])
            return value if known else rec.values.assume_scalar(args[0])
        raise
    except tc.DynamicOutputShapeException:
        # A data-dependent size no handler answers (`bincount`, ...): known when its inputs are, on
        # the CPU (a cuda input would be a sync that no handler reports: left to fail loudly).
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, _Tensor)]
        if inputs and all(_tensor_device(t).type == "cpu" for t in inputs):
            out = rec.values.known_fakes(func, args, kwargs, _tensor_device(inputs[0]))
            if out is not None:
                return out
        raise
    rec.values.after_op(func, args, kwargs, out)  # real shadows of small known tensors follow the op
    return out


_UNSEEN = object()


class _OpRecorder(tc.TorchDispatchMode):
    # higher-order operators in eager code (torchao's `out_dtype` int8 matmul) come here too
    supports_higher_order_operators = True

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self._composites: dict[Any, Any] = {}  # op -> its CompositeImplicitAutograd kernel or None

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        if func is _PRIM_DEVICE:  # first: about two of these per op (torch_compat.fake_device_answer)
            device = _fake_device_answer(args)
            if device is not None:
                return device
        kwargs = kwargs or {}
        rec = self.recorder
        namespace = func.namespace
        if namespace == "higher_order":
            return tc.run_higher_order(self, func, args, kwargs)
        if namespace == "prim" or rec._hidden:  # prim.device & co: metadata queries of FakeTensor's device policy
            return func(*args, **kwargs)
        for t in types:
            if t is not _FakeTensor and t is not _Tensor and t is not _Parameter:
                # A tensor subclass with its own __torch_dispatch__ (torchao's Float8TrainingTensor,
                # DTensor): let it run first; the ops it issues come back here with this mode still on,
                # so the trace shows what the GPU runs (`_scaled_mm`), not the wrapper's `mm`.
                return NotImplemented
        if namespace == "profiler":
            return self._profiler_op(func, args, kwargs)
        decompose = self._composites.get(func, _UNSEEN)
        if decompose is _UNSEEN:
            decompose = self._composites[func] = tc.composite_implicit_kernel(func)
        if decompose is not None:
            # only under inference mode does a composite op (linear, matmul, conv2d) come here: run its
            # composite kernel with this mode on, so the ops a GPU runs (addmm, convolution) are recorded
            # and handled, with their FLOPs
            with self:
                out = decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        if not rec.recording:
            out = _run(rec, func, args, kwargs)
            rec.memory.outputs(out, rec._current_phase())
            return out

        memory = rec.memory
        node = _current_node()
        if node is not None:
            sequence_nr = _node_sequence_nr(node)
            stack: Optional[tuple[Frame, ...]]
            if sequence_nr == tc.ACCUMULATE_GRAD_SEQUENCE_NR:
                stack = rec._backward_stack
            else:
                stack = rec._site_of_node.get(sequence_nr)
            thread = _thread_id()
            if stack is None:
                # a node that an earlier backward op created (create_graph=True: a gradient penalty's
                # double backward), numbered by this thread's own counter
                stack = rec._site_of_backward_node.get((thread, sequence_nr))
            file, line = _innermost(stack)
            memory.op_started(file, line)
            # autograd numbers an op's node before the op reaches this mode: the nodes made since the
            # last backward op on this thread are this op's (there are some only with create_graph=True)
            now = _sequence_nr()
            if stack:
                nodes = rec._site_of_backward_node
                for created in range(rec._last_backward_nr.get(thread, max(now - 1, 0)), now):
                    nodes[(thread, created)] = stack
            out = _run(rec, func, args, kwargs)
            rec._last_backward_nr[thread] = _sequence_nr()
            node_name = node.name()
            if node_name.startswith("torch::autograd::"):  # "torch::autograd::AccumulateGrad"
                node_name = node_name[len("torch::autograd::") :]
            memory.node_names[sequence_nr] = node_name
            phase = "backward"
            module = None
        else:
            stack = rec.user_stack(_getframe(1))
            now = _sequence_nr()
            if now > rec._last_sequence_nr:
                # the autograd node(s) this op created: their backward ops belong to this stack
                site_of_node = rec._site_of_node
                for sequence_nr in range(rec._last_sequence_nr, now):
                    site_of_node[sequence_nr] = stack
            phase = rec._current_phase()
            if phase == "backward" and not stack:
                stack = rec._backward_stack
            file, line = _innermost(stack)
            memory.op_started(file, line)
            out = _run(rec, func, args, kwargs)
            rec._last_sequence_nr = _sequence_nr()
            node_name = None
            module = rec.modules.current

        outputs: tuple[TensorMeta, ...]
        if isinstance(out, _Tensor):
            outputs = (rec.meta(out),)
            if rec._handed_back:  # only once a DTensor handed back a local shard (tensor parallel)
                shard = rec._local_shard_of(args, out, outputs[0])
                if shard is not None:
                    outputs = (shard,)
        elif isinstance(out, (tuple, list)):
            outputs = rec.metas(out)
        else:
            outputs = ()
        allocated = memory.outputs(out, phase, file, line)
        memory.op_finished()
        inputs = rec.metas(args)
        described = rec._described.get(func)
        if described is None:  # name and FLOP formula: decided once per overload
            described = rec._described[func] = (rec.op_name(func), rec.flop_formulas.get(func.overloadpacket))
        name, formula = described
        flops = _apply_formula(formula, args, kwargs, out) if formula is not None else None
        moved = bytes_moved(func, args, kwargs, out) if rec.cost else 0
        event = _event(
            {
                "kind": "op",
                "name": name,
                "phase": phase,
                "file": file,
                "line": line,
                "stack": stack or (),
                "outputs": outputs,
                "inputs": inputs,
                "flops": flops,
                "node": node_name,
                "module": module,
                "bytes_allocated": allocated,
                "bytes_moved": moved,
                "estimate_seconds": _estimate(rec, flops, moved, inputs, outputs)
                if rec.cost and (moved or flops)
                else 0.0,
            }
        )
        if namespace in _COLLECTIVE_NAMESPACES and rec.collectives is not None:
            event = rec.collectives.event(event, func, args, kwargs, out)
            if event.kind == "collective":
                rec.hazards.collective(event, args, kwargs, out, _getframe(1), rec.collectives.flattened(event))
        elif rec.hazards.reduced:
            rec.hazards.op(func, args, out, stack)
        if rec.overlap is not None and (event.estimate_seconds or namespace in _COLLECTIVE_NAMESPACES):
            rec.scheduled(func, event, args, kwargs, out)
        if rec.op_extras is not None:  # the symbolic pass of named dims (trace/shapes.py)
            rec.op_extras(len(rec.events), func, args, kwargs, out)
        rec.keep(event)
        return out

    def _profiler_op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        rec = self.recorder
        out = func(*args, **kwargs)
        # record_function regions nest (they are context managers), and the handle passed to the
        # exit op is a fresh Python wrapper, so a stack of "is this an optimizer region" suffices.
        if func is tc.RECORD_FUNCTION_ENTER:
            is_optimizer = isinstance(args[0], str) and args[0].startswith("Optimizer.")
            if is_optimizer and rec.recording and args[0].startswith("Optimizer.step#"):
                rec.optimizer_steps += 1
            rec._record_functions.append(is_optimizer)
            rec._optimizer_depth += is_optimizer
        elif func is tc.RECORD_FUNCTION_EXIT and rec._record_functions:
            rec._optimizer_depth -= rec._record_functions.pop()
        return out


class _CallRecorder(TorchFunctionMode):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        rec = self.recorder
        run_call = rec.run_call
        if _getframe(1).f_code is _PARAMETER_NEW_CODE:
            # nn.Parameter(data) being made: bookkeeping, not recorded; the memory model learns
            # which storage is a parameter's
            recording, rec.recording = rec.recording, False
            try:
                out = run_call(func, args, kwargs)
            finally:
                rec.recording = recording
            rec.memory.parameter_created(out)
            return out
        if not rec.recording:
            return run_call(func, args, kwargs)
        name = rec.call_name(func)
        stack: tuple[Frame, ...] = ()
        start = len(rec.events)
        if name is not None:
            stack = rec.user_stack(_getframe(1))
            file, line = _innermost(stack)
            is_backward = func in _BACKWARD_CALLS
            rec.keep(
                _event(
                    {
                        "kind": "call",
                        "name": name,
                        "phase": "backward" if is_backward else rec._current_phase(),
                        "file": file,
                        "line": line,
                        "stack": stack,
                    }
                )
            )
            if is_backward:
                previous = rec._backward_stack
                rec._backward_stack = stack
                rec._in_backward += 1
                try:
                    return run_call(func, args, kwargs)
                finally:
                    rec._in_backward -= 1
                    rec._backward_stack = previous
                    rec.memory.scan_parameters()  # the new .grads are gradients
        out = run_call(func, args, kwargs)
        if isinstance(out, _Tensor) and type(out) is not _FakeTensor and type(out) is not _Parameter:
            rec.placed(start, out)
        return out
