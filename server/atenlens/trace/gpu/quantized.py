"""Quantized tensors (`torch.ao.quantization`: `quantize_dynamic`, `quantize_per_tensor`, the
`quantized::` ops such as `linear_dynamic`): the trace cannot simulate them, and says so.

Fake tensors have no quantized kernels (torch registers none for the QuantizedMeta backend), and
the `quantized::` ops read packed weights made from real data by fbgemm or qnnpack. Left alone, the
first such op ended the trace with torch's dispatcher error ("Could not run
'aten::_empty_affine_quantized' with arguments from the 'QuantizedMeta' backend"), which names
neither the cause nor a way out. Here every op that makes or takes a quantized tensor raises a
message that does, at the user's line (AL900). torchao's quantization (`quantize_`) keeps plain
tensors inside tensor subclasses and is traced (docs/fidelity.md).
"""

from __future__ import annotations

from typing import Any, NoReturn

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall

_QUANTIZING = (
    "quantize_per_tensor",
    "quantize_per_channel",
    "_empty_affine_quantized",
    "_empty_per_channel_affine_quantized",
)


def _is_quantized_op(op: Any) -> bool:
    """`quantized::` ops and the aten ops that make quantized tensors; not `fake_quantize_*` (QAT's
    float ops, which fake tensors run)."""
    name = getattr(op, "_opname", "")
    return getattr(op, "namespace", None) == "quantized" or name.startswith(_QUANTIZING)


@DISPATCH_HANDLERS.register_predicate("quantized tensors", _is_quantized_op)
def quantized_op(call: InterceptedCall) -> NoReturn:
    raise NotImplementedError(
        f"`{call.target}` works on quantized tensors (torch.ao.quantization), which the trace cannot simulate: "
        "fake tensors have no quantized kernels, and torch.ao's quantized engines (fbgemm, qnnpack) run on the CPU "
        "only, with weights packed from real data; trace the float model, or quantize with torchao "
        "(`torchao.quantization.quantize_`), whose quantized layers the trace follows (docs/fidelity.md)"
    )
