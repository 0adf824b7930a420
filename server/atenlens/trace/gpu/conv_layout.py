"""The memory format of a convolution's result on simulated CUDA: cuDNN's.

A GPU runs a convolution on cuDNN, which returns channels_last results when the input or the
weight is channels_last (`cudnn_conv_suggest_memory_format`, aten/src/ATen/native/ConvUtils.h). A CPU
build of torch is not compiled with cuDNN, so FakeTensorMode picks the slow CUDA kernel's format for
fake cuda tensors: always contiguous. The shapes were right and the strides were not, so what
follows decided differently: `flatten` of a channels_last activation is a copy on a GPU and was a
view in the trace, and the weight gradients needed a copy into the parameters' layout. Here the
forward result and the input and weight gradients get cuDNN's format (float64 stays contiguous, as
in cuDNN; `torch.backends.cudnn.enabled = False` keeps the slow kernel's contiguous format).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from atenlens.trace import torch_compat
from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall
from atenlens.trace.gpu.tracker import is_cuda

aten = torch.ops.aten


def _cudnn_format(input_: torch.Tensor, weight: torch.Tensor) -> Optional[torch.memory_format]:
    """cuDNN's choice, when it is not contiguous (None then)."""
    if not torch.backends.cudnn.enabled or torch.float64 in (input_.dtype, weight.dtype):
        return None
    formats = {torch_compat.suggested_memory_format(input_), torch_compat.suggested_memory_format(weight)}
    if weight.dim() == 4 and torch.channels_last in formats:
        return torch.channels_last
    if weight.dim() == 5 and torch.channels_last_3d in formats:
        return torch.channels_last_3d
    return None


def _as(t: Any, memory_format: torch.memory_format) -> Any:
    if not isinstance(t, torch.Tensor) or t.dim() not in (4, 5) or t.is_contiguous(memory_format=memory_format):
        return t
    return t.contiguous(memory_format=memory_format)  # a fake tensor of the same shape, other strides


@DISPATCH_HANDLERS.register(aten.convolution.default)
def convolution(call: InterceptedCall) -> Any:
    out = call.run()
    input_, weight = call.args[0], call.args[1]
    if not is_cuda(input_):
        return out
    memory_format = _cudnn_format(input_, weight)
    return out if memory_format is None else _as(out, memory_format)


@DISPATCH_HANDLERS.register(aten.convolution_backward.default)
def convolution_backward(call: InterceptedCall) -> Any:
    grad_input, grad_weight, grad_bias = call.run()
    input_, weight = call.args[1], call.args[2]
    if not is_cuda(input_):
        return grad_input, grad_weight, grad_bias
    memory_format = _cudnn_format(input_, weight)
    if memory_format is None:
        return grad_input, grad_weight, grad_bias
    return _as(grad_input, memory_format), _as(grad_weight, memory_format), grad_bias
