"""Classes of error found by the sixteenth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Sixteenth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

STEP_LOOP_NAMED_EPOCH = dedent(
    """\
    import torch


    class GAN(torch.nn.Module):
        def __init__(self, disc, n_iter, device="cuda"):
            super().__init__()
            self.disc = disc.to(device)
            self.opt = torch.optim.Adam(disc.parameters())
            self.n_iter = n_iter
            self.device = device

        def _train_discriminator(self, X):
            errors = []
            for epoch in range(self.n_iter):
                out = self.disc(X.to(self.device))
                err = -out.mean()
                self.opt.zero_grad()
                err.backward()
                self.opt.step()
                errors.append(err.item())
            return errors

        def fit(self, loader, epochs):
            for epoch in range(epochs):
                for X in loader:
                    self._train_discriminator(X)
                print(self.disc.weight.norm().item())
    """
)


def test_a_loop_named_epoch_whose_own_body_steps_the_optimizer_is_a_step_loop() -> None:
    """`for epoch in range(self.n_iter):` whose own body calls `self.opt.step()` takes a step per
    iteration (a discriminator's inner steps, per batch): its reads are warnings, not once per epoch."""
    assert findings(STEP_LOOP_NAMED_EPOCH) == [
        (20, 30, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


VERBOSITY_KEYS_AND_ALL = dedent(
    """\
    import torch


    def optimize(n, verbose=0):
        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.randn(n, 3, device=device, requires_grad=True)
        opt = torch.optim.Adam([x], lr=0.1)
        for i in range(5000):
            opt.zero_grad()
            energy = (x @ x.T).sum()
            if verbose > 1:
                print(f"{i}: {energy.item()}")
            energy.backward()
            opt.step()


    class PairCondition(torch.nn.Module):
        def forward(self, x, device="cuda"):
            coords = self.module(x.to(device)).coordinates
            renamed = {f"{k}_left": coords[k] for k in coords}
            return renamed


    def sample(domain, n, dim, device):
        found = torch.zeros((n, 1), dtype=bool, device=device)
        points = torch.zeros((n, dim), device=device)
        for _ in range(100):
            new = torch.rand((n, dim), device=device)
            valid = domain.contains(new)
            found[valid] = True
            points[valid] = new[valid]
            if all(found):
                break
        return points
    """
)


def test_a_verbosity_level_dict_comprehension_keys_and_builtin_all() -> None:
    """`if verbose > 1:` is a verbosity level (information); the keys of `{f"{k}_left": d[k] for k in
    d}` are names, not tensors; Python's `all(found)` of a CUDA tensor reads it on the host."""
    assert findings(VERBOSITY_KEYS_AND_ALL) == [
        (
            12,
            33,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `verbose > 1`",
        ),
        (
            32,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`found`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


CPU_STEPS_MASKS_AND_TEST_DEVICE = dedent(
    """\
    import unittest

    import torch


    def chunk_mask(q, chunk):
        out = []
        for i in range(chunk):
            mask = (torch.arange(chunk) <= i).to(q.device)
            out.append(q.masked_fill(~mask, 0))
        return out


    def level_mask(theta, L, n):
        upper = torch.triu(torch.ones(n, n), diagonal=1).to(theta.device)
        pairs = torch.cartesian_prod(torch.arange(n), torch.arange(n)).to(L.device)
        decay = torch.linspace(0, 1, n).pow(2).to(theta.device)
        return upper, pairs, decay


    def collect(perms, spans, device):
        out = []
        for start, end in spans:
            perm = torch.tensor(perms[start:end], device=device)
            ident = torch.arange(len(perm), device=device).unsqueeze(-1)
            out.append(perm[..., (perm != ident).any(dim=0)])
        return out


    class TestAlign(unittest.TestCase):
        def setUp(self):
            self.device = "cpu"

        def test_shapes(self):
            weight = torch.rand(4, 56).to(self.device)
            self.assertEqual(weight.shape, (4, 56))
    """
)


def test_cpu_tensors_through_comparisons_and_torch_functions_masks_by_reduction() -> None:
    """A factory moved after a comparison (`(torch.arange(n) <= i).to(d)`), inside `torch.triu` or
    `torch.cartesian_prod`, or after `.pow(2)` is AL302; a mask made by `.any(dim=0)` indexes with a
    boolean mask; a test case whose `setUp` sets `self.device = "cpu"` moves nothing."""
    assert findings(CPU_STEPS_MASKS_AND_TEST_DEVICE) == [
        (
            9,
            42,
            "AL302",
            "warning",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            15,
            53,
            "AL302",
            "warning",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            16,
            67,
            "AL302",
            "warning",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            17,
            43,
            "AL302",
            "warning",
            "`torch.linspace(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            26,
            19,
            "AL100",
            "warning",
            "`perm[..., (perm != ident).any(dim=0)]` (a boolean mask: the result's shape depends on "
            "the data) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


NOT_A_TENSOR_BRANCH = dedent(
    """\
    import torch


    class LaProp(torch.optim.Optimizer):
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if "lr_avg" not in state:
                        state["lr_avg"] = torch.zeros_like(group["lr"]) if torch.is_tensor(group["lr"]) else 0.0
                    state["lr_avg"] = state["lr_avg"] * 0.9 + 0.1 * group["lr"]
                    if torch.is_tensor(state["lr_avg"]):
                        size = torch.where(state["lr_avg"] != 0.0, group["lr"] / state["lr_avg"], 0.0)
                    else:
                        size = group["lr"] / state["lr_avg"] if state["lr_avg"] != 0.0 else 0.0
                    if state["lr_avg"].abs().sum() > 0:
                        p.add_(p.grad, alpha=-1)
    """
)


def test_the_branch_where_a_value_is_tested_not_a_tensor_reads_no_tensor() -> None:
    """The `else` of `if torch.is_tensor(state["lr_avg"]):` holds a Python number (timm's LaProp keeps
    the learning-rate average as a float unless the learning rate is a tensor); the same value read
    outside that branch is still a CUDA tensor."""
    assert findings(NOT_A_TENSOR_BRANCH) == [
        (
            16,
            19,
            "AL100",
            "warning",
            'a CUDA tensor as a condition (`state["lr_avg"].abs().sum() > 0`) inside a loop: the host '
            "waits for the GPU on every iteration",
        )
    ]


ONNX_EXPORT_TIMING = dedent(
    """\
    import time

    import torch


    def export(model, inputs, path):
        model = model.to("cuda")
        start = time.time()
        torch.onnx.export(model, inputs.to("cuda"), path)
        return time.time() - start
    """
)


def test_a_timed_onnx_export_writes_the_weights_and_waits() -> None:
    """`torch.onnx.export(...)` writes every weight to a file, which waits for the GPU: the interval
    around it is measured whole (silent)."""
    assert findings(ONNX_EXPORT_TIMING) == []
