"""Sparse COO tensors keep their entries through `clone`.

FakeTensorMode clones a sparse COO tensor through its meta kernel, which makes an empty one (no
entries, `_nnz() == 0`). Autograd clones a sparse gradient when it stores it (`nn.Embedding` or
`nn.EmbeddingBag` with `sparse=True`), so every sparse gradient of a trace was empty, and
`torch.optim.SparseAdam` (and the sparse branches of SGD and Adagrad) skipped the update as "no
entries": no optimizer ops, no memory. The clone here is what a GPU makes: a sparse tensor of the
same size, coalesced state and number of entries, with copies of its indices and values.

`coalesce()` (SparseAdam coalesces every gradient) keeps one entry per distinct index: a size that
depends on the indices. Known indices give it — a sparse tensor made from indices whose values the
trace knows (an embedding's gradient of known token ids) carries them through these handlers —;
unknown ones take half the entries (AL906). On a GPU
the kernel learns the count on the host after sorting the indices (thrust's `unique_by_key`
returns it), so a cuda coalesce is a sync (AL100). `dense.to_sparse()` is the same kind of count
(its nonzero positions), made here as a GPU makes it.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall
from atenlens.trace.gpu.syncs import WAITS
from atenlens.trace.gpu.tracker import tensor_label
from atenlens.trace.torch_compat import real_tensors, sparse_entries, sparse_indices, sparse_values

aten = torch.ops.aten
_INDICES = "_atenlens_sparse_indices"  # the real indices of a sparse tensor, where the trace knows them


def _known_indices(call: InterceptedCall, sparse: torch.Tensor) -> Optional[torch.Tensor]:
    found: Optional[torch.Tensor] = sparse.__dict__.get(_INDICES)
    return found if found is not None else call.tracker.values.known(sparse_indices(sparse))


def _keep(sparse: torch.Tensor, indices: Optional[torch.Tensor]) -> torch.Tensor:
    if indices is not None:
        sparse.__dict__[_INDICES] = indices
    return sparse


def _coo(
    shape: torch.Size, sparse_dim: int, indices: torch.Tensor, values: torch.Tensor, coalesced: bool
) -> torch.Tensor:
    """A sparse COO tensor of `shape` from its indices and values, on their device and dtype."""
    return aten._sparse_coo_tensor_with_dims_and_tensors(
        sparse_dim,
        len(shape) - sparse_dim,
        list(shape),
        indices,
        values,
        dtype=values.dtype,
        layout=torch.sparse_coo,
        device=values.device,
        is_coalesced=coalesced,
    )


@DISPATCH_HANDLERS.register(aten._sparse_coo_tensor_with_dims_and_tensors.default)
def sparse_coo_tensor(call: InterceptedCall) -> Any:
    """Made from indices the trace knows: the result remembers them."""
    out = call.run()
    indices = call.arg(4, "indices")
    return _keep(out, call.tracker.values.known(indices)) if isinstance(indices, torch.Tensor) else out


@DISPATCH_HANDLERS.register(aten.clone.default)
def clone(call: InterceptedCall) -> Any:
    source = call.args[0]
    if not isinstance(source, torch.Tensor) or source.layout != torch.sparse_coo:
        return call.run()
    copy = _coo(
        source.shape,
        source.sparse_dim(),
        aten.clone.default(sparse_indices(source)),
        aten.clone.default(sparse_values(source)),
        source.is_coalesced(),
    )
    return _keep(copy, _known_indices(call, source))


@DISPATCH_HANDLERS.register(aten._coalesce.default)
def coalesce(call: InterceptedCall) -> Any:
    source = call.args[0]
    indices, values = sparse_indices(source), sparse_values(source)
    known = _known_indices(call, source)
    if known is not None:
        with real_tensors():
            known = known.unique(dim=1) if known.numel() else known  # sorted, as coalesce leaves them
        entries = int(known.shape[1])
    else:
        entries = call.tracker.values.assume_size(
            sparse_entries(source), f"the distinct indices of `coalesce()` of {tensor_label(source)}"
        )
    if source.device.type == "cuda":
        call.tracker.sync(
            f"`coalesce()` of sparse {tensor_label(source)} counts its distinct indices on the host: {WAITS}",
            str(call.target),
        )
    coalesced = _coo(
        source.shape,
        source.sparse_dim(),
        torch.empty((source.sparse_dim(), entries), dtype=indices.dtype, device=source.device),
        values.new_empty((entries, *values.shape[1:])),
        True,
    )
    return _keep(coalesced, known)


@DISPATCH_HANDLERS.register(aten.sparse_mask.default)
def sparse_mask(call: InterceptedCall) -> Any:
    """`dense.sparse_mask(mask)`: the dense tensor's values at the mask's entries, a sparse tensor
    with the mask's indices (the meta kernel has no sparse CUDA output)."""
    dense, mask = call.args[0], call.args[1]
    if dense.layout != torch.strided or mask.layout != torch.sparse_coo:
        return call.run()
    indices = sparse_indices(mask)
    values = dense.new_empty((sparse_entries(mask), *dense.shape[mask.sparse_dim() :]))
    masked = _coo(mask.shape, mask.sparse_dim(), aten.clone.default(indices), values, mask.is_coalesced())
    return _keep(masked, _known_indices(call, mask))


