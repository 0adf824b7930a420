"""Real third-party models traced on simulated CUDA (the `models` extra: pip install -e '.[test,models]').

Each test traces a small program of tests/fixtures/models/ in the real trace worker and asserts what a
GPU run shows: output shapes, the kernels taken, phases and the syncs a library makes, named at the
user's line and at the library's. A test whose library cannot be imported here skips and says why.
"""

from __future__ import annotations

import importlib.util
import linecache
from collections import Counter
from pathlib import Path

import pytest

import source_lines
from gpu_helpers import cuda_request

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "models"


def needs(*modules: str) -> None:
    """Skip unless the libraries are installed. (Whether they import is the trace's business: the
    traced program imports them in the worker, and a library that fails there fails the test.)"""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            pytest.skip(
                f"{name} is not installed; install the models extra: pip install torch==2.13.0 -e '.[test,models]'"
            )


def trace(worker, file: str, qualname: str):
    report = worker.trace(cuda_request(FIXTURES / file, qualname, timeout=120))
    assert report.status == "ok", report.message
    assert report.device == "cuda"
    return report


def line_of(file: str, text: str) -> int:
    return source_lines.line_of(FIXTURES / file, text)


def op_counts(report, prefix: str = "aten.") -> Counter:
    return Counter((e.phase, e.name) for e in report.events if e.kind == "op" and e.name.startswith(prefix))


def test_hf_llama_train_step(worker):
    needs("transformers")
    report = trace(worker, "hf_llama.py", "train_step")
    assert report.stdout == "(2, 16, 128) torch.float32\n"
    line = line_of("hf_llama.py", "out = model(input_ids=ids, attention_mask=mask, labels=ids)")
    # an all-ones attention mask: transformers checks it on the host (padding_mask.all()) and, finding no
    # padding, passes is_causal=True without a mask: the fused kernel without a bias, one per layer
    attention = [e for e in report.events if e.kind == "op" and e.name.startswith("aten._scaled_dot_product_")]
    assert [(e.phase, e.name, len(e.inputs)) for e in attention] == [
        ("forward", "aten._scaled_dot_product_efficient_attention.default", 3)
    ] * 2 + [("backward", "aten._scaled_dot_product_efficient_attention_backward.default", 8)] * 2
    assert {e.line for e in attention} == {line}
    lm_head = [
        e
        for e in report.events
        if e.kind == "op"
        and e.phase == "forward"
        and e.line == line
        and e.name == "aten.mm.default"
        and e.outputs[0].shape == (32, 128)
    ]  # 2 x 16 tokens x vocab
    assert len(lm_head) == 1
    counts = op_counts(report, "aten._foreach_")
    assert counts[("optimizer", "aten._foreach_lerp_.Scalar")] == 1  # AdamW's foreach path, as on a GPU
    assert counts[("optimizer", "aten._foreach_addcdiv_.ScalarList")] == 1
    [sync] = [d for d in report.diagnostics if d.code == "AL100"]
    assert (sync.line, sync.severity, sync.count) == (line, "warning", 1)
    assert sync.cause is not None and sync.cause.file.endswith("/transformers/masking_utils.py")
    assert "padding_mask" in linecache.getline(sync.cause.file, sync.cause.line)
    assert f", inside transformers/masking_utils.py:{sync.cause.line} `" in sync.message
    assert sync.message.endswith(", called from this line")
    assert report.summary.syncs == 1


def test_hf_mixtral_reaches_its_experts(worker):
    needs("transformers")
    report = trace(worker, "hf_moe.py", "step")
    assert report.stdout == "(2, 16, 128) grouped_mm\n"
    line = line_of("hf_moe.py", "out = model(input_ids=ids, labels=ids)")
    counts = op_counts(report, "aten._grouped_mm")
    # gate_up and down projections of the experts; each backward computes input and weight gradients
    assert counts == {("forward", "aten._grouped_mm.default"): 2, ("backward", "aten._grouped_mm.default"): 4}
    grouped = [
        e for e in report.events if e.kind == "op" and e.name == "aten._grouped_mm.default" and e.phase == "forward"
    ]
    # every token goes to 2 of the 4 experts: 2 x 16 tokens x top-2 = 64 rows
    assert [e.outputs[0].shape for e in grouped] == [(64, 256), (64, 64)]
    syncs = sorted((d.line, d.count, d.cause is not None) for d in report.diagnostics if d.code == "AL100")
    # fp32 experts take torch's grouped-mm fallback on a GPU, which copies the group offsets to the host
    assert syncs == [(line, 2, True), (line, 4, False)]


