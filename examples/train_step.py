"""A small classifier and its training step: the example the README traces.

    atenlens trace examples/train_step.py::train_step   # one SGD step, line by line
    atenlens trace examples/train_step.py::train        # the loop: `.item()` waits for the GPU every step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in: int = 16, d_hidden: int = 32, n_classes: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        return self.fc2(h)


def setup(batch: int = 8):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = MLP().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(batch, 16, device=device)
    y = torch.randint(0, 4, (batch,), device=device)
    return model, opt, x, y


# atenlens: train_step(*setup())
def train_step(model, opt, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


# atenlens: train(*setup(), steps=3)
def train(model, opt, x, y, steps: int = 100):
    total = 0.0
    for step in range(steps):
        loss = train_step(model, opt, x, y)
        total += loss.item()
    return total / steps
