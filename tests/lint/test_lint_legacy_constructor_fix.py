"""AL302's quick fix for a legacy typed constructor (`torch.LongTensor(n, m).to(device)`): such a
constructor rejects any device but the CPU ("legacy constructor expects device type: cpu"), so
the fix rewrites it as `torch.empty` with the constructor's dtype. The fixed code is run with
torch on the `meta` device, which the legacy constructors reject as they reject CUDA."""

from __future__ import annotations

from textwrap import dedent

import pytest
import torch
from test_lint_fixes import apply_edits

from atenlens.lint.engine import lint_source_strict

SOURCE = dedent(
    """\
    import torch


    def encode(texts, max_len, device):
        out = []
        for t in texts:
            ids = torch.LongTensor(len(texts), max_len).to(device)
            pad = torch.Tensor(3, 4).to(device)
            mask = torch.BoolTensor(len(t),).to(device=device)
            h = torch.HalfTensor(2, 3).to(device)
            out.append((ids, pad, mask, h))
        return out
    """
)


def test_the_fix_makes_the_same_tensor_with_torch_empty() -> None:
    findings = [f for f in lint_source_strict(SOURCE) if f.code == "AL302"]
    assert [(f.line, f.fix.title if f.fix else None) for f in findings] == [
        (7, "Create the tensor on the device (`torch.empty(..., dtype=torch.int64, device=device)`)"),
        (8, "Create the tensor on the device (`torch.empty(..., device=device)`)"),
        (9, "Create the tensor on the device (`torch.empty(..., dtype=torch.bool, device=device)`)"),
        (10, "Create the tensor on the device (`torch.empty(..., dtype=torch.float16, device=device)`)"),
    ]
    edits = [edit for f in findings if f.fix is not None for edit in f.fix.edits]
    fixed = apply_edits(SOURCE, tuple(edits))
    assert fixed.splitlines()[6:10] == [
        "        ids = torch.empty(len(texts), max_len, dtype=torch.int64, device=device)",
        "        pad = torch.empty(3, 4, device=device)",
        "        mask = torch.empty(len(t), dtype=torch.bool, device=device)",
        "        h = torch.empty(2, 3, dtype=torch.float16, device=device)",
    ]
    assert lint_source_strict(fixed) == []
    namespace: dict[str, object] = {}
    exec(compile(fixed, "fixed.py", "exec"), namespace)
    ((ids, pad, mask, h),) = namespace["encode"](["ab"], 5, "meta")  # type: ignore[operator]
    assert (ids.shape, ids.dtype, ids.device.type) == (torch.Size([1, 5]), torch.int64, "meta")
    assert (pad.shape, pad.dtype) == (torch.Size([3, 4]), torch.get_default_dtype())
    assert (mask.shape, mask.dtype, h.dtype) == (torch.Size([2]), torch.bool, torch.float16)


def test_device_keyword_on_a_legacy_constructor_raises() -> None:
    """What the fix must not write: the legacy constructor itself given the device."""
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        torch.LongTensor(2, 3, device="meta")
