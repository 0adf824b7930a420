"""`atenlens trace` end to end: a real subprocess, a real worker, real exit codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from engine_helpers import REPO, write
from source_lines import line_of


def atenlens(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_trace_example_prints_the_listing_and_exits_0() -> None:
    result = atenlens("examples/train_step.py::train_step", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "examples/train_step.py::train_step  device cpu  ok"
    assert any("aten.addmm.default" in text and "f32[8, 32]" in text for text in lines)
    assert "\x1b[" not in result.stdout  # not a terminal: no colour


def test_json_report_round_trips_with_the_documented_keys() -> None:
    result = atenlens("examples/train_step.py::train_step", "--device", "cpu", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 3
    assert data["status"] == "ok"
    assert data["target"] == {"file": str(REPO / "examples" / "train_step.py"), "qualname": "train_step"}
    assert set(data["summary"]) == {
        "ops",
        "calls",
        "flops",
        "syncs",
        "seconds",
        "memory",
        "time",
        "assumptions",
        "world_size",
        "rank",
        "gpus_per_node",
        "collectives",
        "communication_seconds",
        "exposed_communication_seconds",
    }
    # a single-process run (no --world-size): one rank, nothing communicated
    keys = ("world_size", "rank", "collectives", "communication_seconds", "exposed_communication_seconds")
    assert [data["summary"][k] for k in keys] == [1, 0, 0, 0.0, 0.0]
    memory, time = data["summary"]["memory"], data["summary"]["time"]
    assert {"peak_bytes", "peak_file", "peak_line", "peak_phase", "at_peak", "device_bytes"} <= set(memory)
    assert set(memory["at_peak"]) == {
        "parameters",
        "gradients",
        "optimizer_state",
        "activations",
        "temporaries",
        "inputs",
        "unsharded_parameters",
        "unsharded_gradients",
        "communication",
    }
    assert all(type(v) is int for v in memory["at_peak"].values())
    assert memory["device_bytes"] == 80 * 2**30 and memory["peak_file"] == str(REPO / "examples" / "train_step.py")
    assert {"gpu", "step_seconds", "mfu_bound"} <= set(time) and time["gpu"] == "h100-sxm"
    assert time["step_seconds"] > 0 and 0 < time["mfu_bound"] <= 0.75
    addmm = next(e for e in data["events"] if e["name"] == "aten.addmm.default")
    assert addmm["outputs"] == [{"dtype": "float32", "shape": [8, 32], "device": "cpu"}]
    assert addmm["bytes_allocated"] == 8 * 32 * 4 and type(addmm["estimate_seconds"]) is float
    assert addmm["line"] == line_of(REPO / "examples" / "train_step.py", "h = F.relu(self.fc1(x))")


@pytest.mark.parametrize(
    "target, message",
    [
        ("examples/train_step.py", "target must look like FILE::QUALNAME"),
        ("examples/missing.py::f", "no such file: examples/missing.py"),
        ("examples/train_step.py::nope", "examples/train_step.py has no function nope (functions: MLP.__init__,"),
        ("examples/train_step.py::1x", "'1x' is not a function name"),
    ],
)
def test_usage_errors_exit_2_with_one_line_on_stderr(target: str, message: str) -> None:
    result = atenlens(target)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"atenlens trace: {message}")


def test_gpu_option_takes_the_tables_names_in_any_case_and_rejects_others() -> None:
    result = atenlens("examples/train_step.py::train_step", "--device", "cpu", "--json", "--gpu", "A100-80GB")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["summary"]["time"]["gpu"] == "a100-80gb" and data["summary"]["memory"]["device_bytes"] == 80 * 2**30
    result = atenlens("examples/train_step.py::train_step", "--gpu", "v100")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("atenlens trace: --gpu: unknown GPU 'v100'; known: h100-sxm, h100-pcie, h200,")


def test_user_exception_exits_1_and_user_output_stays_in_its_section(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "broken.py",
        """
        import torch

        print("module loaded")


        def f():
            print("inside f")
            a = torch.randn(2, 3)
            return a @ torch.randn(4, 5)
    """,
    )
    result = atenlens(f"{path}::f", "--device", "cpu")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].endswith("device cpu  error")
    assert lines[1].startswith("RuntimeError: ")
    fence = lines.index("----- stdout of the traced code -----")
    assert lines[fence + 1 : fence + 4] == ["module loaded", "inside f", "----- end of stdout -----"]
    assert "module loaded" not in "\n".join(lines[:fence])
    line = line_of(path, "return a @ torch.randn(4, 5)")
    assert any(text.startswith(f"  {path}:{line}:12  error AL900 exception: RuntimeError: ") for text in lines)


def test_needs_inputs_exits_1_with_a_directive_example(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "needs.py",
        """
        def f(x):
            return x * 2
    """,
    )
    result = atenlens(f"{path}::f", "--device", "cpu")
    assert result.returncode == 1
    assert "needs-inputs" in result.stdout.splitlines()[0]
    assert "# atenlens: f(...)" in result.stdout
    result = atenlens(f"{path}::f", "--device", "cpu", "--call", "f(torch.ones(3))")
    assert result.returncode == 1  # torch is not imported by the module: NameError
    assert "NameError: name 'torch' is not defined" in result.stdout


def test_call_option_traces_with_the_given_inputs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "scaled.py",
        """
        import torch


        def scale(x, k=2):
            return x * k
    """,
    )
    result = atenlens(
        f"{path}::scale", "--device", "cpu", "--call", "scale(torch.ones(3, 5, dtype=torch.bfloat16))", "--json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["call"] == "scale(torch.ones(3, 5, dtype=torch.bfloat16))"
    mul = [e for e in data["events"] if e["name"] == "aten.mul.Tensor"]
    assert [e["outputs"][0]["dtype"] for e in mul] == ["bfloat16"] and mul[0]["outputs"][0]["shape"] == [3, 5]


def _run_in_terminal(env: dict) -> str:
    """Run the command with stdout on a real pseudo-terminal and return what it printed."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "atenlens", "trace", "examples/train_step.py::train_step", "--device", "cpu"],
        cwd=REPO,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert process.wait(timeout=300) == 0
    return b"".join(chunks).decode()


