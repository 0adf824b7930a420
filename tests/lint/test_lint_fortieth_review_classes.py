"""Classes of error found in the fortieth to forty-second reviews (tests/lint/corpus_real/WHOLE_TREES.md), each with a small
program and the exact findings: line, column (0-based), code, severity and message. Each program is also
linted without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

STAGE_FORWARD = dedent(
    """\
    import torch


    class DenoisingStage(PipelineStage):
        def forward(self, batch, args):
            assert not torch.isnan(batch.prompt_embeds).any()
            mask = torch.ones(batch.shape).to(batch.device)
            latents = batch.latents
            for i, t in enumerate(batch.timesteps):
                noise = self.transformer(latents, t, mask)
                assert not torch.isnan(noise).any()
                latents = self.scheduler.step(noise, t, latents)
            batch.output = latents.cpu()
            return batch


    class Block(torch.nn.Module):
        def forward(self, x):
            assert not torch.isnan(x).any()
            return self.proj(x)
    """
)


def test_a_pipeline_stage_forward_that_runs_its_own_denoising_loop_is_per_request() -> None:
    """A `forward` that walks the timesteps itself (a pipeline stage's `forward(self, batch, args)`) runs once per
    request: the checks and moves outside its denoising loop are not per step (the read is silent, the move is
    information). Inside the loop, and in an ordinary module's `forward`, they stay warnings."""
    assert findings(STAGE_FORWARD) == [
        (
            7,
            39,
            "AL302",
            "information",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per call of `forward`, outside the sampling loop it runs on line 9 (once "
            "per generation): a small cost, not paid every step",
        ),
        (
            11,
            23,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(noise).any()`) inside a loop: the host waits for the GPU "
            "on every iteration",
        ),
        (
            19,
            19,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(x).any()`) in `forward`: the host waits for the GPU on "
            "every forward pass",
        ),
    ]


EARLY_RETURN = dedent(
    """\
    import torch


    def _assert_finite(name, tensor):
        if torch.isfinite(tensor).all():
            return
        nan_count = int(torch.isnan(tensor).sum().item())
        raise RuntimeError(f"{name} has {nan_count} NaNs")


    def train(model, loader, optimizer):
        for batch in loader:
            loss = model(batch.cuda()).mean()
            _assert_finite("loss", loss)
            loss.backward()
            optimizer.step()
    """
)


def test_reads_past_an_early_return_on_a_finite_check_are_the_failure_path() -> None:
    """`if torch.isfinite(t).all(): return`, then reads, then `raise`: past the early return the function only
    reports the failure. The check itself still waits every call."""
    assert findings(EARLY_RETURN) == [
        (
            5,
            7,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(tensor).all()`) in `_assert_finite`, which `train` "
            "calls in a loop: the host waits for the GPU on every iteration",
        ),
    ]


DEBUG_ENV = dedent(
    """\
    import os
    import torch


    def train(model, loader, optimizer):
        for batch in loader:
            out = model(batch.cuda())
            if os.getenv("MODEL_DEBUG_LOG", "0") == "1":
                print(f"sum={out.sum().item():.6f}")
            if os.environ.get("MODEL_MODE") == "strict":
                print(out.max().item())
            out.mean().backward()
            optimizer.step()
    """
)


def test_a_debugging_environment_variable_is_a_switch() -> None:
    """`if os.getenv("MODEL_DEBUG_LOG", "0") == "1":` turns on debugging output: what it runs is information.
    An environment variable that names no debugging (`MODEL_MODE`) is no switch."""
    assert findings(DEBUG_ENV) == [
        (
            9,
            35,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where "
            '`os.getenv("MODEL_DEBUG_LOG", "0") == "1"`',
        ),
        (11, 28, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


HOST_TESTS = dedent(
    """\
    import torch


    def validate(model, loader):
        for batch in loader:
            out = model(batch.cuda())
            if (out.audio is None) != (out.video is None):
                raise ValueError("both or neither")
            output_audio_sample_rate = out.sample_rate
            rate = int(output_audio_sample_rate)
            caption = model.describe(batch)[0]["generated_text"]
            print(f"{caption} at {rate}")
            print(out.norm().item())
    """
)


def test_identity_tests_rates_and_generated_text_are_host_values() -> None:
    """`(out.audio is None) != (out.video is None)` compares Python bools; `int(output_audio_sample_rate)` reads a
    number; `model.describe(batch)[0]["generated_text"]` is text. A model output's `.item()` is still reported."""
    assert findings(HOST_TESTS) == [
        (13, 25, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


EVALUATION_COPY = dedent(
    """\
    import torch


    class Validation:
        def _log_validation(self, pipeline, dataloader):
            videos = []
            for validation_batch in dataloader:
                with torch.no_grad():
                    output_batch = pipeline.forward(validation_batch)
                samples = output_batch.output.cpu()
                if self.rank != 0:
                    continue
                x = rearrange(samples, "b c t h w -> t b c h w")
                frames = [make_grid(f) for f in x]
                videos.append(frames)

        def train(self, model, dataloader, optimizer):
            for batch in dataloader:
                output = model(batch.cuda())
                loss = output.mean()
                loss.backward()
                optimizer.step()
                samples = output.cpu()
                show(samples)
    """
)


def test_an_evaluation_output_brought_home_per_batch_is_a_result() -> None:
    """`samples = output_batch.output.cpu()` in a loop of `_log_validation` that walks batches and takes no training
    step: an evaluation's result, one copy per batch (information). In a training loop it is a warning."""
    assert findings(EVALUATION_COPY) == [
        (
            10,
            42,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop in "
            "`_log_validation` that takes no training step, bringing the output home (`samples = out.cpu()`: an "
            "evaluation's result, one copy per batch)",
        ),
        (23, 29, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]


LOGGED_THEN_READ = dedent(
    """\
    import torch


    def train(model, loader, optimizer, tb_logger, device):
        for step, x in enumerate(loader):
            loss = model(x.to(device)).mean()
            tb_logger.add_scalar("loss", loss, global_step=step)
            print(f"step: {step}, loss: {loss.item()}")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
)


def test_a_read_right_after_add_scalar_of_the_same_tensor_adds_no_wait() -> None:
    """`tb_logger.add_scalar("loss", loss)` reads the loss (a wait); `loss.item()` in the next statement, with nothing
    queued between, waits for nothing new."""
    assert findings(LOGGED_THEN_READ) == [
        (
            7,
            8,
            "AL100",
            "warning",
            "logging a CUDA tensor (`loss`) with `add_scalar` inside a loop: the host waits for the GPU on every "
            "iteration",
        ),
        (
            8,
            42,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the read on line 7 just "
            "before already waited for it: no new wait",
        ),
    ]


HOST_NON_BLOCKING = dedent(
    """\
    import numpy as np
    import torch


    def load_frames(capture, device):
        frames = []
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            tensor = torch.from_numpy(frame.copy()).float().to("cpu", non_blocking=True).float() / 255.0
            frames.append(tensor.permute(2, 0, 1))
        return torch.stack(frames).to(device)


    def fetch(logits):
        host = logits.cuda().to("cpu", non_blocking=True)
        return host.argmax(-1)
    """
)


def test_a_non_blocking_copy_of_a_cpu_tensor_to_the_cpu_copies_nothing() -> None:
    """`torch.from_numpy(frame).float().to("cpu", non_blocking=True)` is already on the host: no device-to-host copy
    is in flight (AL201 says nothing). A CUDA tensor's non-blocking copy is still reported."""
    assert findings(HOST_NON_BLOCKING) == [
        (
            18,
            11,
            "AL201",
            "warning",
            "`host` is read before a synchronize: the `non_blocking=True` device-to-host copy on line 17 may not "
            "have landed yet (stale data, no error)",
        ),
    ]


APPLE_ONLY = dedent(
    """\
    import torch

    device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")


    def generate(model, steps):
        x = torch.randn(1, 4, device=device)
        for t in range(steps):
            x = model(x, t)
            print(x.norm().item())
        torch.mps.synchronize()
        return x
    """
)


def test_a_file_for_apples_mps_backend_only_has_no_cuda_waits() -> None:
    """A file that picks `torch.device("mps" if torch.backends.mps.is_available() else "cpu")` and never speaks of
    CUDA or a GPU runs on Apple's backend: no CUDA findings."""
    assert findings(APPLE_ONLY) == []


FIRST_VALUE = dedent(
    """\
    import torch


    class Trainer:
        def train(self, loader, optimizer):
            for batch in loader:
                loss = self.model(batch.cuda())
                self.ema_loss = loss.mean().item() if self.ema_loss is None else self.ema_loss * 0.99 + loss.mean().item() * 0.01
                loss.mean().backward()
                optimizer.step()
                output = self.model.synthesise(batch.cuda())
                print(f"RTF: {output['rtf']:.4f}")
    """
)


def test_the_first_value_of_a_running_average_and_a_real_time_factor() -> None:
    """`x.item() if self.ema_loss is None else ...` reads only on the first iteration (the `else`
    reads every time); `output["rtf"]` is a real-time factor, a number."""
    assert findings(FIRST_VALUE) == [
        (
            8,
            40,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `self.ema_loss is None`",
        ),
        (8, 112, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


WALL_CLOCK_LOGGING = dedent(
    """\
    import time

    import torch


    def train(model, loader, optimizer, args):
        last_logging = time.time()
        for step, batch in enumerate(loader):
            loss = model(batch.cuda()).mean()
            loss.backward()
            optimizer.step()
            current_time = time.time()
            if args.rank == 0 and current_time - last_logging > args.log_freq_time:
                print(loss.item())
                last_logging = current_time
            if args.rank == 0:
                print(loss.item())
    """
)


def test_logging_once_per_interval_of_wall_time_is_a_throttle() -> None:
    """`current_time - last_logging > args.log_freq_time` lets the read through once per interval of
    wall time. A rank test alone is fixed per process: rank 0 reads every step."""
    assert findings(WALL_CLOCK_LOGGING) == [
        (
            14,
            23,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `args.rank == 0 and "
            "current_time - last_logging > args.log...`",
        ),
        (17, 23, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


LOG_BLOCKS = dedent(
    """\
    import torch


    def train_epoch(model, loader, optimizer, iters, args):
        for step, (input_ids, labels) in enumerate(loader, start=1):
            loss = model(input_ids.cuda(), labels.cuda()).loss
            loss.backward()
            optimizer.step()
            if step % args.log_interval == 0 or step == iters:
                print(loss.item())
            if args.debug_mode and step % args.debug_interval == 0:
                for i in range(len(labels)):
                    for j in range(args.num_generations):
                        print(loss[i, j].item())
            if step % args.val_every_step == 0:
                for name, val_loader in args.val_loaders.items():
                    total = 0.0
                    for vx, vy in val_loader:
                        val_loss = model(vx.cuda(), vy.cuda()).loss
                        total += val_loss.item()
                    print(f"{name}: {val_loss}")
    """
)


def test_log_blocks_and_loops_of_reports_under_a_throttle() -> None:
    """`if step % args.log_interval == 0 or step == iters:` is a throttle (the last step too); loops of
    debugging output or of per-dataset reports inside a throttle run only on the throttled steps. A
    validation pass inside the throttle still reads once per validation batch."""
    assert findings(LOG_BLOCKS) == [
        (
            10,
            23,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `step % "
            "args.log_interval == 0 or step == iters`",
        ),
        (
            14,
            37,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where "
            "`args.debug_mode and step % args.debug_interval == 0`",
        ),
        (20, 38, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            21,
            32,
            "AL100",
            "information",
            "formatting a CUDA tensor (`{val_loss}`) inside a loop: the host waits for the GPU only on "
            "iterations where `step % args.val_every_step == 0`",
        ),
    ]


DATASET_ITEM = dedent(
    """\
    import torch


    class FormLangDataset(torch.utils.data.Dataset):
        def __getitem__(self, idx):
            mask = torch.from_numpy(self.masks[idx])
            mask = torch.concat((torch.zeros([self.prefix]).to(device=mask.device, dtype=mask.dtype), mask))
            out = []
            for m in mask:
                if m == 1:
                    out.append(idx)
            return mask, out
    """
)


def test_a_move_to_the_device_of_a_cpu_tensor_stays_on_the_host() -> None:
    """`.to(device=mask.device)` with `mask = torch.from_numpy(...)` stays on the host: no
    create-then-move (AL302), and `m == 1` over that mask reads no GPU value."""
    assert findings(DATASET_ITEM) == []


ARGUMENT_DEFAULTS = dedent(
    """\
    import argparse

    import torch


    def train_epoch(model, loader, optimizer, args):
        for step, batch in enumerate(loader, start=1):
            loss = model(batch.cuda()).mean()
            loss.backward()
            optimizer.step()
            if step % args.log_interval == 0:
                print(loss.item())
            if step % args.save_interval == 0:
                print(loss.item())
            if step >= len(loader) - 1:
                if step % args.log_interval == 0:
                    print(loss.norm().item())


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--log_interval", type=int, default=1, help="log every N steps")
        parser.add_argument("--save-interval", type=int, default=1000)
        train_epoch(None, [], None, parser.parse_args())
    """
)


def test_a_modulus_by_an_option_whose_default_is_one_is_every_step() -> None:
    """`step % args.log_interval == 0` with `parser.add_argument("--log_interval", default=1)` in the
    script's own code holds on every step unless the user asks otherwise: a warning. With a default
    of 1000 it is a throttle, and so is `step >= len(loader) - 1` around it (the last batch only)."""
    assert findings(ARGUMENT_DEFAULTS) == [
        (12, 23, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            14,
            23,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `step % "
            "args.save_interval == 0`",
        ),
        (
            17,
            34,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `step >= len(loader) - 1`",
        ),
    ]
