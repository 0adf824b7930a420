"""Classes of error found by the fifteenth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Fifteenth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

EPOCH_HOOKS = dedent(
    """\
    import torch
    from lightning import LightningModule


    class Model(LightningModule):
        def training_step(self, batch, batch_idx):
            return self(batch).mean()

        def on_validation_epoch_end(self):
            for name in self.metric_names:
                value = self.metrics[name].compute()
                self.log(name, 0.0 if torch.isnan(value) else value.item())


    def main(model, loader, losses, epochs, device):
        for epoch in range(epochs):
            for batch in loader:
                losses.update(model(batch.to(device)))
            summary = {n: torch.stack(v).mean().item() for n, v in losses.summaries()}
            print(summary)
            for batch in loader:
                print(model(batch.to(device)).mean().item())
    """
)


def test_reads_in_an_epoch_hook_or_in_a_short_loop_of_an_epoch_loop_run_once_per_epoch() -> None:
    """Lightning's `on_validation_epoch_end` runs once per epoch (information), and so does a comprehension
    of `.item()` over the logged summaries directly inside an epoch loop; a loop over the batches
    inside the same epoch loop stays a warning."""
    assert findings(EPOCH_HOOKS) == [
        (
            12,
            34,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`torch.isnan(value)`) inside a loop: the host waits for the "
            "GPU per item in `on_validation_epoch_end` (once per epoch, not per training step)",
        ),
        (
            19,
            44,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU per item, once per epoch (the loop "
            "around it runs the epochs)",
        ),
        (22, 49, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


PIPELINE_TIMING = dedent(
    """\
    import time

    import torch
    from diffusers import StableDiffusionPipeline


    def main():
        pipe = StableDiffusionPipeline.from_pretrained("sd").to("cuda")
        start = time.time()
        images = pipe(prompt="a cat", generator=torch.Generator(device="cuda").manual_seed(0)).images
        elapsed = time.time() - start
        start = time.time()
        latents = pipe(prompt="a cat", output_type="latent", generator=torch.Generator(device="cuda").manual_seed(0)).images
        latent_time = time.time() - start
        print(elapsed, latent_time, images, latents)
    """
)


def test_a_timed_pipeline_that_returns_images_waited_for_the_gpu() -> None:
    """A diffusers pipeline called with its default `output_type="pil"` copies its images to the host
    before it returns, so the clock read after it measures the whole run (silent); with
    `output_type="latent"` it returns CUDA tensors and the interval is reported."""
    assert findings(PIPELINE_TIMING) == [
        (
            14,
            18,
            "AL301",
            "warning",
            "`time.time()` read with no synchronize since the clock read on line 12: CUDA work is "
            "asynchronous, so the interval measures its launch, not its run time",
        )
    ]


LOSS_SETTINGS = dedent(
    """\
    import torch


    def train(model, loader, optimizer, device, loss_log_freq=40):
        losses = []
        for index, (x, y) in enumerate(loader):
            loss = model(x.to(device), y.to(device))
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
            if (index + 1) % loss_log_freq == 0:
                print(torch.stack(losses).mean().item())
                losses = []


    def reduced_loss(a, b, group):
        local = ((a - b) ** 2).mean()
        value = group.all_reduce(local.clone()).item()
        return value  # a Python float


    def search(m, raw, args):
        for block, thresholds in enumerate(m.loss_thresholds):
            for method in m.candidates:
                m.method = method
                loss = reduced_loss(raw, m.forward(*args), m.group)
                if loss < thresholds[block]:
                    break
    """
)


def test_a_setting_or_a_python_number_spelled_with_loss_is_no_tensor() -> None:
    """`loss_log_freq=40` is a logging interval, `m.loss_thresholds` a list of floats, and a function
    that returns `x = ....item()` (a comment after its `return` too) gives a float: none of them
    is read on the host."""
    assert findings(LOSS_SETTINGS) == []


SHORT_AND_TEST_LOOPS = dedent(
    """\
    import torch


    class Encoder(torch.nn.Module):
        def _prime(self, positions, video_indices):
            picked = positions.index_select(0, video_indices)
            self.shape = tuple(int(torch.unique(picked[:, axis]).numel()) for axis in range(3))

        def forward(self, x, positions, video_indices):
            self._prime(positions.to(x.device), video_indices.to(x.device))
            return x


    def test_checkpointing_matches():
        device = "cuda"
        target = torch.randint(42, (768,), device=device)
        inputs = [torch.rand(768, 64, device=device) for _ in range(6)]
        linear = torch.nn.Linear(64, 64).to(device)

        def train_model(model, optimizer, history):
            for x in inputs:
                loss = torch.nn.functional.cross_entropy(model(x), target)
                history.append(loss.item())
                loss.backward()
                optimizer.step()

        history = []
        train_model(linear, torch.optim.SGD(linear.parameters(), lr=0.1), history)
        assert history[-1] < history[0]
    """
)


def test_a_comprehension_over_range_3_and_a_loop_nested_in_a_test_are_information() -> None:
    """`tuple(... for axis in range(3))` runs three times; a loop in a helper nested in a `test_*`
    function is part of the test."""
    assert findings(SHORT_AND_TEST_LOOPS) == [
        (
            7,
            31,
            "AL100",
            "information",
            "`torch.unique(...)` (its output's shape depends on the data) inside a loop: the host "
            "waits for the GPU 3 times (the loop runs 3 times)",
        ),
        (
            23,
            32,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in the "
            "test `test_checkpointing_matches` (a test, not a training step)",
        ),
    ]


TIMING_AND_ONCE = dedent(
    """\
    import enum
    import time

    import torch


    def benchmark(model, optimizer, data, device, iters):
        for i in range(iters):
            t0 = time.perf_counter()
            loss = model(next(data).to(device)).mean()
            loss.backward()
            optimizer.step()
            loss_item = loss.item()  # synchronization
            t1 = time.perf_counter()
            print(f"iter {i}: {loss_item:.3f} in {t1 - t0:.3f}s")


    def train(model, optimizer, loader, device, logger):
        for x in loader:
            start = time.time()
            loss = model(x.to(device)).mean()
            loss.backward()
            optimizer.step()
            logger.update(loss=loss.item())
            logger.update(rate=x.shape[0] / (time.time() - start))


    def main(model, loader, losses):
        train(model, None, loader, "cuda", None)
        metrics = {n: torch.stack(v).mean().item() for n, v in losses.get_summaries()}
        print(metrics)


    class Strategy(enum.Enum):
        NONE = enum.auto()
        LAYER = enum.auto()


    def test_parity(factory, other):
        device = torch.device("cuda", 0)
        for strategy in (Strategy.NONE, other):
            loss = factory(strategy).to(device)(torch.ones(2, 12, device=device)).mean()
            loss.backward()
            if strategy == Strategy.NONE:
                reference = loss.detach()
    """
)


def test_a_read_that_ends_a_timed_step_or_runs_once_per_run_is_information() -> None:
    """`loss_item = loss.item()` right before the clock read that ends a benchmark's timed step is the
    wait the measurement needs; `logger.update(loss=loss.item())` before a clock read is a value
    logged every step (warning); a comprehension of `.item()` in `main` runs once; a loop over
    two enum members that calls `backward()` walks values, not batches."""
    assert findings(TIMING_AND_ONCE) == [
        (
            13,
            25,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, right before the "
            "clock read on line 14: the wait that ends a timed step",
        ),
        (24, 32, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            30,
            40,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU per item, once per run (`main` runs once)",
        ),
    ]


MISSES = dedent(
    """\
    import numpy as np
    import torch


    class Prodigy(torch.optim.Optimizer):
        def step(self, closure=None):
            numerator, denom = 0.0, 0.0
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    state = self.state[p]
                    if "s" not in state:
                        state["s"] = torch.zeros_like(p)
                        state["n_iter"] = 0
                    s = state["s"]
                    numerator += torch.dot(grad.flatten(), s.flatten()).item()
                    denom += s.abs().sum().item()
                    if state["n_iter"] == 1:
                        state["n_iter"] += 1
            return numerator / denom


    def search(searcher, src_tokens, beam_size, max_len):
        offsets = torch.arange(0, 2 * beam_size, device=src_tokens.device)
        for step in range(max_len):
            eos_mask = searcher.step(step).eq(2)
            active = torch.add(eos_mask.type_as(offsets) * beam_size, offsets)
            ignore = active.ge(beam_size)
            assert (~ignore).any(dim=1).all()


    def train(model, loader, optimizer, loss_fn, device):
        total = 0.0
        for feat, label in loader:
            loss = loss_fn(model(feat.to(device)), label.to(device))
            if not np.isnan(loss.item()):
                loss.backward()
                optimizer.step()
                total += loss.item()
        return total


    def distogram_mask(mask, pred):
        return mask * (1 - torch.eye(mask.shape[1])[None]).to(pred.device)
    """
)


def test_the_reads_the_fifteenth_review_found_missing_are_reported() -> None:
    """An optimizer's per-parameter state (`state["s"]`, set to a tensor; not the counter
    `state["n_iter"]`) read in `step`, a mask cast with `type_as` a CUDA tensor and added with
    `torch.add`, a loss read again after `backward()` and `step()` on the finite path of
    `if not np.isnan(loss.item()):`, and `torch.eye(n)[None]` moved to the device."""
    assert findings(MISSES) == [
        (16, 68, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (17, 39, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            29,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`(~ignore).any(dim=1).all()`) inside a loop: the host waits "
            "for the GPU on every iteration",
        ),
        (36, 29, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (39, 26, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            44,
            55,
            "AL302",
            "warning",
            "`torch.eye(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


KEPT_FORMS = dedent(
    """\
    import numpy as np
    import torch


    class Extractor:
        def __init__(self, model):
            self.model = model.to("cuda")

        def collect(self, batches):
            all_heads, all_tails = [], []
            with torch.no_grad():
                for batch in batches:
                    head, tail = self.model(*batch)
                    head, tail = head.tolist(), tail.tolist()
                    all_heads += head
                    all_tails += tail
            return all_heads, all_tails

        def denoise(self, audio, window, stride):
            x = torch.from_numpy(audio).to("cuda")
            outputs = np.zeros(x.shape[1])
            start = 0
            with torch.no_grad():
                while start + window <= x.shape[1]:
                    chunk = self.model(x[:, start : start + window])[0].cpu().numpy()
                    outputs[start:
                            start + window] = chunk
                    start += stride
            return outputs
    """
)


def test_results_kept_through_tuple_unpacking_or_a_two_line_slice_write() -> None:
    """`head, tail = head.tolist(), tail.tolist()` then `all_heads += head`, and a window of the output
    written into a NumPy buffer by a slice written over two lines, keep results (information)."""
    assert findings(KEPT_FORMS) == [
        (
            14,
            34,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting "
            "results on the host (`outputs.append(t.tolist())`: one copy per batch, as intended)",
        ),
        (
            14,
            49,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting "
            "results on the host (`outputs.append(t.tolist())`: one copy per batch, as intended)",
        ),
        (
            25,
            68,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results "
            "on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
    ]
