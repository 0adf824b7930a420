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
            if is_last_stage:
                print(train_loss.item())
            if model.pp_is_last_stage:
                print(train_loss.item())


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
        (29, 29, "AL100", "warning", f"`.item()` {every}"),
        (31, 29, "AL100", "warning", f"`.item()` {every}"),
        (
            38,
            49,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `not state`",
        ),
        (
            46,
            73,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU per item in `log` (once per logging interval, "
            "not per training step)",
        ),
        (
            54,
            40,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isinf(x).any()`) in `forward`: the host waits for the GPU on every "
            "forward pass",
        ),
        (67, 26, "AL100", "warning", f"`.item()` {every}"),
    ]
