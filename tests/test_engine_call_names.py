"""API call names on an optimizer's step: the calls the user's line makes, never the op objects
torch calls from Python on the way (FakeTensor's prim.device checks of foreach ops on simulated
CUDA, the profiler ops of record_function)."""

from __future__ import annotations

from pathlib import Path

from atenlens.worker.client import TraceWorker
from engine_helpers import calls, names, ops
from source_lines import line_of
from worker_helpers import request

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_step.py"


def test_the_step_line_has_no_op_objects_as_calls() -> None:
    step = line_of(EXAMPLE, "opt.step()")
    with TraceWorker() as worker:  # simulated CUDA is loaded before torch: only a worker has it
        # cuda: one foreach op for the four parameters; cpu: SGD's loop, one Tensor.add_ per parameter
        for device, first_op, step_calls in (
            ("cuda", "aten._foreach_add_.List", []),
            ("cpu", "aten.add_.Tensor", ["torch.Tensor.add_"] * 4),
        ):
            report = worker.trace(request(str(EXAMPLE), "train_step", device=device))
            assert (report.status, report.device) == ("ok", device), report.message
            assert names(calls(report, line=step)) == step_calls, device
            assert names(ops(report, line=step, phase="optimizer"))[0] == first_op, device
            assert [e.name for e in report.events if e.kind == "call" and e.name.endswith(".default")] == [], device
