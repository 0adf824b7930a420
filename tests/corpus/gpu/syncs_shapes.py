"""Ops whose output size depends on GPU data: the host waits to learn the size."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_nonzero():
    x = torch.randn(64, device=DEVICE)
    idx = torch.nonzero(x > 0)  # expect: AL100:warning
    rows = torch.where(x > 0)  # expect: AL100:warning
    where = torch.argwhere(x < 0)  # expect: AL100:warning
    return idx.shape, rows[0].shape, where.shape


def case_boolean_mask():
    x = torch.randn(64, device=DEVICE)
    positive = x[x > 0]  # expect: AL100:warning
    picked = torch.masked_select(x, x < 0)  # expect: AL100:warning
    x[x < -1] = 0.0  # a CPU scalar into a mask: index_put_ runs masked_fill_ on CUDA, no nonzero, no sync
    return positive.sum() + picked.sum()


def case_unique_and_repeat():
    labels = torch.randint(0, 10, (128,), device=DEVICE)
    classes = torch.unique(labels)  # expect: AL100:warning
    counts = torch.randint(1, 3, (4,), device=DEVICE)
    expanded = torch.repeat_interleave(counts)  # expect: AL100:warning
    return classes.shape, expanded.shape


def case_masks_in_loop():
    x = torch.randn(32, 8, device=DEVICE)
    for step in range(4):
        keep = x[x[:, 0] > 0]  # expect: AL100:warning
        x = x + keep.mean()
    return x


def case_shapes_known_in_advance():
    x = torch.randn(64, device=DEVICE)
    counts = torch.randint(1, 3, (4,), device=DEVICE)
    expanded = torch.repeat_interleave(counts, output_size=8)
    clipped = torch.where(x > 0, x, torch.zeros_like(x))
    zeroed = x.masked_fill(x < 0, 0.0)
    first = torch.nonzero_static(x > 0, size=8)
    return expanded.shape, clipped.sum() + zeroed.sum(), first.shape


def case_linalg_error_checks():
    a = torch.randn(4, 4, device=DEVICE)
    spd = a @ a.T + torch.eye(4, device=DEVICE)
    factor = torch.linalg.cholesky(spd)  # expect: AL100:warning
    inverse = torch.linalg.inv(a)  # expect: AL100:warning
    unchecked, info = torch.linalg.inv_ex(a)
    return factor, inverse, unchecked, info
