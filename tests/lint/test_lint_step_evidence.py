"""What a loop shows about the step it runs, across the whole-tree reviews
(tests/lint/corpus_real/WHOLE_TREES.md, "Calls written on purpose"): a synchronize or an
`empty_cache()` in a loop is a warning only where the loop shows that it runs once per training or
inference step, and an inference loop over batches that brings its output home as NumPy is
information. Each program with the exact findings: line, column (0-based), code, severity and
message."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

SET_UP_LOOPS = dedent(
    """\
    import torch


    class Engine:
        def record_graphs(self, capture_sizes):
            for size in capture_sizes:
                self.forward_dummy(size)
                torch.cuda.synchronize()

        def quant_weights(self, fcs, device):
            for name, fc in fcs.items():
                fc.to(device)
                fc.weight.data = quantize(fc.weight.data)
                fc.to("cpu")
                torch.cuda.empty_cache()

        def encode(self, loader):
            out = []
            for batch in loader:
                out.append(self.model(batch.cuda()))
                torch.cuda.empty_cache()
            for i in range(num_batch):
                out.append(self.model(inputs[i * 64 : (i + 1) * 64]))
                torch.cuda.empty_cache()
            return out
    """
)


def test_a_synchronize_or_empty_cache_in_a_loop_that_shows_no_step_is_information() -> None:
    """A synchronize after each graph capture, an `empty_cache()` after each layer a quantizer moves:
    the call is written on purpose and the loop walks no batches and takes no training step, so it
    is information; per batch of a loader (`for batch in loader:`, `for i in range(num_batch):`) it
    stays a warning."""
    assert findings(SET_UP_LOOPS) == [
        (
            8,
            12,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every "
            "iteration; reported as information: nothing shows that the loop runs once per training or "
            "inference step (it walks no batches and takes no training step), and a set-up, warm-up or "
            "per-layer loop pays this only a few times",
        ),
        (
            15,
            12,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; reported as information: nothing shows that the loop runs once per "
            "training or inference step (it walks no batches and takes no training step), and a "
            "set-up, warm-up or per-layer loop pays this only a few times",
        ),
        (
            21,
            12,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (
            24,
            12,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
    ]


STEP_LOOPS = dedent(
    """\
    import torch


    class Adam8bit(torch.optim.Optimizer):
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    update(p)
                    torch.cuda.synchronize()


    def train(model, opt, data, num_steps):
        for _ in range(num_steps):
            model(data)
            torch.cuda.synchronize()
        for x, y in data:
            loss = model(x, y)
            loss.backward()
            opt.step()
            torch.cuda.empty_cache()
    """
)


def test_a_synchronize_in_an_optimizer_step_or_a_training_loop_is_a_warning() -> None:
    """An optimizer's `step` waits once per parameter; `for _ in range(num_steps):` counts steps; a loop
    that calls `backward()` and `opt.step()` takes a training step: each is a warning."""
    assert findings(STEP_LOOPS) == [
        (
            9,
            16,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (
            15,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (
            20,
            8,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
    ]


OPTIONS_AND_CHUNKS = dedent(
    """\
    import torch


    class VideoNet(torch.nn.Module):
        def forward(self, frames):
            feats = []
            if self.cpu_cache:
                for i in range(frames.size(1)):
                    feats.append(self.extract(frames[:, i]).cpu())
                    torch.cuda.empty_cache()
            for i in range(frames.size(1)):
                feats.append(self.extract(frames[:, i]))
                torch.cuda.empty_cache()
            return feats


    def separate(model, chunks, rows):
        out = []
        for chunk in chunks:
            out.append(model.infer(chunk).cpu())
            torch.cuda.empty_cache()
        for start in range(0, rows.shape[0], 4096):
            out.append(dequantize(rows[start : start + 4096]))
            torch.cuda.empty_cache()
        return out
    """
)


def test_an_option_that_asks_for_it_or_chunks_without_a_model_make_it_information() -> None:
    """`if self.cpu_cache:` around the loop asks for the memory to be freed per frame (information); the
    same loop in `forward` without the option is a warning; a model run on each chunk is a warning,
    a dequantization in chunks of rows is information."""
    assert findings(OPTIONS_AND_CHUNKS) == [
        (
            10,
            16,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; it runs only when `self.cpu_cache` is set, an option that asks for it",
        ),
        (
            13,
            12,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (
            20,
            38,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results "
            "on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (
            21,
            8,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (
            24,
            8,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; reported as information: nothing shows that the loop runs once per "
            "training or inference step (it walks no batches and takes no training step), and a "
            "set-up, warm-up or per-layer loop pays this only a few times",
        ),
    ]


INFERENCE_OUTPUT = dedent(
    """\
    import torch
    import torch.nn.functional as F


    class Calculator:
        def calculate(self, model, loader, device):
            for batch in loader:
                result = model(batch.to(device))
                self.results.update(energy=result["energy"].detach().cpu().numpy()[0])


    def validate(model, val_loader, device):
        correct = 0
        for images, labels in val_loader:
            preds = model(images.to(device)).argmax(-1).cpu().numpy()
            correct += (preds == labels.numpy()).sum()
        return correct


    def fit(model, loader, opt, device):
        for images, labels in loader:
            out = model(images.to(device))
            loss = F.cross_entropy(out, labels.to(device))
            loss.backward()
            opt.step()
            probs = out.softmax(-1).detach().cpu().numpy()
            log_histogram(probs)
    """
)


def test_an_inference_output_brought_home_as_numpy_per_batch_is_information() -> None:
    """`t.cpu().numpy()` per batch of a loop over a loader that takes no training step brings the
    output home (information); a copy compared right away to count correct predictions, or one
    in a loop that takes a training step, stays a warning."""
    assert findings(INFERENCE_OUTPUT) == [
        (
            9,
            65,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop that "
            "takes no training step, bringing the output home as NumPy (`t.cpu().numpy()`: an "
            "inference pass's result, one copy per batch)",
        ),
        (15, 52, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (26, 41, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]
