"""Ops that read a CPU tensor argument's data in C++ without dispatching an op on it.

`torch.tensor_split(x, torch.tensor([3, 7]))` takes its split points from a CPU tensor, which
torch's composite kernel reads through a data pointer; a fake tensor has no data, so the trace ended
with "The tensor has a non-zero number of elements, but its data is not allocated yet". Where the
trace knows the value (trace/values.py) the handler passes it on as the integers torch would read,
so the same ops run. Unknown split points are assumed evenly spaced, noted at the line (AL906).
(The packed sequences' `batch_sizes`, the same mechanism, are in packed.py.)
"""

from __future__ import annotations

from typing import Any

import torch

from atenlens.trace.gpu.registry import FUNCTION_HANDLERS, InterceptedCall
from atenlens.trace.gpu.tracker import tensor_label
from atenlens.trace.torch_compat import FakeTensor, real_tensors


@FUNCTION_HANDLERS.register(torch.tensor_split, torch.Tensor.tensor_split)
def tensor_split(call: InterceptedCall) -> Any:
    name = next((n for n in ("indices_or_sections", "tensor_indices_or_sections") if n in call.kwargs), None)
    points = call.kwargs[name] if name is not None else (call.args[1] if len(call.args) > 1 else None)
    if not isinstance(points, FakeTensor) or points.device.type != "cpu":
        return call.run()  # integers, a list, or torch's own error for a tensor on the GPU
    real = call.tracker.values.known(points)
    value: Any
    if real is not None:
        with real_tensors():  # the shadow is a real tensor: read it outside the fake mode
            value = int(real.item()) if real.dim() == 0 else [int(v) for v in real.tolist()]
    else:
        # as many pieces as the split points make, of even sizes (a count alone: one piece)
        value = points.numel() + 1 if points.dim() == 1 else 1
        call.tracker.values.note(
            f"took {value} even sections for `tensor_split` at unknown points ({tensor_label(points)})"
        )
    if name is not None:
        kwargs = {k: v for k, v in call.kwargs.items() if k != name}
        kwargs["indices_or_sections" if isinstance(value, list) else "sections"] = value
        return call.target(*call.args, **kwargs)
    return call.target(call.args[0], value, *call.args[2:], **call.kwargs)
