"""A training loop that stalls the GPU, and the same loop fixed. Traced on simulated CUDA:

    atenlens trace examples/input_pipeline.py::train_stalling   # AL200 upload, AL100 .item(), AL201 read
    atenlens trace examples/input_pipeline.py::train_overlapped # nothing to report
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def setup(pin_memory: bool):
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(256, 32), torch.randint(0, 10, (256,)))
    return model, optimizer, DataLoader(data, batch_size=64, pin_memory=pin_memory)


def step(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


# atenlens: train_stalling(*setup(pin_memory=False))
def train_stalling(model, optimizer, loader):
    total = 0.0
    for x, y in loader:
        x = x.to(DEVICE, non_blocking=True)         # pageable source: the host waits for the copy
        y = y.to(DEVICE, non_blocking=True)
        loss = step(model, optimizer, x, y)
        total += loss.item()                        # the host waits for the whole step, every step
        last = loss.to("cpu", non_blocking=True)
        print(f"last loss {float(last):.3f}")       # read before the copy has landed
    return total


# atenlens: train_overlapped(*setup(pin_memory=True))
def train_overlapped(model, optimizer, loader):
    total = torch.zeros((), device=DEVICE)
    for x, y in loader:
        x = x.to(DEVICE, non_blocking=True)         # pinned by the loader: truly asynchronous
        y = y.to(DEVICE, non_blocking=True)
        total += step(model, optimizer, x, y)       # stays on the GPU; read once, after the loop
    return total
