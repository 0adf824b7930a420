"""Classes of error found by the twenty-first whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twenty-first review"), each with a small program and the exact findings: line, column (0-based),
code, severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

SELF_CHECK_CALLED_FROM_MAIN = dedent(
    """\
    import torch


    def sanity_check():
        p = torch.nn.Parameter(torch.rand(10, 10).cuda())
        a = torch.rand(10, 10).cuda()
        p1 = p.data.sum().item()
        adam = torch.optim.Adam([p])
        out = a * p
        loss = out.sum()
        loss.backward()
        adam.step()
        p2 = p.data.sum().item()
        assert p1 != p2


    def main():
        print("checking the installation")
        sanity_check()
    """
)


def test_a_self_check_only_main_calls_runs_once() -> None:
    """`sanity_check()` takes one optimizer step to check an installation, and only `main` calls it:
    its create-then-moves run once per run (information) and its reads are no training step's
    (silent), where before they were "every training step" (bitsandbytes' diagnostics)."""
    assert findings(SELF_CHECK_CALLED_FROM_MAIN) == [
        (
            5,
            46,
            "AL302",
            "information",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `sanity_check`, which this file calls only from `main` (once per run): "
            "a small cost, not paid every step",
        ),
        (
            6,
            27,
            "AL302",
            "information",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `sanity_check`, which this file calls only from `main` (once per run): "
            "a small cost, not paid every step",
        ),
    ]


HABANA_ONLY_CODE = dedent(
    """\
    import torch


    def multi_tensor_adam(tensor_lists, lr):
        from habana_frameworks.torch import core as htcore

        for grad, param in zip(*tensor_lists):
            step = torch.tensor(lr).to("hpu", non_blocking=True)
            if param.sum().item() > 0:
                torch.ops.hpu.add_(param, grad * step)
        htcore.mark_step()
    """
)


def test_a_file_for_another_accelerator_is_not_linted() -> None:
    """A file that imports `habana_frameworks` (or `torch_npu`, `torch_xla`), calls that
    accelerator's API (`torch.ops.hpu.*`) and never says `cuda` runs on that accelerator: no CUDA
    copy or wait to report (deepspeed's HPU fused Adam). A pipeline that only imports `torch_xla`
    when it is there and tests `device.type == "npu"` runs on CUDA too (diffusers' pipelines): it is
    linted."""
    assert findings(HABANA_ONLY_CODE) == []
    on_cuda = HABANA_ONLY_CODE.replace('"hpu"', '"cuda"').replace(
        "from habana_frameworks.torch import core as htcore", "htcore = load_core()"
    )
    assert findings(on_cuda) == [
        (
            8,
            43,
            "AL200",
            "warning",
            "`non_blocking=True` copy from memory not known to be pinned: from pageable memory the host "
            "waits for the copy; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`)",
        )
    ]


CALLED_ONCE_PER_ROLLOUT = dedent(
    """\
    import torch


    class MaskablePPO:
        def train(self):
            for epoch in range(self.n_epochs):
                for rollout_data in self.rollout_buffer.get(self.batch_size):
                    loss = self.policy.evaluate_actions(rollout_data.observations.cuda()).mean()
                    self.policy.optimizer.zero_grad()
                    loss.backward()
                    self.policy.optimizer.step()
            self.logger.record("train/loss", loss.item())

        def learn(self, total_timesteps):
            while self.num_timesteps < total_timesteps:
                continue_training = self.collect_rollouts(self.env, self.rollout_buffer)
                if not continue_training:
                    break
                self.train()
    """
)


def test_a_loop_that_collects_rollouts_is_a_collector_loop() -> None:
    """`while ...: self.collect_rollouts(...); self.train()`: each iteration collects a rollout
    (which waited for the environments), so the read after `train`'s epochs is once per rollout:
    silent, not "every iteration" (sb3-contrib's MaskablePPO)."""
    assert findings(CALLED_ONCE_PER_ROLLOUT) == []
    assert findings(CALLED_ONCE_PER_ROLLOUT.replace("self.collect_rollouts(", "self.prepare(")) == [
        (
            12,
            46,
            "AL100",
            "warning",
            "`.item()` in `train`, which `learn` calls in a loop: the host waits for the GPU on every iteration",
        )
    ]


FILLED_ON_FIRST_USE = dedent(
    """\
    import torch


    class Analyzer:
        def run(self, results, n):
            for i, part in enumerate(results):
                if self.totals[i] is None:
                    self.totals[i] = torch.zeros(n).to(self.device)
                self.totals[i].add_(part.to(self.device))


    def generate(model, tokens, steps):
        attn = None
        for step in range(steps):
            scores = model(tokens.cuda())
            if attn is None:
                attn = torch.empty(tokens.size(0), steps).to(scores.device)
            attn[:, step] = scores[:, 0]
        return attn
    """
)


def test_an_attribute_filled_on_first_use_runs_once() -> None:
    """`if self.totals[i] is None: self.totals[i] = ...` fills an attribute once: information. A
    local filled on first use (`if attn is None: attn = ...` in a decoding loop) is made on every
    call, as often as the function runs: a warning (fairseq's generator, labelled so)."""
    assert findings(FILLED_ON_FIRST_USE) == [
        (
            8,
            48,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs only on iterations where `self.totals[i] is None`: a small cost, not paid "
            "every step",
        ),
        (
            17,
            54,
            "AL302",
            "warning",
            "`torch.empty(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


XLA_WHEN_PRESENT = dedent(
    """\
    import torch

    if is_torch_xla_available():
        import torch_xla.core.xla_model as xm


    def denoise(transformer, latents, timesteps, watershed):
        for t in timesteps:
            is_npu = latents.device.type == "npu"
            current = t.expand(latents.shape[0]).to(latents.device)
            if current[0] < watershed:
                latents = transformer(latents, current)
            if is_torch_xla_available():
                xm.mark_step()
        return latents
    """
)


def test_a_pipeline_that_supports_another_accelerator_is_linted() -> None:
    """Imports `torch_xla` only when present and tests for an NPU, but calls no other accelerator's
    API: a CUDA pipeline (diffusers' Lumina), linted as one."""
    assert findings(XLA_WHEN_PRESENT) == [
        (
            11,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`current[0] < watershed`) inside a loop: the host waits for the GPU "
            "on every iteration",
        )
    ]
