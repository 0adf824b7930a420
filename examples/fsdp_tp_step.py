"""FSDP2 + tensor parallel on a 2-D mesh, as `torchrun --nproc-per-node 8` would start it:
8 ranks as 2 data-parallel replicas x 4 tensor-parallel shards (docs/distributed.md).

    atenlens trace examples/fsdp_tp_step.py::train_step                  # rank 0 of 8, one node
    atenlens trace examples/fsdp_tp_step.py::train_step --world-size 16 --gpus-per-node 4
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, HIDDEN, TP = 512, 2048, 4


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.up(x))
        return x + self.down(h)


class Model(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(FeedForward() for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def setup(batch: int = 8, seq: int = 128):
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size() // TP, TP), mesh_dim_names=("dp", "tp"))
    model = Model().cuda()
    for layer in model.layers:
        parallelize_module(layer, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt, torch.randn(batch, seq, DIM, device="cuda")


# atenlens-ranks: --world-size 8
# atenlens: train_step(*setup())
def train_step(model, opt, x):
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
