"""More real third-party configurations traced on simulated CUDA (the `models` extra).

Each fixture in tests/fixtures/models/ was first traced and also run eagerly on the CPU with real
small tensors under a recording TorchDispatchMode; these tests pin what the trace must show where
the two were compared: the ops a GPU takes, their shapes, the lines they are at, and the syncs
a library makes. Differences that are CPU-versus-CUDA kernel choices are listed in docs/fidelity.md.
"""

from __future__ import annotations

from collections import Counter

from test_models import line_of, op_counts, trace


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
