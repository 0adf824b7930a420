"""Classes of error found by the twentieth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twentieth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

ROWS_THROUGH_REVERSED_LIST = dedent(
    """\
    import torch


    def explain(model, x, num_layers):
        x = x.cuda()
        scores = model(x)
        for layer in reversed(list(range(num_layers))):
            print(f"training the mask of layer {layer}")
        for row in reversed(list(x)):
            print(f"input {row}")
    """
)


def test_reversed_and_list_give_the_elements_they_wrap() -> None:
    """`for row in reversed(list(x)):` walks the rows of `x`, a CUDA tensor: formatting one waits, a
    warning (`reversed`, `list`, `tuple`, `sorted` and `iter` give the elements they wrap)."""
    assert findings(ROWS_THROUGH_REVERSED_LIST) == [
        (
            10,
            22,
            "AL100",
            "warning",
            "formatting a CUDA tensor (`{row}`) inside a loop: the host waits for the GPU on every iteration",
        )
    ]


LAYER_NUMBER_IN_A_TRAINING_LOOP = dedent(
    """\
    import torch


    class Explainer(torch.nn.Module):
        def train_explainer(self, model, x, edge_index):
            optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
            for layer in reversed(list(range(self.num_layers))):
                if self.log:
                    print(f"Train explainer for layer {layer}")
                for epoch in range(self.epochs):
                    optimizer.zero_grad()
                    loss = self.loss(model(x, edge_index), layer)
                    loss.backward()
                    optimizer.step()
    """
)


def test_a_number_from_a_wrapped_range_is_no_tensor() -> None:
    """`for layer in reversed(list(range(self.num_layers))):` gives Python ints: `f"{layer}"` reads
    no tensor (torch_geometric's GraphMaskExplainer)."""
    assert findings(LAYER_NUMBER_IN_A_TRAINING_LOOP) == []


DEVICE_TEST_BOUND_TO_A_NAME = dedent(
    """\
    import torch


    class Sampler:
        def sample(self, model, x, index):
            weight = model(x)
            is_cuda = weight.device.type == "cuda"
            if not is_cuda:
                zero_weight = weight == 0
                while zero_weight.any():
                    index = torch.where(zero_weight, index - 1, index)
                    zero_weight = weight[index] == 0
            else:
                for i in range(index.numel()):
                    if weight[index[i]] == 0:
                        index[i] -= 1
            return index
    """
)


def test_a_device_test_bound_to_a_name_marks_the_host_path() -> None:
    """`is_cuda = weight.device.type == "cuda"`, then `if not is_cuda:`: the tensors of that branch are
    on the host, as under `if not weight.is_cuda:`; the other branch still waits (torchrl's
    prioritized sampler)."""
    assert findings(DEVICE_TEST_BOUND_TO_A_NAME) == [
        (
            15,
            19,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`weight[index[i]] == 0`) inside a loop: the host waits for the "
            "GPU on every iteration",
        )
    ]


LOCAL_NAME_SET_TO_NONE = dedent(
    """\
    import torch


    def check_images(input_ids, image_grid_thw, num_images):
        input_ids = input_ids.cuda()
        if image_grid_thw is not None and num_images is not None:
            has_mismatch = False
            for b in range(input_ids.shape[0]):
                tokens = (input_ids[b] == 1).sum().item()
                if tokens != num_images[b]:
                    has_mismatch = True
            if has_mismatch:
                image_grid_thw = None
        return image_grid_thw
    """
)


