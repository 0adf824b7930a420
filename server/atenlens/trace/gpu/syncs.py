"""Handlers for host-device syncs: ops whose result the host must wait for.

A CUDA kernel launch returns at once and the host runs ahead of the GPU; anything that needs a
value computed on the GPU (a scalar, a copy to host memory, the size of a data-dependent output)
makes the host wait until the GPU has drained its queue, leaving it idle while the host catches up.
Each handler reports the sync (only for tensors on cuda: a value already on the CPU costs no GPU
wait) and returns what the program needs to run on, as the trace's values decide it
(trace/values.py: the real value where a small shadow knows it, else an assumption, noted at the line).
The host-side reads of pending non_blocking copies are in copies.py.
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace import torch_compat
from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.tracker import HazardTracker, is_cuda, tensor_label
from atenlens.trace.torch_compat import DataDependentOutputException, DynamicOutputShapeException, FakeTensor

aten = torch.ops.aten

# How the function level names what the user wrote, for messages about `_local_scalar_dense`.
_SCALAR_READERS = {
    "item": "`.item()`",
    "__bool__": "`bool()` / `if tensor:`",
    "__float__": "`float()`",
    "__int__": "`int()`",
    "__index__": "using a tensor as an index",
    "__format__": "formatting a tensor",
    "__repr__": "printing a tensor",
    "tolist": "`.tolist()`",
    "__len__": "`len()`",
}

WAITS = "the host waits until the GPU has finished all queued work"


def _run_or(call: InterceptedCall, placeholder: Any) -> Any:
    """The fake result when fake tensors know it (constants), else the placeholder."""
    try:
        return call.run()
    except (DataDependentOutputException, DynamicOutputShapeException):
        return placeholder() if callable(placeholder) else placeholder


def _is_fake(t: Any) -> bool:
    return isinstance(t, FakeTensor)


def _report_sync(call: InterceptedCall, t: torch.Tensor, message: str) -> None:
    if is_cuda(t):
        call.tracker.sync(message, str(call.target))


# -- scalars -----------------------------------------------------------------------------------------


@DISPATCH_HANDLERS.register(aten._local_scalar_dense.default)
def scalar_to_host(call: InterceptedCall) -> Any:
    t = call.args[0]
    reader = _SCALAR_READERS.get(call.tracker.current_api or "")
    if is_cuda(t):  # checked first: the optimizer reads CPU step counters hundreds of times
        what = reader or "reading a tensor's value on the host"
        _report_sync(call, t, f"{what} copies a value of cuda {tensor_label(t)} to the host: {WAITS}")
    if not _is_fake(t):
        return call.run()
    values = call.tracker.values
    known, value = values.scalar(t, reader)
    if known:
        return value
    try:
        return call.run()  # a fake that holds a constant
    except DataDependentOutputException:
        return values.assume_scalar(t, reader)


_COMPARISONS = {aten.equal.default: "`torch.equal`", aten.allclose.default: "`torch.allclose`"}


@DISPATCH_HANDLERS.register(*_COMPARISONS)
def tensors_equal(call: InterceptedCall) -> Any:
    """`torch.equal` and `torch.allclose` return a Python bool: the host reads it from the GPU."""
    a, what = call.args[0], _COMPARISONS[call.target]
    _report_sync(call, a, f"{what} returns a Python bool computed on the GPU: {WAITS}")
    known = call.tracker.values.run_known(call.target, call.args, call.kwargs)
    if known is not None:
        return known
    try:
        return call.run()
    except (DataDependentOutputException, DynamicOutputShapeException):
        call.tracker.values.note(f"took `True` for {what} of {tensor_label(a)}")
        return True


@DISPATCH_HANDLERS.register(aten._nested_tensor_from_mask_left_aligned.default)
def padding_mask_left_aligned(call: InterceptedCall) -> Any:
    """`nn.TransformerEncoder` in inference asks whether the padding mask is left-aligned before it
    packs the batch into a nested tensor: a bool read on the host. (In a trace the nested fast path
    is then not taken anyway: torch skips it while a torch function mode is active; docs/fidelity.md.)"""
    mask = call.args[1]
    _report_sync(
        call, mask, f"`nn.TransformerEncoder` checks on the host that the padding mask is left-aligned: {WAITS}"
    )
    known = call.tracker.values.run_known(call.target, call.args, call.kwargs)
    if known is not None:
        return known
    call.tracker.values.note(f"took `True` for the left alignment of padding mask {tensor_label(mask)}")
    return True


@DISPATCH_HANDLERS.register(aten._linalg_check_errors.default)
def linalg_error_check(call: InterceptedCall) -> Any:
    info = call.args[0]
    api = call.tracker.current_api
    what = f"`torch.linalg.{api.removeprefix('linalg_')}`" if api else "a torch.linalg function"
    _report_sync(
        call,
        info,
        f"{what} checks its result for errors on the host (the `info` codes of the "
        f"kernel): {WAITS}; the `_ex` variants (e.g. `torch.linalg.inv_ex`) do not",
    )
    return call.run()


# -- data-dependent output shapes -------------------------------------------------------------------
# The size comes from the trace's values (trace/values.py): the real result when every input is
# known, else an assumed size, noted at the line.


def _shape_message(what: str) -> str:
    return (
        f"{what} has a data-dependent output shape: the host waits for the GPU to compute the size "
        "before it can allocate the result"
    )


def _known_result(call: InterceptedCall, device: torch.device) -> Any:
    """The op's real result (as fakes of the real sizes) when every input is known, else None."""
    return call.tracker.values.known_fakes(call.target, call.args, call.kwargs, device)


