"""The facts of issue 2 about what each source line dispatches, forward, backward and optimizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_helpers import EXAMPLES, calls, label, names, ops, trace, write
from source_lines import line_of

LINEAR = """
import torch
import torch.nn as nn


def step():
    layer = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    y = layer(x)
    y.sum().backward()
    return y


def step_no_grad():
    layer = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = layer(x)
    return out
"""


@pytest.fixture
def linear_file(tmp_path: Path) -> Path:
    return write(tmp_path, "linear_user.py", LINEAR)


def test_linear_forward_line_dispatches_addmm_and_sees_linear_at_function_level(linear_file: Path) -> None:
    report = trace(linear_file, "step")
    assert report.status == "ok", report.message
    line = line_of(linear_file, "y = layer(x)")
    forward = ops(report, line=line, phase="forward")
    assert "aten.addmm.default" in names(forward)
    addmm = next(e for e in forward if e.name == "aten.addmm.default")
    assert label(addmm) == "float32[2, 3]"
    assert addmm.flops == 2 * 2 * 4 * 3
    line_calls = names(calls(report, line=line))
    assert "torch.nn.functional.linear" in line_calls
    assert not any("addmm" in name for name in line_calls)


def test_linear_backward_ops_belong_to_the_forward_line(linear_file: Path) -> None:
    report = trace(linear_file, "step")
    line = line_of(linear_file, "y = layer(x)")
    backward = ops(report, line=line, phase="backward")
    # grad of the weight only: the input needs no grad, so exactly one mm
    assert names(backward).count("aten.mm.default") == 1
    assert "aten.sum.dim_IntList" in names(backward)  # grad of the bias
    mm = next(e for e in backward if e.name == "aten.mm.default")
    assert mm.node == "AddmmBackward0"
    assert label(mm) == "float32[3, 4]"
    # the seed and AccumulateGrad go to the backward() line
    backward_line = line_of(linear_file, ".backward()")
    accumulate = [e for e in ops(report, phase="backward") if e.node == "AccumulateGrad"]
    assert len(accumulate) == 2 and {e.line for e in accumulate} == {backward_line}
    assert all(e.line is not None for e in ops(report, phase="backward"))


def test_no_grad_forward_still_dispatches_addmm_and_has_no_backward(linear_file: Path) -> None:
    report = trace(linear_file, "step_no_grad")
    assert report.status == "ok", report.message
    line = line_of(linear_file, "out = layer(x)")
    assert "aten.addmm.default" in names(ops(report, line=line, phase="forward"))
    assert ops(report, phase="backward") == []
    assert report.summary.ops["backward"] == 0


def test_mlp_sgd_step_line_by_line() -> None:
    path = EXAMPLES / "train_step.py"
    report = trace(path, "train_step")
    assert report.status == "ok", report.message
    assert report.call == "train_step(*setup())"
    fc1 = line_of(path, "h = F.relu(self.fc1(x))")
    fc2 = line_of(path, "return self.fc2(h)")
    model_call = line_of(path, "logits = model(x)")
    loss_line = line_of(path, "loss = F.cross_entropy(logits, y)")
    backward_line = line_of(path, "loss.backward()")
    step_line = line_of(path, "opt.step()")

    for line, shape in ((fc1, "float32[8, 32]"), (fc2, "float32[8, 4]")):
        addmms = [e for e in ops(report, line=line, phase="forward") if e.name == "aten.addmm.default"]
        assert [label(e) for e in addmms] == [shape]
        # both Linear lines also sit under the model(x) line of train_step
        assert [(f.line, f.function) for f in addmms[0].stack][:1] == [(model_call, "train_step")]
        assert addmms[0].stack[-1].function == "MLP.forward"

    backward_mms = [e for e in ops(report, phase="backward") if e.name == "aten.mm.default"]
    assert len(backward_mms) >= 3
    assert sorted(label(e) for e in backward_mms if e.line == fc2) == ["float32[4, 32]", "float32[8, 32]"]
    # grad_W1 only: the input x needs no grad
    assert [label(e) for e in backward_mms if e.line == fc1] == ["float32[32, 16]"]

    loss_ops = names(ops(report, line=loss_line, phase="forward"))
    assert "aten._log_softmax.default" in loss_ops and "aten.nll_loss_forward.default" in loss_ops
    assert "torch.nn.functional.cross_entropy" in names(calls(report, line=loss_line))

    step_ops = ops(report, line=step_line)
    assert {e.phase for e in step_ops} == {"optimizer"}
    assert names(step_ops).count("aten.add_.Tensor") == 4
    assert sorted(label(e) for e in step_ops if e.name == "aten.add_.Tensor") == [
        "float32[32, 16]",
        "float32[32]",
        "float32[4, 32]",
        "float32[4]",
    ]

    assert {e.line for e in ops(report, phase="backward") if e.node == "AccumulateGrad"} == {backward_line}
    assert all(e.line is not None for e in ops(report, phase="backward"))
    # setup() ran, but its ops (model construction, inputs) are not the step's work
    assert not any(f.function == "setup" for e in report.events for f in e.stack)
    assert report.summary.ops["optimizer"] == 4
    assert report.summary.flops == sum(e.flops or 0 for e in report.events)
