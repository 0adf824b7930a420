"""What the worker traces once at start, in its own process, before it forks any child: it makes
torch and the engine load and cache what every trace needs (function and dispatch modes, fake
tensor caches, module and optimizer code paths, report building), so each forked trace starts warm.

No backward here: autograd's first backward starts device threads, and a process forked after that
refuses to run backward (see main._warm_up).
"""

import torch


def warmup_step():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(2, 8)
    loss = torch.nn.functional.cross_entropy(model(x), torch.tensor([0, 1]))
    loss.item()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    optimizer.zero_grad()
