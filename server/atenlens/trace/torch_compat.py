"""Every private torch API the engine relies on lives here, each with the reason it is needed.

torch 2.13 is the version measured (docs and /shared probes); when a later torch moves one of these,
this is the one file to change. Public torch APIs are used directly elsewhere.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any, Callable, Iterator, Optional, cast

import torch
import torch.utils
from torch._C._autograd import _get_sequence_nr  # noqa: F401  (re-exported: thread-local autograd node counter)
from torch._subclasses.fake_tensor import (  # noqa: F401  (re-exported for the engine)
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401

# the leaves of nested tuples / lists / dicts of an op's arguments, as torch's own modes walk them
from torch.utils._pytree import tree_leaves  # noqa: F401  (re-exported)

# the iterator of a DataLoader without workers (trace/dataloader.py runs a loader's workers this way)
from torch.utils.data.dataloader import _SingleProcessDataLoaderIter as SingleProcessDataLoaderIter  # noqa: F401

# The autograd node running on this thread (None outside backward). Public in spirit, private in name.
current_autograd_node: Callable[[], Any] = torch._C._current_autograd_node

# AccumulateGrad nodes carry this sequence number (UINT64_MAX): they belong to no forward op.
ACCUMULATE_GRAD_SEQUENCE_NR = 2**64 - 1

# Profiler ops that bracket `Optimizer.step` / `Optimizer.zero_grad` (torch.optim wraps both in
# record_function); under a dispatch mode they arrive as ordinary ops of namespace "profiler".
RECORD_FUNCTION_ENTER = torch.ops.profiler._record_function_enter_new.default
RECORD_FUNCTION_EXIT = torch.ops.profiler._record_function_exit._RecordFunction

# `prim.device`: what C++ code (autograd's engine above all) asks of a FakeTensor's device, about
# two per op. Under the recorder's dispatch mode each one reaches Python there first; answering it
# with FakeTensorMode's own handler (the simulated device, or meta inside a fake kernel) spares it
# a second trip through the dispatcher into FakeTensorMode, which would give the same answer.
PRIM_DEVICE = torch.ops.prim.device.default
_FAKE_DEVICE_ANSWER: Callable[[Any], Any] = torch._subclasses.fake_tensor._DISPATCH_META_HANDLERS[PRIM_DEVICE]


def fake_device_answer(args: tuple) -> Any:
    """FakeTensorMode's answer to `prim.device(args[0])` for a FakeTensor, or None when it is not one."""
    if len(args) == 1 and isinstance(args[0], FakeTensor):
        return _FAKE_DEVICE_ANSWER(args)
    return None


# An aten/prim/profiler op called as a Python object (`torch.ops.prim.device.default(t)`). torch
# itself calls them so, e.g. FakeTensor's device checks of a foreach op from inside the recorder's
# dispatch mode; a TorchFunctionMode sees those calls too.
OP_OBJECT_TYPES: tuple[type, ...] = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


def sequence_nr() -> int:
    """The next autograd node sequence number of this thread (rises by one per node created)."""
    return _get_sequence_nr()


def tensor_device(t: torch.Tensor) -> torch.device:
    """The (simulated) device of a tensor without asking the dispatcher: on a FakeTensor `.device`
    dispatches `prim.device` through every active Python mode, and the recorder reads the device
    of every input and output of every op."""
    device = getattr(t, "fake_device", None)
    return device if device is not None else t.device


