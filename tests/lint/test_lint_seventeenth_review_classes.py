"""Classes of error found by the seventeenth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Seventeenth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

CREATE_THEN_MOVE_BY_FREQUENCY = dedent(
    """\
    import torch


    class Scorer(torch.nn.Module):
        def __init__(self, n, device):
            super().__init__()
            self.register_buffer("degree", torch.zeros(n).to(device))

        def forward(self, x):
            mask = torch.ones(x.shape[0]).to(x.device)
            return x * mask + self.degree


    class Beam(object):
        def __init__(self, size, device):
            self.scores = torch.zeros(size).to(device)


    def test_scorer():
        image = torch.randn(1, 3, 8, 8).to("cuda")
        return Scorer(8, "cuda")(image)


    def make_noise(n, dim, device):
        return torch.randn(n, dim).to(device)


    weights = torch.ones(4).to("cuda")
    """
)


def test_a_create_then_move_paid_once_is_information() -> None:
    """A create-then-move in a test's set-up, in the `__init__` of a module (built once per run) or in
    module-level code is paid once: information, saying so. In `forward`, in a helper called from
    anywhere (`make_noise`) and in the `__init__` of a plain object (a beam built per example) it
    stays a warning."""
    assert findings(CREATE_THEN_MOVE_BY_FREQUENCY) == [
        (
            7,
            54,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per call of `__init__` (set-up, not a step): a small cost, not paid "
            "every step",
        ),
        (
            10,
            38,
            "AL302",
            "warning",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            16,
            40,
            "AL302",
            "warning",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            20,
            36,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per test (`test_scorer`): a small cost, not paid every step",
        ),
        (
            25,
            31,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            28,
            24,
            "AL302",
            "information",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once (module-level code): a small cost, not paid every step",
        ),
    ]


STATE_CREATED_ONCE = dedent(
    """\
    import torch


    class Adam(torch.optim.Optimizer):
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros(p.shape[0]).to(p.device)


    def rollout(envs, done, n_envs, batch_size, device):
        masks = torch.FloatTensor(1 - done).to(device)
        sizes = torch.FloatTensor(batch_size * 2).to(device)
        return masks, sizes
    """
)


def test_optimizer_state_made_on_the_first_step_and_arithmetic_data_as_size() -> None:
    """An optimizer state created under `if len(state) == 0:` in `step` runs on the first step only:
    information. `torch.FloatTensor(1 - done)` holds data (`done` is an array from `env.step`), not a
    size: nothing to report; `torch.FloatTensor(batch_size * 2)` is a size."""
    assert findings(STATE_CREATED_ONCE) == [
        (
            10,
            63,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs only on iterations where `len(state) == 0`: a small cost, not paid every "
            "step",
        ),
        (
            15,
            46,
            "AL302",
            "warning",
            "`torch.FloatTensor(...)` is created on the CPU and then copied to the device: create it there "
            "with `torch.empty(..., dtype=torch.float32, device=...)` (a legacy constructor takes no CUDA `device=`)",
        ),
    ]


VALIDATION_BESIDE_TRAINING = dedent(
    """\
    import torch


    def train(net, train_loader, val_loader, optimizer, scheduler, criterion, device, epochs):
        for epoch in range(epochs):
            for x, y in train_loader:
                loss = criterion(net(x.to(device)), y.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            scheduler.step()
            val_result = []
            for x, y in val_loader:
                info = {}
                out = net(x.to(device))
                info["pred"] = out.cpu().numpy().tolist()
                val_result.append(info)
    """
)


def test_a_validation_loop_beside_the_training_loop_takes_no_step() -> None:
    """The validation loop inside `for epoch in ...:` beside the training loop takes no training step
    (the training loop's `optimizer.step()` and the epoch's `scheduler.step()` are not its own): the
    predictions it stores under a key are its results, kept on purpose."""
    assert findings(VALIDATION_BESIDE_TRAINING) == [
        (
            16,
            31,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on "
            "the host (`results[key] = t.cpu()`: one copy per result, as intended)",
        )
    ]


OWN_LOADER_NO_DEVICE = dedent(
    """\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    class Detector:
        def fit(self, X, epochs):
            loader = DataLoader(TensorDataset(torch.tensor(X)), batch_size=32)
            for epoch in range(epochs):
                for (batch,) in loader:
                    loss = self.model(batch).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    self.history.append(loss.item())
    """
)


def test_a_file_naming_no_device_with_its_own_loader_trains_on_the_cpu() -> None:
    """A file that never names a device and builds its own `DataLoader` feeds the model the loader's CPU
    batches: its loss is on the CPU, nothing to report."""
    assert findings(OWN_LOADER_NO_DEVICE) == []


# The same loop with a loader that `accelerator.prepare` puts on the device
PREPARED_LOADER = OWN_LOADER_NO_DEVICE.replace(
    "import torch\n", "import torch\nfrom accelerate import Accelerator\n", 1
).replace(
    "loader = DataLoader(TensorDataset(torch.tensor(X)), batch_size=32)",
    "loader = self.accelerator.prepare(DataLoader(TensorDataset(torch.tensor(X)), batch_size=32))",
)


def test_a_loader_that_accelerate_prepares_is_on_the_device() -> None:
    """The same loop with a loader that `accelerator.prepare` moves to the device: the per-step read is
    reported."""
    assert findings(PREPARED_LOADER) == [
        (15, 41, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


CPU_CHOSEN = dedent(
    """\
    import torch


    def main(num_episodes, model, x, y):
        device = "cpu"
        model = model.to(device)
        optimizer = torch.optim.Adam(model.parameters())
        for e in range(num_episodes):
            loss_val = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            loss_val.backward()
            optimizer.step()
            print(f"{e}: {loss_val.item()}")
    """
)


def test_a_file_that_chooses_the_cpu_reads_nothing_from_a_gpu() -> None:
    """`device = "cpu"` as a statement of its own, and no CUDA anywhere in the file: nothing is on a GPU."""
    assert findings(CPU_CHOSEN) == []


BATCH_ELEMENTS_MOVED = dedent(
    """\
    import torch


    class Trainer:
        def __init__(self):
            self.loss_information = {"generator_losses": 0.0, "generator_iters": 0}

        def train(self, loader, device, epochs):
            for epoch in range(epochs):
                for dats in loader:
                    result = self.model([dats[0].to(device), dats[1].to(device)])
                    loss = self.criterion(result["out"], dats[-1].to(device))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    target = dats[-1].cpu().numpy()
                    predicted = result["out"].cpu().numpy()
                    if self.loss_information["generator_iters"] > 0:
                        self.log(target, predicted)
    """
)


def test_a_batch_whose_elements_are_moved_stays_on_the_host() -> None:
    """`dats[0].to(device)` moves a copy of an element: the loader's batch `dats` stays on the host, so
    `dats[-1].cpu()` reads nothing from the GPU, while the model's output is read every step. A key
    naming a count (`"generator_iters"`) in a dict of losses holds a number."""
    assert findings(BATCH_ELEMENTS_MOVED) == [
        (17, 42, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration")
    ]


FIXTURE_AND_ONE_PASS = dedent(
    """\
    import os
    import pytest
    import torch


    @pytest.fixture
    def image(device):
        return torch.randn(1, 3, 64, 64).to(device)


    def dump_first_batch(net, loader, device, out_dir):
        for img, label in loader:
            spikes = net(img.to(device))
            torch.save(spikes.cpu(), os.path.join(out_dir, "spikes.pt"))
            print(spikes.sum().item())
            exit()
    """
)


def test_a_fixture_is_test_set_up_and_a_loop_ending_in_exit_runs_once() -> None:
    """A pytest fixture is a test's set-up: its create-then-move is information. A loop whose body ends
    in `exit()` runs one pass: its reads are not per iteration."""
    assert findings(FIXTURE_AND_ONE_PASS) == [
        (
            8,
            37,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per test (`image`): a small cost, not paid every step",
        )
    ]


CUDA_WHEN_AVAILABLE = dedent(
    """\
    import torch


    def main(num_episodes, model, x, y):
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = model.to(device)
        optimizer = torch.optim.Adam(model.parameters())
        for e in range(num_episodes):
            loss_val = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            loss_val.backward()
            optimizer.step()
            print(f"{e}: {loss_val.item()}")
    """
)


def test_a_file_that_picks_cuda_when_available_is_reported() -> None:
    """The same script choosing `"cuda" if torch.cuda.is_available() else "cpu"`: reported."""
    assert findings(CUDA_WHEN_AVAILABLE) == [
        (12, 31, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]