@DISPATCH_HANDLERS.register(aten.nonzero.default)
def nonzero(call: InterceptedCall) -> Any:
    t = call.args[0]
    what = "one-argument `torch.where`" if call.tracker.current_api == "where" else "`nonzero`"
    _report_sync(call, t, _shape_message(what))
    known = _known_result(call, t.device)
    if known is not None:
        return known
    return _run_or(
        call,
        lambda: torch.empty(
            (call.tracker.values.true_count(t, t.numel(), what), t.dim()), dtype=torch.long, device=t.device
        ),
    )


def _is_mask(index: Any) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)


def _masks_as_indices(call: InterceptedCall, indices: list, what: str) -> list:
    """Replace each boolean mask by integer indices of as many elements as it selects."""
    converted: list = []
    for index in indices:
        if _is_mask(index):
            count = call.tracker.values.true_count(index, index.numel(), what)
            converted += [torch.zeros(count, dtype=torch.long, device=index.device)] * index.dim()
        else:
            converted.append(index)
    return converted


@DISPATCH_HANDLERS.register(aten.index.Tensor)
def index_with_mask(call: InterceptedCall) -> Any:
    self, indices = call.args[0], list(call.args[1])
    if not any(_is_mask(i) for i in indices):
        return call.run()
    what = "boolean-mask indexing `x[mask]`"
    _report_sync(call, self, _shape_message(what))
    known = _known_result(call, self.device)
    if known is not None:
        return known
    return _run_or(call, lambda: aten.index.Tensor(self, _masks_as_indices(call, indices, what)))


def _dispatches_to_masked_fill(self: torch.Tensor, indices: list, value: Any, accumulate: bool) -> bool:
    """What `index_put_` checks first in ATen (TensorAdvancedIndexing.cpp, canDispatchToMaskedFill):
    a one-element CPU value, exactly one boolean mask on self's device and no accumulation run as
    `self.masked_fill_(mask, value.item())` — no `nonzero`, so no sync on CUDA."""
    if accumulate or not isinstance(value, torch.Tensor) or value.numel() != 1 or value.device.type != "cpu":
        return False
    defined = [i for i in indices if i is not None]
    return len(defined) == 1 and _is_mask(defined[0]) and defined[0].device == self.device


@DISPATCH_HANDLERS.register(aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default)
def index_put_with_mask(call: InterceptedCall) -> Any:
    self, indices = call.args[0], list(call.args[1])
    if not any(_is_mask(i) for i in indices):
        return call.run()
    if _dispatches_to_masked_fill(self, indices, call.arg(2, "values"), bool(call.arg(3, "accumulate", False))):
        return _run_or(call, lambda: self if call.target is not aten.index_put.default else self.clone())
    _report_sync(
        call,
        self,
        f"boolean-mask assignment `x[mask] = v` turns the mask into indices with `nonzero` on the GPU: {WAITS}",
    )
    inplace = call.target is not aten.index_put.default
    return _run_or(call, lambda: self if inplace else self.clone())


@DISPATCH_HANDLERS.register(aten.masked_select.default)
def masked_select(call: InterceptedCall) -> Any:
    self, mask = call.args[0], call.args[1]
    _report_sync(call, self, _shape_message("`masked_select`"))
    known = _known_result(call, self.device)
    if known is not None:
        return known
    size = torch.broadcast_shapes(self.shape, mask.shape).numel()
    return _run_or(
        call,
        lambda: torch.empty(
            (call.tracker.values.true_count(mask, size, "`masked_select`"),), dtype=self.dtype, device=self.device
        ),
    )


