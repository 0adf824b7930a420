"""Stand-in values for data a fake tensor does not have, so the traced function runs on to the end."""

from __future__ import annotations

from typing import Any

import torch


def placeholder_scalar(dtype: torch.dtype) -> Any:
    """What `.item()` of a tensor of `dtype` returns in a trace: truthy, nonzero, of the right type."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point:
        return 1.0
    if dtype.is_complex:
        return 1 + 0j
    return 1
