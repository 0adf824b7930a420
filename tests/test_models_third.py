"""Third round of real configurations traced on simulated CUDA (the `models` extra for Hugging Face).

Each fixture in tests/fixtures/models/ was traced and also run eagerly on the CPU with real small
tensors (bench/fidelity_sweep/compare.py); these tests pin what the trace must show where the two
first disagreed: the trace ended where the eager run trained.
"""

from __future__ import annotations

from collections import Counter

from test_models import line_of, needs, op_counts, trace


def outputs(report, name: str) -> list[tuple]:
    return [
        (e.phase, e.line, tuple(tuple(o.shape) for o in e.outputs))
        for e in report.events
        if e.kind == "op" and e.name == name
    ]


def test_ctc_loss_runs_the_native_cuda_kernel_forward_and_backward(worker):
    report = trace(worker, "ctc_step.py", "step")
    assert report.stdout == "torch.Size([]) torch.Size([])\n"
    line = line_of("ctc_step.py", "loss = ctc(log_probs, targets, torch.tensor([12, 10]), torch.tensor([5, 3]))")
    gpu_line = line_of("ctc_step.py", "on_gpu = ctc(log_probs.detach(), targets,")
    # per-sequence losses (batch 2) and log_alpha: batch x 12 input steps x (2 * longest target + 1),
    # the longest target being 5 from the host lengths, then 4 from the cuda lengths
    assert outputs(report, "aten._ctc_loss.default") == [
        ("forward", line, ((2,), (2, 12, 11))),
        ("forward", gpu_line, ((2,), (2, 12, 9))),
    ]
    assert outputs(report, "aten._ctc_loss_backward.default") == [("backward", line, ((12, 2, 6),))]
    assert op_counts(report, "aten._ctc_loss") == {
        ("forward", "aten._ctc_loss.default"): 2,
        ("backward", "aten._ctc_loss_backward.default"): 1,
    }
    # the mean reduction divides by the clamped target lengths, copied to the GPU
    assert [
        (e.line, e.outputs[0].shape) for e in report.events if e.kind == "op" and e.name == "aten.clamp_min.default"
    ] == [
        (line, (2,)),
        (gpu_line, (2,)),
    ]
    # lengths on the GPU are copied to the host first: one sync per lengths tensor
    lengths_syncs = [d for d in report.diagnostics if d.code == "AL100" and "i64[2] to the host" in d.message]
    assert [(d.line, d.count) for d in lengths_syncs] == [(gpu_line, 2)]
    assert not [d for d in report.diagnostics if d.code in ("AL900", "AL906")]


def test_gradient_checkpointing_recomputes_with_the_fused_attention_kernel(worker):
    needs("transformers")
    report = trace(worker, "hf_checkpointed.py", "train_step")
    # it used to end in CheckpointError: the recompute in backward took sdpa's math path and saved
    # other tensors than the forward had
    assert report.stdout == "(2, 12, 96) True\n"
    line = line_of("hf_checkpointed.py", "out = model(input_ids=ids, labels=ids)")
    attention = [
        (e.phase, e.name, e.line)
        for e in report.events
        if e.kind == "op" and e.name.startswith("aten._scaled_dot_product_")
    ]
    # one per layer in forward; in backward each layer's recompute, then its kernel's backward
    forward = [("forward", "aten._scaled_dot_product_efficient_attention.default", line)] * 2
    layer = [
        ("backward", "aten._scaled_dot_product_efficient_attention.default", line),
        ("backward", "aten._scaled_dot_product_efficient_attention_backward.default", line),
    ]
    assert attention == forward + layer * 2
    assert op_counts(report, "aten._safe_softmax") == {}  # no math path anywhere
    assert not [d for d in report.diagnostics if d.code == "AL900"]


