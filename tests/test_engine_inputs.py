"""How the traced function gets its inputs: none needed, a directive, --call, or needs-inputs."""

from __future__ import annotations

from pathlib import Path

from atenlens.report import Code
from engine_helpers import EXAMPLES, calls, label, names, ops, trace, write
from source_lines import line_of

SOURCE = """
import torch
import torch.nn as nn


def setup():
    weight = torch.randn(16, 8)
    weight = weight * 2
    return weight, torch.randn(4, 16)


# atenlens: project(*setup())
def project(weight, x):
    return x @ weight


def no_directive(x):
    return x.sum()


def optional_args(n=3, *, scale=2.0):
    return torch.ones(n) * scale


class Scaler(nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k

    # atenlens: Scaler.twice(torch.ones(2, 2))
    @staticmethod
    def twice(x):
        return x + x
"""


def test_directive_arguments_are_built_but_not_recorded(tmp_path: Path) -> None:
    path = write(tmp_path, "inputs.py", SOURCE)
    report = trace(path, "project")
    assert report.status == "ok", report.message
    assert report.call == "project(*setup())"
    line = line_of(path, "return x @ weight")
    assert [(e.name, label(e)) for e in ops(report)] == [("aten.mm.default", "float32[4, 8]")]
    assert all(e.line == line for e in report.events)
    assert report.summary.ops == {"forward": 1, "backward": 0, "optimizer": 0}
    assert names(calls(report)) == ["torch.Tensor.matmul"]


def test_call_option_overrides_the_directive(tmp_path: Path) -> None:
    path = write(tmp_path, "inputs.py", SOURCE)
    report = trace(
        path, "project", call="project(torch.randn(3, 5, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64))"
    )
    assert report.status == "ok", report.message
    assert report.call.startswith("project(torch.randn(3, 5")
    assert [label(e) for e in ops(report)] == ["float64[7, 5]"]


def test_function_with_required_parameters_and_no_directive_needs_inputs(tmp_path: Path) -> None:
    path = write(tmp_path, "inputs.py", SOURCE)
    report = trace(path, "no_directive")
    assert report.status == "needs-inputs"
    assert report.events == ()
    [diagnostic] = report.diagnostics
    assert diagnostic.code == Code.NEEDS_INPUTS and diagnostic.kind == "needs-inputs"
    assert diagnostic.line == line_of(path, "def no_directive(x):")
    assert "# atenlens: no_directive(...)" in diagnostic.message
    assert "# atenlens: no_directive(...)" in report.message


def test_instance_method_needs_a_receiver_and_gets_one_from_call(tmp_path: Path) -> None:
    path = write(tmp_path, "inputs.py", SOURCE)
    report = trace(path, "Scaler.forward")
    assert report.status == "needs-inputs"
    assert "# atenlens: Scaler(...).forward(...)" in report.message
    report = trace(path, "Scaler.forward", call="Scaler(3.0).forward(torch.ones(2, 6))")
    assert report.status == "ok", report.message
    assert [(e.name, e.line) for e in ops(report)] == [("aten.mul.Tensor", line_of(path, "return x * self.k"))]


def test_defaults_only_function_is_traced_as_is_and_static_method_directive(tmp_path: Path) -> None:
    path = write(tmp_path, "inputs.py", SOURCE)
    report = trace(path, "optional_args")
    assert report.status == "ok" and report.call is None
    assert names(ops(report)) == ["aten.ones.default", "aten.mul.Tensor"]
    report = trace(path, "Scaler.twice")
    assert report.status == "ok", report.message
    assert names(ops(report)) == ["aten.add.Tensor"]


def test_unsaved_source_is_traced_instead_of_the_file_on_disk(tmp_path: Path) -> None:
    path = write(tmp_path, "inputs.py", SOURCE)
    edited = SOURCE.replace("return x @ weight", "return (x @ weight).relu()")
    report = trace(path, "project", source=edited.lstrip("\n"))
    assert names(ops(report)) == ["aten.mm.default", "aten.relu.default"]


def test_block_directive_builds_the_module_unrecorded() -> None:
    path = EXAMPLES / "gpt_block.py"
    report = trace(path, "Block.forward")
    assert report.status == "ok", report.message
    assert report.call == "Block(64, 4).forward(torch.randn(2, 8, 64))"
    sdpa_line = line_of(path, "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)")
    assert "torch.nn.functional.scaled_dot_product_attention" in names(calls(report, line=sdpa_line))
    assert [label(e) for e in ops(report, line=sdpa_line) if e.outputs][-1].startswith("float32[2, 4, 8, 16]")
    assert not any(e.name in ("aten.empty.memory_format", "aten.uniform_.default") for e in report.events)


def test_generators_and_coroutines_are_run_not_just_created(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "lazy.py",
        """
        import torch


        def batches():
            while True:
                yield torch.randn(4, 8).relu()


        async def forward():
            return torch.ones(3).exp()
    """,
    )
    report = trace(path, "batches")
    assert report.status == "ok", report.message
    assert names(ops(report)).count("aten.relu.default") == 100
    assert report.notes[-1] == "the generator was traced for its first 100 items"
    report = trace(path, "forward")
    assert report.status == "ok", report.message
    assert names(ops(report)) == ["aten.ones.default", "aten.exp.default"]
