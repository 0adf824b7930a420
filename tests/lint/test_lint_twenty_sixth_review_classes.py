"""Classes of error found by the twenty-sixth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twenty-sixth review"), each with a small program and the exact findings: line, column (0-based),
code, severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

DEMO_CALLBACK = dedent(
    """\
    import torch


    class DemoCallback:
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if (trainer.global_step - 1) % self.demo_every != 0 or self.last_demo_step == trainer.global_step:
                return
            self.last_demo_step = trainer.global_step
            noise = torch.randn([self.num_demos, 4, 1024]).to(module.device)
            for cfg_scale in self.cfg_scales:
                steps = torch.linspace(0, 1, 100).to(module.device)
                module.sample(noise, steps, cfg_scale)
    """
)


def test_a_hook_that_returns_early_unless_a_modulus_holds_is_throttled() -> None:
    """`if (step - 1) % self.demo_every != 0 or ...: return` at the top of a per-batch hook: what
    follows runs every `demo_every` steps (stable-audio-tools' demo callbacks), in a loop or not."""
    passes = "`if (trainer.global_step - 1) % self.demo_every != 0 or self....:` above it"
    assert findings(DEMO_CALLBACK) == [
        (
            9,
            55,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            f"it runs only on calls that pass {passes}: a small cost, not paid every step",
        ),
        (
            11,
            46,
            "AL302",
            "information",
            "`torch.linspace(...)` is created on the CPU and then copied to the device: create it there with "
            f"`device=`; it runs only on calls that pass {passes}: a small cost, not paid every step",
        ),
    ]


TYPE_REFINEMENT = dedent(
    """\
    import torch


    def generate(model, inputs, device):
        for step in range(inputs.size(1)):
            outputs = model(inputs.to(device))
            assert torch.jit.isinstance(outputs, dict)
            if torch.jit.is_scripting():
                break
            if outputs["logits"].isnan().any():
                break
    """
)


def test_torchscript_type_refinements_return_python_bools() -> None:
    """`torch.jit.isinstance(outputs, T)` and `torch.jit.is_scripting()` answer on the host, as
    `isinstance` does (torchtext's generation loop); a test of the model's output still reads it."""
    assert [row[:4] for row in findings(TYPE_REFINEMENT)] == [(10, 11, "AL100", "warning")]


DEBUG_FLAG = dedent(
    """\
    import torch


    class Wrapper:
        def training_step(self, batch, batch_idx):
            loss = self.model(batch).mean()
            if self.log_loss_info:
                buckets = torch.arange(0, 1, 0.1).to(self.device)
                self.log_buckets(loss, buckets)
            noise = torch.randn(8, 16).to(self.device)
            return loss + self.model(noise).mean()
    """
)


def test_a_create_then_move_under_a_debugging_flag_runs_only_when_asked() -> None:
    """`if self.log_loss_info:` ("loss debugging logs", off by default in stable-audio-tools): the
    copy is paid only when the user asks for those logs. The noise made on every step is not."""
    assert findings(DEBUG_FLAG) == [
        (
            8,
            46,
            "AL302",
            "information",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs only when `self.log_loss_info` asks for debugging logs: a small cost, not paid every step",
        ),
        (
            10,
            35,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]