def test_torchao_int8_dynamic_runs_the_int8_matmul_of_its_higher_order_operator(worker):
    needs("torchao")
    report = trace(worker, "int8_dynamic.py", "infer")
    # it used to end in AL900: the matmul is the `out_dtype` higher-order operator, which the trace's
    # dispatch mode did not run; on cuda its eager kernel is torch._int_mm (int8 x int8 -> int32)
    assert report.stdout == "(4, 16) torch.float32\n"
    line = line_of("int8_dynamic.py", "out = model(x)")
    int_mm = [e for e in report.events if e.kind == "op" and e.name == "aten._int_mm.default"]
    assert [(e.line, e.inputs[0].dtype, e.inputs[1].dtype, e.outputs[0].shape, e.outputs[0].dtype) for e in int_mm] == [
        (line, "int8", "int8", (4, 64), "int32"),
        (line, "int8", "int8", (4, 16), "int32"),
    ]
    assert not [d for d in report.diagnostics if d.code == "AL900"]


def test_transformer_encoder_inference_with_a_padding_mask_runs(worker):
    report = trace(worker, "transformer_infer.py", "infer")
    # it used to end in AL900: the encoder's left-alignment check of the mask has no meta kernel
    assert report.stdout == "(2, 9, 32) False\n"
    line = line_of("transformer_infer.py", "out = encoder(x, src_key_padding_mask=pad)")
    check = [
        e for e in report.events if e.kind == "op" and e.name == "aten._nested_tensor_from_mask_left_aligned.default"
    ]
    assert [(e.line, e.inputs[0].shape, e.inputs[1].shape) for e in check] == [(line, (2, 9, 32), (2, 9))]
    [sync] = [d for d in report.diagnostics if d.code == "AL100"]
    assert (sync.line, sync.count) == (line, 1)
    assert "checks on the host that the padding mask is left-aligned" in sync.message
    # the mask is known (built from zeros): no assumption; two layers, two norms each
    assert [d.code for d in report.diagnostics] == ["AL100"]
    assert op_counts(report, "aten.native_layer_norm") == {("forward", "aten.native_layer_norm.default"): 4}


def test_channels_last_convolutions_return_channels_last_as_cudnn_does(worker):
    report = trace(worker, "channels_last.py", "step")
    # the feature maps and the weight gradients are channels_last, as cuDNN makes them (they were
    # contiguous: a CPU build of torch has no cuDNN and fake tensors took the slow kernel's format)
    assert report.stdout == "True True\n"
    line = line_of("channels_last.py", "logits = head(maps.flatten(1))")
    # so flatten(1) of the channels_last maps is a copy, not a view, as on a GPU
    at_flatten = [
        (e.name, e.outputs[0].shape, e.outputs[0].dtype)
        for e in report.events
        if e.kind == "op"
        and e.line == line
        and e.phase == "forward"
        and e.name in ("aten.clone.default", "aten._unsafe_view.default", "aten.view.default")
    ]
    assert at_flatten == [
        ("aten.clone.default", (2, 8, 7, 7), "bfloat16"),
        ("aten._unsafe_view.default", (2, 392), "bfloat16"),
    ]
    # the gradients arrive in the parameters' layout: no copy into it in backward
    assert op_counts(report, "aten.copy_") == {}


def test_double_backward_ops_are_at_the_line_whose_backward_built_them(worker):
    report = trace(worker, "gradient_penalty.py", "step")
    assert report.stdout == "(4, 8) True\n"
    score = line_of("gradient_penalty.py", "score = critic(mixed)")
    # they had no line: the graph torch.autograd.grad built (create_graph=True) is numbered by the
    # autograd thread's own counter. In loss.backward() its nodes run: the backward of the critic's
    # backward (LeakyReLU's backward, the two matmuls' transposed products)
    double = Counter(
        (e.name, e.outputs[0].shape)
        for e in report.events
        if e.kind == "op" and e.phase == "backward" and e.line == score and e.name in _DOUBLE_BACKWARD
    )
    # what an eager CPU run puts at this line plus what it puts at the autograd.grad line (where its
    # recorder places the double backward): compare.py found no other difference
    assert double == {
        ("aten.leaky_relu_backward.default", (4, 16)): 2,
        ("aten.zeros_like.default", (4, 16)): 1,
        ("aten.mm.default", (16, 8)): 2,
        ("aten.mm.default", (4, 16)): 2,
        ("aten.mm.default", (1, 16)): 1,
        ("aten.mm.default", (4, 8)): 2,
    }
    assert [e.name for e in report.events if e.kind == "op" and e.line is None] == []


