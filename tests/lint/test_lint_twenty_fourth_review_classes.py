"""Classes of error found by the twenty-fourth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twenty-fourth review"), each with a small program and the exact findings: line, column (0-based),
code, severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

ANNOTATED_AGGREGATOR = dedent(
    """\
    import torch
    from sheeprl.utils.metric import MetricAggregator


    def train(agent, loader, optimizer, aggregator: MetricAggregator | None):
        for batch in loader:
            loss = agent(batch.cuda())
            loss.backward()
            optimizer.step()
            if aggregator and not aggregator.disabled:
                aggregator.update("Loss/value_loss", loss.detach())


    def main(cfg, agent, loader, optimizer):
        device = torch.device("cuda")
        aggregator = None
        if cfg.metric.log_level > 0:
            aggregator: MetricAggregator = instantiate(cfg.metric.aggregator).to(device)
        for update in range(cfg.total_steps):
            train(agent, loader, optimizer, aggregator)
            if aggregator and not aggregator.disabled:
                print(aggregator.compute())
    """
)


def test_a_name_annotated_as_a_class_that_is_no_tensor_is_no_tensor() -> None:
    """`aggregator: MetricAggregator = instantiate(...).to(device)` and the parameter
    `aggregator: MetricAggregator | None`: `.to(device)` moves the object's metrics and returns
    it, and `if aggregator:` tests an object, not a tensor (sheeprl's metric aggregator, 44
    findings in 16 files). Annotated as a tensor (or not at all), the same code is read as one."""
    assert findings(ANNOTATED_AGGREGATOR) == []
    as_tensor = ANNOTATED_AGGREGATOR.replace("MetricAggregator | None", "torch.Tensor | None").replace(
        "aggregator: MetricAggregator =", "aggregator ="
    )
    assert [row[:4] for row in findings(as_tensor)] == [
        (10, 11, "AL100", "warning"),
        (21, 11, "AL100", "warning"),
        (22, 12, "AL100", "warning"),
    ]


SET_UP_BEFORE_A_TRAINING_LOOP = dedent(
    """\
    import torch


    def train_domain_classifier(model, x, y, epochs, device):
        model.to(device)
        labels = torch.zeros(len(x)).to(device)
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(epochs):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return model


    def sinkhorn(scores, num_iters, device):
        q = torch.exp(scores)
        r = torch.ones(q.shape[0]).to(device)
        for it in range(num_iters):
            q = q * (r / q.sum(dim=1)).unsqueeze(1)
        return q
    """
)


def test_a_create_then_move_before_the_functions_own_training_loop_runs_once_per_call() -> None:
    """`labels` is made before the loop that trains (backward, step) and reused in it: once per
    fit, not per step (torchcp's domain classifier). A loop that only counts iterations (Sinkhorn's)
    runs inside every step of its caller: the copy before it stays a warning."""
    assert findings(SET_UP_BEFORE_A_TRAINING_LOOP) == [
        (
            6,
            33,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per call of `train_domain_classifier`, before its loop of steps on line 8: a small cost, "
            "not paid every step",
        ),
        (
            18,
            31,
            "AL302",
            "warning",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


THROTTLED_CALL = dedent(
    """\
    import torch


    class MultiscaleCallback:
        def __init__(self, frequency):
            self.frequency = frequency

        def __call__(self, inputs, batch_idx):
            if batch_idx % self.frequency == 0:
                self.size = torch.LongTensor(2).to(inputs.device)
            return inputs
    """
)


def test_a_create_then_move_under_a_modulus_throttle_runs_only_on_those_calls() -> None:
    """`if batch_idx % self.frequency == 0:` in a callback's `__call__` (outside any loop): the
    copy is paid every N batches, not on every call (super-gradients' multiscale callback)."""
    assert findings(THROTTLED_CALL) == [
        (
            10,
            44,
            "AL302",
            "information",
            "`torch.LongTensor(...)` is created on the CPU and then copied to the device: create it there with "
            "`torch.empty(..., dtype=torch.int64, device=...)` (a legacy constructor takes no CUDA `device=`); it "
            "runs only on calls where `batch_idx % self.frequency == 0`: a small cost, not paid every step",
        )
    ]


HOST_ROWS_COMPARED = dedent(
    """\
    import torch


    def collect(model, batches, pad, device):
        for batch in batches:
            generated = model.generate(batch["input_ids"].to(device))
            query = batch["input_ids"].detach().cpu()
            response = generated[:, 10:].detach().cpu()
            for i in range(len(query)):
                start = (query[i] != pad).nonzero()[0]
                end = (response[i] != pad).nonzero()[-1]
                kept = (generated[i] != pad).nonzero()
    """
)


def test_a_row_of_a_host_copy_compared_with_a_value_stays_on_the_host() -> None:
    """`query = ids.cpu()`, then `(query[i] != pad).nonzero()`: a CPU row compared with a number
    (or a CPU tensor: a CUDA one would raise) is on the CPU (llamafactory's PPO trainer). The
    same test on a row of the device tensor is a read."""
    assert findings(HOST_ROWS_COMPARED) == [
        (
            12,
            19,
            "AL100",
            "warning",
            "`.nonzero()` (its output's shape depends on the data) inside a loop: the host waits for the GPU on "
            "every iteration",
        )
    ]


DATA_PARAMETER = dedent(
    """\
    import torch


    def transfer(source_tensor, offset=(0, -40.0, -3.0), voxel_size=(.05, .05, .1), beam_size=4):
        source = source_tensor.indices.float()
        offset = torch.Tensor(offset).to(source.device)
        voxel_size = torch.Tensor(voxel_size).to(source.device)
        scores = torch.Tensor(beam_size).to(source.device)
        return source * voxel_size + offset, scores
    """
)


def test_a_parameter_whose_default_is_a_tuple_of_floats_is_data_not_a_size() -> None:
    """`torch.Tensor(voxel_size)` with `voxel_size=(.05, .05, .1)` copies three values (mmdet3d's
    sparse encoder): no allocation to move, and the fix `torch.empty(voxel_size, ...)` would
    raise. `beam_size=4` is a size: `torch.Tensor(beam_size)` allocates four values."""
    assert findings(DATA_PARAMETER) == [
        (
            8,
            37,
            "AL302",
            "warning",
            "`torch.Tensor(...)` is created on the CPU and then copied to the device: create it there with "
            "`torch.empty(..., device=...)` (a legacy constructor takes no CUDA `device=`)",
        )
    ]


SECOND_CONVERSION = dedent(
    """\
    import torch


    def decide(model, batches, device):
        for batch in batches:
            ranges = model(batch.to(device))
            for k in range(len(ranges)):
                lo = int(ranges[k][0])
                hi = int(ranges[k][1])
                print(lo, hi)
    """
)


def test_a_conversion_right_after_a_conversion_that_waited_is_information() -> None:
    """`lo = int(ranges[k][0])` waits for `ranges`; `hi = int(ranges[k][1])` reads the same
    finished tensor (ms-swift's decision head)."""
    assert findings(SECOND_CONVERSION) == [
        (
            8,
            17,
            "AL100",
            "warning",
            "`int()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            9,
            17,
            "AL100",
            "information",
            "`int()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration, but the read on "
            "line 8 just before already waited for it: no new wait",
        ),
    ]


INPUT_GRADIENT = dedent(
    """\
    import numpy as np
    import torch


    class Estimator:
        def loss_gradient(self, x, y):
            loss, x_grad = self._get_losses(x, y)
            self._model.zero_grad()
            loss.backward()
            if isinstance(x, np.ndarray):
                return x_grad.grad.cpu().numpy()
            return x_grad.grad.clone()

        def fit_step(self, x, y, optimizer):
            loss, _ = self._get_losses(x, y)
            loss.backward()
            optimizer.step()
            return loss.cpu().numpy()
    """
)


def test_a_function_named_for_the_gradient_it_returns_takes_no_training_step() -> None:
    """`loss_gradient` runs a backward to return the input's gradient (its inputs were made
    differentiable by another method) and steps no optimizer: no training step, and its NumPy
    result is the function's answer (ART's estimators). `fit_step` steps the optimizer."""
    assert findings(INPUT_GRADIENT) == [
        (
            18,
            20,
            "AL100",
            "warning",
            "`.cpu()` in `fit_step`, which takes a training step: the host waits for the GPU on every training step",
        )
    ]


HOOK_ONCE_PER_RUN = dedent(
    """\
    import torch
    import lightning as L


    class DeepClusterV2(L.LightningModule):
        def on_train_start(self):
            size = len(self.trainer.train_dataloader) * self.batch_size
            self.register_buffer("local_memory_index", torch.zeros(size).long().to(self.device))

        def training_step(self, batch, batch_idx):
            noise = torch.randn(8, 16).to(self.device)
            return self.model(batch, noise).mean()
    """
)


def test_a_create_then_move_in_a_hook_run_once_per_run_is_information() -> None:
    """`on_train_start` runs once per fit (solo-learn's memory banks); `training_step` per batch."""
    assert findings(HOOK_ONCE_PER_RUN) == [
        (
            8,
            76,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per epoch or run (`on_train_start` is a hook a trainer calls that often): a small cost, "
            "not paid every step",
        ),
        (
            11,
            35,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


NESTED_RESPONSE = dedent(
    """\
    import torch


    def embed(model, batches, device):
        res = []
        for batch in batches:
            preds = model(batch.to(device))
            for i, pred in enumerate(preds):
                res.append(EmbeddingResponse(model="m", data=[EmbeddingResponseData(index=i, embedding=pred.tolist())]))
        return res
    """
)


def test_a_copy_kept_in_a_response_nested_in_a_list_is_collecting_results() -> None:
    """`res.append(Response(data=[Item(embedding=pred.tolist())]))`: the embedding is kept, in a
    list handed to a constructor whose object the loop appends (ms-swift's embedding engine), as
    `rows.append(Row(embedding=p.tolist()))` is."""
    assert findings(NESTED_RESPONSE) == [
        (
            9,
            104,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting results on the "
            "host (`outputs.append(t.tolist())`: one copy per batch, as intended)",
        )
    ]
