"""A loop in a function that every call in its file runs rarely (from `__init__`, from tests,
under a throttle, or from such a function one level up) and that shows no step of its own (walks no
batches, counts no steps, runs no model, takes no training step): a read there is paid once per
object, test or throttled step, so it is information, and the message says why. Each program has
its exact findings (line, 0-based column, code, severity, message) and is also linted without the
prefilter (every definition parsed), which must give the same findings: the prefilter keeps the
methods that call a kept method of their class."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

SET_UP_ONLY = dedent(
    """\
    import torch


    class MaskGenerator(torch.nn.Module):
        def __init__(self, width):
            self.width = width
            self.pdf = self.get_pdf()

        def get_pdf(self, max_iter=100):
            pdf = torch.linspace(0, 1, self.width, device="cuda")
            a, b = 0.0, 1.0
            for i in range(max_iter):
                c = (a + b) / 2
                fraction = (pdf + c).clamp(0, 1).mean().item()
                if fraction < 0.25:
                    a = c
                else:
                    b = c
            return pdf + a

        def step(self, x):
            return x * self.pdf
    """
)


def test_a_loop_of_a_method_only_init_calls_is_information() -> None:
    """`self.pdf = self.get_pdf()` in `__init__` is the only call of `get_pdf`: its bisection's
    `.item()` is paid once per object, not per step (deepinv's `PolyOrderMaskGenerator`)."""
    assert findings(SET_UP_ONLY) == [
        (
            14,
            52,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in "
            "`get_pdf`, which this file calls only from `__init__` (once per object or run), so not on "
            "every training step",
        )
    ]


CALLED_FROM_FORWARD_TOO = dedent(
    """\
    import torch


    class MaskGenerator(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.width = width
            self.pdf = self.get_pdf(torch.device("cuda"))

        def get_pdf(self, device):
            pdf = torch.linspace(0, 1, self.width, device=device)
            total = 0.0
            for i in range(self.width):
                total += pdf[i].item()
            return pdf / total

        def forward(self, x):
            return x * self.get_pdf(x.device)
    """
)


def test_a_loop_of_a_method_forward_also_calls_stays_a_warning() -> None:
    """The same method also called from `forward`: every step runs its loop, a warning."""
    assert findings(CALLED_FROM_FORWARD_TOO) == [
        (14, 28, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


HELPER_OF_TESTS = dedent(
    """\
    import torch

    DEVICE = torch.device("cuda")


    def check_counts(output, ensemble_size):
        counts = [0] * ensemble_size
        for i, v in enumerate(output.cuda()):
            counts[int(v.item()) % ensemble_size] += 1
        return counts


    def test_random_propagation():
        output = torch.arange(8, device=DEVICE)
        assert check_counts(output, 4) == [2, 2, 2, 2]


    def test_fixed_propagation():
        output = torch.zeros(8, dtype=torch.long, device=DEVICE)
        assert check_counts(output, 4) == [8, 0, 0, 0]
    """
)


def test_a_helper_only_tests_call_is_information() -> None:
    """A module-level helper that only `test_*` functions call reads per element in a test, not in
    a training step (mbrl's `_check_output_counts_and_update_history`); the message names the tests."""
    assert findings(HELPER_OF_TESTS) == [
        (
            9,
            21,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in "
            "`check_counts`, which this file calls only from tests (`test_random_propagation`, "
            "`test_fixed_propagation`), so not on every training step",
        )
    ]


CALLED_UNDER_A_THROTTLE = dedent(
    """\
    import torch


    def grad_norms(model):
        norms = []
        for p in model.parameters():
            norms.append(p.grad.norm().item())
        return norms


    def train(model, loader, optimizer):
        model.cuda()
        for step, (x, y) in enumerate(loader):
            loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
            loss.backward()
            if step % 100 == 0:
                print(grad_norms(model))
            optimizer.step()
            optimizer.zero_grad()
    """
)


def test_a_helper_called_under_a_throttle_is_information() -> None:
    """`if step % 100 == 0: print(grad_norms(model))`: the helper's per-parameter reads run on one
    step in a hundred (torchquantum's `_get_grad`)."""
    assert findings(CALLED_UNDER_A_THROTTLE) == [
        (
            7,
            35,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in "
            "`grad_norms`, which this file calls only from `train` under `if step % 100 == 0:`, so not on "
            "every training step",
        )
    ]


CALLED_FROM_SET_UP_TWO_LEVELS_UP = dedent(
    """\
    import torch


    def partition(graph, world_size):
        ids = graph.nodes.cuda()
        parts = []
        for rank in range(world_size):
            parts.append((ids % world_size == rank).sum().item())
        return parts


    def partition_graph(graph, world_size):
        graph = graph.coalesce()
        return partition(graph, world_size)


    class DistributedGraph(torch.nn.Module):
        def __init__(self, graph, world_size):
            self.sizes = partition_graph(graph, world_size)
    """
)


def test_a_helper_of_a_set_up_helper_is_information() -> None:
    """`partition` is called only by `partition_graph`, which only `__init__` calls: a graph is
    partitioned once per object (physicsnemo's `DistributedGraph`)."""
    assert findings(CALLED_FROM_SET_UP_TWO_LEVELS_UP) == [
        (
            8,
            54,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in "
            "`partition`, which this file calls only from `partition_graph`, which this file calls only "
            "from `__init__` (once per object or run), so not on every training step",
        )
    ]


HANDED_ON = dedent(
    """\
    import torch


    def column_sums(rows):
        sums = []
        for row in rows.cuda():
            sums.append(row.sum().item())
        return sums


    class Aggregator:
        def __init__(self, rows):
            self.first = column_sums(rows)
            self.hook = column_sums
    """
)


def test_a_function_the_file_hands_on_stays_a_warning() -> None:
    """`self.hook = column_sums` hands the function to callers the file does not show: the one call
    in `__init__` does not decide how often it runs."""
    assert findings(HANDED_ON) == [
        (7, 30, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


VALIDATION_PASS_PER_EPOCH = dedent(
    """\
    import torch


    def infer(valid_queue, model, criterion):
        total = 0.0
        for step, (x, y) in enumerate(valid_queue):
            logits = model(x.cuda())
            loss = criterion(logits, y.cuda())
            total += loss.item()
        return total


    def main(model, criterion, queue):
        model.cuda()
        for epoch in range(10):
            print(infer(queue, model, criterion))
    """
)


def test_a_loop_that_runs_a_model_stays_a_warning_however_rarely_called() -> None:
    """`infer` is called once per epoch, but its loop runs the model on every batch of the
    validation set: a read per batch is a warning (fedml's DARTS `infer`)."""
    assert findings(VALIDATION_PASS_PER_EPOCH) == [
        (9, 22, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]