_DOUBLE_BACKWARD = ("aten.leaky_relu_backward.default", "aten.zeros_like.default", "aten.mm.default")


def test_packed_lstm_runs_step_by_step_on_the_batch_sizes_of_the_known_lengths(worker):
    # it ended at pack_padded_sequence (AL900): the packed kernels read batch_sizes through a data
    # pointer; the trace now computes them from the lengths [6, 4, 2] and hands those kernels the real ones
    report = trace(worker, "packed_lstm.py", "step")
    pack = line_of("packed_lstm.py", "packed = pack_padded_sequence(emb(ids), lengths, batch_first=True)")
    rnn = line_of("packed_lstm.py", "out, _ = lstm(packed)")
    pad = line_of("packed_lstm.py", "padded, _ = pad_packed_sequence(out, batch_first=True)")
    # 12 packed rows (6 + 4 + 2) and batch sizes [3, 3, 2, 2, 1, 1] on the host
    assert outputs(report, "aten._pack_padded_sequence.default") == [("forward", pack, ((12, 8), (6,)))]
    # one fused cell per step, on the sequences still running, and its backward in reverse order
    cells = [3, 3, 2, 2, 1, 1]
    assert outputs(report, "aten._thnn_fused_lstm_cell.default") == [
        ("forward", rnn, ((b, 12), (b, 12), (b, 48))) for b in cells
    ]
    assert outputs(report, "aten._thnn_fused_lstm_cell_backward_impl.default") == [
        ("backward", rnn, ((b, 48), (b, 12), (48,))) for b in reversed(cells)
    ]
    # pad_packed_sequence: the padded output filled run by run (steps with the same batch size), then
    # transposed for batch_first; lengths allocated on the host
    assert outputs(report, "aten.full.default") == [("forward", pad, ((6, 3, 12),))]
    assert [s for s in outputs(report, "aten.copy_.default") if s[0] == "forward"] == [
        ("forward", pad, ((2, 3, 12),)),
        ("forward", pad, ((2, 2, 12),)),
        ("forward", pad, ((2, 1, 12),)),
    ]
    assert outputs(report, "aten.empty.memory_format") == [("forward", pad, ((3,),))]
    # the packing's backward scatters the gradient back step by step into the padded input's shape
    assert ("backward", pack, ((6, 3, 8),)) in outputs(report, "aten.zeros.default")
    assert not report.diagnostics


def test_pack_padded_sequence_with_unknown_lengths_assumes_no_padding(worker):
    report = trace(worker, "packed_lstm.py", "unknown_lengths")
    line = line_of("packed_lstm.py", "packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True)")
    # lengths read from data the trace does not know: every sequence as long as the padded batch
    assert report.stdout == "[6, 6, 6]\n"
    assert outputs(report, "aten._pack_padded_sequence.default") == [("forward", line, ((18, 8), (6,)))]
    [assumed] = [d for d in report.diagnostics if d.code == "AL906"]
    assert assumed.line == line
    assert "took 6 for every length of `pack_padded_sequence` (i64[3] unknown: sequences assumed unpadded)" in (
        assumed.message
    )


def test_reentrant_checkpoint_recomputes_with_the_fused_attention_kernel(worker):
    report = trace(worker, "checkpoint_reentrant.py", "step")
    assert report.stdout == "(2, 4, 8, 8)\n"
    line = line_of("checkpoint_reentrant.py", "return F.scaled_dot_product_attention(q, k, v, is_causal=True)")
    attention = [
        (e.phase, e.name, e.line)
        for e in report.events
        if e.kind == "op" and e.name.startswith("aten._scaled_dot_product_")
    ]
    # the recompute in backward took the math path (bmm, _safe_softmax) before
    assert attention == [
        ("forward", "aten._scaled_dot_product_efficient_attention.default", line),
        ("backward", "aten._scaled_dot_product_efficient_attention.default", line),
        ("backward", "aten._scaled_dot_product_efficient_attention_backward.default", line),
    ]
    assert op_counts(report, "aten._safe_softmax") == {}
