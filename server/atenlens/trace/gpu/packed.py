"""Packed sequences: `pack_padded_sequence`, packed LSTM / GRU / RNN and `pad_packed_sequence`.

A `PackedSequence`'s `batch_sizes` (how many sequences are still running at each step) is a CPU
tensor computed from the lengths, so packing is no GPU wait. The kernels that use it — the packed
RNN functions, `pad_packed_sequence` and the backward of the packing — read it in C++ through a
data pointer, without dispatching any op on it, and a fake tensor has no data. So the trace computes
`batch_sizes` for real from the lengths (which its values usually know: `torch.tensor([...])`,
`mask.sum(1).cpu()` of known masks) and hands those functions the real tensor; the program gets a
fake one whose value is known (`int(batch_sizes[0])` in `nn.LSTM` reads it). Their other inputs
stay fake, so the ops they issue (the per-step LSTM/GRU cells, the copies into the padded output and
the packing's backward) are recorded at the line, as a GPU without cuDNN runs them (a GPU with cuDNN
runs one `_cudnn_rnn`: docs/fidelity.md).

Unknown lengths are assumed to be the padded length (no padding), noted at the line (AL906).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.tracker import tensor_label
from atenlens.trace.torch_compat import PACK_PADDED_SEQUENCE, PAD_PACKED_SEQUENCE, FakeTensor, as_fake, real_tensors

aten = torch.ops.aten

UNKNOWN_BATCH_SIZES = (
    "the `batch_sizes` of this PackedSequence are not known in the trace (they were not made by "
    "`pack_padded_sequence` from known lengths): the packed kernels read them on the host from tensor data, "
    "which fake tensors do not have (docs/fidelity.md)"
)


@FUNCTION_HANDLERS.register(PACK_PADDED_SEQUENCE)
def pack_padded_sequence(call: InterceptedCall) -> Any:
    source, lengths = call.arg(0, "input"), call.arg(1, "lengths")
    batch_first = bool(call.arg(2, "batch_first", False))
    if not isinstance(lengths, FakeTensor) or lengths.device.type != "cpu" or lengths.dim() != 1:
        return call.run()  # torch's own errors (lengths on the GPU, ...)
    real = call.tracker.values.known(lengths)
    if real is None:
        steps = source.shape[1 if batch_first else 0]
        call.tracker.values.note(
            f"took {steps} for every length of `pack_padded_sequence` ({tensor_label(lengths)} unknown: "
            f"sequences assumed unpadded)"
        )
        with real_tensors():
            real = torch.full((lengths.numel(),), steps, dtype=torch.int64)
    with real_tensors():
        real = real.to(torch.int64)
    # through autograd: its node keeps the real batch_sizes for the packing's backward
    data, batch_sizes = PACK_PADDED_SEQUENCE(source, real, batch_first)
    return data, _known_fake(call, batch_sizes)


@DISPATCH_HANDLERS.register(aten._pack_padded_sequence.default)
def pack_padded_sequence_op(call: InterceptedCall) -> Any:
    source, lengths, batch_first = call.args[0], call.args[1], bool(call.args[2])
    if isinstance(lengths, FakeTensor):  # not from the function above: no real lengths
        raise NotImplementedError(UNKNOWN_BATCH_SIZES.replace("of this PackedSequence ", "", 1))
    steps, batch = (source.shape[1], source.shape[0]) if batch_first else (source.shape[0], source.shape[1])
    with real_tensors():
        # torch's own kernel on a stand-in of one value per (step, sequence): its checks (sorted,
        # positive lengths, one per sequence) and its batch_sizes
        stand_in = torch.zeros((batch, steps) if batch_first else (steps, batch))
        packed, batch_sizes = PACK_PADDED_SEQUENCE(stand_in, lengths, batch_first)
    data = source.new_empty((packed.shape[0], *source.shape[2:]))
    return data, batch_sizes


def _known_fake(call: InterceptedCall, real: torch.Tensor) -> torch.Tensor:
    """A fake of the real CPU tensor `real` whose value the trace knows."""
    fake = as_fake(real)
    call.tracker.values.attach_result(fake, real)
    return fake


def _real_batch_sizes(call: InterceptedCall, batch_sizes: Any) -> torch.Tensor:
    if not isinstance(batch_sizes, FakeTensor):
        return batch_sizes
    real: Optional[torch.Tensor] = call.tracker.values.known(batch_sizes)
    if real is None:
        raise NotImplementedError(UNKNOWN_BATCH_SIZES)
    return real


@FUNCTION_HANDLERS.register(torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu)
def packed_rnn(call: InterceptedCall) -> Any:
    """The `.data` overloads (data, batch_sizes, hx, params, ...) take the real batch_sizes; the padded
    ones (input, hx, params, ...) run as they are."""
    args = call.args
    packed = len(args) > 2 and isinstance(args[1], torch.Tensor) and not isinstance(args[2], (list, tuple))
    if call.target is torch.lstm:  # lstm's hx is a list in both: (input, hx[], ...) or (data, batch_sizes, hx[], ...)
        packed = len(args) > 1 and isinstance(args[1], torch.Tensor)
    if not packed:
        return call.run()
    return call.target(args[0], _real_batch_sizes(call, args[1]), *args[2:], **call.kwargs)


@FUNCTION_HANDLERS.register(PAD_PACKED_SEQUENCE)
def pad_packed_sequence(call: InterceptedCall) -> Any:
    """torch's `_pad_packed_sequence` (a composite of ops on the data) step by step, with the real
    batch_sizes: the same `full`, the same copies of each run of steps with one batch size, the same
    `transpose`; its lengths tensor is allocated on the host and filled from batch_sizes there."""
    data, batch_sizes = call.arg(0, "data"), call.arg(1, "batch_sizes")
    batch_first = bool(call.arg(2, "batch_first"))
    padding_value, total_length = float(call.arg(3, "padding_value")), int(call.arg(4, "total_length"))
    sizes = [int(b) for b in _real_batch_sizes(call, batch_sizes).tolist()]
    steps, batch = len(sizes), sizes[0]
    if total_length < steps:
        raise RuntimeError(
            f"Expected total_length to be at least the length of the longest sequence in input, but got "
            f"total_length={total_length} and max sequence length being {steps}"
        )
    output = torch.full((total_length, batch, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    lengths = [0] * batch
    offset, previous_batch, previous_step = 0, batch, 0
    for step in range(steps + 1):
        size = sizes[step] if step != steps else 0
        if size == previous_batch:
            continue
        count = previous_batch * (step - previous_step)
        run = data[offset : offset + count].view(step - previous_step, previous_batch, *data.shape[1:])
        output[previous_step:step, :previous_batch].copy_(run)
        offset, previous_step = offset + count, step
        for sequence in range(size, previous_batch):
            lengths[sequence] = step
        previous_batch = size
    if batch_first:
        output = output.transpose(0, 1)
    host_lengths = torch.empty((batch,), dtype=torch.int64)  # torch allocates it on the host, then fills it
    with real_tensors():
        real_lengths = torch.tensor(lengths, dtype=torch.int64)
    call.tracker.values.attach_result(host_lengths, real_lengths)
    return output, host_lengths