def test_hf_mixtral_eager_experts_loop_runs_the_experts_it_hits(worker):
    needs("transformers")
    report = trace(worker, "hf_moe.py", "step_eager")
    assert report.stdout == "(2, 16, 128) eager\n"
    forward = [
        e.outputs[0].shape
        for e in report.events
        if e.kind == "op" and e.name == "aten.mm.default" and e.phase == "forward"
    ]
    # nonzero() of the experts hit takes 3 of its 5 rows (4 experts + the padding class); the padding
    # guard `expert_idx == num_experts` is assumed false, so each of the 3 runs gate_up and down on its
    # one-hot share of the 32 tokens (32 x top-2 / 5 classes = 13 rows)
    assert forward[5:11] == [(13, 256), (13, 64)] * 3
    guard = [d for d in report.diagnostics if d.code == "AL906" and "assumed not to equal" in d.message]
    assert [(d.count, "modeling_mixtral.py" in d.message) for d in guard] == [(3, True)]


def test_timm_vit_takes_the_fused_attention_kernel(worker):
    needs("timm")
    report = trace(worker, "vision.py", "vit")
    assert report.stdout == "(2, 1000)\n"
    counts = op_counts(report)
    assert counts[("forward", "aten._scaled_dot_product_efficient_attention.default")] == 2  # depth=2
    assert counts[("backward", "aten._scaled_dot_product_efficient_attention_backward.default")] == 2
    assert counts[("forward", "aten.convolution.default")] == 1  # patch embedding
    assert counts[("forward", "aten.bmm.default")] == 0  # no math path
    assert report.diagnostics == ()


def test_timm_convnext(worker):
    needs("timm")
    report = trace(worker, "vision.py", "convnext")
    assert report.stdout == "(2, 10)\n"
    counts = op_counts(report, "aten.convolution")
    # stem, 3 downsamples, and per block (depths 2, 2, 6, 2) a depthwise conv and a 1x1-conv MLP (fc1, fc2)
    assert counts == {
        ("forward", "aten.convolution.default"): 40,
        ("backward", "aten.convolution_backward.default"): 40,
    }
    assert report.diagnostics == ()


def test_diffusers_unet2d(worker):
    needs("diffusers")
    report = trace(worker, "vision.py", "unet")
    assert report.stdout == "(2, 3, 16, 16)\n"
    counts = op_counts(report)
    assert counts[("forward", "aten.convolution.default")] == 25
    assert counts[("forward", "aten._scaled_dot_product_efficient_attention.default")] == 4
    assert counts[("backward", "aten._scaled_dot_product_efficient_attention_backward.default")] == 4
    assert report.diagnostics == ()


def test_torchao_float8_training_runs_scaled_mm(worker):
    needs("torchao")
    report = trace(worker, "vision.py", "float8")
    assert report.stdout == "Float8Linear (32, 64)\n"
    counts = op_counts(report, "aten._scaled_mm")
    # the float8 GEMMs a GPU runs: output, grad input and grad weight of each of the 2 linears
    assert counts == {("forward", "aten._scaled_mm.default"): 2, ("backward", "aten._scaled_mm.default"): 4}
    inputs = [[i.dtype for i in e.inputs][:2] for e in report.events if e.name == "aten._scaled_mm.default"]
    assert all(dtypes[0].startswith("float8_e") and dtypes[1].startswith("float8_e") for dtypes in inputs)


def test_lightning_fit_phases_and_steps(worker):
    needs("lightning")
    report = trace(worker, "lightning_fit.py", "fit")
    assert report.stdout == "2 cuda:0\n"
    step_line = line_of("lightning_fit.py", "return self.layer(x).pow(2).mean()")
    at_step = Counter(e.phase for e in report.events if e.kind == "op" and e.line == step_line)
    # automatic optimization runs training_step inside optimizer.step(closure): still forward and backward
    assert set(at_step) == {"forward", "backward"}
    assert at_step["forward"] == 2 * 4  # t, addmm, pow, mean per step
    optimizer = op_counts(report, "aten._foreach_")
    assert optimizer == {("optimizer", "aten._foreach_add_.List"): 2}  # SGD's foreach update, once per step
    fit_line = line_of("lightning_fit.py", "trainer.fit(Regression(), data)")
    found = sorted(
        (d.code, d.count, d.message.rsplit(" — ", 1)[1], d.cause.file.split("site-packages/")[1])
        for d in report.diagnostics
    )
    assert {d.line for d in report.diagnostics} == {fit_line}
    assert found == [
        # teardown moves the module back to the CPU: weight and bias
        (
            "AL100",
            2,
            "after the last of 2 optimizer steps (teardown, not per step)",
            "lightning/fabric/utilities/device_dtype_mixin.py",
        ),
        (
            "AL100",
            2,
            "after the last of 2 optimizer steps (teardown, not per step)",
            "lightning/fabric/utilities/device_dtype_mixin.py",
        ),
        # the length checks of the dataloader, before training starts
        (
            "AL100",
            2,
            "before the first of 2 optimizer steps (setup, not per step)",
            "lightning/pytorch/utilities/data.py",
        ),
        (
            "AL100",
            2,
            "before the first of 2 optimizer steps (setup, not per step)",
            "lightning/pytorch/utilities/data.py",
        ),
        # each batch is uploaded with non_blocking=True from pageable memory
        ("AL200", 2, "once per optimizer step (2 steps)", "lightning/fabric/utilities/apply_func.py"),
    ]