def _unique_placeholder(
    call: InterceptedCall, what: str, return_inverse: bool, return_counts: bool, dim: Any = None
) -> tuple:
    self = call.args[0]
    known = _known_result(call, self.device)
    if known is not None:
        return known
    largest = self.shape[dim] if dim is not None else self.numel()
    size = call.tracker.values.assume_size(largest, what)
    if dim is not None:
        shape = list(self.shape)
        shape[dim] = size
        values = torch.empty(shape, dtype=self.dtype, device=self.device)
    else:
        values = torch.empty((size,), dtype=self.dtype, device=self.device)
    inverse_shape = (self.shape[dim],) if dim is not None else self.shape
    return (
        values,
        torch.empty(inverse_shape if return_inverse else (0,), dtype=torch.long, device=self.device),
        torch.empty((size,) if return_counts else (0,), dtype=torch.long, device=self.device),
    )


@DISPATCH_HANDLERS.register(aten._unique2.default)
def unique(call: InterceptedCall) -> Any:
    _report_sync(call, call.args[0], _shape_message("`unique`"))
    return _run_or(
        call,
        lambda: _unique_placeholder(
            call, "`unique`", call.arg(2, "return_inverse", False), call.arg(3, "return_counts", False)
        ),
    )


@DISPATCH_HANDLERS.register(aten.unique_dim.default)
def unique_dim(call: InterceptedCall) -> Any:
    _report_sync(call, call.args[0], _shape_message("`unique(dim=...)`"))
    return _run_or(
        call,
        lambda: _unique_placeholder(
            call,
            "`unique(dim=...)`",
            call.arg(3, "return_inverse", False),
            call.arg(4, "return_counts", False),
            call.arg(1, "dim"),
        ),
    )


@DISPATCH_HANDLERS.register(aten.unique_consecutive.default)
def unique_consecutive(call: InterceptedCall) -> Any:
    _report_sync(call, call.args[0], _shape_message("`unique_consecutive`"))
    return _run_or(
        call,
        lambda: _unique_placeholder(
            call,
            "`unique_consecutive`",
            call.arg(1, "return_inverse", False),
            call.arg(2, "return_counts", False),
            call.arg(3, "dim"),
        ),
    )


@DISPATCH_HANDLERS.register(aten.repeat_interleave.Tensor)
def repeat_interleave(call: InterceptedCall) -> Any:
    repeats = call.args[0]
    if call.arg(1, "output_size") is not None:
        return call.run()
    _report_sync(call, repeats, _shape_message("`repeat_interleave` without `output_size`"))
    known = _known_result(call, repeats.device)
    if known is not None:
        return known

    def placeholder() -> torch.Tensor:
        call.tracker.values.note(
            f"took size {repeats.numel()} for `repeat_interleave` of {tensor_label(repeats)} "
            "(each element assumed repeated once)"
        )
        return torch.empty((repeats.numel(),), dtype=torch.long, device=repeats.device)

    return _run_or(call, placeholder)


@DISPATCH_HANDLERS.register(aten.bincount.default)
def bincount(call: InterceptedCall) -> Any:
    """`bincount`'s length is its input's largest value plus one (at least `minlength`): the CUDA
    kernel reads the input's min and max back to the host before it allocates the result."""
    t, weights, minlength = call.args[0], call.arg(1, "weights"), int(call.arg(2, "minlength", 0) or 0)
    _report_sync(call, t, _shape_message("`bincount`"))
    known = _known_result(call, t.device)
    if known is not None:
        return known

    def placeholder() -> torch.Tensor:
        size = minlength if minlength > 0 else t.numel()
        assumed = f"every value below `minlength` {minlength}" if minlength > 0 else f"largest value {size - 1}"
        call.tracker.values.note(f"took size {size} for `bincount` of {tensor_label(t)} ({assumed} assumed)")
        dtype = torch.long if weights is None else (torch.float if weights.dtype == torch.float else torch.double)
        return torch.empty((size,), dtype=dtype, device=t.device)

    return _run_or(call, placeholder)


@DISPATCH_HANDLERS.register(aten.histc.default)
def histc(call: InterceptedCall) -> Any:
    """`histc` with `min == max` (the default, 0 and 0) takes its range from the data: the CUDA kernel
    copies the input's min and max to the host first. The output's size (`bins`) is known."""
    t = call.args[0]
    low, high = call.arg(2, "min", 0), call.arg(3, "max", 0)
    if low == high and t.numel() > 0:
        _report_sync(
            call,
            t,
            "`histc` with `min == max` (the default) copies the input's min and max to the host to find its "
            f"range: {WAITS}",
        )
    return call.run()


