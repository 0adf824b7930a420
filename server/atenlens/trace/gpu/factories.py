"""Host factories that build a tensor around existing memory without dispatching an op.

`torch.frombuffer` (torchvision's MNIST reader) and `torch.from_dlpack` wrap memory the program
already holds. They reach neither torch mode (no `__torch_function__` check, no aten op), so the
tensor they return would be the only real tensor in the trace and the first op on it fails
("Please convert all Tensors to FakeTensors first"). On a GPU build they return ordinary CPU
tensors; while a trace runs they return the fake of that CPU tensor (same dtype, shape, strides).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import torch
import torch.utils.dlpack

from atenlens.trace import torch_compat


def _returning_fakes(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def factory(*args: Any, **kwargs: Any) -> Any:
        return torch_compat.as_fake(original(*args, **kwargs))

    return factory


@contextlib.contextmanager
def host_factories_return_fakes() -> Iterator[None]:
    """For one trace: torch.frombuffer and torch.from_dlpack return fake tensors."""
    patches = [(torch, "frombuffer"), (torch, "from_dlpack"), (torch.utils.dlpack, "from_dlpack")]
    originals = [(owner, name, getattr(owner, name)) for owner, name in patches]
    for owner, name, original in originals:
        setattr(owner, name, _returning_fakes(original))
    try:
        yield
    finally:
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)
