"""`atenlens check`: budgets, baselines, output formats and the pytest plugin, on real traces.

The fixture step (tests/fixtures/check/step.py) runs three SGD steps of a Linear(16, 4) on a batch of 8;
`train` reads `loss.item()` at line 22 (column 18) each step, `train_clean` keeps the loss on the device.
FLOPs: forward addmm 2*8*16*4 = 1024 and the weight-gradient mm 1024 per step, 6144 in all (x needs no
gradient, so there is no input-gradient mm).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from atenlens.check.baseline import baseline_text, entry_of, read_baseline
from atenlens.check.budgets import Budget, CheckConfig, load_check_config
from atenlens.check.command import run_check_command
from atenlens.check.formats import WRITERS
from atenlens.check.run import judge, request_for
from atenlens.check.units import format_bytes, format_seconds, parse_bytes, parse_seconds, round_count

FIXTURE = Path(__file__).parent / "fixtures" / "check" / "step.py"
ITEM = "step.py:22:18: step.py::train: syncs 3 (budget 0): AL100 "


def project(tmp_path: Path, functions: str) -> Path:
    shutil.copy(FIXTURE, tmp_path / "step.py")
    (tmp_path / "pyproject.toml").write_text("[tool.atenlens.check.functions]\n" + textwrap.dedent(functions))
    return tmp_path


def check_args(*argv: str) -> argparse.Namespace:
    from atenlens.cli import build_parser

    return build_parser().parse_args(["check", *argv])


# -- units and configuration (no trace) -------------------------------------------------------


def test_sizes_and_durations_parse_as_written_and_print_with_three_digits() -> None:
    assert parse_bytes("70 GiB") == 70 * 1024**3
    assert parse_bytes("1.5GB") == 1_500_000_000
    assert parse_bytes(4096) == 4096
    assert parse_seconds("400 ms") == pytest.approx(0.4)
    assert parse_seconds("25us") == pytest.approx(25e-6)
    assert format_bytes(5120) == "5 KiB"
    assert format_bytes(1288490) == "1.23 MiB"
    assert format_bytes(512) == "512 B"
    assert format_seconds(0.01234) == "12.3 ms"
    assert format_seconds(3.8686e-9) == "3.87 ns"
    assert round_count(6144) == 6140 and round_count(999) == 999 and round_count(123_456_789) == 123_000_000
    with pytest.raises(ValueError, match="unknown size unit 'gigs'"):
        parse_bytes("70 gigs")


@pytest.mark.parametrize(
    "functions, message",
    [
        ('"step.py::train" = { sync = 0 }\n', "[tool.atenlens.check].functions 'step.py::train' unknown key 'sync'"),
        ('"step.py::train" = { syncs = -1 }\n', "syncs must be a count (0 or more), got -1"),
        ('"step.py::train" = { peak = "70 gigs" }\n', "peak: unknown size unit 'gigs'"),
        ('"step.py::train" = { gpu = "h900" }\n', "gpu: unknown GPU 'h900'"),
        ('"nope.py::train" = { syncs = 0 }\n', "'nope.py::train': no such file: nope.py"),
        ('"step.py" = { syncs = 0 }\n', "the key must look like FILE::FUNCTION"),
    ],
)
def test_a_bad_table_is_a_usage_error_naming_the_file_and_the_key(tmp_path: Path, functions: str, message: str) -> None:
    project(tmp_path, functions)
    err = io.StringIO()
    code = run_check_command(check_args("--config", str(tmp_path / "pyproject.toml")), io.StringIO(), err)
    assert code == 2
    assert err.getvalue().startswith(f"atenlens check: {tmp_path / 'pyproject.toml'}: ")
    assert message in err.getvalue()


def test_no_table_is_a_usage_error(tmp_path: Path) -> None:
    err = io.StringIO()
    assert run_check_command(check_args(str(tmp_path)), io.StringIO(), err) == 2
    assert err.getvalue() == (
        f"atenlens check: nothing to check: no pyproject.toml with a [tool.atenlens.check] "
        f"table at or above {tmp_path}, and no `# atenlens-budget:` comment in {tmp_path}\n"
    )


def test_a_budget_comment_that_does_not_parse_names_its_file_and_line(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "f.py").write_text("# atenlens-budget: syncs = \n# atenlens: f()\ndef f():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    assert run_check_command(check_args("f.py"), io.StringIO(), err) == 2
    assert err.getvalue().startswith(
        "atenlens check: f.py:1: the `# atenlens-budget:` comment is not `key = value, ...` ("
    )


def test_a_budget_comment_next_to_the_directive_is_checked_without_a_table(tmp_path: Path, monkeypatch) -> None:
    source = FIXTURE.read_text().replace(
        "# atenlens: train(*setup())\n", '# atenlens-budget: syncs = 0, gpu = "h100"\n# atenlens: train(*setup())\n'
    )
    (tmp_path / "step.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert run_check_command(check_args("step.py"), out, io.StringIO()) == 1
    lines = out.getvalue().splitlines()
    # one line lower than in the fixture: the comment is above it
    assert lines[0].startswith("step.py:23:18: step.py::train: syncs 3 (budget 0): AL100 `.item()`")
    assert lines[1:] == ["Checked 1 function: 1 over budget."]


def test_the_pre_commit_hook_runs_check_once_not_per_file() -> None:
    hooks = (Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    block = hooks.split("- id: atenlens-check\n", 1)[1].split("\n- id:", 1)[0]
    lines = [line.strip() for line in block.splitlines()]
    assert "entry: atenlens check" in lines and "pass_filenames: false" in lines
    assert "files: '(\\.py|pyproject\\.toml)$'" in lines


# -- real traces, one warm worker for the module ------------------------------------------------


@pytest.fixture(scope="module")
def traced(worker, tmp_path_factory):
    """Both fixture functions traced once in the module's warm worker, from a project folder."""
    root = project(
        tmp_path_factory.mktemp("check"),
        """\
        "step.py::train" = { syncs = 0 }
        "step.py::train_clean" = { syncs = 0, AL100 = 0, peak = "1 GiB" }
    """,
    )
    config = load_check_config(root / "pyproject.toml")
    reports = {f.target: worker.trace(request_for(f)) for f in config.functions}
    assert all(r.status == "ok" for r in reports.values()), [r.message for r in reports.values()]
    return root, config, reports