def test_colour_in_a_terminal_unless_no_color_is_set() -> None:
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    coloured = _run_in_terminal(environment)
    assert "\x1b[1m" in coloured and "aten.addmm.default" in coloured
    plain = _run_in_terminal({**environment, "NO_COLOR": "1"})
    assert "\x1b[" not in plain and "aten.addmm.default" in plain


def test_timeout_exits_1_and_names_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "spin.py",
        """
        import torch


        def spin():
            x = torch.ones(2)
            while True:
                x = x * 1
    """,
    )
    result = atenlens(f"{path}::spin", "--device", "cpu", "--timeout", "2", "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["status"] == "timeout"
    [diagnostic] = data["diagnostics"]
    assert diagnostic["code"] == "AL902"
    assert diagnostic["line"] in (line_of(path, "while True:"), line_of(path, "x = x * 1"))


def test_plot_and_memory_timeline_options_write_their_files(tmp_path: Path) -> None:
    svg, timeline = tmp_path / "step.svg", tmp_path / "step.json"
    result = atenlens(
        "examples/train_step.py::train_step", "--device", "cpu", "--plot", str(svg), "--memory-timeline", str(timeline)
    )
    assert result.returncode == 0, result.stderr
    assert svg.read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert any(e["ph"] == "C" and e["name"] == "device memory" for e in json.loads(timeline.read_text())["traceEvents"])
    assert "\nmemory    peak " in result.stdout and "\ntime      ~" in result.stdout
    result = atenlens("examples/train_step.py::train_step", "--plot", str(tmp_path / "step.png"))
    assert result.returncode == 2 and result.stderr.startswith("atenlens trace: --plot writes SVG: give a FILE.svg")
