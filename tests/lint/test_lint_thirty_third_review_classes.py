"""Classes of error found in the thirty-third review (tests/lint/corpus_real/WHOLE_TREES.md), each
with a small program and the exact findings: line, column (0-based), code, severity and message.
Each program is also linted without the prefilter (every definition parsed), which must give the
same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

REPEATS = dedent(
    """\
    import torch

    device = torch.device("cuda")


    def pack(batches):
        for ids, lengths in batches:
            lengths = lengths.to(device)
            owner = torch.repeat_interleave(torch.arange(len(ids), device=device), lengths)
            starts = torch.repeat_interleave(lengths)
            rows = ids.to(device).repeat_interleave(lengths, dim=0)
            sized = torch.repeat_interleave(ids, lengths, output_size=64)
            doubled = ids.to(device).repeat_interleave(2, dim=0)
            host = ids.repeat_interleave(torch.tensor([1, 2]), dim=0)
            yield owner, starts, rows, sized, doubled, host
    """
)


def test_repeat_interleave_with_repeats_on_the_device_reads_their_sum() -> None:
    """The output's length is the sum of the repeats: with repeats in a CUDA tensor and no
    `output_size=`, the host reads that sum first. A number of repeats, `output_size=`, or repeats
    made on the CPU cost nothing."""
    message = "with repeats in a CUDA tensor (`lengths`; the output's length is their sum) inside a loop: the host waits for the GPU on every iteration"
    assert findings(REPEATS) == [
        (9, 16, "AL100", "warning", f"`torch.repeat_interleave(...)` {message}"),
        (10, 17, "AL100", "warning", f"`torch.repeat_interleave(...)` {message}"),
        (11, 15, "AL100", "warning", f"`.repeat_interleave()` {message}"),
    ]


DELAYED_ACTOR = dedent(
    """\
    import torch


    class TD3:
        def update(self, batch):
            critic_loss = self.critic(batch.obs.cuda()).mean()
            self.critic_optim.zero_grad()
            critic_loss.backward()
            self.critic_optim.step()
            self.count += 1
            if self.count % self.actor_delay == 0:
                actor_loss = -self.critic(self.actor(batch.obs.cuda())).mean()
                self.actor_optim.zero_grad()
                actor_loss.backward()
                self.actor_optim.step()
                self.last_actor_loss = actor_loss.item()
            return critic_loss.item()

        def update_with_helper(self, batch):
            critic_loss = self._minimize(batch, self.critic, self.critic_optim)
            if self.count % self.actor_delay == 0:
                actor_loss = -self.critic(self.actor(batch.obs.cuda())).mean()
                self.actor_optim.step(actor_loss)
                self.last_actor_loss = actor_loss.item()
            return critic_loss

        def accumulate(self, batch, step):
            loss = self.model(batch.cuda()).mean()
            loss.backward()
            if step % self.accumulation_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.last = loss.item()
    """
)


def test_a_delayed_update_beside_an_update_every_step_reads_every_n_steps() -> None:
    """`if count % actor_delay == 0:` around the actor's optimizer step (TD3, REDQ) while the
    critic steps on every call, itself or in a helper handed its optimizer: the actor's reads run
    every N steps and are left silent as other throttled reads. A throttle around the only
    optimizer step is gradient accumulation: its read runs on every training step."""
    every_step = "in `{}`, which takes a training step: the host waits for the GPU on every training step"
    assert findings(DELAYED_ACTOR) == [
        (17, 27, "AL100", "warning", "`.item()` " + every_step.format("update")),
        (33, 29, "AL100", "warning", "`.item()` " + every_step.format("accumulate")),
    ]


HOST_VALUES = dedent(
    """\
    import torch
    from pyro.infer import SVI, Trace_ELBO


    def fit(model, guide, optim, data, cfg):
        model.cuda()
        svi = SVI(model, guide, optim, loss=Trace_ELBO())
        for x in data:
            loss = svi.step(x.cuda())
            print(loss)
            total = float(cfg.grpo_config.loss_denominator)
            if model.has("pred_masks"):
                pass
            moved = model.kv_read_bytes(x.cuda()) / 1e9
            print(f"{moved:.1f} GB")
            out = model(x.cuda())
            print(out.sum().item())
    """
)


def test_values_that_only_look_like_tensors_are_host_values() -> None:
    """Pyro's `svi.step(x)` returns the loss as a float; a field of a settings object spelled
    with a prefix (`self.grpo_config`) is a setting; a predicate (`has`, `is_*`) is a bool and a
    model's `*_bytes(...)` a count, whatever they are given. Only the model's own output is read."""
    assert findings(HOST_VALUES) == [
        (17, 24, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


DRAINED = dedent(
    """\
    import time

    import torch

    synchronize = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None


    def train(model, loader, optimizer, scaler):
        step = 0
        t0 = time.time()
        for x in loader:
            loss = model(x.cuda())
            loss.backward()
            optimizer.step()
            train_loss = loss.detach()
            loss_f = train_loss.item()
            synchronize()
            t1 = time.time()
            dt = t1 - t0
            step += 1
            print(f"{step} {train_loss.item():.3f} {dt:.2f}")
            a, b = model.pair(x.cuda())
            print(a.detach().item(), b.detach().item())
            err = model(x.cuda()).norm()
            if err > 1.0:
                print(f"large error {err.item()}")
    """
)


def test_reads_after_a_wait_that_covers_them_add_no_wait() -> None:
    """A read right before `synchronize()` and the clock read is the wait that ends a timed step
    (a device-conditional alias of `torch.cuda.synchronize` included); after the barrier, clock
    bookkeeping (`t1 = time.time()`, `dt = t1 - t0`, `step += 1`) queues no GPU work; a second
    `.detach().item()` in the statement reads a value the first read already waited for; and a
    read inside `if err > 1.0:` reads what the condition has just waited for."""
    every = "inside a loop: the host waits for the GPU on every iteration"
    assert findings(DRAINED) == [
        (
            16,
            28,
            "AL100",
            "information",
            f"`.item()` {every}, right before the clock read on line 18: the wait that ends a timed step",
        ),
        (
            21,
            35,
            "AL100",
            "information",
            f"`.item()` {every}, but the `synchronize()` on line 17 just before already waited for it: no new wait",
        ),
        (23, 25, "AL100", "warning", f"`.item()` {every}"),
        (
            23,
            44,
            "AL100",
            "information",
            f"`.item()` {every}, but an earlier read of this statement (line 23) already waited: no new wait",
        ),
        (25, 11, "AL100", "warning", f"a CUDA tensor as a condition (`err > 1.0`) {every}"),
        (
            26,
            37,
            "AL100",
            "information",
            f"`.item()` {every}, but the condition on line 25 just before already waited for it: no new wait",
        ),
    ]


HOW_OFTEN = dedent(
    """\
    import time

    import torch
    import torch.distributed as dist
    from torch import nn
    from typing_extensions import override
    from transformers import Trainer


    def train(model, loader, optimizers, steps, accumulation, is_last_stage):
        training_time = 0.0
        dist.barrier()
        t0 = time.perf_counter()
        for step in range(steps):
            if step % 125 == 0:
                dist.barrier()
                training_time += time.perf_counter() - t0
                dist.barrier()
                t0 = time.perf_counter()
            for i in range(accumulation):
                loss = model(next(loader).cuda())
                train_loss = loss.detach()
                loss.backward()
            for opt in optimizers:
                opt.step()
            approx = training_time + (time.perf_counter() - t0)
            print(f"{step} {approx:.1f}s loss {train_loss.item():.3f}")
            last = model(next(loader).cuda())
            if is_last_stage:
                print(last.item())
            if model.pp_is_last_stage:
                print(last.item())


    def psgd_step(params, states):
        for p in params:
            state = states[p]
            if not state:
                state["scale"] = p.grad.abs().mean().item()
            p.grad.mul_(state["scale"])


    class MyTrainer(Trainer):
        @override
        def log(self, logs, *args, **kwargs):
            for key, values in self.stored.items():
                logs[key] = torch.tensor(values).to(self.args.device).mean().item()
            super().log(logs, *args, **kwargs)


    class Layer(nn.Module):
        @torch.no_grad()
        def forward(self, x):
            x = x.cuda()
            if x.dtype == torch.float16 and torch.isinf(x).any():
                x = x.clamp(-1000, 1000)
            return x


    def run(model, next_batch, optimizer):
        step = 0
        while True:
            loss = model(next_batch().cuda())
            loss.backward()
            optimizer.step()
            step += 1
            epoch = f"{step // 1000} of the data"
            print(epoch, loss.item())
    """
)


def test_how_often_a_read_or_a_timing_runs() -> None:
    """A clock read of a running total (its start before the loop or after each validation only)
    is information; a loop of backward passes beside a loop over the optimizers' steps is gradient
    accumulation, so the step loop's reads are per step; `if not state:` creates a parameter's state
    once; a pipeline stage flag (`is_last_stage`, `pp_is_last_stage`) is fixed per process, no
    throttle; a decorated `log` override of a Trainer runs once
    per logging interval; a decorated `forward` is a forward; and a text for display spelled
    `epoch` does not make the step loop an epoch loop."""
    every = "inside a loop: the host waits for the GPU on every iteration"
    assert findings(HOW_OFTEN) == [
        (
            26,
            34,
            "AL301",
            "information",
            "`time.perf_counter()` read with no synchronize since the clock read on line 19, a running total over "
            "the iterations since then: CUDA work is asynchronous, so it leaves out the work still queued "
            "(about the last iteration's)",
        ),
        (27, 54, "AL100", "warning", f"`.item()` {every}"),
        (30, 23, "AL100", "warning", f"`.item()` {every}"),
        (32, 23, "AL100", "warning", f"`.item()` {every}"),
        (
            39,
            49,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `not state`",
        ),
        (
            47,
            73,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU per item in `log` (once per logging interval, "
            "not per training step)",
        ),
        (
            55,
            40,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isinf(x).any()`) in `forward`: the host waits for the GPU on every "
            "forward pass",
        ),
        (68, 26, "AL100", "warning", f"`.item()` {every}"),
    ]


MODULE_LOOP = dedent(
    """\
    import torch
    import torch.distributed as dist


    def update_metrics(loss_sum):
        dist.all_reduce(loss_sum)
        return loss_sum.item()


    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(100):
        loss_sum = model(torch.randn(2, 4, device="cuda")).sum()
        loss_sum.backward()
        optimizer.step()
        update_metrics(loss_sum.detach())
    """
)


def test_a_function_that_module_level_code_calls_in_a_loop_says_so() -> None:
    """The read is in a function that a script's top-level training loop calls on every step:
    the message names the caller as module-level code."""
    assert findings(MODULE_LOOP) == [
        (
            7,
            20,
            "AL100",
            "warning",
            "`.item()` in `update_metrics`, which module-level code calls in a loop: the host waits for the GPU on "
            "every iteration",
        ),
    ]


POPULATE = dedent(
    """\
    import torch
    from torch import nn


    class Splats(nn.Module):
        def __init__(self, points):
            super().__init__()
            self.points = points
            self.populate_modules()

        def populate_modules(self):
            self.colors = nn.Parameter(torch.zeros(self.points.shape[0], 3).cuda())
    """
)


def test_a_create_then_move_in_populate_modules_is_paid_once() -> None:
    """`populate_modules` (nerfstudio's models build their fields there, from `__init__`) is
    set-up: its create-then-move is paid once."""
    assert findings(POPULATE) == [
        (
            12,
            72,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per call of `populate_modules` (set-up, not a step): a small cost, not paid every step",
        ),
    ]


RESULTS_AND_BARRIERS = dedent(
    """\
    import os

    import numpy as np
    import torch
    import torch.nn.functional as F


    def cache_latents(vae, loader, folder, distributed):
        for samples, paths in loader:
            moments = vae.encode(samples.cuda())
            for i, path in enumerate(paths):
                np.savez(os.path.join(folder, path), moments=moments[i].cpu().numpy())
            if distributed:
                torch.cuda.synchronize()


    def loglikelihoods(model, requests):
        res = []
        for chunk in requests:
            logits = F.log_softmax(model(chunk.cuda()), dim=-1)
            greedy = logits.argmax(dim=-1)
            answer = (float(logits.sum()), bool((greedy == 0).all()))
            res.append(answer)
        return res


    class Rotary(torch.nn.Module):
        def forward(self, x, seq_len, base):
            inv_freq = 1.0 / (base ** (torch.arange(0, 8, 2).float() / 8))
            t = torch.arange(seq_len).type_as(inv_freq)
            return torch.einsum("i,j->ij", t, inv_freq).to(x.device)
    """
)


def test_results_kept_and_barriers_after_a_read_are_information() -> None:
    """A VAE's `encode` of a CUDA tensor computes on the device (not `str.encode`); the latents'
    `.cpu()` written with `np.savez` is a result kept, and a synchronize right after it waits for
    nothing new; and `torch.arange(...)` cast to the dtype of another
    CPU `arange` (`base ** (torch.arange(0, dim, 2).float() / dim)`) moves nothing."""
    every = "inside a loop: the host waits for the GPU on every iteration"
    assert findings(RESULTS_AND_BARRIERS) == [
        (
            12,
            68,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`save(path, t.cpu())`: one copy per result written, as intended)",
        ),
        (
            14,
            12,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration, but the "
            "`.cpu()` on line 12 just before already waited for it: no new wait",
        ),
        (22, 18, "AL100", "warning", f"`float()` of a CUDA tensor {every}"),
        (22, 39, "AL100", "warning", f"`bool()` of a CUDA tensor {every}"),
    ]


ONCE_PER_EVALUATION_OR_EXPORT = dedent(
    """\
    import torch


    class ORT_NMS(torch.autograd.Function):
        @staticmethod
        def forward(ctx, boxes, scores):
            batch = scores.shape[0]
            return torch.randint(0, 100, (batch, 3)).to(boxes.device)

        @staticmethod
        def symbolic(g, boxes, scores):
            return g.op("NonMaxSuppression", boxes, scores)


    class IoUMetric:
        def __init__(self, device):
            self.device = device

        def update(self, pred, target):
            self.hits += (pred == target).sum()

        def reset(self):
            self.hits = torch.zeros(1).to(self.device)


    def log_tensorboard_graph(writer, model, imgsz):
        image = torch.zeros((1, 3, imgsz, imgsz)).to(next(model.parameters()).device)
        writer.add_graph(torch.jit.trace(model, image), [])


    def train(model, loader, optimizer):
        for x in loader:
            loss = model(x.cuda())
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            torch.cuda.synchronize()
            print(loss.item())
            if grad_norm is not None:
                print(grad_norm.item())
            sizes = [int(n) for n in loss.new_ones(3)]
            shape = (int(loss.sum()),)
    """
)


def test_code_that_runs_once_per_export_or_evaluation_and_reads_after_a_barrier() -> None:
    """The `forward` of an `autograd.Function` with a `symbolic` runs while ONNX export traces it;
    a metric's `reset` once per evaluation; `log_tensorboard_graph` once. After a synchronize a read
    waits for nothing new; a read inside `if grad_norm is not None:` after another read is still a
    wait of its own (as the labelled corpora have it), and so is each `int()` of a list of sizes."""
    once = (
        "`torch.{}(...)` is created on the CPU and then copied to the device: create it there with `device=`; it runs "
    )
    every = "inside a loop: the host waits for the GPU on every iteration"
    assert findings(ONCE_PER_EVALUATION_OR_EXPORT) == [
        (
            8,
            49,
            "AL302",
            "information",
            once.format("randint")
            + "once per export (the `forward` of an `autograd.Function` with a `symbolic`: an ONNX export stub): "
            "a small cost, not paid every step",
        ),
        (
            23,
            35,
            "AL302",
            "information",
            once.format("zeros")
            + "once per evaluation (in `reset` of a metric, whose `update` is what runs every step): a small cost, "
            "not paid every step",
        ),
        (
            27,
            46,
            "AL302",
            "information",
            once.format("zeros")
            + "once per call of `log_tensorboard_graph` (set-up, not a step): a small cost, not paid every step",
        ),
        (
            36,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (
            37,
            19,
            "AL100",
            "information",
            f"`.item()` {every}, but the `synchronize()` on line 36 just before already waited for it: no new wait",
        ),
        (39, 28, "AL100", "warning", f"`.item()` {every}"),
        (40, 17, "AL100", "warning", f"`int()` of a CUDA tensor {every}"),
        (41, 17, "AL100", "warning", f"`int()` of a CUDA tensor {every}"),
    ]


ROTARY_CACHE = dedent(
    """\
    import torch


    class Rotary(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def cache(self, seq_len, base, device):
            inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2).float() / self.dim))
            t = torch.arange(seq_len).type_as(inv_freq)
            cached = inv_freq.to(device)
            moved = torch.arange(seq_len).type_as(cached)
            return torch.einsum("i,j->ij", t, inv_freq), moved, cached.size(0)
    """
)


def test_type_as_a_cpu_range_moves_nothing() -> None:
    """`inv_freq` made from `torch.arange` on the CPU, whatever it is combined with (a CUDA operand
    would raise), is on the CPU: `.type_as(inv_freq)` only casts. A copy of it moved to the device
    is a move."""
    assert findings(ROTARY_CACHE) == [
        (
            13,
            38,
            "AL302",
            "warning",
            "`torch.arange(...)` is created on the CPU and then copied to the device of `cached`: create "
            "it there with `device=`",
        ),
    ]


LOGGING_AND_FLAGS = dedent(
    """\
    import enum

    import fire
    import torch
    import torch.distributed as dist


    class ReduceType(enum.Enum):
        SUM = "sum"
        MAX = "max"


    def train(model, loader, optimizer, args, meter):
        for x in loader:
            loss = model(x.cuda())
            loss.backward()
            optimizer.step()
            if args.log_logit_mean:
                meter.update(loss.mean().item())
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss)
            meter.update(global_loss.item())
            done = torch.zeros(1, device="cuda")
            dist.all_reduce(done)
            if done.item() > 0:
                break


    def merge(model, batches):
        for batch in batches:
            for name, (value, reduction) in model.metrics(batch.cuda()).items():
                if reduction == ReduceType.MAX:
                    print(name)
            empty = torch.tensor([]).to("cuda", non_blocking=True)
            print(empty.numel())


    class Rotary(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.max_seq_len_cached = 0

        def _set_cache(self, seq_len, device):
            self.max_seq_len_cached = seq_len
            self.t = torch.arange(seq_len).to(device)

        def forward(self, x, seq_len):
            if seq_len > self.max_seq_len_cached:
                self._set_cache(seq_len, x.device)
            return self.t[:seq_len]


    def sample(device="cuda"):
        noise = torch.zeros(4).to(device)
        return noise


    if __name__ == "__main__":
        fire.Fire(sample)
    """
)


def test_opt_in_logging_rank_flags_enums_empty_copies_caches_and_entry_points() -> None:
    """`if args.log_logit_mean:` is logging the user turns on; an all-reduced loss logged every step
    is a per-step wait, not a flag the ranks stop on (that one is `done`); an enum member compared is
    no tensor; `torch.tensor([])` copies nothing; a rotary cache rebuilt under `if seq_len >
    self.max_seq_len_cached:` is made when it grows; the function `fire.Fire` runs is the command."""
    every = "inside a loop: the host waits for the GPU"
    assert findings(LOGGING_AND_FLAGS) == [
        (19, 37, "AL100", "information", f"`.item()` {every} only on iterations where `args.log_logit_mean`"),
        (22, 33, "AL100", "warning", f"`.item()` {every} on every iteration"),
        (
            25,
            16,
            "AL100",
            "information",
            f"`.item()` {every} on every iteration, as a flag shared across ranks (all-reduced or broadcast) to stop "
            "together (every rank needs it on the host)",
        ),
        (
            45,
            39,
            "AL302",
            "information",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `_set_cache`, which this file calls only from `forward` on first use (`if "
            "seq_len > self.max_seq_len_cached:`): a small cost, not paid every step",
        ),
        (
            54,
            27,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per run (`sample` is the command's entry point): a small cost, not paid every "
            "step",
        ),
    ]


SCRIPT_EDITS = dedent(
    """\
    import time

    import torch


    def export(model, device):
        x = torch.randn(1, 3).to(device)
        return torch.jit.trace(model, x)


    def export(model, device):
        return torch.jit.trace(model, torch.randn(1, 3, device=device))


    def train(model, loader, optimizer, train_config, classes):
        it = iter(loader)
        for step in range(100):
            start = time.time()
            batch = next(it)
            clips = batch[0].to("cuda")
            labels = torch.tensor([classes[int(v)] for v in batch[1]]).cuda()
            data_elapsed_time = time.time() - start
            loss = model(clips, labels)
            loss.backward()
            optimizer.step()
            if train_config.save_metrics:
                print(loss.item())


    class Runner:
        def capture_model(self, model, sizes):
            for n in sizes:
                buffer = torch.zeros(n).to("cuda")
                model(buffer)
    """
)


def test_a_replaced_definition_a_host_batch_captures_and_metric_options() -> None:
    """The first `export` is replaced by the second before anything calls it: no finding in it.
    `batch = next(it)` whose items the loop moves itself (`batch[0].to("cuda")`) is a host batch, so
    `int(v)` of `batch[1]` reads no GPU value, and the data time around it times host work;
    `train_config.save_metrics` is an opt-in record; CUDA-graph capture runs once."""
    assert findings(SCRIPT_EDITS) == [
        (
            27,
            23,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `train_config.save_metrics`",
        ),
        (
            33,
            36,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs per item in `capture_model` (once per call, not per training step): a small cost, not paid "
            "every step",
        ),
    ]


USED_BEFORE_REPLACED = dedent(
    """\
    import torch


    def make(device):
        return torch.randn(1, 3).to(device)


    FIRST = make("cuda")


    def make(device):
        return torch.randn(1, 3, device=device)
    """
)


def test_a_definition_used_before_it_is_replaced_is_still_linted() -> None:
    """`make` runs at module level before the second `def make` replaces it: its finding stays."""
    assert [f[:4] for f in findings(USED_BEFORE_REPLACED)] == [(5, 29, "AL302", "warning")]


MODEL_ON_HOST_INPUTS = dedent(
    """\
    import numpy as np
    import torch

    cpu = torch.device("cpu")


    class Separator:
        def __init__(self, model):
            self.model = model.cuda()

        def demix(self, mixes):
            for mix in mixes:
                waves = torch.tensor(np.asarray(mix), dtype=torch.float32).to(cpu)
                spec = self.model.stft(waves)
                print(spec.cpu().numpy().sum())
                ortho = self.model.ortho(self.model.device)
                print(ortho.item())
    """
)


def test_a_model_given_only_cpu_tensors_computes_on_the_cpu() -> None:
    """`.to(cpu)` with `cpu = torch.device("cpu")` at the top of the module is on the CPU, and a
    model's method given only CPU tensors computes there (a model on the GPU would raise): no wait
    to report. A method given no tensor (`ortho(self.model.device)`) still computes on the model's
    device."""
    assert findings(MODEL_ON_HOST_INPUTS) == [
        (17, 24, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


SMOKE_TESTS_AND_TEXT = dedent(
    """\
    import torch


    def adafactor_step(p, state, lr):
        if len(state) == 0:
            state["step"] = 0
            state["exp_avg_sq"] = torch.zeros(p.shape).to(p.device)
        p.data.add_(-lr * p.grad)


    def chat(model, tokenizer, queries, pool):
        history = []
        for query in queries:
            for response, history in model.stream_chat(tokenizer, query, history=history):
                pass
            for q, r in history:
                print(f"{q}: {r}")
            ids = model(tokenizer(query).cuda()).argmax(-1)
            pool.add(ids.tolist())
            if ids[-1] == tokenizer.eos_token:
                break


    if __name__ == "__main__":
        model = torch.nn.Linear(4, 4).cuda()
        steps = 10
        for step in range(steps):
            x = torch.randn(2, 4).cuda()
            print(model(x).sum().item())
    """
)


def test_smoke_tests_optimizer_state_and_text_that_is_no_tensor() -> None:
    """`steps = 10`, then `for step in range(steps):` runs ten times (a smoke test under
    `__main__`); an optimizer's state made under `if len(state) == 0:` once per parameter; a chat
    model's `stream_chat` yields text; `tokenizer.eos_token` is text (a tensor compared with it is
    False, nothing read); `pool.add(ids.tolist())` keeps the ids."""
    ten = "(the loop runs 10 times)"
    assert findings(SMOKE_TESTS_AND_TEXT) == [
        (
            7,
            51,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per object, on first use (`if len(state) == 0:`): a small cost, not paid every step",
        ),
        (
            19,
            21,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting results on the "
            "host (`outputs.append(t.tolist())`: one copy per batch, as intended)",
        ),
        (
            28,
            30,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            f"it runs 10 times {ten}: a small cost, not paid every step",
        ),
        (29, 29, "AL100", "information", f"`.item()` inside a loop: the host waits for the GPU 10 times {ten}"),
    ]


MAX_NORM = dedent(
    """\
    import torch


    def apply_max_norm(state_dict, keys, max_norm):
        norms = []
        for key in keys:
            updown = state_dict[key].cuda()
            norm = updown.norm().clamp(min=max_norm / 2)
            desired = torch.clamp(norm, max=max_norm)
            ratio = desired.cpu() / norm.cpu()
            if ratio != 1:
                state_dict[key] *= ratio
            scaled = updown.norm() * ratio
            norms.append(scaled.item())
        return norms
    """
)


def test_a_ratio_of_two_copies_used_at_once_is_a_wait_and_the_second_copy_adds_none() -> None:
    """`ratio = desired.cpu() / norm.cpu()` tested at once is no result kept (`updown.norm() *
    ratio` is GPU work beside it, not a host step of it): the first copy waits every iteration, the
    second copies a value the first already waited for."""
    every = "inside a loop: the host waits for the GPU on every iteration"
    assert findings(MAX_NORM) == [
        (10, 24, "AL100", "warning", f"`.cpu()` {every}"),
        (
            10,
            37,
            "AL100",
            "information",
            f"`.cpu()` {every}, but an earlier read of this statement (line 10) already waited: no new wait",
        ),
        (14, 28, "AL100", "warning", f"`.item()` {every}"),
    ]