def _results(traced, baseline=None):
    root, config, reports = traced
    return [judge(f, reports[f.target], config, baseline) for f in config.functions]


def _written(fmt: str, results) -> str:
    out = io.StringIO()
    WRITERS[fmt](results, out)
    return out.getvalue()


def test_zero_sync_budget_fails_at_the_item_line_and_passes_without_it(traced, monkeypatch) -> None:
    root, config, reports = traced
    monkeypatch.chdir(root)
    message = next(d.message for d in reports["step.py::train"].diagnostics if d.code == "AL100")
    train, clean = _results(traced)
    assert not train.passed and clean.passed
    assert (train.measurement.syncs, train.measurement.codes, train.measurement.flops) == (3, {"AL100": 3}, 6144)
    assert (clean.measurement.syncs, clean.measurement.codes, clean.measurement.flops) == (0, {}, 6144)
    assert _written("text", [train, clean]) == (f"{ITEM}{message} (x3)\nChecked 2 functions: 1 over budget.\n")
    assert _written("text", [clean]) == "Checked 1 function: all within budget.\n"


def test_each_format_names_the_item_line(traced, monkeypatch) -> None:
    root, config, reports = traced
    monkeypatch.chdir(root)
    results = _results(traced)
    step = str(root / "step.py")
    data = json.loads(_written("json", results))
    assert data["passed"] is False
    assert [f["passed"] for f in data["functions"]] == [False, True]
    (problem,) = data["functions"][0]["problems"]
    assert {k: problem[k] for k in ("key", "against", "limit", "measured")} == {
        "key": "syncs",
        "against": "budget",
        "limit": "0",
        "measured": "3",
    }
    (location,) = problem["locations"]
    assert (location["filename"], location["row"], location["column"]) == (step, 22, 18)
    assert location["message"].startswith("step.py::train: syncs 3 (budget 0): AL100 `.item()`")

    github = _written("github", results).splitlines()
    assert github[0].startswith(f"::error title=atenlens check (syncs),file={step},line=22,col=18::{ITEM}`.item()`")
    assert github[1:] == ["Checked 2 functions: 1 over budget."]

    junit = _written("junit", results)
    assert '<testsuite name="atenlens check" tests="2" failures="1" errors="0" skipped="0">' in junit
    assert (
        '<testcase classname="atenlens.check" name="step.py::train" file="step.py" line="15">'
        '<failure message="syncs 3 (budget 0)">' + ITEM + "`.item()`" in junit
    )
    assert '<testcase classname="atenlens.check" name="step.py::train_clean" file="step.py" line="27" />' in junit


