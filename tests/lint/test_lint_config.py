"""`[tool.atenlens]` in pyproject.toml, `.gitignore` and `exclude`: which files and rules run,
checked through the CLI's own entry point (in this process, for speed) with real files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from atenlens.cli import build_parser
from atenlens.lint.command import run_lint_command

# Findings of every rule family on known lines: AL100 (3), AL101 (4), AL300 (5), AL302 (6).
SOURCE = (
    "import torch\nfor x in xs.cuda():\n    v = x.item()\n    torch.cuda.synchronize()\n"
    "    torch.cuda.empty_cache()\nn = torch.zeros(3).cuda()\n"
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def lint(cwd: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, list[str], str]:
    """(exit status, `path code` per finding, stderr)."""
    monkeypatch.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    status = run_lint_command(
        build_parser().parse_args(["lint", "--format", "concise", "--jobs", "1", *argv]), out, err
    )
    found = [
        " ".join(line.split(": ")[:2]).split(" [*]")[0]
        for line in out.getvalue().splitlines()
        if line.count(":") >= 3 and not line.startswith("[*]")
    ]
    return status, [f"{f.split(':')[0]} {f.split(' ')[1]}" for f in found], err.getvalue()


def test_select_ignore_and_extend_select_resolve_by_specificity_as_in_ruff(tmp_path, monkeypatch) -> None:
    write(tmp_path / "t.py", SOURCE)
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nselect = ["AL1"]\nignore = ["AL101"]\n')
    assert lint(tmp_path, monkeypatch, "t.py")[1] == ["t.py AL100"]
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nselect = ["AL100"]\nignore = ["AL1"]\n')
    assert lint(tmp_path, monkeypatch, "t.py")[1] == ["t.py AL100"]  # the more specific select wins
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nselect = ["AL1"]\nextend-select = ["AL302"]\n')
    assert lint(tmp_path, monkeypatch, "t.py")[1] == ["t.py AL100", "t.py AL101", "t.py AL302"]
    # the command line: --select replaces the file's select, --ignore and --extend-select add to it
    assert lint(tmp_path, monkeypatch, "t.py", "--select", "AL3")[1] == ["t.py AL300", "t.py AL302"]
    assert lint(tmp_path, monkeypatch, "t.py", "--ignore", "AL100")[1] == ["t.py AL101", "t.py AL302"]
    assert lint(tmp_path, monkeypatch, "t.py", "--extend-select", "AL300")[1] == [
        "t.py AL100",
        "t.py AL101",
        "t.py AL300",
        "t.py AL302",
    ]


def test_the_nearest_pyproject_with_a_tool_atenlens_table_applies(tmp_path, monkeypatch) -> None:
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nignore = ["AL3"]\n')
    write(tmp_path / "sub" / "pyproject.toml", '[project]\nname = "sub"\n')  # no table: passed over
    write(tmp_path / "other" / "pyproject.toml", '[tool.atenlens]\nselect = ["AL101"]\n')
    write(tmp_path / "sub" / "a.py", SOURCE)
    write(tmp_path / "other" / "b.py", SOURCE)
    status, found, err = lint(tmp_path / "sub", monkeypatch, "a.py", "../other/b.py")
    assert (status, err) == (1, "")
    assert found == ["a.py AL100", "a.py AL101", "../other/b.py AL101"]


def test_per_file_ignores_match_paths_names_and_negations(tmp_path, monkeypatch) -> None:
    write(
        tmp_path / "pyproject.toml",
        '[tool.atenlens]\nselect = ["AL100", "AL302"]\n'
        "[tool.atenlens.per-file-ignores]\n"
        '"tests/*" = ["AL100"]\n"conftest.py" = ["AL1"]\n"!src/*" = ["AL302"]\n',
    )
    for name in ("tests/deep/test_a.py", "src/conftest.py", "src/m.py", "tools/t.py"):
        write(tmp_path / name, SOURCE)
    status, found, _ = lint(tmp_path, monkeypatch, ".")
    # `*` crosses `/` (ruff's globs); the negated key applies outside src/ only
    assert found == ["src/conftest.py AL302", "src/m.py AL100", "src/m.py AL302", "tools/t.py AL100"]


def test_exclude_and_gitignore_leave_files_out_of_a_walk_but_not_a_named_file(tmp_path, monkeypatch) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".gitignore", "generated/\n*_pb2.py\n!keep_pb2.py\n")
    write(tmp_path / "pkg" / ".gitignore", "scratch.py\n")
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nselect = ["AL100"]\nexclude = ["legacy", "pkg/old_*.py"]\n')
    for name in (
        "pkg/a.py",
        "pkg/scratch.py",
        "pkg/old_x.py",
        "pkg/x_pb2.py",
        "pkg/keep_pb2.py",
        "generated/g.py",
        "legacy/l.py",
        "pkg/legacy/l.py",
    ):
        write(tmp_path / name, SOURCE)
    assert lint(tmp_path, monkeypatch, ".")[1] == ["pkg/a.py AL100", "pkg/keep_pb2.py AL100"]
    # walking from a subfolder still applies the .gitignore files above it
    assert lint(tmp_path / "pkg", monkeypatch, ".")[1] == ["a.py AL100", "keep_pb2.py AL100"]
    # a file named on the command line is linted, as in ruff
    assert lint(tmp_path, monkeypatch, "legacy/l.py", "pkg/scratch.py")[1] == [
        "legacy/l.py AL100",
        "pkg/scratch.py AL100",
    ]
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nselect = ["AL100"]\nrespect-gitignore = false\n')
    assert lint(tmp_path, monkeypatch, "pkg")[1] == [
        "pkg/a.py AL100",
        "pkg/keep_pb2.py AL100",
        "pkg/old_x.py AL100",
        "pkg/scratch.py AL100",
        "pkg/x_pb2.py AL100",
        "pkg/legacy/l.py AL100",
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'select = ["AL999"]',
            "[tool.atenlens] select: unknown rule code 'AL999' (known: AL100, AL101, AL200, "
            "AL201, AL300, AL301, AL302)",
        ),
        ("ignore = 'AL100'", "[tool.atenlens] ignore must be a list of rule codes, got 'AL100'"),
        (
            "selct = ['AL100']",
            "[tool.atenlens] unknown key 'selct' (known: select, extend-select, ignore, exclude, "
            "extend-exclude, per-file-ignores, respect-gitignore, force-exclude, lint)",
        ),
        ("exclude = 'build'", "[tool.atenlens] exclude must be a list of glob patterns, got 'build'"),
        (
            'per-file-ignores = { "tests/*" = "AL100" }',
            "[tool.atenlens] per-file-ignores.'tests/*' must be a list of rule codes, got 'AL100'",
        ),
        (
            'per-file-ignores = { "tests/*" = ["XX1"] }',
            "[tool.atenlens] per-file-ignores.'tests/*': unknown rule code 'XX1' (known: AL100, AL101, AL200, AL201, "
            "AL300, AL301, AL302)",
        ),
        ("respect-gitignore = 'yes'", "[tool.atenlens] respect-gitignore must be true or false, got 'yes'"),
    ],
)
def test_a_bad_config_is_an_error_naming_the_file_and_the_key(tmp_path, monkeypatch, table, message) -> None:
    write(tmp_path / "t.py", SOURCE)
    write(tmp_path / "pyproject.toml", f"[tool.atenlens]\n{table}\n")
    status, found, err = lint(tmp_path, monkeypatch, "t.py")
    assert (status, found) == (2, [])
    assert err == f"atenlens lint: {tmp_path / 'pyproject.toml'}: {message}\n"


def test_a_pyproject_that_is_not_toml_is_an_error(tmp_path, monkeypatch) -> None:
    write(tmp_path / "t.py", SOURCE)
    write(tmp_path / "pyproject.toml", "[tool.atenlens\nselect = 1\n")
    status, _, err = lint(tmp_path, monkeypatch, "t.py")
    assert status == 2
    assert err.startswith(f"atenlens lint: {tmp_path / 'pyproject.toml'}: not valid TOML (")


def test_a_tree_linted_by_two_processes_reports_what_one_process_does(tmp_path, monkeypatch) -> None:
    for i in range(20):
        write(tmp_path / f"m{i:02d}.py", SOURCE if i % 3 else "x = 1\n")
    one = lint(tmp_path, monkeypatch, ".")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    status = run_lint_command(
        build_parser().parse_args(["lint", "--format", "concise", "--jobs", "2", "."]), out, io.StringIO()
    )
    two = [
        " ".join(line.split(": ")[:2]).split(" [*]")[0] for line in out.getvalue().splitlines() if line.count(":") >= 3
    ]
    assert status == one[0] == 1
    assert [f"{f.split(':')[0]} {f.split(' ')[1]}" for f in two] == one[1]
    assert len(one[1]) == 13 * 4


def test_exclude_patterns_match_names_and_paths_as_fnmatch_would(tmp_path, monkeypatch) -> None:
    """Each `exclude` glob is matched against a file's or folder's name and against its path from
    the config's folder (a trailing `/` does not count; a leading `./` anchors it to a path);
    `[...]`, `[!...]` and `?` as in fnmatch."""
    write(
        tmp_path / "pyproject.toml",
        '[tool.atenlens]\nselect = ["AL100"]\nexclude = ["./build/", "gen_[ab]?.py", "[!p]*/skip_*.py"]\n',
    )
    for name in (
        "build/b.py",
        "pkg/build/b.py",
        "pkg/gen_a1.py",
        "pkg/gen_c1.py",
        "pkg/gen_a12.py",
        "pkg/skip_1.py",
        "src/skip_1.py",
        "src/keep.py",
    ):
        write(tmp_path / name, SOURCE)
    # `./build` is a path: the folder `build` under `pkg` is not excluded by it
    assert lint(tmp_path, monkeypatch, ".")[1] == [
        "pkg/gen_a12.py AL100",
        "pkg/gen_c1.py AL100",
        "pkg/skip_1.py AL100",
        "pkg/build/b.py AL100",
        "src/keep.py AL100",
    ]
