"""`torch._grouped_mm` (MoE experts) as a CUDA build of torch runs it.

On an sm90 GPU the fused grouped GEMM takes bf16 inputs; fp32 and fp16 inputs take torch's
fallback (aten/src/ATen/native/GroupedMMUtils.h), one `mm` per group, which first copies `offs`
to the host (`offs.cpu()`) to know where each group starts: a sync. The meta kernel that fake
tensors run accepts only bf16 and would end the trace where a GPU run goes on (Hugging Face MoE
models call `_grouped_mm` with fp32 weights by default). Here the op keeps its name and gets the
output a GPU build allocates (the same sizes and 16-byte aligned strides), and the fallback's host
copy of `offs` is reported as the sync it is.
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall
from atenlens.trace.gpu.syncs import WAITS
from atenlens.trace.gpu.tracker import is_cuda, tensor_label

aten = torch.ops.aten
_FALLBACK_DTYPES = (torch.float32, torch.float16)


def _output(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: Any, dtype: torch.dtype) -> torch.Tensor:
    """create_grouped_gemm_output_tensor of GroupedMMUtils.h: sizes, and strides padded to 16 bytes."""
    a_2d, b_2d = mat_a.dim() == 2, mat_b.dim() == 2
    if a_2d and b_2d:
        size = [offs.shape[0], mat_a.shape[0], mat_b.shape[1]]
    elif a_2d:
        size = [mat_a.shape[0], mat_b.shape[-1]]
    elif b_2d:
        size = [mat_a.shape[1], mat_b.shape[1]]
    else:
        size = [mat_a.shape[0], mat_a.shape[1], mat_b.shape[-1]]
    alignment = 16 // torch.empty((), dtype=dtype, device="meta").element_size()
    padded = (size[-1] + alignment - 1) // alignment * alignment
    stride = [padded, 1] if a_2d != b_2d else [size[1] * padded, padded, 1]
    return torch.empty_strided(size, stride, dtype=dtype, device=mat_a.device)


@DISPATCH_HANDLERS.register(aten._grouped_mm.default)
def grouped_mm(call: InterceptedCall) -> Any:
    mat_a, mat_b = call.args[0], call.args[1]
    offs = call.arg(2, "offs")
    out_dtype = call.arg(4, "out_dtype")
    fallback = (
        is_cuda(mat_a)
        and is_cuda(mat_b)
        and mat_a.dtype == mat_b.dtype
        and mat_a.dtype in _FALLBACK_DTYPES
        and out_dtype in (None, mat_a.dtype)
        and mat_a.dim() in (2, 3)
        and mat_b.dim() in (2, 3)
    )
    if not fallback:
        return call.run()
    if offs is not None and is_cuda(offs):
        call.tracker.sync(
            f"`torch._grouped_mm` with {str(mat_a.dtype).removeprefix('torch.')} inputs takes "
            f"torch's fallback on a GPU (one `mm` per group; the fused kernel takes bf16), which "
            f"copies the group offsets `offs` {tensor_label(offs)} to the host: {WAITS}",
            str(call.target),
        )
    return _output(mat_a, mat_b, offs, mat_a.dtype)
