"""Modules built on fake tensors move, cast and copy; the user's project imports like a project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine_helpers import REPO, label, names, ops, trace, write
from source_lines import line_of

MOVES = """
import copy
import torch
import torch.nn as nn


def build():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 2))


def cast_bf16():
    model = build().to(torch.bfloat16)
    return model(torch.randn(4, 8, dtype=torch.bfloat16))


def move_and_half():
    model = build().to("cpu").half().to(device="cpu", dtype=torch.float32)
    return model(torch.randn(4, 8))


def deep_copy():
    model = build()
    ema = copy.deepcopy(model)
    assert ema[0].weight is not model[0].weight
    assert isinstance(ema[0].weight, nn.Parameter)
    return ema(torch.randn(4, 8))


def to_cuda():
    model = build().cuda()
    return model(torch.randn(4, 8, device="cuda"))
"""


def test_module_built_under_fake_mode_casts_to_bfloat16(tmp_path: Path) -> None:
    path = write(tmp_path, "moves.py", MOVES)
    report = trace(path, "cast_bf16")
    assert report.status == "ok", report.message
    line = line_of(path, "return model(torch.randn(4, 8, dtype=torch.bfloat16))")
    addmms = [e for e in ops(report, line=line) if e.name == "aten.addmm.default"]
    assert [label(e) for e in addmms] == ["bfloat16[4, 16]", "bfloat16[4, 2]"]
    cast_line = line_of(path, "model = build().to(torch.bfloat16)")
    assert "aten._to_copy.default" in names(ops(report, line=cast_line))


def test_module_moves_and_casts_back_and_forth(tmp_path: Path) -> None:
    path = write(tmp_path, "moves.py", MOVES)
    report = trace(path, "move_and_half")
    assert report.status == "ok", report.message
    line = line_of(path, "return model(torch.randn(4, 8))")
    assert [label(e) for e in ops(report, line=line) if e.name == "aten.addmm.default"] == [
        "float32[4, 16]",
        "float32[4, 2]",
    ]


def test_deepcopy_of_a_fake_module_with_buffers(tmp_path: Path) -> None:
    path = write(tmp_path, "moves.py", MOVES)
    report = trace(path, "deep_copy")
    assert report.status == "ok", report.message
    line = line_of(path, "return ema(torch.randn(4, 8))")
    line_ops = names(ops(report, line=line))
    assert line_ops.count("aten.addmm.default") == 2
    assert "aten.native_batch_norm.default" in line_ops
    assert "aten.add_.Tensor" in line_ops  # the copied num_batches_tracked buffer counts on


def test_module_cuda_on_simulated_cuda_through_the_cli(tmp_path: Path) -> None:
    path = write(tmp_path, "moves.py", MOVES)
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{path}::to_cuda", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(result.stdout)
    assert result.returncode == 0, data["message"]
    assert data["device"] == "cuda"
    line = line_of(path, 'return model(torch.randn(4, 8, device="cuda"))')
    addmms = [e for e in data["events"] if e["name"] == "aten.addmm.default" and e["line"] == line]
    assert [e["outputs"][0]["device"] for e in addmms] == ["cuda:0", "cuda:0"]


def test_sibling_modules_and_packages_import_and_are_forgotten_afterwards(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[project]\nname = 'demo'\n")
    write(tmp_path, "demo/__init__.py", "")
    write(
        tmp_path,
        "demo/layers.py",
        """
        import torch.nn as nn


        def make_layer():
            return nn.Linear(4, 2)
    """,
    )
    write(
        tmp_path,
        "demo/helpers.py",
        """
        def double(t):
            return t * 2
    """,
    )
    path = write(
        tmp_path,
        "demo/train.py",
        """
        import torch

        from .layers import make_layer
        from demo.helpers import double


        def step():
            layer = make_layer()
            return double(layer(torch.randn(3, 4)))
    """,
    )
    script = write(
        tmp_path,
        "scripts/run.py",
        """
        import torch
        from helper_next_door import scale


        def f():
            return scale(torch.ones(2))
    """,
    )
    write(
        tmp_path,
        "scripts/helper_next_door.py",
        """
        def scale(t):
            return t * 3
    """,
    )
    report = trace(path, "step")
    assert report.status == "ok", report.message
    mul = next(e for e in ops(report) if e.name == "aten.mul.Tensor")
    assert (mul.file, mul.line) == (str(tmp_path / "demo" / "helpers.py"), 2)
    assert [f.function for f in mul.stack] == ["step", "double"]
    report = trace(script, "f")
    assert report.status == "ok", report.message
    assert names(ops(report)) == ["aten.ones.default", "aten.mul.Tensor"]
    assert not {"demo", "demo.train", "demo.layers", "demo.helpers", "run", "helper_next_door"} & set(sys.modules)
    assert str(tmp_path) not in sys.path and str(tmp_path / "scripts") not in sys.path
