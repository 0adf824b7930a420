"""Classes of error found by the nineteenth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Nineteenth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

FIRST_STEP_OF_A_FORWARD = dedent(
    """\
    import torch


    class Seq2Seq(torch.nn.Module):
        def forward(self, x):
            outputs = []
            for t in range(x.size(1)):
                if t == 0:
                    h = torch.zeros(x.size(0), 64).to(x.device)
                h = self.cell(x[:, t], h)
                outputs.append(h)
            return torch.stack(outputs, 1)


    class Adam(torch.optim.Optimizer):
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros(p.shape[0]).to(p.device)
    """
)


def test_a_move_on_the_first_iteration_of_forward_is_paid_every_step() -> None:
    """`if t == 0: h = torch.zeros(...).to(x.device)` in `forward` runs once per call, and a model's
    forward runs on every step: a warning. An optimizer state made under `if len(state) == 0:` in
    `step` is made once: information."""
    assert findings(FIRST_STEP_OF_A_FORWARD) == [
        (
            9,
            47,
            "AL302",
            "warning",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            21,
            63,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs only on iterations where `len(state) == 0`: a small cost, not paid every "
            "step",
        ),
    ]
