"""Named dims read from the example call's own variables on request (a bare `dims:`,
atenlens/call_dims.py): which names count, the ones left out with a note, and the CLI on
tests/fixtures/shapes/call_named.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from atenlens.call_dims import CallDims, call_dims, notes_text
from atenlens.traceable import split_example_call
from engine_helpers import REPO, ops, trace

FIXTURE = "tests/fixtures/shapes/call_named.py"

SETUP = """
import torch

def setup(batch=4, seq=32, heads=4, *, width=W):
    return torch.randn(batch, seq, width), torch.randint(0, 50257, (batch, seq))

def pair(n):
    return torch.zeros((n, 3))
"""


def test_a_bare_dims_is_read_with_or_without_compile() -> None:
    assert split_example_call("f(x)  dims:") == ("f(x)", "", False)
    assert split_example_call("f(x)  compile  dims:") == ("f(x)", "", True)
    assert split_example_call("f(x)  dims: compile") == ("f(x)", "", True)
    assert split_example_call("f(x)  dims: B=8 compile") == ("f(x)", "B=8", True)


@pytest.mark.parametrize(
    "expression, namespace, expected",
    [
        # module variables in a factory's size positions; the literal 768 and `model` are no names
        ("f(model, torch.randn(B, T, 768))", {"B": 8, "T": 1024, "model": object()}, CallDims((("B", 8), ("T", 1024)))),
        # a tuple size, randint's bounds are not sizes (V is 50257: not a dim)
        ("f(torch.randint(0, V, (B, T)))", {"B": 8, "T": 1024, "V": 50257}, CallDims((("B", 8), ("T", 1024)))),
        ("f(torch.zeros(size=(B, T)))", {"B": 8, "T": 1024}, CallDims((("B", 8), ("T", 1024)))),
        # a name that is not a size (steps) is no dim
        ("f(torch.randn(B, 16), steps)", {"B": 8, "steps": 16}, CallDims((("B", 8),))),
        # a module function's parameters that size its tensors: defaults, passed literals, passed variables;
        # heads=4 sizes nothing, so it does not collide with batch=4; width's default is a module variable
        ("f(*setup())", {"W": 64}, CallDims((("batch", 4), ("seq", 32), ("width", 64)))),
        ("f(*setup(seq=128))", {"W": 64}, CallDims((("batch", 4), ("seq", 128), ("width", 64)))),
        ("f(*setup(B, width=D))", {"B": 8, "D": 96, "W": 64}, CallDims((("B", 8), ("seq", 32), ("D", 96)))),
        # size 1 is a constant to torch: it stays a number, with nothing to say
        ("f(torch.randn(B, T))", {"B": 1, "T": 16}, CallDims((("T", 16),))),
        # arguments spread at run time cannot be matched to parameters: nothing is read
        ("f(*setup(*sizes))", {"W": 64, "sizes": (4, 8)}, CallDims(())),
    ],
)
def test_names_come_from_the_sizes_the_example_call_builds(
    expression: str, namespace: dict, expected: CallDims
) -> None:
    assert call_dims(expression, SETUP, namespace) == expected


@pytest.mark.parametrize(
    "expression, namespace, expected",
    [
        ("f(torch.randn(B, H, 64))", {"B": 8, "H": 8}, CallDims((), ("B and H are both 8",))),
        (
            "f(torch.randn(B, H, T, C))",
            {"B": 8, "H": 8, "T": 16, "C": 8},
            CallDims((("T", 16),), ("B, H and C are all 8",)),
        ),
        # the 8 written as a number could not be told from B
        ("f(torch.randn(B, 8))", {"B": 8}, CallDims((), ("B is 8, and so is a size written as a number",))),
        (
            "f(torch.randn(B, T))",
            {"B": True, "T": 16},
            CallDims((("T", 16),), ("B is bool True in the module, not a Python int",)),
        ),
        ("f(*pair(3))", {}, CallDims((), ("n is 3, and so is a size written as a number",))),
    ],
)
def test_names_that_cannot_be_told_apart_are_left_out_with_a_note(
    expression: str, namespace: dict, expected: CallDims
) -> None:
    assert call_dims(expression, SETUP, namespace) == expected


def test_the_note_says_what_was_left_out_and_how_to_name_it() -> None:
    assert notes_text(()) is None
    assert notes_text(("B and H are both 8", "C is bool True in the module, not a Python int")) == (
        "names from the example call: B and H are both 8; C is bool True in the module, not a Python int: "
        "the sizes of these names are shown as numbers (name them with `dims:` and distinct sizes)"
    )


def _cli(qualname: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{FIXTURE}::{qualname}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return [line.rstrip() for line in result.stdout.splitlines()]


def test_cli_names_the_dims_after_the_module_variables_of_the_example_call() -> None:
    lines = _cli("project")
    assert lines[1:3] == [
        "call project(model, torch.randn(B, T, 768))",
        "dims B=8, T=1024 (from the example call): shapes in these names; memory and time are estimated at B=8, T=1024",
    ]
    start = lines.index("15 |     y = model(x)")
    assert lines[start : start + 9] == [
        "15 |     y = model(x)",
        "   |     call      linear",
        "   |     forward   aten.addmm.default     f32[B*T, 256]          3.22 GFLOP",
        "   |     named     FLOPs 393216*B*T = 3.22 GFLOP · bytes moved 4096*B*T + 787456 = 32.8 MiB",
        "16 |     return y.flatten(0, 1).softmax(-1)",
        "   |     call      flatten, softmax",
        "   |     forward   aten._softmax.default  f32[B*T, 256]",
        "   |     named     bytes moved 2048*B*T = 16 MiB",
        "",
    ]


def test_cli_names_the_dims_after_the_setup_functions_parameters() -> None:
    lines = _cli("project_small")
    assert lines[2] == (
        "dims batch=4, seq=32 (from the example call): shapes in these names; "
        "memory and time are estimated at batch=4, seq=32"
    )
    start = lines.index("21 |     y = model(x)")
    assert lines[start + 2 : start + 4] == [
        "   |     forward   aten.addmm.default    f32[batch*seq, 64]          1.05 MFLOP",
        "   |     named     FLOPs 8192*batch*seq = 1.05 MFLOP · bytes moved 512*batch*seq + 16640 = 80.2 KiB",
    ]


def test_cli_shows_numbers_and_says_why_when_two_names_share_a_size() -> None:
    lines = _cli("heads")
    assert not any(line.startswith("dims ") for line in lines)
    assert "   |     forward   aten.mul.Tensor  f32[8, 8, 64]" in lines
    assert lines[-1] == (
        f"  {FIXTURE}:25  information AL920 named-dims: names from the example call: B and H are "
        "both 8: the sizes of these names are shown as numbers (name them with `dims:` and distinct sizes)"
    )


def test_without_a_bare_dims_the_call_is_traced_once_with_numbers() -> None:
    # the names are asked for: a second, symbolic run costs 2-3 times the trace (docs/named-shapes.md)
    report = trace(REPO / FIXTURE, "plain")
    assert report.status == "ok", report.message
    assert report.named_shapes is None
    assert [[m.shape for m in e.outputs] for e in ops(report, line=32)] == [[(8, 1024, 64)]]
    assert all(m.dims is None for e in report.events for m in e.outputs)


def test_a_bare_dims_whose_call_names_nothing_says_so() -> None:
    report = trace(REPO / FIXTURE, "nothing_named")
    assert report.status == "ok", report.message
    assert report.named_shapes is None
    assert [(d.line, d.code, d.message) for d in report.diagnostics] == [
        (
            35,
            "AL920",
            "dims from the example call: the example call builds no tensor from a named size (`torch.randn(B, T, "
            "768)` with module variables, or a setup function whose parameters size its tensors); name them as "
            "`dims: B=8 T=1024`; shapes are shown with concrete sizes",
        )
    ]
