"""Named dims (`# atenlens: f(*setup())  dims: B=8 T=1024`): the directive's syntax, the symbolic pass
(trace/shapes.py) on an MLP and a GPT-like attention block, its guards, its fallbacks, and the CLI."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from atenlens.dims import parse_dims, split_directive
from atenlens.report import TraceReport
from atenlens.traceable import find_functions
from engine_helpers import REPO, ops, trace, write
from source_lines import line_of

FIXTURES = REPO / "tests" / "fixtures" / "shapes"

ATTENTION = """
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, d_model=64, n_heads=4, context=32):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.n_heads) ** 0.5)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        y = att.softmax(dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


def setup():
    return Attention(), torch.randn(2, 16, 64, requires_grad=True)


# atenlens: step(*setup())  dims: B=2 T=16
def step(model, x):
    y = model(x)
    loss = y.square().mean()
    loss.backward()
    return loss
"""


def test_the_directive_names_dims_after_its_call() -> None:
    assert split_directive("train_step(*setup())  dims: B=8 T=1024") == ("train_step(*setup())", "B=8 T=1024")
    assert split_directive("f(x) dims: B=8") == ("f(x)", "B=8")
    assert split_directive("f(dims=3)") == ("f(dims=3)", None)  # valid Python as a whole: a call, no dims
    assert split_directive("f(x)") == ("f(x)", None)
    (info,) = find_functions("# atenlens: f(*setup())  dims: B=8 T=1024\ndef f(x):\n    return x\n")
    assert (info.directive, info.directive_line, info.dims) == ("f(*setup())", 1, "B=8 T=1024")
    assert parse_dims("B=8 T=1024") == (("B", 8), ("T", 1024))
    assert parse_dims("B=8, T=1024") == (("B", 8), ("T", 1024))


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "B=8 H=8",
            "B and H are both 8: give each name a distinct size (e.g. B=8 H=16) so the trace can tell them apart",
        ),
        ("B=1", "B=1: sizes 0 and 1 cannot be named (torch treats them as constants)"),
        ("B:8", "'B:8' is not NAME=SIZE (e.g. `B=8`)"),
        ("B=8 B=16", "B is named twice"),
        ("", "`dims:` names no dimensions; write them as `dims: B=8 T=1024`"),
        ("B=8 T", "T has no size: write T=SIZE, or bind T to a whole number at the module's top level"),
    ],
)
def test_dims_that_cannot_be_used_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_dims(text)
    assert str(error.value) == message


def test_a_bare_name_takes_its_size_from_the_module() -> None:
    module = {"B": 8, "T": 1024, "D": 7.5}
    assert parse_dims("B T", module.__getitem__) == (("B", 8), ("T", 1024))
    assert parse_dims("B T=512", module.__getitem__) == (("B", 8), ("T", 512))
    with pytest.raises(ValueError) as error:
        parse_dims("D", module.__getitem__)
    assert str(error.value) == "D is float 7.5 in the module, not a whole number"
    with pytest.raises(ValueError) as error:
        parse_dims("H", module.__getitem__)
    assert str(error.value) == "H has no size: write H=SIZE, or bind H to a whole number at the module's top level"


def _labels(report: TraceReport, line: int, phase: str = "forward") -> list[tuple[str, list[str]]]:
    return [
        (e.name, [f"{m.dtype}[{', '.join(m.dims or [str(s) for s in m.shape])}]" for m in e.outputs])
        for e in ops(report, line=line, phase=phase)
    ]


def test_attention_block_shapes_flops_and_guards_in_the_names(tmp_path: Path) -> None:
    path = write(tmp_path, "attention.py", ATTENTION)
    report = trace(path, "step")
    assert report.status == "ok", report.message
    att = line_of(path, "att = (q @ k.transpose")
    mask = line_of(path, "att = att.masked_fill")
    assert _labels(report, line_of(path, "q, k, v = self.qkv(x)")) == [
        ("aten.view.default", ["float32[B*T, 64]"]),
        ("aten.t.default", ["float32[64, 192]"]),
        ("aten.addmm.default", ["float32[B*T, 192]"]),
        ("aten.view.default", ["float32[B, T, 192]"]),
        ("aten.split.Tensor", ["float32[B, T, 64]", "float32[B, T, 64]", "float32[B, T, 64]"]),
    ]
    assert _labels(report, att) == [
        ("aten.transpose.int", ["float32[B, 4, 16, T]"]),
        ("aten.expand.default", ["float32[B, 4, T, 16]"]),
        ("aten.clone.default", ["float32[B, 4, T, 16]"]),
        ("aten._unsafe_view.default", ["float32[4*B, T, 16]"]),
        ("aten.expand.default", ["float32[B, 4, 16, T]"]),
        ("aten.clone.default", ["float32[B, 4, 16, T]"]),
        ("aten._unsafe_view.default", ["float32[4*B, 16, T]"]),
        ("aten.bmm.default", ["float32[4*B, T, T]"]),
        ("aten._unsafe_view.default", ["float32[B, 4, T, T]"]),
        ("aten.mul.Tensor", ["float32[B, 4, T, T]"]),
    ]
    assert ("aten.bmm.default", ["float32[4*B, T, 16]"]) in _labels(report, att, "backward")
    named = report.named_shapes
    assert named is not None and named.symbolic and named.dims == ("B=2", "T=16")
    by_line = {n.line: n for n in named.lines}
    # the q @ k^T line: one bmm forward and two backward, 2*4B*T*T*16 FLOPs each
    assert (by_line[att].flops, by_line[att].flops_value) == ("384*B*T**2", 196608)
    assert by_line[att].flops_value == sum(e.flops or 0 for e in ops(report, line=att))
    assert by_line[att].bytes_value == sum(e.bytes_moved for e in ops(report, line=att))
    # slicing the 32-row mask by T: what the shapes assume, at the line that slices
    guards = [(d.line, d.code, d.message) for d in report.diagnostics if d.code.startswith("AL92")]
    assert guards == [
        (mask, "AL921", "assumed T <= 32 (named dims B=2, T=16): the named shapes hold where this does"),
        (mask, "AL921", "assumed T != 32 (named dims B=2, T=16): the named shapes hold where this does"),
    ]


def test_named_dims_leave_every_number_of_the_trace_as_it_was(tmp_path: Path) -> None:
    path = write(tmp_path, "attention.py", ATTENTION)
    named = trace(path, "step")
    plain = trace(path, "step", source=path.read_text().replace("  dims: B=2 T=16", ""))
    assert plain.named_shapes is None
    strip = [dataclasses.replace(e, outputs=(), inputs=(), file=None, stack=()) for e in named.events]
    assert strip == [dataclasses.replace(e, outputs=(), inputs=(), file=None, stack=()) for e in plain.events]
    assert [[m.shape for m in e.outputs] for e in named.events] == [[m.shape for m in e.outputs] for e in plain.events]
    assert named.summary.memory == plain.summary.memory
    assert named.summary.memory.peak_bytes == plain.summary.memory.peak_bytes
    assert named.summary.time.step_seconds == plain.summary.time.step_seconds
    assert named.summary.flops == plain.summary.flops


def test_a_python_branch_on_a_named_size_is_a_guard_at_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mlp.py",
        """
        import torch
        import torch.nn as nn


        def setup():
            return nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 32)), torch.randn(4, 64, 32)


        # atenlens: mlp(*setup())  dims: B=4 T=64
        def mlp(model, x):
            if x.shape[1] > 48:
                x = x[:, -48:]
            return model(x).sum()
        """,
    )
    report = trace(path, "mlp")
    assert report.status == "ok", report.message
    branch = line_of(path, "if x.shape[1] > 48:")
    assert [(d.line, d.message) for d in report.diagnostics if d.code == "AL921"] == [
        (branch, "assumed T > 48 (named dims B=4, T=64): the named shapes hold where this does")
    ]
    # after the slice the second dim is 48 whatever T is: named only where it depends on a name
    assert [(e.name, m.dims) for e in ops(report, line=branch + 1) for m in e.outputs] == [
        ("aten.slice.Tensor", ("B", "48", "32"))
    ]
    assert [(e.name, m.dims) for e in ops(report, line=branch + 2) for m in e.outputs][:5] == [
        ("aten.t.default", None),
        ("aten.clone.default", ("B", "48", "32")),
        ("aten._unsafe_view.default", ("48*B", "32")),
        ("aten.mm.default", ("48*B", "128")),
        ("aten._unsafe_view.default", ("B", "48", "128")),
    ]


def test_bare_names_in_dims_read_the_modules_sizes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "sized.py",
        """
        import torch

        B, T = 4, 64


        # atenlens: double(torch.randn(B, T, 32))  dims: B T
        def double(x):
            return (x * 2).sum(-1)
        """,
    )
    report = trace(path, "double")
    assert report.status == "ok", report.message
    assert report.named_shapes is not None and report.named_shapes.dims == ("B=4", "T=64")
    assert [(e.name, [m.dims for m in e.outputs]) for e in ops(report, line=line_of(path, "return (x * 2)"))] == [
        ("aten.mul.Tensor", [("B", "T", "32")]),
        ("aten.sum.dim_IntList", [("B", "T")]),
    ]


def test_a_data_dependent_size_falls_back_to_concrete_sizes_with_a_note(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "masked.py",
        """
        import torch


        # atenlens: keep_positive(torch.randn(8, 1024))  dims: B=8 T=1024
        def keep_positive(x):
            kept = x[x > 0]
            return kept * 2
        """,
    )
    report = trace(path, "keep_positive")
    assert report.status == "ok", report.message
    assert report.named_shapes is not None and report.named_shapes.symbolic is False
    (note,) = [d for d in report.diagnostics if d.code == "AL920"]
    assert (note.line, note.severity) == (4, "information")
    assert note.message.startswith(
        "dims B=8, T=1024: the trace with symbolic sizes failed at line 6 of masked.py (a size only the data "
        "decides (a boolean mask, nonzero, unique) has no value in a symbolic trace; torch then raised "
    )
    assert note.message.endswith("); shapes are shown with concrete sizes")
    assert all(m.dims is None for e in report.events for m in e.outputs)
    assert [m.shape for e in ops(report, line=7) for m in e.outputs] == [(4096,)]


@pytest.mark.parametrize(
    "dims, message",
    [
        (
            "B=8 H=8",
            "dims 'B=8 H=8': B and H are both 8: give each name a distinct size (e.g. B=8 H=16) so the trace can "
            "tell them apart; shapes are shown with concrete sizes",
        ),
        (
            "B=3",
            "dims B=3: no input of the example call has a named size (B=3); shapes are shown with concrete sizes",
        ),
    ],
)
def test_dims_that_name_nothing_keep_the_trace_and_say_so(tmp_path: Path, dims: str, message: str) -> None:
    path = write(
        tmp_path,
        "double.py",
        f"""
        import torch


        # atenlens: double(torch.randn(8, 16))  dims: {dims}
        def double(x):
            return x * 2
        """,
    )
    report = trace(path, "double")
    assert report.status == "ok"
    assert [(d.line, d.code, d.message) for d in report.diagnostics] == [(4, "AL920", message)]
    assert [m.shape for e in ops(report, line=6) for m in e.outputs] == [(8, 16)]


def test_cli_shows_the_mlp_in_named_dims() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", "tests/fixtures/shapes/named_mlp.py::mlp"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2] == "dims B=8, T=1024: shapes in these names; memory and time are estimated at B=8, T=1024"
    start = lines.index("13 |     h = model[0](x)")
    body = [line.rstrip() for line in lines[start : start + 17]]
    assert body == [
        "13 |     h = model[0](x)",
        "   |     call      linear",
        "   |     forward   aten.addmm.default  bf16[B*T, 3072]           38.7 GFLOP  52.1 µs  48 MiB",
        "   |     cost      52.1 µs  37.3%  compute-bound  allocates 48 MiB, holds 48 MiB at line end "
        "(referenced by the program 48 MiB)",
        "   |     named     FLOPs 4718592*B*T = 38.7 GFLOP · bytes moved 7680*B*T + 4724736 = 64.5 MiB",
        "14 |     h = model[1](h)",
        "   |     call      gelu",
        "   |     forward   aten.gelu.default   bf16[B, T, 3072]                      35.4 µs  48 MiB",
        "   |     cost      35.4 µs  25.3%  memory-bound  allocates 48 MiB, holds 48 MiB at line end "
        "(referenced by the program 48 MiB)",
        "   |     named     bytes moved 12288*B*T = 96 MiB",
        "15 |     y = model[2](h)",
        "   |     call      linear",
        "   |     forward   aten.addmm.default  bf16[B*T, 768]            38.7 GFLOP  52.1 µs  12 MiB",
        "   |     cost      52.1 µs  37.3%  compute-bound  allocates 12 MiB, holds 12 MiB at line end "
        "(referenced by the program 12 MiB)",
        "   |     named     FLOPs 4718592*B*T = 38.7 GFLOP · bytes moved 7680*B*T + 4720128 = 64.5 MiB",
        "16 |     return y.flatten(0, 1)",
        "   |     call      flatten",
    ]


def test_a_transposed_input_is_named_and_the_inputs_that_keep_their_sizes_are_listed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "layouts.py",
        """
        import torch


        def setup():
            x = torch.randn(16, 4, 32).transpose(0, 1)
            w = torch.randn(4, 16, requires_grad=True) * 2
            s = torch.randn(4, 64)[:, ::2]
            return x, w, s


        # atenlens: f(*setup())  dims: B=4 T=16
        def f(x, w, s):
            y = x.contiguous() * 2
            z = w.sum(0)
            return y.sum(-1), z, s.sum()
        """,
    )
    report = trace(path, "f")
    assert report.status == "ok", report.message
    # the transpose is made again from a symbolic (T, B, 32) tensor: its copy is named, strides and all
    assert _labels(report, line_of(path, "y = x.contiguous() * 2")) == [
        ("aten.clone.default", ["float32[B, T, 32]"]),
        ("aten.mul.Tensor", ["float32[B, T, 32]"]),
    ]
    assert _labels(report, line_of(path, "z = w.sum(0)")) == [("aten.sum.dim_IntList", ["float32[16]"])]
    assert [(d.line, d.code, d.message) for d in report.diagnostics] == [
        (
            line_of(path, "# atenlens: f(*setup())"),
            "AL920",
            "dims B=4, T=16: these inputs keep their concrete sizes, and what is computed from them shows numbers: "
            "w (not a leaf of autograd: an op on a tensor that requires grad made it); "
            "s (a view with gaps or overlaps: a strided slice, an expand)",
        )
    ]


def test_an_input_that_cannot_take_the_names_is_named_in_the_note(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "scaled.py",
        """
        import torch


        # atenlens: double(torch.randn(8, 16, requires_grad=True) * 2)  dims: B=8
        def double(x):
            return x * 2
        """,
    )
    report = trace(path, "double")
    assert report.status == "ok", report.message
    assert report.named_shapes is not None and report.named_shapes.symbolic is False
    assert [(d.line, d.code, d.message) for d in report.diagnostics] == [
        (
            4,
            "AL920",
            "dims B=8: no input with a named size (B=8) could take the names: x (not a leaf of autograd: an op on "
            "a tensor that requires grad made it); shapes are shown with concrete sizes",
        )
    ]
    assert [m.shape for e in ops(report, line=6) for m in e.outputs] == [(8, 16)]
