"""Fourth round of configurations traced on simulated CUDA (bench/fidelity_sweep/round4.py).

Each fixture in tests/fixtures/models/ was traced and also run eagerly on the CPU with real small
tensors (bench/fidelity_sweep/compare.py); these tests pin what the trace must show where the trace
was wrong: ops a GPU does not run, or a result in another layout.
"""

from __future__ import annotations

from collections import Counter

from test_models import line_of, needs, op_counts, trace


def test_inference_mode_records_the_ops_a_gpu_runs_for_composite_ops(worker):
    report = trace(worker, "inference_mode.py", "infer")
    # under inference mode, autograd's dispatch keys are skipped and composite ops (conv2d, linear,
    # matmul) reached the trace undecomposed: recorded as one op without FLOPs, and the convolution's
    # cuDNN layout was not applied (the features came back contiguous)
    assert report.stdout == "(2, 4) (2, 2) True\n"
    conv = line_of("inference_mode.py", "features = model[0](x)")
    head = line_of("inference_mode.py", "logits = model[1:](features)")
    scores = line_of("inference_mode.py", "scores = torch.matmul(logits, logits.T)")
    ops = [(e.line, e.name, e.outputs[0].shape, e.flops) for e in report.events if e.kind == "op"]
    assert ops == [
        (conv, "aten.convolution.default", (2, 8, 16, 16), 221184),
        (head, "aten.relu.default", (2, 8, 16, 16), None),
        (head, "aten.mean.dim", (2, 8, 1, 1), None),
        (head, "aten.as_strided_.default", (2, 8, 1, 1), None),
        (head, "aten.view.default", (2, 8), None),
        (head, "aten.t.default", (8, 4), None),
        (head, "aten.addmm.default", (2, 4), 128),
        (scores, "aten.permute.default", (4, 2), None),
        (scores, "aten.mm.default", (2, 2), 32),
    ]
    assert report.summary.flops == 221184 + 128 + 32
    assert not report.diagnostics


def test_grouped_query_sdpa_takes_flash_in_half_precision_and_math_in_fp32(worker):
    report = trace(worker, "sdpa_gqa.py", "step")
    assert report.stdout == "(2, 8, 16, 32) (2, 2, 16, 32)\n"
    half = line_of("sdpa_gqa.py", "half = F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)")
    full = line_of("sdpa_gqa.py", "full = F.scaled_dot_product_attention(q.float(), kv.float(), kv.float()")
    # torch's flash check admits grouped-query heads (the efficient kernel does not): fp16 took the
    # math path before; the kernel reads the 2 key/value heads as they are and gives their gradients
    attention = [
        (e.phase, e.line, e.name, tuple(o.shape for o in e.outputs[:3]))
        for e in report.events
        if e.kind == "op" and e.name.startswith("aten._scaled_dot_product_")
    ]
    assert attention == [
        ("forward", half, "aten._scaled_dot_product_flash_attention.default", ((2, 8, 16, 32), (2, 8, 16), (2,))),
        (
            "backward",
            half,
            "aten._scaled_dot_product_flash_attention_backward.default",
            ((2, 8, 16, 32), (2, 2, 16, 32), (2, 2, 16, 32)),
        ),
    ]
    # fp32 with grouped-query heads: neither fused kernel, the math path (two bmm forward, four backward)
    assert op_counts(report, "aten.bmm") == {("forward", "aten.bmm.default"): 2, ("backward", "aten.bmm.default"): 4}
    assert {e.line for e in report.events if e.kind == "op" and e.name == "aten.bmm.default"} == {full}


def test_sparse_gradients_keep_their_entries_and_sparse_adam_updates(worker):
    report = trace(worker, "sparse_embedding.py", "step")
    # autograd clones the sparse gradient when it stores it; the fake clone had no entries, so
    # SparseAdam skipped the update ("empty gradient") and the step showed no op at all
    assert report.stdout == "True 12\n"
    line = line_of("sparse_embedding.py", "opt.step()")
    # coalesce keeps the 8 distinct ids of the 12 looked up (known: the ids are); on a GPU the count
    # comes back to the host, a sync
    [sync] = [d for d in report.diagnostics if d.code == "AL100"]
    assert sync.line == line
    assert sync.message.startswith("`coalesce()` of sparse f32[100, 16] counts its distinct indices on the host")
    assert not [d for d in report.diagnostics if d.code != "AL100"]
    update = Counter(
        (e.name, e.outputs[0].shape if e.outputs else None)
        for e in report.events
        if e.kind == "op" and e.phase == "optimizer" and e.line == line
    )
    # sparse_adam's update on the 8 coalesced rows, written into exp_avg, exp_avg_sq and the weight
    # through sparse tensors (an eager CPU run shows the same ops and shapes)
    assert update[("aten._coalesce.default", (100, 16))] == 1
    assert update[("aten.sparse_mask.default", (100, 16))] == 2
    assert update[("aten.add_.Tensor", (100, 16))] == 3
    assert update[("aten.sqrt_.default", (8, 16))] == 1
    assert update[("aten.div_.Tensor", (8, 16))] == 1


