"""Classes of error found by the twenty-second whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twenty-second review"), each with a small program and the exact findings: line, column (0-based),
code, severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

A_PASS_OVER_THE_DATA = dedent(
    """\
    import torch


    def compute_sim_matrix(model, data_loader, texts):
        embeds = []
        for samples in data_loader:
            embeds.append(model.encode(samples["image"].to(model.device)))
        embeds = torch.cat(embeds)
        scores = torch.full((len(embeds), len(texts)), -100.0).to(model.device)
        return scores, embeds


    def score_batch(model, batch, texts):
        rows = []
        for sample in batch:
            rows.append(model.encode(sample.to(model.device)))
        scores = torch.full((len(rows), len(texts)), -100.0).to(model.device)
        return scores, rows
    """
)


def test_code_outside_the_data_loop_of_a_function_runs_once_per_pass() -> None:
    """`compute_sim_matrix` walks `data_loader` itself: what it makes outside that loop is made once
    per pass over the data (an evaluation), information (LAVIS's retrieval scores). A function that
    walks one batch (`for sample in batch:`) runs inside a step: a warning."""
    assert findings(A_PASS_OVER_THE_DATA) == [
        (
            9,
            59,
            "AL302",
            "information",
            "`torch.full(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per pass over the data (`compute_sim_matrix` walks `data_loader` "
            "itself, in its loop on line 6): a small cost, not paid every step",
        ),
        (
            17,
            57,
            "AL302",
            "warning",
            "`torch.full(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]
