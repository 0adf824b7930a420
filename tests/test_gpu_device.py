"""Simulated CUDA through the real trace worker: device-agnostic code takes its GPU branch, modules
move and cast, autocast casts, sdpa and AdamW take the kernels a real GPU takes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import source_lines
from gpu_helpers import CORPUS, cuda_request, ops_named

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "gpu" / "device_api.py"


def trace(worker, qualname, call=None, path=FIXTURE):
    report = worker.trace(cuda_request(path, qualname, call=call))
    assert report.status == "ok", report.message
    assert report.device == "cuda"
    return report


def line_of(text: str, path: Path = FIXTURE) -> int:
    return source_lines.line_of(path, text)


def test_device_agnostic_code_takes_its_gpu_branch(worker):
    report = trace(worker, "gpu_branch")
    assert report.stdout.splitlines() == [
        "device cuda 1 0",
        "props 9 0 80 132",
        "capability (9, 0) True",
        "accelerator True cuda 1 0",
        "memory 0 0",
        "stream cuda:0 cuda:0",
        "rng (16,) torch.uint8",
    ]
    assert report.diagnostics == ()


def test_modules_move_to_cuda_and_cast(worker):
    report = trace(worker, "module_moves")
    assert report.stdout.splitlines() == [
        "built cpu",
        "to cuda:0 torch.float32",
        "cuda cuda:0",
        "cast cuda:0 torch.bfloat16",
        "grad cuda:0 torch.bfloat16",
    ]
    addmm = [e for e in report.events if e.name == "aten.addmm.default" and e.line == line_of("y = layer(x)")]
    assert [(o.dtype, o.shape, o.device) for e in addmm for o in e.outputs] == [("bfloat16", (2, 4), "cuda:0")]


def test_autocast_bf16_runs_matmuls_in_bf16_on_cuda(worker):
    report = trace(worker, "autocast_bf16")
    assert report.stdout == "torch.bfloat16 torch.float32\n"
    inside = [e for e in report.events if e.name == "aten.addmm.default" and e.line == line_of("inside = layer(x)")]
    outside = [e for e in report.events if e.name == "aten.addmm.default" and e.line == line_of("outside = layer(x)")]
    assert [o.dtype for e in inside for o in e.outputs] == ["bfloat16"]
    assert [o.dtype for e in outside for o in e.outputs] == ["float32"]
    casts = [e for e in report.events if e.name == "aten._to_copy.default" and e.line == line_of("inside = layer(x)")]
    assert {o.dtype for e in casts for o in e.outputs} == {"bfloat16"}


@pytest.mark.parametrize(
    "call, forward, backward",
    [
        (
            'attention("bfloat16")',
            "aten._scaled_dot_product_flash_attention.default",
            "aten._scaled_dot_product_flash_attention_backward.default",
        ),
        (
            'attention("float16")',
            "aten._scaled_dot_product_flash_attention.default",
            "aten._scaled_dot_product_flash_attention_backward.default",
        ),
        (
            'attention("float32")',
            "aten._scaled_dot_product_efficient_attention.default",
            "aten._scaled_dot_product_efficient_attention_backward.default",
        ),
        (
            'attention("bfloat16", masked=True)',
            "aten._scaled_dot_product_efficient_attention.default",
            "aten._scaled_dot_product_efficient_attention_backward.default",
        ),
    ],
)
def test_sdpa_takes_the_fused_kernel_a_gpu_takes(worker, call, forward, backward):
    report = trace(worker, "attention", call=call)
    assert ops_named(report, "aten._scaled_dot_product_", "forward") == [forward]
    assert ops_named(report, "aten._scaled_dot_product_", "backward") == [backward]
    assert ops_named(report, "aten.bmm") == []  # not the math path
    assert report.stdout == f"torch.Size([2, 4, 64, 32]) torch.{call.split(chr(34))[1]}\n"


def test_sdpa_under_autocast_casts_before_choosing_the_kernel(worker):
    report = trace(worker, "attention_autocast_mixed")
    assert ops_named(report, "aten._scaled_dot_product_", "forward") == [
        "aten._scaled_dot_product_flash_attention.default"
    ]
    assert ops_named(report, "aten._scaled_dot_product_", "backward") == [
        "aten._scaled_dot_product_flash_attention_backward.default"
    ]
    assert ops_named(report, "aten.bmm") == []
    casts = [
        e
        for e in report.events
        if e.name == "aten._to_copy.default"
        and e.phase == "forward"
        and e.line == line_of("out = F.scaled_dot_product_attention(q, q, v, is_causal=True)")
    ]
    # q (a leaf that requires grad, passed as query and key) is cast once, as autocast's cache does; v already is bf16
    assert [[o.dtype for o in e.outputs] for e in casts] == [["bfloat16"]]
    assert report.stdout == "torch.Size([2, 4, 64, 32]) torch.bfloat16\n"


def test_sdpa_kernel_math_keeps_the_math_path(worker):
    report = trace(worker, "attention", call='attention("bfloat16", backend="math")')
    assert ops_named(report, "aten._scaled_dot_product_") == []
    forward = set(ops_named(report, "aten.", "forward"))
    assert {"aten.bmm.default", "aten._safe_softmax.default"} <= forward


def test_adamw_takes_the_foreach_path(worker):
    report = trace(worker, "adamw_step")
    optimizer = Counter(e.name for e in report.events if e.kind == "op" and e.phase == "optimizer")
    assert optimizer["aten._foreach_lerp_.Scalar"] == 1
    assert optimizer["aten._foreach_addcdiv_.ScalarList"] == 1
    assert optimizer["aten.lerp_.Scalar"] == 0  # the per-parameter loop is not taken
    assert report.summary.syncs == 0  # the CPU step counters are no GPU sync


def test_gpt_train_step_with_adamw_and_clipping_traces_to_the_end_without_syncs(worker):
    path = CORPUS / "clean_training.py"
    report = trace(worker, "case_train", path=path)
    assert report.summary.syncs == 0 and report.diagnostics == ()
    assert report.summary.ops["optimizer"] > 0 and report.summary.ops["backward"] > 0
    assert len(ops_named(report, "aten._scaled_dot_product_flash_attention.default", "forward")) == 6  # 2 layers x 3
    assert len(ops_named(report, "aten._foreach_lerp_", "optimizer")) == 3
    clip_line = line_of("clip_grad_norm_(", path)
    clip_ops = {e.name for e in report.events if e.kind == "op" and e.line == clip_line}
    assert {"aten._foreach_norm.Scalar", "aten._foreach_mul_.Tensor"} <= clip_ops  # foreach, as on a GPU
    step_line = line_of("optimizer.step()", path)
    assert {e.phase for e in report.events if e.line == step_line and e.kind == "op"} == {"optimizer"}


def test_side_stream_prefetch_with_nvtx_ranges_runs_without_findings(worker):
    report = trace(worker, "side_stream_prefetch")
    assert report.stdout == "cuda:0 1 False\n"
    assert report.diagnostics == ()
    record = [e for e in report.events if e.name == "aten.record_stream.default"]
    assert [e.line for e in record] == [line_of("on_gpu.record_stream(")]


def test_cuda_generator_is_created_seeded_and_used(worker):
    report = trace(worker, "seeded_generator")
    assert report.stdout == "cuda:0 1234 (16,) torch.uint8 (4, 8) cuda:0\n"
    line = line_of('x = torch.randn(4, 8, device="cuda", generator=g)')
    assert [(e.name, [o.shape for o in e.outputs]) for e in report.events if e.kind == "op" and e.line == line] == [
        ("aten.randn.generator", [(4, 8)])
    ]


def test_cuda_version_and_cudnn_answer_as_a_cuda_build(worker):
    assert trace(worker, "cuda_build_facts").stdout == "13.0 True 91300\n"


def test_frombuffer_gives_a_fake_host_tensor(worker):
    report = trace(worker, "mnist_style_buffer")
    assert report.stdout == "FakeTensor (4, 4) cuda:0\n"
    line = line_of('y = t.to("cuda").float() / 255')
    assert [e.name for e in report.events if e.kind == "op" and e.line == line] == [
        "aten._to_copy.default",
        "aten._to_copy.default",
        "aten.div.Tensor",
    ]


def test_grouped_mm_in_fp32_takes_the_fallback_and_its_offsets_sync(worker):
    report = trace(worker, "experts_grouped_mm", call='experts_grouped_mm("float32")')
    assert report.stdout == "(8, 32) (32, 1) torch.float32 (2, 16, 32)\n"
    assert ops_named(report, "aten._grouped_mm", "forward") == ["aten._grouped_mm.default"]
    assert ops_named(report, "aten._grouped_mm", "backward") == ["aten._grouped_mm.default"] * 2
    line = line_of("out = torch._grouped_mm(tokens, weights, offs=offs)")
    at_line = [d for d in report.diagnostics if d.line == line]
    # the forward op and the two backward ops (grad input, grad weight; at the forward line) each sync
    assert [(d.code, d.severity, d.count) for d in at_line] == [("AL100", "warning", 3)]
    assert [d for d in report.diagnostics if d.line is None] == []
    assert at_line[0].message.startswith("`torch._grouped_mm` with float32 inputs takes torch's fallback on a GPU")


def test_grouped_mm_in_bf16_takes_the_fused_kernel_without_a_sync(worker):
    report = trace(worker, "experts_grouped_mm", call='experts_grouped_mm("bfloat16")')
    assert report.stdout == "(8, 32) (32, 1) torch.bfloat16 (2, 16, 32)\n"
    assert ops_named(report, "aten._grouped_mm", "forward") == ["aten._grouped_mm.default"]
    assert [d for d in report.diagnostics if d.code == "AL100"] == []


@pytest.mark.parametrize("pin", [False, True])
def test_dataloader_with_workers_loads_in_process_and_says_so(worker, pin):
    report = trace(worker, "loader_with_workers", call=f"loader_with_workers({pin})")
    assert report.stdout == "(4, 4) cuda:0\n"
    loop, upload = line_of("for (x,) in loader:"), line_of('y = x.to("cuda", non_blocking=True)')
    found = sorted((d.line, d.code, d.severity, d.count) for d in report.diagnostics)
    expected = [(loop, "AL907", "information", 1)] + ([] if pin else [(upload, "AL200", "warning", 2)])
    assert found == expected
    [note] = [d for d in report.diagnostics if d.code == "AL907"]
    assert note.message.startswith(
        "DataLoader(num_workers=1): on a real run 1 worker process loads and collates "
        "the batches, up to 2 ahead (prefetch_factor=2), while the step runs"
    )
    assert ("pin_memory=True: a pin-memory thread pins each batch" in note.message) == pin
    assert [e.name for e in report.events if e.kind == "op" and e.line == upload] == ["aten._to_copy.default"] * 2


def test_per_step_work_is_told_from_once_per_run_work(worker):
    report = trace(worker, "steps_and_teardown")
    by_line = {d.line: d for d in report.diagnostics if d.code == "AL100"}
    item, teardown = by_line[line_of("print(loss.item())")], by_line[line_of("weights = model.weight.cpu()")]
    assert item.count == 3 and item.message.endswith(" — once per optimizer step (3 steps)")
    assert teardown.count == 1
    assert teardown.message.endswith(" — after the last of 3 optimizer steps (teardown, not per step)")
