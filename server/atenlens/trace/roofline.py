"""What each op costs on the selected GPU: the bytes it moves, priced by atenlens/cost.py's roofline.

Bytes moved = the bytes of every tensor argument the op reads plus every output it writes, counting
only the elements a tensor really spans: a broadcast dimension (stride 0, `expand`) counts once.
Views and metadata ops (`view`, `t`, `transpose`, `detach`, `expand`, ...) and allocations without a
fill (`empty*`) move nothing; ops that only write their first argument (`copy_`, `zero_`, `fill_`)
do not read it, and the `*_like` / `new_*` constructors (`zeros_like`: AdamW's state) take their
tensor argument for its shape and dtype only: they write their output and read nothing. Also here: FLOP
formulas for ops torch's flop counter lacks and that matter for cost
(`aten._grouped_mm`, the grouped GEMMs of mixture-of-experts layers), registered with torch's own
`register_flop_formula`, so the recorder's FLOPs and torch's FlopCounterMode agree.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import flop_registry, register_flop_formula

aten = torch.ops.aten
_Tensor = torch.Tensor

_FREE_PACKETS = frozenset(
    {
        aten.empty,
        aten.empty_like,
        aten.empty_strided,
        aten.new_empty,
        aten.new_empty_strided,
        aten.detach,
        aten.alias,
        aten.lift_fresh,
        aten.lift_fresh_copy,
        aten._unsafe_view,
        aten.view,
        aten.t,
        aten.transpose,
        aten.permute,
        aten.expand,
        aten.squeeze,
        aten.unsqueeze,
        aten.as_strided,
        aten.split,
        aten.split_with_sizes,
        aten.unbind,
        aten.select,
        aten.slice,
        aten.chunk,
        aten.diagonal,
        aten.unfold,
        aten._reshape_alias,
        aten.set_,
        aten.resize_,
        aten.is_pinned,
        aten._local_scalar_dense,
        aten.sym_size,
        aten.sym_stride,
        aten.sym_numel,
        aten.sym_storage_offset,
    }
)
_WRITE_ONLY_FIRST = frozenset(
    {aten.copy_, aten.zero_, aten.fill_, aten.normal_, aten.uniform_, aten.bernoulli_, aten.random_, aten.exponential_}
)
_READ_NOTHING = frozenset(
    {
        aten.zeros_like,
        aten.ones_like,
        aten.full_like,
        aten.rand_like,
        aten.randn_like,
        aten.randint_like,
        aten.new_zeros,
        aten.new_ones,
        aten.new_full,
    }
)


def _touched(t: _Tensor) -> int:
    """Bytes of the elements `t` spans: broadcast (stride-0) dimensions count once."""
    shape = t.shape
    count = 1
    if any(s == 0 for s in t.stride()):
        for size, stride in zip(shape, t.stride()):
            if stride != 0:
                count *= size
    else:
        for size in shape:
            count *= size
    return count * t.dtype.itemsize


def _tensors(values: Any, skip_first: bool = False) -> list[_Tensor]:
    found: list[_Tensor] = []
    for i, v in enumerate(values):
        if i == 0 and skip_first:
            continue
        if isinstance(v, _Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(w for w in v if isinstance(w, _Tensor))
    return found


def bytes_moved(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """Bytes an op reads from and writes to memory (see the module docstring); 0 for what it cannot
    measure (sparse and nested tensors have no strides): pricing never stops a trace."""
    try:
        return _bytes_moved(func, args, kwargs, out)
    except Exception:
        return 0


# op overload -> None (moves nothing), _WRITES_ONLY (reads no argument) or whether it skips reading
# its first argument: decided once per overload, not per op
_KIND: dict[Any, Any] = {}
_WRITES_ONLY = "writes only"


def _kind(func: Any) -> Any:
    packet = func.overloadpacket
    kind: Any
    if packet in _FREE_PACKETS or func.is_view:
        kind = None
    elif packet in _READ_NOTHING:
        kind = _WRITES_ONLY
    else:
        kind = packet in _WRITE_ONLY_FIRST
    _KIND[func] = kind
    return kind


def _bytes_moved(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    try:
        skip_first = _KIND[func]
    except KeyError:
        skip_first = _kind(func)
    if skip_first is None:
        return 0
    total = 0
    if skip_first is not _WRITES_ONLY:
        for t in _tensors(args, skip_first=skip_first):
            total += _touched(t)
        if kwargs:
            for t in _tensors(kwargs.values()):
                total += _touched(t)
    if isinstance(out, _Tensor):
        total += _touched(out)
    elif isinstance(out, (list, tuple)):
        for t in _tensors(out):
            total += _touched(t)
    return total


def _grouped_mm_flops(a_shape: Any, b_shape: Any, out_shape: Any) -> int:
    """`torch._grouped_mm(a, b, offs)`: groups of GEMMs in one kernel. 2-D x 3-D (tokens routed to
    experts), 3-D x 3-D (batched), 3-D x 2-D: every output element is a dot product of length K =
    a's last dimension. 2-D x 2-D splits K between the groups: the groups' K add up to a's K."""
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    out = 1
    for size in out_shape:
        out *= size
    return 2 * out * a_shape[-1]


if aten._grouped_mm not in flop_registry:

    @register_flop_formula(aten._grouped_mm, get_raw=False)
    def _grouped_mm_flop(a_shape: Any, b_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return _grouped_mm_flops(a_shape, b_shape, out_shape)
