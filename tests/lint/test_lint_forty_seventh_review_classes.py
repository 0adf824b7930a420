"""Classes of error found in the forty-seventh review (tests/lint/corpus_real/WHOLE_TREES.md), each
with a small program and the exact findings: line, column (0-based), code, severity and message.
Each program is also linted without the prefilter (every definition parsed), which must give the
same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

OWN_LOOP_VARIABLE = dedent(
    """\
    import torch


    def shape_str(x):
        return "x".join([str(x) for x in x.shape])


    def train(model, loader):
        for x in loader:
            loss = model(x.cuda())
            print([float(v) for v in loss], shape_str(loss))
            print(loss.item())
    """
)


def test_a_comprehension_that_names_its_variable_in_its_own_iterable_does_not_stop_the_rule() -> None:
    """`[str(x) for x in x.shape]` binds `x` from an iterable read through the name it binds
    (VideoCrafter's `lvdm/common.py`, tutel's `spmdx.py`): following the loop variable back to its
    iterable must end, or the rule fails on the file and reports nothing in it."""
    assert findings(OWN_LOOP_VARIABLE) == [
        (
            11,
            15,
            "AL100",
            "warning",
            "`float()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            12,
            19,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every iteration",
        ),
    ]
