"""The command line's process pool (lint/command.py): chunks of about equal bytes, largest first,
and results in the order of the files whatever order the chunks finish in."""

from __future__ import annotations

import io
from pathlib import Path

from atenlens.cli import build_parser
from atenlens.lint.command import Task, _chunks, run_lint_command

# (each function named apart: a `def` that a later one of the same name replaces is never linted)
READ_IN_LOOP = "import torch\n\n\ndef f{k}(xs):\n    for x in xs:\n        x.cuda().item()\n"


def _concise(argv: list[str], folder: Path, monkeypatch) -> tuple[int, list[str]]:
    monkeypatch.chdir(folder)
    out = io.StringIO()
    status = run_lint_command(build_parser().parse_args(["lint", "--format", "concise", *argv]), out, io.StringIO())
    return status, out.getvalue().splitlines()


def test_chunks_hold_every_file_once_in_about_equal_bytes_largest_first(tmp_path: Path) -> None:
    sizes = [100, 5000, 100, 100, 2500, 100, 100, 100, 2500, 100, 100, 9000]
    tasks: list[Task] = []
    for i, size in enumerate(sizes):
        (tmp_path / f"m{i:02d}.py").write_text("#" * (size - 1) + "\n")
        tasks.append((str(tmp_path / f"m{i:02d}.py"), ("AL100",), "check"))
    chunks = _chunks(tasks, 2)  # a budget of 19,800 // 48 = 412 bytes: a chunk closes at 412 or more
    places = [[at for at, _ in chunk] for chunk in chunks]
    assert sorted(at for chunk in places for at in chunk) == list(range(12))
    assert all(task == tasks[at] for chunk in chunks for at, task in chunk)
    weights = [sum(sizes[at] + 1 for at in chunk) for chunk in places]
    assert weights == sorted(weights, reverse=True)
    # in path order, each chunk closed by the file that reaches the budget; then the heaviest first
    assert places == [[9, 10, 11], [0, 1], [5, 6, 7, 8], [2, 3, 4]]
    assert weights == [9203, 5102, 2804, 2703]


def test_two_processes_report_files_of_many_sizes_in_path_order_as_one_does(tmp_path: Path, monkeypatch) -> None:
    for i in range(30):
        body = "".join(READ_IN_LOOP.format(k=k) for k in range(1 + (i * 7) % 11)) if i % 4 else "x = 1\n"
        (tmp_path / f"m{i:02d}.py").write_text(body)
    one = _concise(["--jobs", "1", "--no-cache", "."], tmp_path, monkeypatch)
    two = _concise(["--jobs", "2", "--no-cache", "."], tmp_path, monkeypatch)
    assert one[0] == two[0] == 1
    assert two[1] == one[1]
    files = [line.split(":")[0] for line in one[1] if line.count(":") >= 3]
    assert files == sorted(files) and len(set(files)) == 22
    assert sum(1 for line in one[1] if "AL100" in line) == sum(1 + (i * 7) % 11 for i in range(30) if i % 4)