@DISPATCH_HANDLERS.register(aten.add_.Tensor)
def add_(call: InterceptedCall) -> Any:
    """`dense.add_(sparse)` (SparseAdam's and sparse SGD's update) writes the sparse entries into the
    dense tensor in place; fake tensors have no kernel for a sparse operand on cuda."""
    other = call.args[1] if len(call.args) > 1 else call.kwargs.get("other")
    if not isinstance(other, torch.Tensor) or other.layout != torch.sparse_coo:
        return call.run()
    dense = call.args[0]
    if dense.layout != torch.strided or dense.shape != other.shape:
        return call.run()
    return dense


@DISPATCH_HANDLERS.register(aten._embedding_bag_backward.default)
def embedding_bag_backward(call: InterceptedCall) -> Any:
    """The sparse gradient of `nn.EmbeddingBag(sparse=True)` has one entry per looked-up index, in
    order: its indices are the bag's indices (without a padding index), known when the ids are."""
    out = call.run()
    sparse, padding_idx = call.arg(9, "sparse"), call.arg(11, "padding_idx", -1)
    if not sparse or padding_idx is None or padding_idx >= 0 or not isinstance(out, torch.Tensor):
        return out
    known = call.tracker.values.known(call.arg(1, "indices"))
    if known is None or out.layout != torch.sparse_coo or sparse_entries(out) != known.numel():
        return out
    with real_tensors():
        return _keep(out, known.reshape(1, -1).to(torch.int64))


@DISPATCH_HANDLERS.register(aten._to_sparse.default, aten._to_sparse.sparse_dim)
def dense_to_sparse(call: InterceptedCall) -> Any:
    """`dense.to_sparse()` (COO): one entry per nonzero position of the sparse dims, a count that
    depends on the data (FakeTensorMode has no kernel for it: on cuda it tried a real CUDA
    allocation and ended the trace). The kernel finds the entries with `nonzero`, so on cuda the
    count comes back to the host: a sync. Known data gives the count and the indices, unknown data
    half the positions (AL906)."""
    dense = call.args[0]
    layout = call.kwargs.get("layout")
    if dense.layout != torch.strided or (layout is not None and layout != torch.sparse_coo):
        return call.run()
    sparse_dim = (
        int(call.arg(1, "sparse_dim", dense.dim())) if call.target is aten._to_sparse.sparse_dim else dense.dim()
    )
    dense_dim = dense.dim() - sparse_dim
    known = call.tracker.values.known(dense)
    indices_value: Optional[torch.Tensor] = None
    if known is not None:
        with real_tensors():
            flat = known.reshape(*known.shape[:sparse_dim], -1) if dense_dim else known
            occupied = flat.ne(0).any(-1) if dense_dim else flat.ne(0)
            indices_value = occupied.nonzero().t().contiguous()
        entries = int(indices_value.shape[1])
    else:
        positions = 1
        for size in dense.shape[:sparse_dim]:
            positions *= int(size)
        entries = call.tracker.values.assume_size(
            positions, f"the nonzero entries of `to_sparse()` of {tensor_label(dense)}"
        )
    if dense.device.type == "cuda":
        call.tracker.sync(
            f"`to_sparse()` of {tensor_label(dense)} counts its nonzero entries on the host: {WAITS}", str(call.target)
        )
    sparse = _coo(
        dense.shape,
        sparse_dim,
        torch.empty((sparse_dim, entries), dtype=torch.long, device=dense.device),
        dense.new_empty((entries, *dense.shape[sparse_dim:])),
        True,
    )
    return _keep(sparse, indices_value)