def test_sparse_gradient_of_unknown_ids_coalesces_to_half_its_entries(worker):
    report = trace(worker, "sparse_embedding.py", "unknown_ids")
    assert report.stdout == "12\n"
    line = line_of("sparse_embedding.py", "optimizer.step()")
    [assumed] = [d for d in report.diagnostics if d.code == "AL906"]
    assert "took size 6 of at most 12 for the distinct indices of `coalesce()` of f32[100, 16]" in assumed.message
    assert assumed.line == line
    rows = {e.outputs[0].shape for e in report.events if e.kind == "op" and e.name == "aten.sqrt_.default"}
    assert rows == {(6, 16)}


def test_transformer_layers_take_the_fused_attention_kernel_inside_multi_head_attention(worker):
    report = trace(worker, "transformer_layer.py", "step")
    assert report.stdout == "(2, 9, 32) (2, 9, 9)\n"
    layer = line_of("transformer_layer.py", "out = layer(x, src_mask=mask, is_causal=True)")
    mha = line_of("transformer_layer.py", "mixed, weights = mha(out, out, out)")
    # the layer's self-attention asks for no weights: F.multi_head_attention_forward calls sdpa from
    # inside, which took the math path (bmm, _safe_softmax); a GPU takes the efficient kernel (fp32, mask)
    attention = [
        (e.phase, e.line, e.name)
        for e in report.events
        if e.kind == "op" and e.name.startswith("aten._scaled_dot_product_")
    ]
    assert attention == [
        ("forward", layer, "aten._scaled_dot_product_efficient_attention.default"),
        ("backward", layer, "aten._scaled_dot_product_efficient_attention_backward.default"),
    ]
    # asked for its weights, MultiheadAttention computes them explicitly (no sdpa), on a GPU too
    softmax = {(e.phase, e.line) for e in report.events if e.kind == "op" and "softmax" in e.name}
    assert softmax == {("forward", mha), ("backward", mha)}
    assert {e.line for e in report.events if e.kind == "op" and e.name == "aten.bmm.default"} == {mha}


def test_beam_search_output_has_the_generated_length(worker):
    needs("transformers")
    report = trace(worker, "hf_beam.py", "beam")
    # the output is cropped to the longest generated beam, `sum(...).max()` of unknown beam indices:
    # taken as 1 before, an output of (1, 1); now the most it can be, 5 prompt + 3 new tokens
    assert report.stdout == "(1, 8)\n"
    line = line_of("hf_beam.py", "out = model.generate(ids, max_new_tokens=3, num_beams=2")
    longest = [d for d in report.diagnostics if d.code == "AL906" and "the longest of unknown lengths" in d.message]
    assert [(d.line, d.message.split(": the longest")[0]) for d in longest] == [
        (line, "value unknown on fake tensors: took `8` for i64[]"),
        (line, "value unknown on fake tensors: took `3` for i64[]"),
    ]
    assert all("inside transformers/generation/utils.py:" in d.message for d in longest)


def test_inference_mode_copies_are_seen_as_syncs_and_pageable_uploads(worker):
    report = trace(worker, "inference_mode.py", "to_host")
    assert report.stdout == "(2, 4) (3,)\n"
    # `.cpu()` and `.to()` are composite (`aten.to`): under inference mode the trace saw only them and
    # not the `_to_copy` they run, so the sync and the pageable upload went unreported
    download = line_of("inference_mode.py", "on_host = logits.cpu()")
    upload = line_of("inference_mode.py", 'mean = torch.ones(3).to("cuda", non_blocking=True)')
    assert [(d.code, d.line) for d in report.diagnostics] == [("AL100", download), ("AL200", upload)]
    assert report.diagnostics[0].message.startswith("`.cpu()` copies cuda f32[2, 4] to the host and blocks")
    copies = [(e.line, e.name) for e in report.events if e.kind == "op" and e.name.startswith("aten._to_copy")]
    assert copies == [(download, "aten._to_copy.default"), (upload, "aten._to_copy.default")]