def test_baseline_round_trip_writes_then_catches_a_regression_and_reports_an_improvement(traced, monkeypatch) -> None:
    root, config, reports = traced
    monkeypatch.chdir(root)
    results = _results(traced)
    now = {r.function.target: entry_of(r.measurement) for r in results}
    peaks = {t: format_bytes(reports[t].summary.memory.peak_bytes) for t in now}
    times = {t: format_seconds(reports[t].summary.time.step_seconds) for t in now}
    text = baseline_text(now)
    assert text == (
        "# What each function does now, as `atenlens check` measures it (docs/check.md).\n"
        "# Rewritten by `atenlens check --update-baseline`; review its changes like code.\n"
        "\n"
        '["step.py::train"]\n'
        "codes = { AL100 = 3 }\n"
        "collective_bytes = 0\n"
        "flops = 6140\n"
        f'peak = "{peaks["step.py::train"]}"\n'
        f'step_time = "{times["step.py::train"]}"\n'
        "syncs = 3\n"
        "\n"
        '["step.py::train_clean"]\n'
        "codes = {}\n"
        "collective_bytes = 0\n"
        "flops = 6140\n"
        f'peak = "{peaks["step.py::train_clean"]}"\n'
        f'step_time = "{times["step.py::train_clean"]}"\n'
        "syncs = 0\n"
    )
    path = root / "atenlens-baseline.toml"
    path.write_text(text)
    assert baseline_text(read_baseline(path)) == text  # stable: reading and writing changes nothing
    # Against its own baseline, nothing regresses and nothing improves.
    unchanged = [judge(f, reports[f.target], config, read_baseline(path)) for f in config.functions]
    assert [(r.problems, r.improvements) for r in unchanged][1] == ((), ())
    assert [p.against for p in unchanged[0].problems] == ["budget"]

    # train_clean's baseline for train: a pull request added the `.item()`.
    loose = CheckConfig(path=config.path, baseline=path, functions=config.functions)
    no_budget = [replace(f, budget=Budget()) for f in config.functions]
    regressed = judge(no_budget[0], reports["step.py::train"], loose, {"step.py::train": now["step.py::train_clean"]})
    assert [(p.key, p.against, p.limit, p.measured) for p in regressed.problems] == [
        ("syncs", "baseline", "0", "3"),
        ("AL100", "baseline", "0", "3"),
    ]
    assert (
        _written("text", [regressed])
        .splitlines()[0]
        .startswith("step.py:22:18: step.py::train: syncs 3 (baseline 0): AL100 `.item()`")
    )
    # train's baseline for train_clean: a pull request removed it; it passes and says so.
    # (keeping train_clean's own peak and time: its running total holds one more small tensor)
    old = replace(
        now["step.py::train"],
        peak_bytes=now["step.py::train_clean"].peak_bytes,
        step_seconds=now["step.py::train_clean"].step_seconds,
    )
    improved = judge(no_budget[1], reports["step.py::train_clean"], loose, {"step.py::train_clean": old})
    assert improved.passed
    assert _written("text", [improved]) == (
        "step.py::train_clean: syncs improved, 3 -> 0 (atenlens check --update-baseline records it)\n"
        "step.py::train_clean: AL100 improved, 3 -> 0 (atenlens check --update-baseline records it)\n"
        "Checked 1 function: all within budget.\n"
    )