@FUNCTION_HANDLERS.register(torch.isfinite, torch.Tensor.isfinite)
def isfinite(call: InterceptedCall) -> Any:
    """No sync: `isfinite` decomposes into `abs`, `ne`, `eq`, `mul`, so the trace's values learn
    here that its result is assumed all-True (values.py)."""
    out = call.run()
    call.tracker.values.after_call(call.target, out)
    return out


@FUNCTION_HANDLERS.register(torch.nn.functional.one_hot)
def one_hot(call: InterceptedCall) -> Any:
    """No sync: a one-hot mask of unknown indices has one set element per row, so a data-dependent
    size taken from it (MoE routing: `torch.where(mask[expert])`) is 1/classes of the elements."""
    out = call.run()
    if isinstance(out, torch.Tensor) and out.dim() and out.shape[-1]:
        classes = out.shape[-1]
        call.tracker.values.assume_density(
            out, 1 / classes, f"one-hot over {classes} classes: 1/{classes} of the elements assumed set"
        )
    return out


# -- function level: values the host formats or converts ---------------------------------------------


def fake_tolist(tracker: "HazardTracker", t: torch.Tensor) -> Any:
    """`.tolist()` of a fake tensor (FakeTensor defines tolist itself, bypassing the function mode;
    device.py routes it here): one copy to the host, so one sync, and the values the trace knows
    or assumes."""
    if is_cuda(t):
        tracker.sync(
            f"`.tolist()` copies cuda {tensor_label(t)} to the host: {WAITS}", "aten._local_scalar_dense.default"
        )
    return tracker.values.tolist(t)


@FUNCTION_HANDLERS.register(torch.Tensor.__repr__)
def tensor_repr(call: InterceptedCall) -> Any:
    t = call.args[0]
    if _is_fake(t) and is_cuda(t):
        call.tracker.sync(
            f"printing a cuda tensor copies its values ({tensor_label(t)}) to the host: {WAITS}",
            "aten._local_scalar_dense.default",
        )
    return call.run()


@FUNCTION_HANDLERS.register(torch.Tensor.__format__)
def tensor_format(call: InterceptedCall) -> Any:
    t, spec = call.args[0], call.arg(1, "format_spec", "")
    if not _is_fake(t):
        return call.run()
    if is_cuda(t):
        call.tracker.sync(
            f"formatting a cuda tensor copies its values ({tensor_label(t)}) to the host: {WAITS}",
            "aten._local_scalar_dense.default",
        )
    if t.dim() == 0 and spec:
        known, value = call.tracker.values.scalar(t, "formatting")
        return format(value if known else call.tracker.values.assume_scalar(t, "formatting"), spec)
    return call.run()


_NUMPY_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}


_TORCH_SCALAR_TYPE_NAMES = {
    torch.bfloat16: "BFloat16",
    torch.float8_e4m3fn: "Float8_e4m3fn",
    torch.float8_e5m2: "Float8_e5m2",
}


@FUNCTION_HANDLERS.register(torch.Tensor.numpy, torch.Tensor.__array__)
def to_numpy(call: InterceptedCall) -> Any:
    """`.numpy()`, and `numpy.asarray(t)` (Tensor.__array__, which calls numpy() itself)."""
    t = call.args[0]
    if not _is_fake(t):
        return call.run()
    force = call.target is torch.Tensor.numpy and bool(call.arg(1, "force", False))
    if is_cuda(t):
        if not force:  # what torch does on a real GPU
            raise TypeError(
                f"can't convert {t.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                "the tensor to host memory first."
            )
        call.tracker.sync(
            f"`.numpy(force=True)` copies cuda {tensor_label(t)} to the host: {WAITS}", "aten._to_copy.default"
        )
    dtype = _NUMPY_DTYPES.get(t.dtype)
    if dtype is None:  # numpy has no bfloat16 (nor float8): torch raises the same
        raise TypeError(f"Got unsupported ScalarType {_TORCH_SCALAR_TYPE_NAMES.get(t.dtype, str(t.dtype))}")
    import numpy

    real = call.tracker.values.known(t)
    if real is not None:
        with torch_compat.real_tensors():
            array = real.numpy().copy()
    else:
        array = numpy.zeros(tuple(t.shape), dtype=dtype)
        call.tracker.values.note(f"took zeros for `.numpy()` of {tensor_label(t)}")
    wanted = call.arg(1, "dtype") if call.target is torch.Tensor.__array__ else None
    return array.astype(wanted, copy=False) if wanted is not None else array