def storage_key(t: torch.Tensor) -> Optional[int]:
    """An id of the storage behind `t` (shared by its views), or None when it has none."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def generator_id(generator: torch.Generator) -> int:
    """The id of a generator: the address of its C++ object (the dispatcher hands ops a new Python
    wrapper of the same generator, so `is` and `id()` do not match the user's object)."""
    return generator._cdata  # type: ignore[attr-defined]


def storage_id(storage: Any) -> int:
    """The id of an untyped storage: the address of its C++ object, the same for every view of it."""
    return storage._cdata


def node_sequence_nr(node: Any) -> int:
    """The sequence number of an autograd node: that of the forward op that created it."""
    return node._sequence_nr()


def op_schema(func: Any) -> Any:
    """The schema of an op overload (`OpOverload._schema`: arguments, returns, alias annotations)."""
    return func._schema


def written_arguments(func: Any) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The positions and names of the arguments an op writes (its schema's `Tensor(a!)`: in-place
    ops, `out=`, c10d's collectives, FSDP2's copy-in and chunk_cat)."""
    arguments = op_schema(func).arguments
    written = [(i, a) for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write]
    return tuple(i for i, a in written if not a.kwarg_only), tuple(a.name for _, a in written)


def op_name(func: Any) -> str:
    """The op's name without namespace and overload: `_allgather_base_` for `c10d._allgather_base_.default`."""
    return func._opname if hasattr(func, "_opname") else func.__name__.split(".")[0]


def import_dynamo() -> None:
    """Imports torch._dynamo now (FakeTensorMode imports it, and its import indexes every torch.cuda
    function once: trace/gpu/cuda_api.py lets it index the real ones before patching them)."""
    import torch._dynamo  # noqa: F401


def dynamo_file(name: str) -> str:
    """The path of a file of the torch._dynamo package (its graph-break registry)."""
    import torch._dynamo

    return os.path.join(os.path.dirname(torch._dynamo.__file__), name)


def compiled_original(module: torch.nn.Module) -> torch.nn.Module:
    """The module that `torch.compile(module)` wrapped: `OptimizedModule` keeps it in the private
    `_orig_mod` and has no public accessor."""
    return cast(torch.nn.Module, module._orig_mod)


# torch.cuda's private initializer, patched out while CUDA is simulated (trace/gpu/cuda_api.py)
CUDA_LAZY_INIT = "_lazy_init"


def missing_host_empty_cache(replacement: Callable[..., Any]) -> list[tuple[Any, str, Any]]:
    """The patch that gives a CPU build the private `torch._C._host_emptyCache` (torch.cuda.graph's
    `__enter__` empties the pinned-host cache), as (object, name, value); none when it has one."""
    if hasattr(torch._C, "_host_emptyCache"):
        return []
    return [(torch._C, "_host_emptyCache", replacement)]


def no_function_modes() -> Any:
    """A context in which tensor methods (`untyped_storage()`, `.grad`) skip torch function modes: the
    memory model reads tensors from optimizer and autograd hooks, where the recorder's function mode
    is active and would take each read for a call of the traced program (and charge its cost).
    `DisableTorchFunction` is private."""
    return torch._C.DisableTorchFunction()


@contextlib.contextmanager
def real_tensors() -> Iterator[None]:
    """Compute on real tensors from inside the recorder's dispatch mode (trace/values.py shadows):
    the fake mode is set aside (it would turn the inputs into fakes) and torch function modes
    are off (the recorder's function mode would see torch's calls as the user's)."""
    with unset_fake_temporarily(), torch._C.DisableTorchFunction():
        yield


def _active_fake_mode(tensor: Any) -> Optional[FakeTensorMode]:
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    return mode if mode is not None else getattr(tensor, "fake_mode", None)


def as_fake(tensor: Any) -> Any:
    """`tensor` as a fake tensor of the active fake mode (itself when it already is one, or when no
    fake mode is active)."""
    if not isinstance(tensor, torch.Tensor) or isinstance(tensor, FakeTensor):
        return tensor
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    return mode.from_tensor(tensor) if mode is not None else tensor


def _forget_constant(converter: Any, t: Any) -> None:
    """Drop FakeTensorMode's constant value of `t` and its converter's weak references to `t`."""
    mapping = converter.constant_storage_mapping
    for key, refs in list(mapping.items()):
        kept = [r for r in refs if r() is not t]
        if len(kept) == len(refs):
            continue
        if kept:
            mapping[key] = kept
        else:
            del mapping[key]
    t.constant = None


def _swap_tensors_clearing_fake_memo(original: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    # torch 2.13: nn.Module._apply always swaps FakeTensor parameters with torch.utils.swap_tensors,
    # which refuses tensors that have weak references. FakeTensorMode's meta converter keeps a
    # WeakValueDictionary memo that holds such references (nn.Parameter(fake) detaches), so
    # module.to(device) / .to(dtype) / .cuda() fail with "Couldn't swap Linear.weight".
    # The memo is only a cache: clearing it right before the swap is safe.
    # A fake made from one-element data (`nn.Parameter(torch.tensor(2.66))`: CLIP's logit_scale, a
    # learnable temperature) is also one of FakeTensorMode's "constants", and the converter keeps weak
    # references to constants (constant_storage_mapping), so the swap fails with "Couldn't swap
    # CLIPModel.logit_scale". The swapped tensors stop being constants (the mode then computes on
    # them as on any fake; their values stay known to the trace through trace/values.py).
    def swap_tensors(t1: Any, t2: Any) -> None:
        if isinstance(t1, FakeTensor) or isinstance(t2, FakeTensor):
            mode = _active_fake_mode(t1)
            if mode is not None:
                converter = mode.fake_tensor_converter
                converter.meta_converter.tensor_memo.clear()
                for t in (t1, t2):
                    if isinstance(t, FakeTensor) and t.constant is not None:
                        _forget_constant(converter, t)
        return original(t1, t2)

    swap_tensors.__wrapped__ = original  # type: ignore[attr-defined]
    return swap_tensors


def _deepcopy_fake_as_clone(original: Callable[..., Any]) -> Callable[..., Any]:
    # torch 2.13: Tensor.__deepcopy__ of a FakeTensor (e.g. BatchNorm's num_batches_tracked buffer)
    # goes through set_() of a meta storage from a cpu one and can corrupt the heap; a clone is an
    # exact fake copy with the same metadata and no storage sharing.
    def __deepcopy__(self: torch.Tensor, memo: dict) -> torch.Tensor:
        if not isinstance(self, FakeTensor):
            return original(self, memo)
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            copied = self.clone()
        if isinstance(self, torch.nn.Parameter):
            copied = torch.nn.Parameter(copied, requires_grad=self.requires_grad)
        else:
            copied.requires_grad_(self.requires_grad)
        memo[id(self)] = copied
        return copied

    __deepcopy__.__wrapped__ = original  # type: ignore[attr-defined]
    return __deepcopy__


@contextlib.contextmanager
def fake_module_fixes() -> Iterator[None]:
    """Make modules built under FakeTensorMode movable, castable and deep-copyable; restores
    torch afterwards so the process is left as it was found."""
    original_swap = torch.utils.swap_tensors
    original_deepcopy = torch.Tensor.__deepcopy__
    torch.utils.swap_tensors = _swap_tensors_clearing_fake_memo(original_swap)
    torch.Tensor.__deepcopy__ = _deepcopy_fake_as_clone(original_deepcopy)  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.utils.swap_tensors = original_swap
        torch.Tensor.__deepcopy__ = original_deepcopy  # type: ignore[method-assign]


# -- simulated CUDA (trace/device.py, trace/gpu/) -----------------------------------------------------


class NoDeviceInitFakeTensorMode(FakeTensorMode):
    """FakeTensorMode that never initializes a real device, even while torch.cuda.is_available() is
    patched to True for simulated CUDA. FakeTensorMode derives `avoid_device_init` from
    is_available(); with it False the mode would constant-fold device moves by running them for real
    (on a GPU that does not exist) and would lift cuda constants instead of keeping them fake."""

    @property
    def avoid_device_init(self) -> bool:  # type: ignore[override]
        return True


@contextlib.contextmanager
def foreach_optimizers_for_fake_tensors() -> Iterator[None]:
    """torch.optim and torch.nn.utils.clip_grad_norm_ take their foreach paths (`_foreach_*` ops, as
    real tensors do) only for tensor types in the private `_foreach_supported_types` lists; FakeTensor
    is in neither, so AdamW on fake cuda parameters would take a per-parameter loop that no GPU run
    takes, and clip_grad_norm_ one norm per gradient. Added for one trace. (Devices still decide as
    for real tensors: optimizers use foreach only on cuda, clip_grad_norm_ on cpu and cuda.)"""
    import torch.optim.optimizer as optimizer_module
    import torch.utils._foreach_utils as foreach_utils

    lists = (optimizer_module._foreach_supported_types, foreach_utils._foreach_supported_types)
    added = [types for types in lists if FakeTensor not in types]
    for types in added:
        types.append(FakeTensor)
    try:
        yield
    finally:
        for types in added:
            if FakeTensor in types:
                types.remove(FakeTensor)


@contextlib.contextmanager
def fake_tensor_tolist(replacement: Callable[[Any, Callable[[Any], Any]], Any]) -> Iterator[None]:
    """FakeTensor overrides `tolist` in Python (one `.item()` per element), so a TorchFunctionMode
    never sees `Tensor.tolist` on a fake and a 1,000-element `.tolist()` would look like 1,000 syncs
    instead of one copy. `replacement(tensor, original)` runs instead for one trace."""
    original = FakeTensor.tolist

    def tolist(self: Any) -> Any:
        return replacement(self, original)

    FakeTensor.tolist = tolist  # type: ignore[method-assign]
    try:
        yield
    finally:
        FakeTensor.tolist = original  # type: ignore[method-assign]


# Ops that return a fresh tensor header over existing memory without declaring it in their schema
# (`_unsafe_view` is a view in all but name: autograd's "unsafe" variant of `view`).
_VIEWS_BY_NAME = frozenset({"_unsafe_view"})


def is_bookkeeping_op(func: Any) -> bool:
    """An op that allocates and computes nothing: every output aliases an input without writing to
    it (views: `view`, `t`, `transpose`, `expand`, `as_strided`, `alias`, `detach`, `split`, ...), as the
    op's schema declares (`Tensor(a) self -> Tensor(a)`). Reads the private `OpOverload._schema`."""
    if getattr(func, "_opname", None) in _VIEWS_BY_NAME:
        return True
    try:
        returns = func._schema.returns
    except AttributeError:
        return False
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


@contextlib.contextmanager
def outside_trace_modes() -> Iterator[None]:
    """Run torch code as if no trace were active: every dispatch mode (the fake mode and the
    recorder's) is popped for the duration and torch function modes are off. A DeviceMesh keeps its
    rank bookkeeping in real tensors (`init_device_mesh` under fake mode fails with "rank_coords.size(0)
    must be 0 or 1"), so it is built here. `_disable_current_modes` is private."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch._C.DisableTorchFunction():
        yield


@contextlib.contextmanager
def sharding_propagation_through(hidden: Callable[[], Any]) -> Iterator[None]:
    """Run DTensor's sharding propagation inside `hidden()` (a context manager). To learn an op's output
    shape, DTensor runs the op once more on global-shape fake tensors (`ShardingPropagator.
    _propagate_tensor_meta_non_cached`, private): ops no GPU runs, which allocate nothing on any rank.
    Unhidden they would stand in the trace at the user's line with the global shapes, and be counted as
    memory. (FSDPMemTracker means to skip them by comparing fake modes, which fails under a fake mode:
    the propagation re-enters the active one.)"""
    try:
        from torch.distributed.tensor._sharding_prop import ShardingPropagator
    except ImportError:  # a torch built without distributed
        yield
        return
    original = ShardingPropagator._propagate_tensor_meta_non_cached

    def propagate(self: Any, op_schema: Any) -> Any:
        with hidden():
            return original(self, op_schema)

    ShardingPropagator._propagate_tensor_meta_non_cached = propagate  # type: ignore[method-assign]
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = original  # type: ignore[method-assign]


def dtensor_layout(t: Any) -> Optional[tuple[Any, str, tuple[int, ...]]]:
    """For a DTensor: (its local shard, its placements as `Shard(2)`, `Replicate(), Shard(1)`, its global
    shape); None for any other value. Placements and shapes are public; the local shard is `_local_tensor`."""
    local = getattr(t, "_local_tensor", None)
    placements = getattr(t, "placements", None)
    if local is None or placements is None:
        return None
    return local, ", ".join(_placement_label(p) for p in placements), tuple(t.shape)


@contextlib.contextmanager
def dtensor_handing_back(handed_back: Callable[[Any, Any], None]) -> Iterator[None]:
    """`DTensor.to_local()` (public) hands back a plain tensor that holds only this rank's shard; tensor
    parallel's styles call it on a module's output when `use_local_output=True` (ColwiseParallel's
    default). `handed_back(local, dtensor)` is told of each, so the trace can say the tensor is a shard."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed
        yield
        return
    original = DTensor.to_local

    def to_local(self: Any, *args: Any, **kwargs: Any) -> Any:
        local = original(self, *args, **kwargs)
        handed_back(local, self)
        return local

    DTensor.to_local = to_local  # type: ignore[method-assign]
    try:
        yield
    finally:
        DTensor.to_local = original  # type: ignore[method-assign]


def _placement_label(placement: Any) -> str:
    if placement.is_shard():
        return f"Shard({placement.dim})"
    if placement.is_partial():
        return f"Partial({getattr(placement, 'reduce_op', 'sum')})"
    return "Replicate()"


def local_tensor(t: Any) -> Any:
    """The tensor a rank holds for `t`: a DTensor's local shard (FSDP2's sharded parameters and their
    gradients are DTensors; private `_local_tensor`, what `to_local()` returns), else `t` itself."""
    return getattr(t, "_local_tensor", t)


@contextlib.contextmanager
def fsdp2_storage_roles(
    role: Callable[[Any, str], None], gathered: Optional[Callable[[Any, tuple, int], None]] = None
) -> Iterator[None]:
    """Tell `role(tensor, category)` which storages FSDP2 uses for what, from its parameter groups'
    private state while a trace runs:
    - before `FSDPParamGroup.wait_for_unshard`: the all-gather's flat output ("communication");
    - after it: each parameter's `all_gather_outputs`, the storages of its unsharded parameter
      ("unsharded_parameters"; FSDP2 frees and re-allocates them by resizing the storage);
    - before `post_backward`: each unsharded parameter's `.grad` ("unsharded_gradients"), which it
      then copies into the reduce-scatter's input ("communication", after it).
    `gathered(group, modules, nbytes)`: after each unshard, the parameter group, its modules and the
    bytes of its unsharded parameters."""
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
    except ImportError:  # a torch built without distributed
        yield
        return
    wait_for_unshard, post_backward = FSDPParamGroup.wait_for_unshard, FSDPParamGroup.post_backward

    def tell(tensors: Any, category: str) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                role(t, category)

    def waited(self: Any) -> Any:
        result = getattr(self, "_all_gather_result", None)
        if result is not None:
            tell([getattr(result, "all_gather_output", None)], "communication")
        out = wait_for_unshard(self)
        nbytes = 0
        for fsdp_param in self.fsdp_params:
            outputs = getattr(fsdp_param, "all_gather_outputs", ())
            tell(outputs, "unsharded_parameters")
            nbytes += sum(t.numel() * t.element_size() for t in outputs if isinstance(t, torch.Tensor))
        if gathered is not None:
            gathered(self, tuple(getattr(self, "modules", ())), nbytes)
        return out

    def reduced(self: Any, *args: Any) -> Any:
        for fsdp_param in self.fsdp_params:
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            tell([getattr(unsharded, "grad", None)], "unsharded_gradients")
        out = post_backward(self, *args)
        states = getattr(getattr(self, "comm_ctx", None), "reduce_scatter_states", None) or ()
        tell([getattr(state, "reduce_scatter_input", None) for state in states], "communication")
        return out

    FSDPParamGroup.wait_for_unshard, FSDPParamGroup.post_backward = waited, reduced  # type: ignore[method-assign]
    try:
        yield
    finally:
        FSDPParamGroup.wait_for_unshard, FSDPParamGroup.post_backward = wait_for_unshard, post_backward  # type: ignore[method-assign]


class _ChunksByIndex(Sequence[torch.Tensor]):
    """`torch.chunk(tensor, n, dim)` padded to n chunks with empty ones, as FSDP2's `_chunk_with_empty`
    returns it, except that a chunk is made when it is read: FSDP2 reads its own rank's chunk and chunk 0
    (the padded size) and drops the others. A chunk is the same view torch.chunk makes (same storage,
    offset, sizes and strides; a narrow instead of one split of n outputs)."""

    def __init__(self, tensor: torch.Tensor, num_chunks: int, dim: int) -> None:
        self._tensor, self._count, self._dim = tensor, num_chunks, dim
        size = tensor.size(dim)
        self._step = -(-size // num_chunks)
        self._made = -(-size // self._step)  # torch.chunk may return fewer than n chunks
        self._chunks: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("chunk index out of range")
        chunk = self._chunks.get(index)
        if chunk is None:
            if index < self._made:
                start = index * self._step
                length = min(self._step, self._tensor.size(self._dim) - start)
                chunk = self._tensor.narrow(self._dim, start, length)
            else:  # what _chunk_with_empty pads with
                chunk = self[0].new_empty(0)
            self._chunks[index] = chunk
        return chunk


def _foreach_groups(lists: list[Sequence[Any]], key: Callable[[int], Any]) -> Optional[list[list[int]]]:
    """The indices 0..n-1 of a foreach op's lists (all of length n) grouped by `key(i)`, in the order of
    each group's first index; None when the lists' lengths differ or a key cannot be hashed (SymInts)."""
    if not lists or any(len(items) != len(lists[0]) for items in lists):
        return None
    groups: dict[Any, list[int]] = {}
    try:
        for i in range(len(lists[0])):
            groups.setdefault(key(i), []).append(i)
    except TypeError:
        return None
    return list(groups.values())


def _spec_key(spec: Any) -> Any:
    """What DTensor's sharding propagation reads of an input's DTensorSpec (its hash key, and the
    strided-shard flag)."""
    return (spec.mesh, spec.placements, spec.shard_order, spec.tensor_meta, spec.use_strided_shard_as_shard_order)


def _contains(value: Any, kind: type) -> bool:
    if isinstance(value, kind):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains(v, kind) for v in value)
    if isinstance(value, dict):
        return any(_contains(v, kind) for v in value.values())
    return False


def foreach_strategy_by_kind(original: Callable[..., Any]) -> Callable[..., Any]:
    """A replacement for DTensor's `_expand_single_dim_strategy_to_mesh` (private) that expands a foreach
    op's strategy once per kind of list element instead of once per element.

    torch expands the strategy of a foreach op element by element (`expanded_foreach_strategy`): element
    i's strategy is a function of the op, the mesh, the i-th entries of the op's tensor lists, its other
    arguments and the i-th output's TensorMeta, nothing else (its per-element lru_cache caches the
    function that computes it, not the result, so nothing is saved). AdamW's foreach ops over a
    Llama-7B's 291 FSDP2 parameters have a few kinds of element (one per shape, dtype and placement). Here torch's own expansion runs on the op
    with one element of each kind and its strategy stands for every element of that kind (the same
    object: what reads it downstream copies what it keeps). Any other op, or lists that cannot be keyed,
    go to torch's expansion as they are."""
    from torch.distributed.tensor._op_schema import OpSchema, OpSpec, OpStrategy, TupleStrategy

    def element_key(child: Any) -> Any:
        if not (isinstance(child, OpStrategy) and len(child.strategies) == 1):
            raise TypeError("not an input's strategy")
        spec = child.strategies[0]
        if not isinstance(spec, OpSpec) or spec.input_specs is not None or spec.redistribute_cost is not None:
            raise TypeError("not an input's strategy")
        return _spec_key(spec.output_specs)

    def expand(mesh: Any, op_schema: Any, strategy_info: Any, output_tensor_meta: Any) -> Any:
        expanded = original(mesh, op_schema, strategy_info, output_tensor_meta)
        if getattr(expanded, "__name__", "") != "expanded_foreach_strategy":
            return expanded
        args = op_schema.args_schema
        positions = [j for j, arg in enumerate(args) if isinstance(arg, TupleStrategy)]
        if any(_contains(arg, TupleStrategy) for arg in args if not isinstance(arg, TupleStrategy)):
            return expanded  # a list nested in another argument: torch's expansion
        lists = [args[j].children for j in positions]
        outputs = output_tensor_meta

        def key(i: int) -> Any:
            return (tuple(element_key(children[i]) for children in lists), None if outputs is None else outputs[i])

        if outputs is not None and (not isinstance(outputs, (list, tuple)) or len(outputs) != len(lists[0])):
            return expanded
        groups = _foreach_groups(lists, key)
        if groups is None or len(groups) == len(lists[0]):
            return expanded

        def by_kind(op: Any, args_schema: Any, kwargs_schema: Any) -> Any:
            children: list[Any] = [None] * len(lists[0])
            for indices in groups:
                first = indices[0]
                one = tuple(_one_child(arg, first) if isinstance(arg, TupleStrategy) else arg for arg in args)
                schema = OpSchema(op_schema.op, one, op_schema.kwargs_schema, schema_info=op_schema.schema_info)
                meta = None if outputs is None else [outputs[first]]
                (strategy,) = original(mesh, schema, strategy_info, meta)(op, args_schema, kwargs_schema).children
                for i in indices:
                    children[i] = strategy
            return TupleStrategy(children=children)

        return by_kind

    return expand


def _one_child(strategy: Any, index: int) -> Any:
    """A TupleStrategy of the index-th child only, its children in the same kind of sequence."""
    children = strategy.children
    return type(strategy)((children[index],) if isinstance(children, tuple) else [children[index]])


def foreach_tensor_meta_by_kind(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A replacement for `ShardingPropagator._propagate_tensor_meta_non_cached` (private) that runs a
    foreach op once per kind of list element. To learn the outputs' global shapes torch runs the op on
    fake tensors of the global shapes: a foreach op's i-th output depends only on the i-th entries of
    its lists (that is what a foreach op is), so running it on one element of each kind (the inputs'
    shape, stride, dtype and device, and the scalars of a scalar list) gives every element's TensorMeta.
    Only for `aten::_foreach_*` ops whose tensors all come in lists; anything else runs as torch runs it."""
    from torch.distributed.tensor._dtensor_spec import DTensorSpec

    def tensor_or_scalar(value: Any) -> Any:
        if isinstance(value, DTensorSpec):
            return ("tensor", value.tensor_meta, value.mesh.device_type)
        if isinstance(value, (bool, int, float, complex)):
            return (type(value), value)
        raise TypeError("not a foreach op's list entry")

    def propagate(self: Any, op_schema: Any) -> Any:
        args = op_schema.args_schema
        if not op_schema.op.name().startswith("aten::_foreach_") or _contains(op_schema.kwargs_schema, DTensorSpec):
            return original(self, op_schema)
        if any(isinstance(arg, DTensorSpec) for arg in args):  # a single tensor beside the lists
            return original(self, op_schema)
        positions = [j for j, arg in enumerate(args) if isinstance(arg, (list, tuple))]
        lists = [args[j] for j in positions]
        if not any(_contains(items, DTensorSpec) for items in lists):
            return original(self, op_schema)

        def key(i: int) -> Any:
            return tuple(tensor_or_scalar(items[i]) for items in lists)

        groups = _foreach_groups(lists, key)
        if groups is None or len(groups) == len(lists[0]):
            return original(self, op_schema)
        firsts = [indices[0] for indices in groups]
        fewer = list(args)
        for j in positions:
            fewer[j] = type(args[j])(args[j][i] for i in firsts)
        out = original(self, replace_args(op_schema, tuple(fewer)))
        if out is None:
            return None
        if not isinstance(out, (list, tuple)) or len(out) != len(groups):
            return original(self, op_schema)
        each: list[Any] = [None] * len(lists[0])
        for meta, indices in zip(out, groups):
            for i in indices:
                each[i] = meta
        return type(out)(each)

    return propagate


def replace_args(op_schema: Any, args: tuple) -> Any:
    """`op_schema` with other positional arguments (DTensor's OpSchema, private)."""
    from torch.distributed.tensor._op_schema import OpSchema

    return OpSchema(op_schema.op, args, op_schema.kwargs_schema, schema_info=op_schema.schema_info)


@contextlib.contextmanager
def spmd_setup_shortcuts() -> Iterator[None]:
    """Torch's own costs of simulating one rank of many, avoided with the same results:
    - FSDP2's `fully_shard` cuts every parameter into world-size chunks (private `_chunk_with_empty`,
      twice per parameter) to keep its own rank's: on 64 ranks, 64 fake views per call, of which two
      are read. Here the chunks are made when read (`_ChunksByIndex`).
    - DTensor's sharding propagation of a foreach op checks, for each of the list's N tensors, all of
      the op's N x k input specs for a `_StridedShard` (private `_propagate_use_strided_shard_flag`):
      N x N x k checks (AdamW's foreach ops over a Llama-7B's 291 parameters). Here the inputs are
      checked once per op; without a `_StridedShard` among them the function changes nothing (it
      returns before touching a spec), so it is skipped.
    - DTensor's sharding propagation of a foreach op expands its strategy and runs the op on global-shape
      fake tensors for every element of its lists: here once per kind of element
      (`foreach_strategy_by_kind`, `foreach_tensor_meta_by_kind`)."""
    try:
        import torch.distributed.fsdp._fully_shard._fsdp_param as fsdp_param
        import torch.distributed.tensor._sharding_prop as sharding_prop
        from torch.distributed.tensor.placement_types import _StridedShard
    except ImportError:  # a torch built without distributed
        yield
        return
    original_chunks = fsdp_param._chunk_with_empty
    original_flag = sharding_prop._propagate_use_strided_shard_flag
    original_expand = sharding_prop._expand_single_dim_strategy_to_mesh
    Propagator = sharding_prop.ShardingPropagator
    original_meta = Propagator._propagate_tensor_meta_non_cached
    checked: list[Any] = [None, None, False]  # the op schema last checked, its args, any _StridedShard

    def chunk_with_empty(tensor: torch.Tensor, num_chunks: int, dim: int) -> Any:
        if tensor.size(dim) == 0 or num_chunks < 1:
            return original_chunks(tensor, num_chunks, dim)
        return _ChunksByIndex(tensor, num_chunks, dim)

    def propagate_flag(op_strategy: Any, op_schema: Any) -> None:
        if checked[0] is not op_schema or checked[1] is not op_schema.args_schema:
            strided = any(isinstance(p, _StridedShard) for spec in op_schema.args_spec for p in spec.placements)
            checked[:] = [op_schema, op_schema.args_schema, strided]
        if checked[2]:
            original_flag(op_strategy, op_schema)

    fsdp_param._chunk_with_empty = chunk_with_empty  # type: ignore[assignment]
    sharding_prop._propagate_use_strided_shard_flag = propagate_flag
    sharding_prop._expand_single_dim_strategy_to_mesh = foreach_strategy_by_kind(original_expand)
    Propagator._propagate_tensor_meta_non_cached = foreach_tensor_meta_by_kind(original_meta)  # type: ignore[assignment]
    try:
        yield
    finally:
        fsdp_param._chunk_with_empty = original_chunks
        sharding_prop._propagate_use_strided_shard_flag = original_flag
        sharding_prop._expand_single_dim_strategy_to_mesh = original_expand
        Propagator._propagate_tensor_meta_non_cached = original_meta  # type: ignore[method-assign]
        checked[:] = [None, None, False]


def process_group_named(name: str) -> Any:
    """The ProcessGroup a functional collective names by its `group_name` argument (private resolver)."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(name)  # type: ignore[arg-type]  # GroupName is a str NewType


class _ReducerWithoutRebuild:
    """DDP's reducer, except that it never rebuilds its buckets: the rebuild (after the first
    iteration) syncs bucket indices across ranks through real tensors in C++, which fails on fakes.
    Everything else goes to the reducer itself. The buckets stay the first iteration's."""

    def __init__(self, reducer: Any) -> None:
        object.__setattr__(self, "_reducer", reducer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reducer, name)

    @staticmethod
    def _rebuild_buckets() -> bool:
        return False


class _LoggerWithoutRuntimeStats:
    """DDP's logger, except that it collects no runtime stats: they read the reducer's CUDA timer,
    which a CPU build of torch does not have (`reducer_->timer_ INTERNAL ASSERT FAILED`), and time
    nothing in a trace anyway."""

    def __init__(self, logger: Any) -> None:
        object.__setattr__(self, "_logger", logger)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)

    @staticmethod
    def set_runtime_stats_and_log() -> None:
        return None


@contextlib.contextmanager
def ddp_on_fake_tensors() -> Iterator[None]:
    """DistributedDataParallel's construction and buckets on fake tensors: its C++ cross-rank checks
    (`_verify_param_shape_across_processes`: every rank has the same parameter shapes, trivially true
    in one process; `_sync_module_states` broadcasts parameters and buffers with C++'s
    `_broadcast_coalesced`) read tensor data. The check is skipped, the broadcast runs as one
    `dist.broadcast` per tensor (so the trace sees it), and the reducer and logger are wrapped as above.
    All three names are private to torch.nn.parallel.distributed."""
    import torch.distributed as dist
    import torch.nn.parallel.distributed as ddp

    real_verify, real_sync = ddp._verify_param_shape_across_processes, ddp._sync_module_states
    real_init = ddp.DistributedDataParallel.__init__

    def sync_module_states(
        module: Any,
        process_group: Any,
        broadcast_bucket_size: int,
        src: int,
        params_and_buffers_to_ignore: Any,
        broadcast_buffers: bool = True,
    ) -> None:
        ignored = set(params_and_buffers_to_ignore or ())
        tensors = [p for name, p in module.named_parameters() if name not in ignored]
        if broadcast_buffers:
            tensors += [b for name, b in module.named_buffers() if name not in ignored]
        for t in tensors:
            dist.broadcast(t.detach(), src, group=process_group)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.reducer = _ReducerWithoutRebuild(self.reducer)
        if self.logger is not None:
            self.logger = _LoggerWithoutRuntimeStats(self.logger)

    ddp._verify_param_shape_across_processes = lambda *args, **kwargs: None
    ddp._sync_module_states = sync_module_states
    ddp.DistributedDataParallel.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield
    finally:
        ddp._verify_param_shape_across_processes, ddp._sync_module_states = real_verify, real_sync
        ddp.DistributedDataParallel.__init__ = real_init  # type: ignore[method-assign]


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """`fn` on every leaf of nested tuples / lists / dicts (torch's private pytree)."""
    from torch.utils import _pytree

    return _pytree.tree_map(fn, tree)


class _ScalarReadsAnswered(TorchDispatchMode):
    """Answers `aten._local_scalar_dense` (`.item()`, `bool(t)`) with a fixed value, which fake tensors
    cannot do. An infra mode, so that Dynamo still compiles while it is on the stack (Dynamo steps aside
    for any other dispatch mode: torch/_dynamo/convert_frame.py)."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value
        self.reads = 0

    @classmethod
    def is_infra_mode(cls) -> bool:
        return True

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.reads += 1
            return self.value
        return func(*args, **(kwargs or {}))


def scalar_reads_answered(value: Any) -> _ScalarReadsAnswered:
    return _ScalarReadsAnswered(value)


def dynamo_analysis(fn: Callable[..., Any], args: Any, kwargs: Any) -> tuple[list[Any], int, list[str]]:
    """Runs Dynamo on `fn(*args, **kwargs)` with a backend that generates no code (the graphs run as
    they are) and returns (graphs, guards, graph-break log messages). The messages are those
    `TORCH_LOGS=graph_breaks` prints ("Graph break in user code at FILE:LINE\\nGraph Break Reason: ..."),
    one per break, also for the breaks of frames Dynamo then skips (a break inside a loop), which
    `torch._dynamo.explain` does not list. The artifact logger's name and `optimize` are private."""
    import logging

    graphs: list[Any] = []
    guards: list[Any] = []
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    def backend(gm: Any, example_inputs: Any) -> Callable[..., Any]:
        graphs.append(gm)
        return gm.forward

    logger = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    handler, level, propagate = Collect(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    torch._dynamo.reset()
    # Dynamo needs a ShapeEnv for ops whose output size depends on data (nonzero, x[mask]); the trace's
    # fake mode has none, and is used here only after the traced call was recorded
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fake_mode = torch._guards.detect_fake_mode()
    shape_env = getattr(fake_mode, "shape_env", None)
    if fake_mode is not None and shape_env is None:
        fake_mode.shape_env = ShapeEnv()
    try:
        torch._dynamo.optimize(backend, nopython=False, guard_export_fn=guards.extend)(fn)(*args, **kwargs)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        if fake_mode is not None:
            fake_mode.shape_env = shape_env
        torch._dynamo.reset()
    return graphs, len(guards), messages


# -- symbolic shapes (named dims, trace/shapes.py) ---------------------------------------------------
# ShapeEnv and its symbols live in torch.fx.experimental (public in name, documented as experimental);
# what is private here: a symbol's sympy expression and hint (`SymInt.node`), the guard list
# (`ShapeEnv.guards`) and ConstantSource, the source that names a symbol without a frame.


def symbolic_shape_env(on_guard: Callable[[Any], None]) -> Any:
    """A ShapeEnv that calls `on_guard(expr)` (a sympy boolean) for each guard as it is made, from the
    frame that made it. No duck shaping: two sizes share a symbol only when the user names one."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    class _Guards(list):
        def append(self, guard: Any) -> None:
            on_guard(guard.expr)
            super().append(guard)

    env = ShapeEnv(duck_shape=False)
    env.guards = _Guards(env.guards)
    return env


def named_size(env: Any, name: str, value: int) -> Any:
    """A SymInt for a size of `value` (at least 2) that prints as torch's own symbol (`s44`); its
    sympy symbol is returned second, to map back to `name`."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    symbol = env.create_symbol(value, source=ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC)
    return env.create_symintnode(symbol, hint=value), symbol


def size_expr(size: Any) -> Any:
    """A size's sympy expression (an int stays an int); reading it makes no guard."""
    node = getattr(size, "node", None)
    return node.expr if node is not None else size


def size_hint(size: Any) -> int:
    """A size's concrete value at the given dims; reading it makes no guard (int() would guard on it
    and turn the symbol into a constant for the rest of the trace)."""
    node = getattr(size, "node", None)
    return int(node.hint) if node is not None else int(size)


def no_guards(env: Any) -> Any:
    """Comparisons of symbolic sizes answer from the given values and record no guard: for the
    trace's own measuring (FLOPs, bytes), which is no assumption of the user's program."""
    return env.suppress_guards()


@contextlib.contextmanager
def checkpoint_recompute_under(mode: Any) -> Iterator[None]:
    """Activation checkpointing recomputes its forward during backward, and torch function modes are
    off there: a mode's `__torch_function__` for `backward()` runs with the mode popped, so the
    autograd engine's snapshot of the thread's state has none (pytorch/pytorch#148023, not in torch
    2.13). The recorder's function mode picks kernels at the function level (sdpa's fused kernels), so
    the recompute would take the math path, save other tensors than the forward did, and
    `torch.utils.checkpoint` would raise CheckpointError where a GPU run trains. For one trace, both
    checkpoint flavours recompute with `mode` on (when it is not on already). Private:
    `_CheckpointFrame` (non-reentrant) and `CheckpointFunction.backward` (reentrant)."""
    import torch.utils.checkpoint as checkpoint_module

    def under_mode(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if any(m is mode for m in torch.overrides._get_current_function_mode_stack()):
                return fn(*args, **kwargs)
            with mode:
                return fn(*args, **kwargs)

        return run

    frame_class, function_class = checkpoint_module._CheckpointFrame, checkpoint_module.CheckpointFunction
    original_init, original_backward = frame_class.__init__, function_class.backward

    def frame_init(self: Any, recompute_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        original_init(self, under_mode(recompute_fn), *args, **kwargs)

    frame_class.__init__ = frame_init  # type: ignore[method-assign]
    function_class.backward = staticmethod(under_mode(original_backward))  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        frame_class.__init__ = original_init  # type: ignore[method-assign]
        function_class.backward = staticmethod(original_backward)  # type: ignore[method-assign,assignment]


def run_higher_order(mode: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """A higher-order operator met by the recorder's dispatch mode `mode` (which says it supports
    them, or torch raises): its eager implementation (the CompositeExplicitAutograd kernel, e.g.
    `out_dtype` -> `torch._int_mm` for int8 on cuda) runs with `mode` on again, so the ops it issues are
    recorded at the user's line as in an eager GPU run. One without an eager kernel is left to the
    modes below (the fake mode), unrecorded. Private: `HigherOrderOperator.py_kernels`."""
    dense = func.py_kernels.get(torch._C.DispatchKey.CompositeExplicitAutograd)
    if dense is None:
        return func(*args, **kwargs)
    with mode:
        return dense(*args, **kwargs)


def composite_implicit_kernel(func: Any) -> Optional[Callable[..., Any]]:
    """The CompositeImplicitAutograd kernel of an aten op (`aten.linear`, `aten.matmul`,
    `aten.conv2d`...), or None. Such an op reaches a dispatch mode undecomposed only where autograd's
    dispatch keys are skipped: under `torch.inference_mode()` and on inference tensors. A GPU runs its
    composite kernel there (linear is `t` + `addmm`), so the recorder runs it with its mode on to see
    those ops; the fake mode below would otherwise decompose it out of the recorder's sight. Private:
    `torch._C._dispatch_has_kernel_for_dispatch_key`, `OpOverload.decompose`."""
    if func.namespace != "aten" or not torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd"
    ):
        return None
    return func.decompose


# The functions `pack_padded_sequence` / `pad_packed_sequence` call (torch.nn.utils.rnn): private
# torch functions, the keys of trace/gpu/packed.py's handlers.
PACK_PADDED_SEQUENCE = torch._pack_padded_sequence
PAD_PACKED_SEQUENCE = torch._pad_packed_sequence


def sparse_indices(t: torch.Tensor) -> torch.Tensor:
    """The indices of a sparse COO tensor, coalesced or not (`Tensor._indices()`, private)."""
    return t._indices()


def sparse_values(t: torch.Tensor) -> torch.Tensor:
    """The values of a sparse COO tensor, coalesced or not (`Tensor._values()`, private)."""
    return t._values()


def sparse_entries(t: torch.Tensor) -> int:
    """The number of stored entries of a sparse COO tensor (`Tensor._nnz()`, private)."""
    return int(t._nnz())


def suggested_memory_format(t: torch.Tensor) -> torch.memory_format:
    """The memory format ATen's `Tensor::suggest_memory_format()` gives `t` (channels_last for
    channels-last strides), from torch's Python copy of that rule (private: torch._prims_common)."""
    from torch._prims_common import suggest_memory_format

    return suggest_memory_format(t)