def test_the_command_traces_every_function_in_one_worker_and_writes_the_baseline(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        """\
        "step.py::train" = { syncs = 0 }
        "step.py::train_clean" = { syncs = 0 }
    """,
    )
    run = subprocess.run(
        [sys.executable, "-m", "atenlens", "check", "--update-baseline"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith(ITEM + "`.item()`") and lines[0].endswith(" (x3)")
    assert lines[1:] == ["Checked 2 functions: 1 over budget."]
    assert run.stderr == f"atenlens check: wrote {root / 'atenlens-baseline.toml'} (2 functions)\n"
    written = read_baseline(root / "atenlens-baseline.toml")
    assert {t: (e.syncs, e.codes, e.flops) for t, e in written.items()} == {
        "step.py::train": (3, {"AL100": 3}, 6140),
        "step.py::train_clean": (0, {}, 6140),
    }
    # Only train, budgeted at its 3 syncs, against the baseline: passes (exit 0), and train_clean's entry is kept.
    before = (root / "atenlens-baseline.toml").read_text()
    (root / "pyproject.toml").write_text('[tool.atenlens.check.functions]\n"step.py::train" = { syncs = 3 }\n')
    run = subprocess.run(
        [sys.executable, "-m", "atenlens", "check", "step.py", "--update-baseline"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (run.returncode, run.stdout) == (0, "Checked 1 function: all within budget.\n"), run.stderr
    assert run.stderr == f"atenlens check: wrote {root / 'atenlens-baseline.toml'} (2 functions)\n"
    assert (root / "atenlens-baseline.toml").read_text() == before


PLUGIN_TESTS = """\
import pytest

from atenlens.check.assertions import assert_within


@pytest.mark.atenlens("step.py::train", syncs=0)
def test_marked_train():
    pass


@pytest.mark.atenlens("step.py::train_clean", syncs=0, AL100=0)
def test_marked_clean():
    pass


def test_fixture(atenlens_trace):
    report = atenlens_trace("step.py::train")
    assert report.summary.syncs == 3
    assert_within(report, AL100=1)
"""


def test_pytest_plugin_fails_marked_and_fixture_tests_at_the_item_line(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / "test_budget.py").write_text(PLUGIN_TESTS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_budget.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "2 failed, 1 passed" in out
    # The marker: the offending line alone, no traceback of the plugin's hook.
    assert re.search(r"_ test_marked_train _+\natenlens budget broken:\n" + re.escape(ITEM + "`.item()`"), out), out
    # The fixture with assert_within: the test's line, then the lines, as pytest's assertion rewriting shows them.
    assert (
        ">       assert_within(report, AL100=1)\nE       AssertionError: atenlens budget broken:\n"
        "E       step.py:22:18: step.py::train: AL100 3 (budget 1): AL100 `.item()`" in out
    )
    assert "\ntest_budget.py:19: AssertionError\n" in out
    assert "FAILED test_budget.py::test_marked_train - Failed: atenlens budget broken:" in out
    assert "FAILED test_budget.py::test_fixture - AssertionError: atenlens budget broken:" in out


def test_a_collective_bytes_budget_fails_at_the_collectives_line(worker, tmp_path: Path, monkeypatch) -> None:
    """4 tensor-parallel ranks: the row-parallel output [8, 64] fp32 (2048 bytes) is all-reduced at the
    `down` line, and nothing else communicates (tests/test_distributed.py)."""
    tp = Path(__file__).parent / "fixtures" / "ranks" / "tp_step.py"
    shutil.copy(tp, tmp_path / "tp_step.py")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.atenlens.check.functions]\n"
        '"tp_step.py::step" = { collective_bytes = "1 KiB", call = "step(*setup())", world_size = 4, rank = 2 }\n'
    )
    monkeypatch.chdir(tmp_path)
    config = load_check_config(tmp_path / "pyproject.toml")
    (function,) = config.functions
    report = worker.trace(request_for(function))
    assert report.status == "ok", report.message
    result = judge(function, report, config, None)
    assert result.measurement.collective_bytes == 2048
    down = next(n for n, line in enumerate(tp.read_text().splitlines(), 1) if "return self.down(h)" in line)
    assert _written("text", [result]) == (
        f"tp_step.py:{down}:1: tp_step.py::step: collective_bytes 2 KiB (budget 1 KiB): "
        "all_reduce: 2048 bytes per rank\n"
        "Checked 1 function: 1 over budget.\n"
    )
    assert judge(replace(function, budget=replace(function.budget, collective_bytes=2048)), report, config, None).passed


def test_a_function_that_raises_fails_the_check_at_the_raising_line(worker, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "broken.py").write_text(
        "import torch\n\n\n# atenlens: step()\ndef step():\n"
        "    x = torch.ones(2, device='cuda')\n    raise ValueError('bad batch')\n"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.atenlens.check.functions]\n"broken.py::step" = { syncs = 0 }\n')
    monkeypatch.chdir(tmp_path)
    config = load_check_config(tmp_path / "pyproject.toml")
    (function,) = config.functions
    result = judge(function, worker.trace(request_for(function)), config, None)
    assert not result.passed and result.measurement is None
    line, total = _written("text", [result]).splitlines()
    assert line.startswith("broken.py:7:")
    assert "broken.py::step: not traced (error: " in line and "ValueError" in line and "bad batch" in line
    assert total == "Checked 1 function: 1 not traced."
