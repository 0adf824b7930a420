"""The strides of size-1 dimensions as ATen's C++ gives them, for views and elementwise results.

A dimension of size 1 may have any stride; ATen's C++ and FakeTensorMode's Python pick different
ones. FakeTensorMode computes `view` / `_unsafe_view` with torch's Python reshape (`_reshape_view_helper`,
which keeps a leading size-1 dimension's stride where C++'s `computeStride` takes the chunk's) and
the result of an elementwise op with torch's Python stride rule, where C++ runs TensorIterator
(whose dimension order reads the strides of size-1 dimensions too, and which gives a channels_last
result to channels_last-contiguous inputs). Those strides decide layouts that follow:
`suggest_memory_format()` reads them to tell channels_last from contiguous when the batch is 1,
so in a diffusers VAE decode at batch 1 the attention block's `transpose(-1, -2).reshape(...)`, its
residual add and its rescaling made the trace's activations channels_last where a GPU's stay
contiguous: every nearest-neighbour upsampling and convolution after it took channels_last, and each
group norm copied its input (27 `clone`s a GPU does not run in a tiled decode of nine tiles).

Here a view's result gets `computeStride`'s strides and an out-of-place elementwise op's result
gets TensorIterator's (fast setup, else the dimension order from the operands' strides), and only
where they differ from FakeTensorMode's at dimensions of size 1: those strides change no element's
address, so a mistake here can change a later layout decision but never what the tensor holds.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall
from atenlens.trace.torch_compat import op_schema

aten = torch.ops.aten


def _ints(values: Sequence[Any]) -> bool:
    return all(type(v) is int for v in values)


def _contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def view_strides(old_shape: Sequence[int], old_strides: Sequence[int], new_shape: Sequence[int]) -> Optional[list[int]]:
    """ATen's `computeStride` (aten/src/ATen/TensorUtils.cpp) for a view of a non-empty tensor."""
    if not old_shape:
        return [1] * len(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    return new_strides if view_d == -1 else None


def _non_overlapping_and_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    dims = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: strides[d])
    expected = 1
    for d in dims:
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def _contiguous_in(order: Sequence[int], shape: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's `is_contiguous` for the dimension order `order` (innermost first): size-1 dimensions
    may have any stride."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


Operand = tuple[tuple[int, ...], tuple[int, ...]]  # an input's shape and strides


def iterator_strides(operands: Sequence[Operand], shape: Sequence[int]) -> list[int]:
    """The strides TensorIterator (aten/src/ATen/TensorIterator.cpp) gives the output it allocates for
    inputs `operands` broadcast to `shape`: `compute_fast_setup_type`, else `reorder_dimensions`."""
    ndim = len(shape)
    innermost_first = list(range(ndim - 1, -1, -1))
    if all(s == tuple(shape) for s, _ in operands):
        if all(_contiguous_in(innermost_first, s, st) for s, st in operands):
            return _contiguous_strides(shape)
        if ndim == 4 and all(_contiguous_in((1, 3, 2, 0), s, st) for s, st in operands):
            n, c, h, w = (max(size, 1) for size in shape)
            return [c * h * w, 1, w * c, c]
        first = operands[0][1]
        if all(_non_overlapping_and_dense(s, st) and st == first for s, st in operands):
            return list(first)
    strides = []
    for operand_shape, operand_strides in operands:  # TensorIterator's stride_bytes, in elements: 0 where broadcast
        offset = ndim - len(operand_shape)
        row = [0] * ndim
        for i, (size, stride) in enumerate(zip(operand_shape, operand_strides)):
            row[offset + i] = 0 if size == 1 and shape[offset + i] != 1 else stride
        strides.append(row)

    def should_swap(dim0: int, dim1: int) -> int:
        for row in strides:
            s0, s1 = row[dim0], row[dim1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    perm = innermost_first  # perm[0] is the innermost dimension
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    out, step = [0] * ndim, 1
    for d in perm:
        out[d] = step
        step *= shape[d]
    return out


def _restrided(out: Any, strides: Optional[Sequence[int]]) -> Any:
    """`out` with `strides` where they differ from its own only at size-1 dimensions, else `out`."""
    if strides is None or tuple(strides) == tuple(out.stride()):
        return out
    if any(size != 1 and a != b for size, a, b in zip(out.shape, out.stride(), strides)):
        return out  # not a size-1 difference: the two rules disagree on more than this module knows
    return out.as_strided(out.shape, strides, out.storage_offset())


def _has_size_1(t: Any) -> bool:
    """Whether `t` has a dimension of size 1, asking no symbolic size (that would add a guard)."""
    return isinstance(t, torch.Tensor) and any(type(d) is int and d == 1 for d in t.shape)


def _plain(t: Any) -> bool:
    return (
        type(t).__name__ == "FakeTensor"
        and t.layout == torch.strided
        and _ints(t.shape)
        and _ints(t.stride())
        and t.numel() > 0
    )


@DISPATCH_HANDLERS.register(aten.view.default, aten._unsafe_view.default)
def view(call: InterceptedCall) -> Any:
    out = call.run()
    if not _has_size_1(out):  # only size-1 dimensions' strides are changed here
        return out
    base = call.args[0]
    if not (_plain(base) and _plain(out)):
        return out
    return _restrided(out, view_strides(base.shape, base.stride(), out.shape))


def _out_of_place_pointwise(op: Any) -> bool:
    try:
        schema = op_schema(op)
    except AttributeError:  # not an op overload
        return False
    if schema is None or torch.Tag.pointwise not in getattr(op, "tags", ()) or schema.is_mutable:
        return False
    returns = schema.returns
    return len(returns) == 1 and str(returns[0].type) == "Tensor" and returns[0].alias_info is None


@DISPATCH_HANDLERS.register_predicate("out-of-place elementwise ops", _out_of_place_pointwise)
def elementwise(call: InterceptedCall) -> Any:
    out = call.run()
    if call.kwargs or not _has_size_1(out) or not _plain(out) or out.dim() < 2:
        return out  # only size-1 dimensions' strides are changed here
    shape, strides = tuple(out.shape), tuple(out.stride())
    if strides == tuple(_contiguous_strides(shape)) and all(
        isinstance(v, torch.Tensor) and tuple(v.shape) == shape and tuple(v.stride()) == strides for v in call.args
    ):
        return out  # contiguous inputs and result: both rules agree
    operands: list[Operand] = []
    for argument, value in zip(op_schema(call.target).arguments, call.args):
        if isinstance(value, torch.Tensor):
            if not _plain(value):
                return out
            operands.append((tuple(value.shape), tuple(value.stride())))
        elif str(argument.type) == "Tensor" and isinstance(value, (int, float, bool)):
            operands.append(((), ()))  # a wrapped number: a 0-dim operand, as TensorIterator sees it
    if not operands or tuple(torch.broadcast_shapes(*(s for s, _ in operands))) != shape:
        return out
    return _restrided(out, iterator_strides(operands, shape))
