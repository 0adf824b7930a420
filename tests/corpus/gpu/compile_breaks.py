"""torch.compile graph breaks (AL600) at the user line that causes them; the syncs among them are AL100 too."""
import torch
import torch.nn as nn


@torch.compile
def scaled(x, w):
    y = x @ w
    if y.sum() > 0:  # expect: AL100:warning, AL600:warning
        y = y * 2
    return y * y.mean().item()  # expect: AL100:warning, AL600:warning


# atenlens: case_item_and_branch_in_a_compiled_function(torch.randn(4, 8, device="cuda"), torch.randn(8, 8, device="cuda"))
def case_item_and_branch_in_a_compiled_function(x, w):
    return scaled(x, w)


class Logged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        for _ in range(2):
            x = torch.relu(self.fc(x))
            print("activation", x.shape)  # expect: AL600:warning
        return x


# atenlens: case_print_in_a_compiled_module(torch.compile(Logged().cuda()), torch.randn(4, 8, device="cuda"))
def case_print_in_a_compiled_module(model, x):
    out = model(x)
    return out.sum()


def masked_mean(x):
    kept = x[x > 0]  # expect: AL100:warning, AL600:warning
    return kept.mean()


# atenlens: case_data_dependent_shape_in_a_loop(torch.randn(16, device="cuda"))
def case_data_dependent_shape_in_a_loop(x):
    fn = torch.compile(masked_mean, dynamic=False)
    total = x.new_zeros(())
    for _ in range(3):
        total = total + fn(x)
    return total


def decode_step(h, cache, positions):
    cache.add_(h)  # expect: AL602:warning
    return h * positions.float().mean()


# atenlens: case_reduce_overhead_with_a_mutated_input(torch.randn(4, 16, device="cuda"), torch.zeros(4, 16, device="cuda"))
def case_reduce_overhead_with_a_mutated_input(h, cache):
    step = torch.compile(decode_step, mode="reduce-overhead")
    return step(h, cache, torch.arange(4, device="cuda"))


def scale_by_host_table(h, table):
    return h * table.to(h.device, non_blocking=False).sum()  # expect: AL602:warning


# atenlens: case_reduce_overhead_with_a_cpu_tensor(torch.randn(4, 16, device="cuda"))
def case_reduce_overhead_with_a_cpu_tensor(h):
    step = torch.compile(scale_by_host_table, mode="reduce-overhead")
    return step(h, torch.ones(16))


def accumulate(h, cache):
    for _ in range(2):
        cache.mul_(0.5)  # expect: AL602:warning
        h = h + cache
    return h


# atenlens: case_reduce_overhead_mutating_in_a_loop(torch.randn(4, 16, device="cuda"), torch.zeros(4, 16, device="cuda"))
def case_reduce_overhead_mutating_in_a_loop(h, cache):
    return torch.compile(accumulate, mode="reduce-overhead")(h, cache)
