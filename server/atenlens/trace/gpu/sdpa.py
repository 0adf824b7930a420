"""`scaled_dot_product_attention` takes the kernel a real GPU would take.

Without a GPU, sdpa on fake cuda tensors decomposes into the math path (~28 ops: bmm, softmax,
dropout...). A real GPU runs one fused kernel, and the trace should show that op and its backward.
The choice follows torch's own order (flash, then memory-efficient, then math) with its main
conditions on an sm90 device; docs/fidelity.md lists what this simplifies:
- flash: fp16/bf16, no attn_mask, 4-D inputs, head dim <= 256 and a multiple of 8; grouped-query
  heads (`enable_gqa=True`, fewer key/value heads) allowed, as torch's flash check admits them;
- memory-efficient: fp32/fp16/bf16, masks allowed, 4-D inputs, q/k/v on the same head dim, which
  is a multiple of 8 (4 for fp32), no grouped-query heads;
- otherwise, or when `torch.nn.attention.sdpa_kernel` disables a backend, the math path runs.
Under `torch.autocast("cuda")` the inputs are cast to the autocast dtype before any check, as sdpa's
own autocast rule does, so an fp32 model in bf16 autocast takes flash, and so do fp32 q/k with a bf16 v.
The same choice applies to the sdpa that `F.multi_head_attention_forward` calls from inside.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F

from atenlens.trace.gpu.registry import FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.torch_compat import FakeTensor

aten = torch.ops.aten
_HALF = (torch.float16, torch.bfloat16)


def _eligible(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    return (
        isinstance(q, FakeTensor)
        and q.device.type == "cuda"
        and not q.is_nested
        and q.dim() == 4
        and k.dim() == 4
        and v.dim() == 4
        and q.dtype == k.dtype == v.dtype
        and k.device == q.device == v.device
    )


def _autocast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """What sdpa's autocast rule (lower_precision_fp) does to one input: floating tensors other than
    float64 are cast to the autocast dtype, anything else is left as it is."""
    if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype not in (torch.float64, dtype):
        return t.to(dtype)
    return t


def _flash_fits(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> bool:
    head = q.shape[-1]
    return (
        torch.backends.cuda.flash_sdp_enabled()
        and q.dtype in _HALF
        and mask is None
        and head <= 256
        and head % 8 == 0
        and k.shape[-1] == head
        and v.shape[-1] == head
    )


def _efficient_fits(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gqa: bool) -> bool:
    head = q.shape[-1]
    alignment = 4 if q.dtype == torch.float32 else 8
    return (
        torch.backends.cuda.mem_efficient_sdp_enabled()
        and q.dtype in (*_HALF, torch.float32)
        and not gqa
        and head % alignment == 0
        and k.shape[-1] == head
        and v.shape[-1] % alignment == 0
    )


def _as_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask becomes an additive bias, as sdpa does before the efficient kernel."""
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask.logical_not(), float("-inf"))


@FUNCTION_HANDLERS.register(F.scaled_dot_product_attention)
def scaled_dot_product_attention(call: InterceptedCall) -> Any:
    q, k, v = (call.arg(i, name) for i, name in enumerate(("query", "key", "value")))
    if torch.is_autocast_enabled("cuda") and all(
        isinstance(t, FakeTensor) and t.device.type == "cuda" for t in (q, k, v)
    ):
        # autocast casts before sdpa chooses its kernel: fp32 q/k with a bf16 v (rotary embeddings
        # computed in fp32) are all bf16 by the time the kernel is chosen
        dtype = torch.get_autocast_dtype("cuda")
        cast: dict[int, torch.Tensor] = {}  # autocast's cache: a leaf that requires grad is cast once
        casts = []
        for t in (q, k, v):
            cached = t.is_leaf and t.requires_grad
            if cached and id(t) in cast:
                casts.append(cast[id(t)])
                continue
            casts.append(_autocast(t, dtype))
            if cached:
                cast[id(t)] = casts[-1]
        q, k, v = casts
    if not _eligible(q, k, v):
        return call.run()
    mask = call.arg(3, "attn_mask")
    dropout_p = call.arg(4, "dropout_p", 0.0)
    is_causal = call.arg(5, "is_causal", False)
    scale = call.arg(6, "scale")
    gqa = bool(call.arg(7, "enable_gqa", False)) and q.shape[-3] != k.shape[-3]
    try:
        if _flash_fits(q, k, v, mask) and (not gqa or q.shape[-3] % k.shape[-3] == 0):
            return aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, scale=scale)[0]
        if _efficient_fits(q, k, v, gqa):
            bias = _as_bias(mask, q.dtype) if mask is not None else None
            needs_lse = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
            return aten._scaled_dot_product_efficient_attention(
                q, k, v, bias, needs_lse, dropout_p, is_causal, scale=scale
            )[0]
    except (RuntimeError, ValueError):
        pass  # a shape the fused kernels reject: torch would take the math path too
    return call.run()


@FUNCTION_HANDLERS.register(F.multi_head_attention_forward)
def multi_head_attention_forward(call: InterceptedCall) -> Any:
    """`F.multi_head_attention_forward` (nn.MultiheadAttention's slow path) calls sdpa from inside, for
    `need_weights=False` — what `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` pass. The
    trace's function mode is off inside a handled call, so that sdpa took the math path where a GPU
    takes a fused kernel. For this call, the module's global `scaled_dot_product_attention` (the name
    it calls) goes through the kernel choice above."""
    original = F.scaled_dot_product_attention

    def chosen(*args: Any, **kwargs: Any) -> Any:
        inner = InterceptedCall(original, args, kwargs, call.tracker, run=lambda: original(*args, **kwargs))
        return scaled_dot_product_attention(inner)

    F.scaled_dot_product_attention = chosen
    try:
        return call.run()
    finally:
        F.scaled_dot_product_attention = original
