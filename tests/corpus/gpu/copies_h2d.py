"""Host-to-device copies with non_blocking=True: asynchronous only from pinned memory."""
import torch
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_pageable_sources():
    batch = torch.randn(32, 16)
    a = batch.to(DEVICE, non_blocking=True)  # expect: AL200:warning
    b = batch.cuda(non_blocking=True)  # expect: AL200:warning
    dst = torch.empty(32, 16, device=DEVICE)
    dst.copy_(batch, non_blocking=True)  # expect: AL200:warning
    return a, b, dst


def case_pageable_in_loop():
    out = []
    for _ in range(3):
        batch = torch.randn(8, 4)
        out.append(batch.to(DEVICE, non_blocking=True))  # expect: AL200:warning
    return out


def case_unpinned_loader():
    data = TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    for x, y in DataLoader(data, batch_size=16):
        x = x.to(DEVICE, non_blocking=True)  # expect: AL200:warning
        y = y.to(DEVICE, non_blocking=True)  # expect: AL200:warning
    return x, y


def case_pinned_sources():
    batch = torch.randn(32, 16).pin_memory()
    a = batch.to(DEVICE, non_blocking=True)
    b = batch[:8].cuda(non_blocking=True)
    staging = torch.empty(32, 16, pin_memory=True)
    staging.copy_(torch.randn(32, 16))
    dst = torch.empty(32, 16, device=DEVICE)
    dst.copy_(staging, non_blocking=True)
    c = staging.view(16, 32).to(DEVICE, non_blocking=True)
    return a, b, c, dst, batch.is_pinned(), staging[1:].is_pinned()


def case_pinned_loader():
    data = TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    for x, y in DataLoader(data, batch_size=16, pin_memory=True):
        x = x.to(DEVICE, non_blocking=True)
        y = y.to(DEVICE, non_blocking=True)
    return x, y


def case_blocking_uploads():
    batch = torch.randn(32, 16)
    a = batch.to(DEVICE)
    b = batch.cuda()
    dst = torch.empty(32, 16, device=DEVICE)
    dst.copy_(batch)
    return a, b, dst
