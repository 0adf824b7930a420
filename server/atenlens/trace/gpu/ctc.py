"""CTC loss on simulated CUDA: `aten._ctc_loss` and its backward, with the outputs the CUDA kernels
allocate (aten/src/ATen/native/cuda/LossCTC.cu).

Both ops have CPU and CUDA kernels only, no meta kernel: FakeTensorMode falls back to running them on
real zeros on the device, which a CPU build of torch does not have, and the trace would end where a
GPU run goes on (so have `_use_cudnn_ctc_loss` and `_use_miopen_ctc_loss`, the checks before them: cuDNN's CTC
kernel is not simulated, the native one is taken). The forward returns the per-sequence loss (batch,) and `log_alpha`
(batch, input length, 2 * longest target + 1); the longest target is a host value (lengths given as
tensors are copied to the host first: a sync when they are on the GPU). Unknown target lengths are
assumed to be the padded width of 2-D targets (all of 1-D concatenated targets), noted at the line.
The backward returns a gradient like `log_probs`, contiguous.

Lengths given as tensors: for plain tensors torch's `ctc_loss` copies them to the host and continues
with the integer-list form (`_ctc_loss.default`); for tensor subclasses, fake tensors among them, it
takes a composite path that a GPU run never takes (`_ctc_loss.Tensor`, and a loss divided by the
lengths where they are: on the CPU for CPU lengths, which fails on a cuda loss). So on simulated CUDA
`F.ctc_loss` copies tensor lengths to the host itself (a sync when they are on the GPU, as there) and
calls the integer-list form with their values (known, or assumed as above).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from atenlens.trace import torch_compat
from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.syncs import WAITS
from atenlens.trace.gpu.tracker import is_cuda, tensor_label

aten = torch.ops.aten


def _longest_target(call: InterceptedCall, targets: torch.Tensor, target_lengths: Any) -> int:
    if not isinstance(target_lengths, torch.Tensor):
        return max(target_lengths, default=0)
    known = call.tracker.values.known(target_lengths)
    if known is not None:
        with torch_compat.real_tensors():  # the shadow is a real tensor
            return int(known.max()) if known.numel() else 0
    longest = targets.shape[1] if targets.dim() == 2 else targets.numel()
    call.tracker.values.note(
        f"took {longest} for the longest target of `ctc_loss` ({tensor_label(target_lengths)} target lengths "
        "unknown: " + ("the targets' padded width" if targets.dim() == 2 else "all concatenated targets") + ")"
    )
    return longest


def _report_length_copies(call: InterceptedCall, *lengths: Any) -> None:
    for t in lengths:
        if isinstance(t, torch.Tensor) and is_cuda(t):
            call.tracker.sync(
                f"`ctc_loss` copies its lengths ({tensor_label(t)}) to the host: {WAITS}", str(call.target)
            )
            return


def _as_list(call: InterceptedCall, lengths: Any, assumed: int, what: str) -> Any:
    if not isinstance(lengths, torch.Tensor):
        return lengths
    on_host = lengths.to("cpu", torch.long)  # the copy torch makes (a sync for cuda lengths)
    known = call.tracker.values.known(on_host)
    if known is not None:
        with torch_compat.real_tensors():
            return known.tolist()
    call.tracker.values.note(f"took {assumed} for every {what} of `ctc_loss` ({tensor_label(lengths)} unknown)")
    return [assumed] * lengths.numel()


@FUNCTION_HANDLERS.register(F.ctc_loss)
def ctc_loss_with_length_tensors(call: InterceptedCall) -> Any:
    log_probs, targets = call.args[0], call.args[1]
    input_lengths, target_lengths = call.arg(2, "input_lengths"), call.arg(3, "target_lengths")
    if not is_cuda(log_probs) or not any(isinstance(t, torch.Tensor) for t in (input_lengths, target_lengths)):
        return call.run()
    steps = log_probs.shape[0]
    width = targets.shape[-1] if targets.dim() == 2 else targets.numel()
    blank, reduction, zero_infinity = (
        call.arg(4, "blank", 0),
        call.arg(5, "reduction", "mean"),
        call.arg(6, "zero_infinity", False),
    )
    target_list = _as_list(call, target_lengths, width, "target length (the targets' width)")
    losses = F.ctc_loss(
        log_probs,
        targets,
        _as_list(call, input_lengths, steps, "input length (the input's length)"),
        target_list,
        blank=blank,
        reduction="none",
        zero_infinity=zero_infinity,
    )
    # torch's reduction, made here: it builds the lengths tensor with `at::tensor` from host ints,
    # which writes through a data pointer that fake tensors do not have
    if reduction == "mean":
        lengths = torch.tensor(target_list, dtype=losses.dtype).to(losses.device).clamp_min(1)
        return (losses / lengths).mean()
    return losses.sum() if reduction == "sum" else losses


@DISPATCH_HANDLERS.register(
    aten._use_cudnn_ctc_loss.default,
    aten._use_cudnn_ctc_loss.Tensor,
    aten._use_miopen_ctc_loss.default,
    aten._use_miopen_ctc_loss.Tensor,
)
def use_vendor_ctc_loss(call: InterceptedCall) -> Any:
    """cuDNN's CTC kernel is not simulated (docs/fidelity.md) and MIOpen's is ROCm's: the native
    kernel is taken."""
    return False if is_cuda(call.args[0]) else call.run()


@DISPATCH_HANDLERS.register(aten._ctc_loss.default, aten._ctc_loss.Tensor)
def ctc_loss(call: InterceptedCall) -> Any:
    log_probs, targets = call.args[0], call.args[1]
    input_lengths, target_lengths = call.arg(2, "input_lengths"), call.arg(3, "target_lengths")
    if not is_cuda(log_probs):
        return call.run()
    _report_length_copies(call, input_lengths, target_lengths)
    steps, batch = log_probs.shape[0], log_probs.shape[1]
    longest = _longest_target(call, targets, target_lengths)
    options = {"dtype": log_probs.dtype, "device": log_probs.device}
    return torch.empty((batch,), **options), torch.empty((batch, steps, 2 * longest + 1), **options)


@DISPATCH_HANDLERS.register(aten._ctc_loss_backward.default, aten._ctc_loss_backward.Tensor)
def ctc_loss_backward(call: InterceptedCall) -> Any:
    log_probs = call.args[1]
    if not is_cuda(log_probs):
        return call.run()
    _report_length_copies(call, call.arg(3, "input_lengths"), call.arg(4, "target_lengths"))
    return torch.empty(tuple(log_probs.shape), dtype=log_probs.dtype, device=log_probs.device)
