"""`atenlens lint` as CI runs it: a real subprocess, its output and its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def run_lint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_text_output_is_ruff_shaped_with_one_based_columns_and_exit_1(tmp_path: Path) -> None:
    write(
        tmp_path / "train.py",
        "import torch\nfor batch in xs.cuda():\n    v = batch.item()\n    torch.cuda.synchronize()\n",
    )
    result = run_lint("train.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        "train.py:3:15: AL100 `.item()` inside a loop: the host waits for the GPU on every iteration",
        "train.py:4:5: AL101 `torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every "
        "iteration, but the `.item()` on line 3 just before already waited for it: no new wait",
        "Found 2 problems in 1 file.",
    ]


def test_a_clean_file_exits_0_with_no_output(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "import torch\nx = torch.randn(3, device='cuda')\n")
    result = run_lint("ok.py", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_json_output_is_ruffs_shape_with_one_based_columns_a_rule_url_and_the_quick_fix(tmp_path: Path) -> None:
    write(tmp_path / "make.py", "import torch\ndef step(device):\n    noise = torch.randn(2, 3).to(device)\n")
    result = run_lint("make.py", "--format", "json", cwd=tmp_path)
    assert result.returncode == 1
    assert json.loads(result.stdout) == [
        {
            "cell": None,
            "code": "AL302",
            "name": "create-then-move",
            "severity": "warning",
            "message": "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`",
            "filename": str(tmp_path / "make.py"),
            "location": {"row": 3, "column": 31},
            "end_location": {"row": 3, "column": 41},
            "noqa_row": 3,
            "url": "https://github.com/atenlens/atenlens/blob/main/docs/rules.md#al302-create-then-move",
            "fix": {
                "applicability": "safe",
                "message": "Create the tensor on the device (`device=device`)",
                "edits": [
                    {
                        "location": {"row": 3, "column": 13},
                        "end_location": {"row": 3, "column": 41},
                        "content": "torch.randn(2, 3, device=device)",
                    }
                ],
            },
        }
    ]


def test_json_output_of_a_clean_run_is_an_empty_list(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "x = 1\n")
    result = run_lint("ok.py", "--format", "json", cwd=tmp_path)
    assert (result.returncode, json.loads(result.stdout)) == (0, [])


def test_folders_are_searched_for_python_files_in_order(tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "b.py", "for x in y.cuda():\n    x.cpu()\n")
    write(tmp_path / "pkg" / "sub" / "a.py", "for x in y.cuda():\n    x.tolist()\n")
    write(tmp_path / "pkg" / "notes.txt", "for x in y:\n    x.item()\n")
    write(tmp_path / "pkg" / ".venv" / "lib.py", "for x in y:\n    x.item()\n")
    result = run_lint("pkg", cwd=tmp_path)
    assert result.returncode == 1
    assert [line.split(": ")[0] for line in result.stdout.splitlines()[:-1]] == ["pkg/b.py:2:7", "pkg/sub/a.py:2:7"]


def test_a_file_that_is_not_utf8_is_reported_and_the_others_still_linted(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\nfor x in y.cuda():\n    x.item()\n".encode("latin-1"))
    write(tmp_path / "good.py", "for x in y.cuda():\n    x.tolist()\n")
    result = run_lint("latin1.py", "good.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "latin1.py: not UTF-8 (byte 5: invalid continuation byte); skipped\n"
    assert result.stdout.splitlines()[0].startswith("good.py:2:7: AL100 `.tolist()`")


def test_a_file_that_is_not_utf8_alone_is_a_warning_and_passes_as_in_ruff(tmp_path: Path) -> None:
    # ruff 0.17: "warning: Failed to lint bad.py: stream did not contain valid UTF-8", exit 0
    (tmp_path / "bad.py").write_bytes(b"\xff\xfe\x00")
    result = run_lint("bad.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == "bad.py: not UTF-8 (byte 0: invalid start byte); skipped\n"


def test_select_and_ignore(tmp_path: Path) -> None:
    write(tmp_path / "t.py", "import torch\nfor x in y.cuda():\n    x.item()\n    torch.cuda.empty_cache()\n")
    selected = run_lint("t.py", "--select", "AL3", cwd=tmp_path)
    assert [line.split(": ")[1].split()[0] for line in selected.stdout.splitlines()[:-1]] == ["AL300"]
    ignored = run_lint("t.py", "--ignore", "AL100,AL300", cwd=tmp_path)
    assert (ignored.returncode, ignored.stdout) == (0, "")


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = run_lint("nope.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == "atenlens lint: nope.py: no such file or folder\n"
    write(tmp_path / "t.py", "x = 1\n")
    unknown = run_lint("t.py", "--select", "XX1", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "unknown rule code 'XX1'" in unknown.stderr
    # no path: the current folder, as in ruff (t.py is clean)
    no_args = run_lint(cwd=tmp_path)
    assert (no_args.returncode, no_args.stdout, no_args.stderr) == (0, "", "")


def test_the_fixtures_through_the_cli_match_their_expected_files() -> None:
    result = run_lint("AL200_pageable_copy.py", "AL200_clean.py", cwd=FIXTURES)
    expected = (FIXTURES / "AL200_pageable_copy.expected").read_text().splitlines()
    assert result.stdout.splitlines()[:-1] == [
        "AL200_pageable_copy.py:" + line.replace(" ", ": ", 1) for line in expected
    ]


def test_a_reader_that_closes_the_pipe_early_ends_the_run_quietly(tmp_path: Path) -> None:
    """`atenlens lint . | head -1`: once the reader has what it wants and closes the pipe, the run
    stops without a traceback on stderr (Python's default is a `BrokenPipeError` trace)."""
    for k in range(200):
        write(tmp_path / f"train_{k:03}.py", "import torch\nfor batch in xs.cuda():\n    v = batch.item()\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "atenlens", "lint", "--no-cache", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # what `head -1` does after its line
    stderr = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert first.startswith(b"train_000.py:3:15: AL100"), first
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert code == 1
