"""The fused GRU cell a GPU runs for `nn.GRU` / `nn.GRUCell` without cuDNN.

On cuda, `nn.GRU` runs one `aten._thnn_fused_gru_cell` per time step (after two `mm`s for the
gates), and its backward `aten._thnn_fused_gru_cell_backward`. Both ops have only a CUDA kernel in
torch 2.13: no meta kernel, so fake tensors cannot run them (FakeTensorMode falls back to running
the op on real zeros on the device, which a CPU build of torch does not have) and the trace would
end where a GPU run goes on. (The LSTM cell's ops have meta kernels.) Here both ops keep their names
and get the outputs the CUDA kernels allocate (aten/src/ATen/native/cuda/RNN.cu).
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace.gpu.registry import DISPATCH_HANDLERS, InterceptedCall

aten = torch.ops.aten
_WORKSPACE_GATES = 5  # GRU_WORKSPACE_MULTIPLIER: r, z, n, hx and the hidden n gate, per hidden unit


@DISPATCH_HANDLERS.register(aten._thnn_fused_gru_cell.default)
def fused_gru_cell(call: InterceptedCall) -> Any:
    input_gates, hx = call.args[0], call.arg(2, "hx")
    if input_gates.device.type != "cuda":
        return call.run()
    hy = torch.empty_like(hx, memory_format=torch.contiguous_format)
    workspace = torch.empty((hx.shape[0], hx.shape[1] * _WORKSPACE_GATES), dtype=hx.dtype, device=input_gates.device)
    return hy, workspace


@DISPATCH_HANDLERS.register(aten._thnn_fused_gru_cell_backward.default)
def fused_gru_cell_backward(call: InterceptedCall) -> Any:
    grad_hy, workspace, has_bias = call.args[0], call.args[1], call.arg(2, "has_bias")
    if workspace.device.type != "cuda":
        return call.run()
    gates = (workspace.shape[0], workspace.shape[1] // _WORKSPACE_GATES * 3)
    grad_input_gates = torch.empty(gates, dtype=workspace.dtype, device=workspace.device)
    grad_hidden_gates = torch.empty(gates, dtype=workspace.dtype, device=workspace.device)
    grad_hx = torch.empty_like(grad_hy, memory_format=torch.contiguous_format)
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx, None, None
    # the kernel sums the gate gradients over the batch for the biases (inside the op, as on a GPU)
    return grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0), grad_hidden_gates.sum(0)
