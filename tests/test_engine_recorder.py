"""The recorder on its own: what is a call, phases around the optimizer, placeholders, the event cap."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch

from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.recorder import Recorder
from engine_helpers import calls, names, ops, trace, write
from source_lines import line_of


def record(function, recorder: Recorder) -> Recorder:
    with contextlib.ExitStack() as modes:
        for mode in recorder.modes():
            modes.enter_context(mode)
        recorder.start(boundary=sys._getframe().f_code)
        try:
            function()
        finally:
            recorder.stop()
    return recorder


def test_metadata_queries_are_not_calls_but_compute_is(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "meta.py",
        """
        import torch


        def f():
            x = torch.ones(4, 6)
            n = x.shape[0] + x.size(1) + x.dim() + x.numel()
            return x.T.sum() * n
    """,
    )
    report = trace(path, "f")
    assert report.status == "ok", report.message
    assert names(calls(report, line=line_of(path, "n = x.shape[0]"))) == []
    assert names(calls(report, line=line_of(path, "return x.T.sum() * n"))) == ["torch.Tensor.sum", "torch.Tensor.mul"]
    assert names(ops(report, line=line_of(path, "return x.T.sum() * n"))) == [
        "aten.permute.default",
        "aten.sum.default",
        "aten.mul.Tensor",
    ]


def test_optimizer_phase_covers_step_and_zero_grad_and_ends_with_them(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "opt.py",
        """
        import torch


        def f():
            w = torch.nn.Parameter(torch.ones(3))
            opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
            (w * 2).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
            return w + 1
    """,
    )
    report = trace(path, "f")
    assert report.status == "ok", report.message
    step = ops(report, line=line_of(path, "opt.step()"))
    assert step and {e.phase for e in step} == {"optimizer"}
    zero = ops(report, line=line_of(path, "opt.zero_grad(set_to_none=False)"))
    assert "aten.zero_.default" in names(zero) and {e.phase for e in zero} == {"optimizer"}
    assert [e.phase for e in ops(report, line=line_of(path, "return w + 1"))] == ["forward"]


def test_item_on_a_fake_cpu_tensor_gets_a_placeholder_and_is_recorded(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "item.py",
        """
        import torch


        def f():
            loss = torch.randn(8192).mean()             # too large for a real shadow: its value is unknown
            value = loss.item()
            assert value == 1.0
            flag = bool((loss > 0).any())
            return torch.full((2,), value) if flag else None
    """,
    )
    report = trace(path, "f")
    assert report.status == "ok", report.message
    assert names(ops(report, line=line_of(path, "value = loss.item()"))) == ["aten._local_scalar_dense.default"]
    assert names(ops(report, line=line_of(path, "return torch.full((2,), value)"))) == ["aten.full.default"]
    assert [(d.line, d.code, d.message) for d in report.diagnostics] == [
        (
            line_of(path, "value = loss.item()"),
            "AL906",
            "value unknown on fake tensors: took `1.0` for `.item()` of f32[]",
        ),
        (
            line_of(path, "flag = bool("),
            "AL906",
            "value unknown on fake tensors: took `True` for `bool()` / `if tensor:` of b8[]",
        ),
    ]


def test_events_past_the_cap_are_counted_not_kept() -> None:
    def loop() -> None:
        x = torch.ones(2)
        for _ in range(10):
            x = x + 1

    recorder = record(loop, Recorder(DiagnosticSink(), max_events=7))
    assert len(recorder.events) == 7
    # 1 ones + 10 adds, each a call and an op: 22 events
    assert recorder.dropped == 22 - 7
    kept_ops = sum(1 for e in recorder.events if e.kind == "op")
    assert kept_ops + recorder.dropped_ops["forward"] == 11