def test_a_local_name_set_to_none_outside_a_loop_is_no_one_shot_flag() -> None:
    """`if image_grid_thw is not None ...:` whose body ends `image_grid_thw = None` runs on every call:
    a local name is set again by the next call, so the loop inside reads on every iteration (trl's
    GRPO trainer)."""
    assert findings(LOCAL_NAME_SET_TO_NONE) == [
        (9, 47, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


LOOP_OBJECT_SET_TO_NONE_AND_A_STEP_GATE = dedent(
    """\
    import torch


    class Brain:
        def check_gradients(self):
            for param in self.modules.parameters():
                if param.requires_grad and param.grad is not None:
                    if not torch.isfinite(param.grad).all():
                        param.grad = None

        def optimizers_step(self):
            self.scaler.unscale_(self.optimizer)
            self.check_gradients()
            self.scaler.step(self.optimizer)
            self.scaler.update()

        def fit_batch(self, batch):
            loss = self.compute_loss(batch)
            self.scaler.scale(loss).backward()
            if self.should_step:
                self.optimizers_step()
            return loss.detach()
    """
)


def test_a_loop_variable_set_to_none_and_a_helper_of_the_optimizer_step() -> None:
    """`for param in ...: if param.grad is not None: ... param.grad = None` tests a new parameter on
    each iteration: no one-shot flag. The helper is called by `optimizers_step`, which steps the
    optimizer, under `if self.should_step:` (gradient accumulation): every optimizer step, a
    warning (speechbrain's `check_gradients`)."""
    assert findings(LOOP_OBJECT_SET_TO_NONE_AND_A_STEP_GATE) == [
        (
            8,
            23,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(param.grad).all()`) inside a loop: the host "
            "waits for the GPU on every iteration",
        )
    ]


PROFILING_HELPER_WITH_A_COMMENTED_STEP = dedent(
    """\
    import torch


    class Trainer:
        def _get_grad(self, inputs, targets):
            loss = self.criterion(self.model(inputs.cuda()), targets.cuda())
            self.optimizer.zero_grad()
            loss.backward()
            grad_list = []
            for param in self.model.parameters():
                grad_list.append(param.grad.item())
            # self.optimizer.step()
            return grad_list

        def run_step(self, inputs, targets):
            if self.profile and self.global_step % self.per_steps == 0:
                self.record[self.global_step] = self._get_grad(inputs, targets)
            loss = self.criterion(self.model(inputs.cuda()), targets.cuda())
            loss.backward()
            self.optimizer.step()
    """
)


def test_a_commented_optimizer_step_takes_no_step() -> None:
    """`_get_grad` runs only under `if self.profile and self.global_step % self.per_steps == 0:`; its
    `# self.optimizer.step()` is a comment, not a step, so the call is a throttled one and the
    per-parameter reads are information (torchquantum's gradient-pruning trainer)."""
    assert findings(PROFILING_HELPER_WITH_A_COMMENTED_STEP) == [
        (
            11,
            40,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in "
            "`_get_grad`, which this file calls only from `run_step` under `if self.profile and "
            "self.global_step % self.per_steps == 0:`, so not on every training step",
        )
    ]


SUBSCRIPT_OF_A_FACTORY_MOVED = dedent(
    """\
    import torch


    def sample_slices(slices, ratio):
        keep = int(slices.shape[0] * ratio)
        indices = torch.randperm(slices.shape[0])[:keep].to(slices.device)
        return torch.index_select(slices, dim=0, index=indices)
    """
)


def test_a_subscript_of_a_factory_moved_is_kept_by_the_prefilter() -> None:
    """`torch.randperm(n)[:keep].to(slices.device)`: the move follows a `]`, not a `)`; the
    prefilter keeps the function all the same, so the finding does not depend on it (monai's
    perceptual loss)."""
    assert findings(SUBSCRIPT_OF_A_FACTORY_MOVED) == [
        (
            6,
            53,
            "AL302",
            "warning",
            "`torch.randperm(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        )
    ]


COMPUTE_OF_A_METRIC = dedent(
    """\
    import torch


    class PairwiseMetric:
        def update(self, pred):
            self.preds.append(pred.cuda())

        def compute(self):
            scores = torch.cat(self.preds).to(self.device)
            best = [int(scores[i].max()) for i in range(scores.shape[0])]
            fallback = torch.zeros(len(best)).to(scores.device)
            return best, fallback


    class Ranker:
        def compute(self, preds):
            scores = torch.cat([p.cuda() for p in preds])
            return [int(scores[i].max()) for i in range(scores.shape[0])]
    """
)


def test_the_compute_of_a_metric_runs_once_per_evaluation() -> None:
    """`compute` of a class that also has `update` is a metric's (torchmetrics, ignite): `update` runs
    every step, `compute` once per evaluation, so its per-item reads and its create-then-move are
    information. A `compute` of a class without `update` keeps its warning."""
    assert findings(COMPUTE_OF_A_METRIC) == [
        (
            10,
            16,
            "AL100",
            "information",
            "`int()` of a CUDA tensor inside a loop: the host waits for the GPU per item in `compute` of "
            "a metric, once per evaluation (its `update` is what runs every step)",
        ),
        (
            11,
            42,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per evaluation (in `compute` of a metric, whose `update` is what "
            "runs every step): a small cost, not paid every step",
        ),
        (
            18,
            16,
            "AL100",
            "warning",
            "`int()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


HELPER_UNDER_A_SETTING = dedent(
    """\
    import torch


    class PerceptualLoss(torch.nn.Module):
        def _axis_loss(self, x):
            indices = torch.randperm(x.shape[0])[:4].to(x.device)
            return x[indices].sum()

        def forward(self, x):
            if self.spatial_dims == 3 and self.is_fake_3d:
                return self._axis_loss(x)
            return x.sum()
    """
)


def test_a_setting_tested_in_forward_is_no_throttle() -> None:
    """`if self.spatial_dims == 3 and self.is_fake_3d:` in `forward` tests a setting, not a counter:
    the helper it calls runs on every forward, a warning (monai's perceptual loss)."""
    assert findings(HELPER_UNDER_A_SETTING) == [
        (
            6,
            49,
            "AL302",
            "warning",
            "`torch.randperm(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        )
    ]


HELPERS_OF_INITIALIZERS = dedent(
    """\
    import torch


    def random_mask(rows, cols, device):
        return torch.rand(rows, cols).to(device) > 0.5


    class Adapter(torch.nn.Module):
        def __init__(self, rows, cols):
            super().__init__()
            self.mask = random_mask(rows, cols, "cuda")


    def hypothesis_scores(n, device):
        return torch.zeros(n).to(device)


    class Hypothesis:
        def __init__(self, n):
            self.scores = hypothesis_scores(n, "cuda")


    def partition_sizes(world_size, device):
        return torch.zeros(world_size).to(device)


    class DistributedGraph:
        def __init__(self, world_size):
            self.sizes = partition_sizes(world_size, "cuda")
    """
)


def test_a_create_then_move_in_a_helper_of_an_initializer() -> None:
    """A helper that only a module's `__init__` calls makes its tensor once per object:
    information (peft's `random_mask` for SHiRA adapters), and so does one of a plain class's
    (`class DistributedGraph:`, built once per run). A search's or a hypothesis's `__init__` may run
    per item (parlai's `TreeSearch`, one per example): its helper's copy stays a warning."""
    assert findings(HELPERS_OF_INITIALIZERS) == [
        (
            5,
            34,
            "AL302",
            "information",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `random_mask`, which this file calls only from `__init__` (once per "
            "object or run): a small cost, not paid every step",
        ),
        (
            15,
            26,
            "AL302",
            "warning",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            24,
            35,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `partition_sizes`, which this file calls only from `__init__` (once "
            "per object or run): a small cost, not paid every step",
        ),
    ]
