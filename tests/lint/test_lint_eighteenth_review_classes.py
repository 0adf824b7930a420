"""Classes of error found by the eighteenth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Eighteenth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

from atenlens.lint.engine import lint_source_strict

SEEDED_THROUGH_A_HELPER = dedent(
    """\
    import torch


    def _init_env(rank):
        torch.backends.cudnn.deterministic = True
        torch.manual_seed(rank)


    def run_model(rank, model, optimizer):
        _init_env(rank)

        def run_steps(num_steps):
            for step in range(num_steps):
                data = torch.randn(4, 2).cuda()
                loss = model(data).sum()
                loss.backward()
                optimizer.step()

        run_steps(10)


    def main():
        noise = torch.randn(16, 8).to("cuda")
        return noise
    """
)


def test_a_draw_seeded_by_a_helper_gets_no_rewrite_and_main_runs_once() -> None:
    """`_init_env(rank)` seeds the default generators, so a draw after it (in `run_model` or a function
    nested in it) keeps no rewrite to the device; a create-then-move in `main()` runs once per run:
    information, with its fix."""
    assert findings(SEEDED_THROUGH_A_HELPER) == [
        (
            14,
            37,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=` (the generators are seeded above: drawn there, the numbers differ from the CPU's)",
        ),
        (
            23,
            31,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per run (`main`): a small cost, not paid every step",
        ),
    ]
    fixes = [
        f.fix.edits[0].new_text if f.fix is not None else None for f in lint_source_strict(SEEDED_THROUGH_A_HELPER)
    ]
    assert fixes == [None, 'torch.randn(16, 8, device="cuda")']
    # without the helper's seed, the draw is rewritten
    unseeded = SEEDED_THROUGH_A_HELPER.replace("    torch.manual_seed(rank)\n", "")
    fixes = [f.fix.edits[0].new_text if f.fix is not None else None for f in lint_source_strict(unseeded)]
    assert fixes == ['torch.randn(4, 2, device="cuda")', 'torch.randn(16, 8, device="cuda")']


WORKER_OF_A_TEST = dedent(
    """\
    import torch


    def run_allreduce(rank, nprocs):
        tensor = torch.rand(100).cuda()
        return tensor


    class TestCommunicator:
        def test_allreduce(self, mp):
            process = mp.Process(target=run_allreduce, args=(0, 2))
            process.start()
    """
)


def test_a_function_used_only_by_the_tests_is_test_set_up() -> None:
    """`run_allreduce` is used only by a test (handed to `mp.Process`): its create-then-move is a
    test's set-up."""
    assert findings(WORKER_OF_A_TEST) == [
        (
            5,
            29,
            "AL302",
            "information",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per test (`run_allreduce` is used only by the file's tests): a small "
            "cost, not paid every step",
        )
    ]


TEST_NAMED_METHOD = dedent(
    """\
    import torch


    class CentralizedTrainer:
        def __init__(self, model, test_global, device):
            self.model = model.to(device)
            self.test_global = test_global
            self.device = device

        def test_on_all_clients(self):
            correct = 0
            for x, target in self.test_global:
                pred = self.model(x.to(self.device))
                correct += pred.argmax(1).eq(target.to(self.device)).sum().item()
            return correct


    def attack(model, x, max_iterations, device):
        x = x.to(device)
        for it in range(max_iterations):
            loss = model(x).sum()
            loss.backward()
            if (it + 1 == max_iterations) or it % 500 == 0:
                print(loss.item())
    """
)


def test_a_test_named_method_of_a_trainer_is_no_unit_test_and_last_step_throttles() -> None:
    """`test_on_all_clients` of a trainer class evaluates every batch: its read is a warning, not a unit
    test's. `(it + 1 == max_iterations) or it % 500 == 0` holds on a few iterations only."""
    assert findings(TEST_NAMED_METHOD) == [
        (14, 71, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            24,
            23,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `(it + 1 == "
            "max_iterations) or it % 500 == 0`",
        ),
    ]


HOST_INPUTS_NO_DEVICE = dedent(
    """\
    import numpy as np
    import torch


    class VPG:
        def train_once(self, samples):
            losses = []
            self._policy_opt.zero_grad()
            for path in samples:
                obs = torch.Tensor(path["observations"])
                returns = torch.Tensor(np.cumsum(path["rewards"]))
                loss = (-self.policy(obs) * returns).mean()
                loss.backward()
                losses.append(loss.item())
            self._policy_opt.step()
            return np.mean(losses)
    """
)


def test_a_file_naming_no_device_that_builds_tensors_of_host_data_reads_nothing() -> None:
    """A file that never names a device and builds its inputs from host data (`torch.Tensor(path[...])`)
    runs its policy on the CPU: its loss is no CUDA tensor."""
    assert findings(HOST_INPUTS_NO_DEVICE) == []
