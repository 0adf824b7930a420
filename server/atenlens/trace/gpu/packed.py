"""`pack_padded_sequence` is not simulated: the trace ends at its line with a message that says why.

Its sizes come from the lengths (a CPU tensor, so no GPU wait), which the trace's values often know;
but the packed LSTM/GRU/RNN kernels that consume a `PackedSequence` read its `batch_sizes` through a
data pointer inside one C++ function, which fake tensors do not have, and so does
`pad_packed_sequence`. Rather than FakeTensorMode's `DynamicOutputShapeException` (or a failure one
line later inside the RNN), the program gets this error at the line that packs.
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall

aten = torch.ops.aten

MESSAGE = (
    "`pack_padded_sequence` is not simulated in a trace: the packed RNN kernels and `pad_packed_sequence` "
    "read the packed batch sizes on the host from tensor data, which fake tensors do not have "
    "(docs/fidelity.md); trace the step with padded batches instead"
)


@DISPATCH_HANDLERS.register(aten._pack_padded_sequence.default)
def pack_padded_sequence(call: InterceptedCall) -> Any:
    raise NotImplementedError(MESSAGE)
