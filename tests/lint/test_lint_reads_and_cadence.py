"""Two classes of frequency: a read right after another read that already waited (nothing new
queued in between, so no new wait: information), and a throttle that gates the training itself
(`if self._should_train():`, which lets every update through: not a rare path); and one of
provenance: the elements of a module-level list of literals are host values. Each program is
also linted without the prefilter (class_findings.py)."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

SECOND_READ = dedent(
    """\
    import torch


    def train(model, loader, optimizer):
        model.cuda()
        losses, aligns = [], []
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss, align = model(x, y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            aligns.append(align.item())
    """
)


def test_a_read_right_after_a_read_that_waited_is_information() -> None:
    """`loss.item()` drains the queue; `align` was computed before it, so `align.item()` on the
    next line has nothing new to wait for (cebra's, pyod's, fedml's and tianshou's loss logs)."""
    assert findings(SECOND_READ) == [
        (12, 27, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            13,
            28,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the read on line 12 just "
            "before already waited for it: no new wait",
        ),
    ]


NEW_WORK_BETWEEN_READS = dedent(
    """\
    import torch


    def train(model, loader, optimizer):
        model.cuda()
        losses, aligns = [], []
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = model(x, y)
            losses.append(loss.item())
            loss.backward()
            optimizer.step()
            extra = model(x, y)
            aligns.append(extra.item())
            total = loss * 2
            aligns.append(loss.std().item())
    """
)


def test_a_read_after_new_work_waits_again() -> None:
    """A backward and a step after the first read, a value computed after it (`extra`), and
    arithmetic between two reads (`total = loss * 2`) each queue work the next read waits for."""
    message = "`.item()` inside a loop: the host waits for the GPU on every iteration"
    assert findings(NEW_WORK_BETWEEN_READS) == [
        (10, 27, "AL100", "warning", message),
        (14, 28, "AL100", "warning", message),
        (16, 33, "AL100", "warning", message),
    ]


TRAINING_CADENCE = dedent(
    """\
    import torch


    class Agent:
        def __init__(self, model):
            self.model = model.cuda()
            self.frames = 0

        def act(self, state):
            self.frames += 1
            if self._should_train():
                self._fit(state)

        def _should_train(self):
            return self.frames % 4 == 0

        def _fit(self, state):
            values = self.model(state.cuda())
            for v in values:
                self.history.append(v.item())
    """
)


def test_a_throttle_that_gates_training_is_no_rare_path() -> None:
    """`if self._should_train():` lets every update through (the ALL library's agents train on
    every step past the replay start), so `_fit` runs per update: a warning. The same code under
    `if self._should_log():` runs when the log throttle lets it: information."""
    assert findings(TRAINING_CADENCE) == [
        (20, 34, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]
    assert findings(TRAINING_CADENCE.replace("_should_train", "_should_log")) == [
        (
            20,
            34,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in `_fit`, which this "
            "file calls only from `act` under `if self._should_log():`, so not on every training step",
        )
    ]


MODULE_CONSTANT_SIZES = dedent(
    """\
    import logging

    import torch

    SIZES = [(), (1,), (3, 3)]


    class TestGradients:
        def test_square(self):
            for size in SIZES:
                tensor = torch.randn(size, device="cuda", requires_grad=True)
                out = tensor.pow(2)
                out.sum().backward()
                logging.info(f"square failed with size {size}")
                logging.info(f"gradient {tensor.grad}")
    """
)


def test_an_element_of_a_module_level_list_of_literals_is_a_host_value() -> None:
    """`for size in SIZES:` with `SIZES = [(), (1,), (3, 3)]` at module level: each `size` is a
    tuple of ints, so formatting it reads nothing (crypten's gradient tests). The gradient in the
    same loop of a test that takes a backward is still formatted as a tensor."""
    assert findings(MODULE_CONSTANT_SIZES) == [
        (
            15,
            36,
            "AL100",
            "information",
            "formatting a CUDA tensor (`{tensor.grad}`) inside a loop: the host waits for the GPU on every "
            "iteration of a loop in the test `test_square` (a test, not a training step)",
        )
    ]
    rebound = MODULE_CONSTANT_SIZES.replace("SIZES = [(), (1,), (3, 3)]", "SIZES = [(), (1,), (3, 3)]\nSIZES = load()")
    # (bound twice at module level: not known to be the literal, so `size` may be anything)
    assert [row[:2] for row in findings(rebound)] == [(15, 51), (16, 36)]


HOST_READ_FIRST = dedent(
    """\
    import torch


    def train(model, loader, optimizer):
        model.cuda()
        sizes, aligns = [], []
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss, align = model(x, y)
            loss.backward()
            optimizer.step()
            n = torch.tensor(len(x))
            sizes.append(n.item())
            aligns.append(align.item())
    """
)


def test_a_read_of_a_host_value_drains_nothing() -> None:
    """`sizes.append(n.item())` of a CPU tensor waits for nothing, so the `.item()` of `align`
    right after still waits for the step."""
    assert findings(HOST_READ_FIRST) == [
        (14, 28, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]
