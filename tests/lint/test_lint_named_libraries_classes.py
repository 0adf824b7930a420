"""Classes of error found by reading every finding on the libraries a new user tries first
(transformers, diffusers, timm, torchao, lightning, torchvision, pytorch/examples, nanoGPT, MAE;
tests/lint/corpus_real/WHOLE_TREES.md "Twenty-seventh review"), each with a small program and the
exact findings: line, column (0-based), code, severity and message. Each program is also linted
without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

ENCODER_LAYER = dedent(
    """\
    import torch
    from torch import nn


    class EncoderLayer(nn.Module):
        def forward(self, hidden_states):
            hidden_states = hidden_states.to("cuda")
            if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
                clamp_value = torch.finfo(hidden_states.dtype).max - 1000
                hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
            return hidden_states


    class Experts(nn.Module):
        def forward(self, logits):
            gates = logits.cuda().softmax(-1)
            expert_size = (gates > 0.5).long().sum(0).tolist()
            return torch.split(gates, expert_size)


    class Helper:
        def forward(self, x):
            return x.cuda().sum().item()
    """
)


def test_a_read_in_a_modules_forward_is_paid_on_every_forward_pass() -> None:
    """A module's `forward` runs once per step, a layer's once per layer per step: a NaN check
    there (BART's fp16 clamp) or a `.tolist()` (JetMoE's expert sizes) waits every forward pass.
    Not a `forward` of a plain class, which no module call runs."""
    assert findings(ENCODER_LAYER) == [
        (
            8,
            56,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(hidden_states).all()`) in `forward`: the host waits for the GPU "
            "on every forward pass",
        ),
        (
            17,
            50,
            "AL100",
            "warning",
            "`.tolist()` in `forward`: the host waits for the GPU on every forward pass",
        ),
    ]


NANOGPT_BENCH = dedent(
    """\
    import time

    import torch


    def bench(model, get_batch, optimizer, num_steps):
        model = model.cuda()
        for stage in range(2):
            t0 = time.time()
            for k in range(num_steps):
                X, Y = get_batch()
                logits, loss = model(X, Y)
                loss.backward()
                optimizer.step()
            torch.cuda.synchronize()
            dt = time.time() - t0
            mfu = model.estimate_mfu(num_steps, dt)
            print(f"MFU: {mfu*100:.2f}%")
    """
)


def test_a_models_estimate_of_the_run_is_a_python_number() -> None:
    """`model.estimate_mfu(tokens, dt)` (nanoGPT) computes a figure about the run from numbers,
    not an output from an input: formatting it reads no tensor."""
    assert findings(NANOGPT_BENCH) == []
