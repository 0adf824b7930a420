"""Fidelity: per source line, the forward aten ops recorded on fake tensors are those the same
program dispatches when it runs for real on small CPU tensors."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from atenlens.report import TraceReport
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.recorder import Recorder
from atenlens.trace.runner import build_example_call
from atenlens.traceable import find_functions
from engine_helpers import EXAMPLES, trace

PROGRAMS = [
    ("train_step.py", "train_step"),
    ("train_step.py", "train"),
    ("gpt_block.py", "Block.forward"),
    ("gpt_block.py", "lm_train_step"),
    ("input_pipeline.py", "train_stalling"),
    ("input_pipeline.py", "train_overlapped"),
]


def forward_ops_per_line(events) -> dict[tuple[str, int], list[str]]:
    per_line: dict[tuple[str, int], list[str]] = defaultdict(list)
    for event in events:
        if event.kind == "op" and event.phase == "forward":
            per_line[(event.file, event.line)].append(event.name)
    return dict(per_line)


def run_for_real(path: Path, qualname: str) -> list:
    """The program on real CPU tensors, recorded by the same recorder (no fake mode)."""
    name = f"real_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        info = next(i for i in find_functions(path.read_text()) if i.qualname == qualname)
        if info.directive:
            example = build_example_call(module, info.directive)
            function, args, kwargs = example.function, example.args, example.kwargs
        else:
            function, args, kwargs = getattr(module, qualname), (), {}
        recorder = Recorder(DiagnosticSink())
        with contextlib.ExitStack() as modes:
            for mode in recorder.modes():
                modes.enter_context(mode)
            recorder.start(boundary=sys._getframe().f_code)
            function(*args, **kwargs)
            recorder.stop()
        return recorder.events
    finally:
        del sys.modules[name]


@pytest.mark.parametrize("file, qualname", PROGRAMS)
def test_fake_forward_ops_per_line_equal_the_real_run(file: str, qualname: str) -> None:
    path = EXAMPLES / file
    report: TraceReport = trace(path, qualname)
    assert report.status == "ok", report.message
    fake = forward_ops_per_line(report.events)
    real = forward_ops_per_line(run_for_real(path, qualname))
    assert len(fake) >= 3
    assert fake == real
    # backward and optimizer work is there too, on the same lines
    fake_backward = {(e.file, e.line) for e in report.events if e.kind == "op" and e.phase == "backward"}
    assert all(line is not None for _file, line in fake_backward)


# Examples that simulate several ranks cannot run for real in one process; tests/test_distributed.py
# checks every collective they issue.
SIMULATED_RANKS = {("fsdp_tp_step.py", "train_step")}


def test_every_example_with_a_directive_is_checked_here() -> None:
    with_directive = {
        (path.name, info.qualname)
        for path in EXAMPLES.glob("*.py")
        for info in find_functions(path.read_text())
        if info.directive
    }
    assert len(with_directive) >= 5
    assert with_directive - SIMULATED_RANKS <= set(PROGRAMS)
