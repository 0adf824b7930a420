"""More real third-party configurations traced on simulated CUDA (the `models` extra).

Each fixture in tests/fixtures/models/ was first traced and also run eagerly on the CPU with real
small tensors under a recording TorchDispatchMode; these tests pin what the trace must show where
the two were compared: the ops a GPU takes, their shapes, the lines they are at, and the syncs
a library makes. Differences that are CPU-versus-CUDA kernel choices are listed in docs/fidelity.md.
"""

from __future__ import annotations

from collections import Counter

from test_models import line_of, needs, op_counts, trace


def shapes(report, name: str, phase: str) -> list[tuple]:
    return [
        tuple(tuple(o.shape) for o in e.outputs)
        for e in report.events
        if e.kind == "op" and e.name == name and e.phase == phase
    ]


def test_gru_runs_its_fused_cell_forward_and_backward(worker):
    report = trace(worker, "rnn.py", "step")
    assert report.stdout == "(3, 7, 5)\n"
    lstm_line = line_of("rnn.py", "h, _ = self.lstm(self.emb(ids))")
    gru_line = line_of("rnn.py", "h, _ = self.gru(h)")
    # one fused cell per time step (7) per direction (2) per layer (2) for the LSTM, per step for the GRU
    counts = op_counts(report, "aten._thnn_fused_")
    assert counts == {
        ("forward", "aten._thnn_fused_lstm_cell.default"): 28,
        ("backward", "aten._thnn_fused_lstm_cell_backward_impl.default"): 28,
        ("forward", "aten._thnn_fused_gru_cell.default"): 7,
        ("backward", "aten._thnn_fused_gru_cell_backward.default"): 7,
    }
    # hy (batch 3 x hidden 8) and the kernel's workspace (5 gates' worth); in backward the input and
    # hidden gate gradients (3 gates), grad hx, and the two bias gradients
    assert shapes(report, "aten._thnn_fused_gru_cell.default", "forward") == [((3, 8), (3, 40))] * 7
    assert (
        shapes(report, "aten._thnn_fused_gru_cell_backward.default", "backward")
        == [((3, 24), (3, 24), (3, 8), (24,), (24,))] * 7
    )
    at = Counter((e.phase, e.line) for e in report.events if e.kind == "op" and e.name.startswith("aten._thnn_fused_"))
    assert at == {
        ("forward", lstm_line): 28,
        ("backward", lstm_line): 28,
        ("forward", gru_line): 7,
        ("backward", gru_line): 7,
    }
    # the dropout between the LSTM's layers is the fused dropout a GPU runs
    assert op_counts(report, "aten.native_dropout") == {
        ("forward", "aten.native_dropout.default"): 1,
        ("backward", "aten.native_dropout_backward.default"): 1,
    }
    assert report.diagnostics == ()


def test_gpt2_generate_stops_at_max_new_tokens(worker):
    needs("transformers")
    report = trace(worker, "hf_text.py", "generate")
    # 5 prompt tokens + 3 new ones: the loop ends when the length criterion holds, as on a GPU (the
    # end-of-sequence test reads generated tokens, which are unknown: `unknown | True` is True)
    assert report.stdout == "(1, 8)\n"
    line = line_of("hf_text.py", "out = model.generate(ids, max_new_tokens=3, do_sample=False, use_cache=True)")
    attention = [e for e in report.events if e.kind == "op" and e.name.startswith("aten._scaled_dot_product_")]
    # 2 layers: the prompt's 5 queries once, then one query per new token against the KV cache
    assert [(e.line, e.name, e.inputs[0].shape, e.inputs[1].shape) for e in attention] == [
        (line, "aten._scaled_dot_product_efficient_attention.default", (1, 4, 5, 8), (1, 4, 5, 8))
    ] * 2 + [(line, "aten._scaled_dot_product_efficient_attention.default", (1, 4, 1, 8), (1, 4, 6, 8))] * 2 + [
        (line, "aten._scaled_dot_product_efficient_attention.default", (1, 4, 1, 8), (1, 4, 7, 8))
    ] * 2
    assert op_counts(report, "aten.argmax") == {("forward", "aten.argmax.default"): 3}  # greedy, one per token
    # the stopping check of each step reads `unfinished_sequences.max() == 0` on the host: 3 syncs; the
    # first two are assumed (unknown tokens), the last one is known
    stop = [
        d
        for d in report.diagnostics
        if d.cause is not None and d.cause.file.endswith("transformers/generation/utils.py")
    ]
    [stop_sync] = [d for d in stop if d.code == "AL100" and "unfinished_sequences.max() == 0" in d.message]
    assert (stop_sync.line, stop_sync.count) == (line, 3)
    [stop_assumed] = [d for d in stop if d.code == "AL906"]
    assert (stop_assumed.line, stop_assumed.count) == (line, 2)
    assert report.summary.syncs == 10  # eager on the CPU reads 10 values on the host too


def test_clip_moves_its_scalar_parameter_and_trains(worker):
    needs("transformers")
    report = trace(worker, "hf_text.py", "clip")
    # logit_scale is nn.Parameter(torch.tensor(2.6592)): model.to("cuda") moves it (it used to fail with
    # "Couldn't swap CLIPModel.logit_scale") and it gets its gradient
    assert report.stdout == "(3, 3) cuda:0 True\n"
    line = line_of("hf_text.py", "out = model(input_ids=ids, pixel_values=pixels, return_loss=True)")
    counts = op_counts(report)
    assert counts[("forward", "aten._scaled_dot_product_efficient_attention.default")] == 2  # one per tower
    assert counts[("forward", "aten.convolution.default")] == 1  # the vision tower's patch embedding
    # the contrastive loss: cross entropy over the 3 x 3 similarities, for text and for images
    log_softmax = [e for e in report.events if e.kind == "op" and e.name == "aten._log_softmax.default"]
    assert [(e.line, e.outputs[0].shape) for e in log_softmax] == [(line, (3, 3))] * 2
    [exp] = [e for e in report.events if e.kind == "op" and e.name == "aten.exp.default"]
    assert (exp.line, exp.inputs[0].shape, exp.phase) == (line, (), "forward")  # logit_scale.exp()
