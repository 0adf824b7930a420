"""Compiled code Dynamo captures whole: no graph break, no sync."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.fc2 = nn.Linear(64, 16)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def setup():
    model = Block().cuda()
    model.compile()
    return model, torch.optim.AdamW(model.parameters()), torch.randn(8, 16, device="cuda")


# atenlens: case_compiled_block_in_a_train_step(*setup())
def case_compiled_block_in_a_train_step(model, opt, x):
    for _ in range(2):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.detach()


@torch.compile(fullgraph=True)
def rms(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


# atenlens: case_fullgraph_function(torch.randn(4, 32, device="cuda"))
def case_fullgraph_function(x):
    return rms(x)
