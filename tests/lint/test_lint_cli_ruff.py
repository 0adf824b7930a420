"""`atenlens lint` where a team that runs ruff expects ruff's behaviour: the config tables next to
`[tool.atenlens.check]`, `extend-exclude`, `--force-exclude` (pre-commit), `--config`,
`--isolated`, the json-lines / grouped / pylint formats, `--exit-non-zero-on-fix`,
`--output-file`. A real subprocess each time; the expected texts are ruff 0.17's shapes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOOP = "import torch\nfor x in xs.cuda():\n    v = x.item()\n    n = torch.zeros(3).cuda()\n"
ITEM = "`.item()` inside a loop: the host waits for the GPU on every iteration"
ZEROS = "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`"


def run_lint(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def found(result: subprocess.CompletedProcess[str]) -> list[str]:
    """`path:line CODE` per finding of a text-format run."""
    return [
        f"{line.split(':')[0]}:{line.split(':')[1]} {line.split(': ')[1].split()[0]}"
        for line in result.stdout.splitlines()
        if not line.startswith("Found ")
    ]


def test_a_check_table_and_a_lint_table_sit_next_to_the_rule_keys(tmp_path: Path) -> None:
    # `atenlens check` reads [tool.atenlens.check] (docs/check.md); the lint once failed on it
    write(
        tmp_path / "pyproject.toml",
        "[tool.atenlens]\nextend-exclude = ['gen']\n"
        "[tool.atenlens.lint]\nignore = ['AL302']\n"
        "[tool.atenlens.check]\nfunctions = { 'train.py::step' = { syncs = 0 } }\n",
    )
    write(tmp_path / "t.py", LOOP)
    write(tmp_path / "gen" / "g.py", LOOP)
    result = run_lint(cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        f"t.py:3:11: AL100 {ITEM}\nFound 1 problem in 1 file.\n",
        "",
    )
    write(
        tmp_path / "pyproject.toml", "[tool.atenlens]\nignore = ['AL100']\n[tool.atenlens.lint]\nignore = ['AL302']\n"
    )
    twice = run_lint(cwd=tmp_path)
    assert (twice.returncode, twice.stderr) == (
        2,
        f"atenlens lint: {tmp_path / 'pyproject.toml'}: [tool.atenlens] ignore is given both here "
        "and in [tool.atenlens.lint]\n",
    )
    write(tmp_path / "pyproject.toml", "[tool.atenlens.lint]\nexclude = ['gen']\n")
    wrong = run_lint(cwd=tmp_path)
    assert (wrong.returncode, wrong.stderr) == (
        2,
        f"atenlens lint: {tmp_path / 'pyproject.toml'}: [tool.atenlens].lint unknown key 'exclude' "
        "(known: select, extend-select, ignore, per-file-ignores)\n",
    )


def test_exclude_replaces_the_default_folders_and_extend_exclude_adds_to_them(tmp_path: Path) -> None:
    for name in ("src/m.py", ".venv/lib/v.py", "build/b.py", "site-packages/s.py", "legacy/l.py"):
        write(tmp_path / name, LOOP)
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nselect = ['AL100']\n")
    assert found(run_lint(cwd=tmp_path)) == ["legacy/l.py:3 AL100", "src/m.py:3 AL100"]
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nselect = ['AL100']\nextend-exclude = ['legacy']\n")
    assert found(run_lint(".", cwd=tmp_path)) == ["src/m.py:3 AL100"]
    # ruff's `exclude` is the whole list: the defaults (.venv, build, ...) are no longer in it
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nselect = ['AL100']\nexclude = ['legacy']\n")
    assert found(run_lint(".", cwd=tmp_path)) == [
        ".venv/lib/v.py:3 AL100",
        "build/b.py:3 AL100",
        "site-packages/s.py:3 AL100",
        "src/m.py:3 AL100",
    ]


def test_force_exclude_leaves_out_excluded_files_that_are_named_as_pre_commit_names_them(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nselect = ['AL100']\nextend-exclude = ['legacy', '*_pb2.py']\n")
    for name in ("src/m.py", "legacy/deep/l.py", "src/x_pb2.py"):
        write(tmp_path / name, LOOP)
    named = ("src/m.py", "legacy/deep/l.py", "src/x_pb2.py")
    # without the flag a named file is linted whatever exclude says (ruff's rule)
    assert found(run_lint(*named, cwd=tmp_path)) == [
        "src/m.py:3 AL100",
        "legacy/deep/l.py:3 AL100",
        "src/x_pb2.py:3 AL100",
    ]
    forced = run_lint("--force-exclude", *named, cwd=tmp_path)
    assert (forced.returncode, found(forced), forced.stderr) == (1, ["src/m.py:3 AL100"], "")
    only_excluded = run_lint("--force-exclude", "legacy/deep/l.py", cwd=tmp_path)
    assert (only_excluded.returncode, only_excluded.stdout, only_excluded.stderr) == (0, "", "")
    # the config key does what the flag does; --no-force-exclude turns it off again
    write(
        tmp_path / "pyproject.toml",
        "[tool.atenlens]\nselect = ['AL100']\nextend-exclude = ['legacy']\nforce-exclude = true\n",
    )
    assert found(run_lint(*named[:2], cwd=tmp_path)) == ["src/m.py:3 AL100"]
    assert found(run_lint("--no-force-exclude", *named[:2], cwd=tmp_path)) == [
        "src/m.py:3 AL100",
        "legacy/deep/l.py:3 AL100",
    ]
    # stdin named into an excluded folder: nothing linted; --fix gives the text back unchanged
    piped = run_lint("--stdin-filename", "legacy/p.py", "-", cwd=tmp_path, stdin=LOOP)
    assert (piped.returncode, piped.stdout) == (0, "")
    fixed = run_lint("--fix", "--select", "AL302", "--stdin-filename", "legacy/p.py", "-", cwd=tmp_path, stdin=LOOP)
    assert (fixed.returncode, fixed.stdout) == (0, LOOP)
    # the hook pre-commit runs carries the flag
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert hooks.count("entry: atenlens lint --force-exclude\n  require_serial: true\n") == 2


def test_config_names_the_file_and_isolated_reads_none(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nselect = ['AL100']\n")
    write(tmp_path / "ci" / "lint.toml", "[tool.atenlens]\nselect = ['AL302']\nextend-exclude = ['skip.py']\n")
    write(tmp_path / "t.py", LOOP)
    write(tmp_path / "skip.py", LOOP)
    assert found(run_lint(".", cwd=tmp_path)) == ["skip.py:3 AL100", "t.py:3 AL100"]
    # its patterns are relative to its own folder (ci/), so `skip.py` matches by name
    assert found(run_lint("--config", "ci/lint.toml", ".", cwd=tmp_path)) == ["t.py:4 AL302"]
    assert found(run_lint("--isolated", "t.py", cwd=tmp_path)) == ["t.py:3 AL100", "t.py:4 AL302"]
    missing = run_lint("--config", "nope.toml", ".", cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (2, "atenlens lint: --config nope.toml: no such file\n")


def test_json_lines_grouped_and_pylint_are_ruffs_shapes(tmp_path: Path) -> None:
    write(tmp_path / "a.py", LOOP)
    write(tmp_path / "b.py", "\n" * 9 + "for x in xs.cuda():\n    x.tolist()\n")
    lines = run_lint("--format", "json-lines", ".", cwd=tmp_path)
    rows = lines.stdout.splitlines()
    assert lines.returncode == 1 and len(rows) == 3
    assert rows[0].startswith('{"cell":null,"code":"AL100","end_location":{"column":17,"row":3},"filename":')
    assert [json.loads(row)["location"] for row in rows] == [
        {"column": 11, "row": 3},
        {"column": 24, "row": 4},
        {"column": 7, "row": 11},
    ]
    as_list = json.loads(run_lint("--format", "json", ".", cwd=tmp_path).stdout)
    assert [json.loads(row) for row in rows] == as_list
    assert list(as_list[1]["fix"]) == ["applicability", "edits", "message"]  # keys sorted, as ruff's
    grouped = run_lint("--format", "grouped", ".", cwd=tmp_path)
    assert grouped.stdout == (
        "a.py:\n"
        f"  3:11 AL100 {ITEM}\n"
        f"  4:24 AL302 [*] {ZEROS}\n"
        "\n"
        "b.py:\n"
        "  11:7 AL100 `.tolist()` inside a loop: the host waits for the GPU on every iteration\n"
        "\n"
        "Found 3 problems.\n"
        "[*] 1 fixable with `--fix`.\n"
    )
    assert run_lint("--format", "grouped", "--select", "AL300", ".", cwd=tmp_path).stdout == "All checks passed!\n"
    pylint = run_lint("--format", "pylint", "a.py", cwd=tmp_path)
    assert pylint.stdout == f"a.py:3: [AL100] {ITEM}\na.py:4: [AL302] {ZEROS}\n"


def test_exit_non_zero_on_fix_and_output_file(tmp_path: Path) -> None:
    fixable = "import torch\nn = torch.zeros(3).cuda()\n"
    write(tmp_path / "t.py", fixable)
    plain = run_lint("--fix", "t.py", cwd=tmp_path)
    assert (plain.returncode, plain.stdout) == (0, "Fixed 1 problem (0 remaining).\n")
    write(tmp_path / "t.py", fixable)
    strict = run_lint("--fix", "--exit-non-zero-on-fix", "t.py", cwd=tmp_path)
    assert strict.returncode == 1
    assert (tmp_path / "t.py").read_text() == 'import torch\nn = torch.zeros(3, device="cuda")\n'
    nothing = run_lint("--fix", "--exit-non-zero-on-fix", "t.py", cwd=tmp_path)
    assert (nothing.returncode, nothing.stdout) == (0, "")
    write(tmp_path / "u.py", LOOP)
    to_file = run_lint("--format", "json", "--output-file", "out/report.json", "u.py", cwd=tmp_path / "")
    assert (to_file.returncode, to_file.stdout) == (2, "")
    (tmp_path / "out").mkdir()
    to_file = run_lint("--format", "json", "-o", "out/report.json", "u.py", cwd=tmp_path)
    assert (to_file.returncode, to_file.stdout, to_file.stderr) == (1, "", "")
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert [(r["code"], r["location"]["row"]) for r in report] == [("AL100", 3), ("AL302", 4)]
    # ruff's --unsafe-fixes is accepted: every atenlens fix is safe, so it adds none
    unsafe = run_lint("--diff", "--unsafe-fixes", "u.py", cwd=tmp_path)
    assert unsafe.stdout.splitlines()[-1] == "Would fix 1 problem."


def test_the_lint_runs_where_torch_and_the_language_server_cannot_be_imported(tmp_path: Path) -> None:
    # README's CI line installs atenlens with --no-deps and only tree-sitter, tree-sitter-python
    # and pathspec: the command line's lint path must import nothing else (nor the trace's
    # renderer and the report it imports, which only cost a lint its start-up time)
    write(tmp_path / "t.py", LOOP)
    write(tmp_path / ".gitignore", "ignored.py\n")
    write(tmp_path / "ignored.py", LOOP)
    blocked = "torch numpy pygls lsprotocol cattrs atenlens.render atenlens.report atenlens.cost".split()
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({blocked!r})); from atenlens.cli import main; "
        "sys.exit(main(['lint', '--no-cache', '--format', 'concise', '.']))"
    )
    (tmp_path / ".git").mkdir()
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.splitlines()[:2] == [f"t.py:3:11: AL100 {ITEM}", f"t.py:4:24: AL302 [*] {ZEROS}"]


def notebook(*cells: tuple[str, str]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True)}
                | ({"execution_count": None, "outputs": []} if kind == "code" else {})
                for kind, text in cells
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_notebooks_are_linted_with_findings_in_their_cells_as_ruff_places_them(tmp_path: Path) -> None:
    # ruff 0.17 on the same notebook: `t.ipynb:cell 3:2:8: F401 ...` (every cell counted, from 1)
    cells = (
        ("markdown", "# Training\n"),
        ("code", "import torch\n%matplotlib inline\ndevice = 'cuda'\n"),  # the device, two cells up
        ("code", "%%bash\nfor x in a; do echo $x.item(); done\n"),  # not Python: left out
        ("code", "!nvidia-smi\nfor x in xs.to(device):\n    v = x.item()\n    n = torch.zeros(3).cuda()\n"),
    )
    write(tmp_path / "nb" / "t.ipynb", notebook(*cells))
    write(tmp_path / "nb" / ".ipynb_checkpoints" / "t-checkpoint.ipynb", notebook(*cells))
    result = run_lint("--format", "concise", ".", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "")
    # no quick fix in a notebook (no [*]): --fix leaves the file as it is
    assert result.stdout == (
        f"nb/t.ipynb:cell 4:3:11: AL100 {ITEM}\nnb/t.ipynb:cell 4:4:24: AL302 {ZEROS}\nFound 2 problems.\n"
    )
    again = run_lint("--format", "concise", "--fix", "nb/t.ipynb", cwd=tmp_path)
    assert again.stdout == result.stdout
    assert (tmp_path / "nb" / "t.ipynb").read_text(encoding="utf-8") == notebook(*cells)
    as_json = json.loads(run_lint("--format", "json", "nb", cwd=tmp_path).stdout)
    assert [(r["cell"], r["location"], r["end_location"], r["noqa_row"], r["fix"]) for r in as_json] == [
        (4, {"column": 11, "row": 3}, {"column": 17, "row": 3}, 3, None),
        (4, {"column": 24, "row": 4}, {"column": 30, "row": 4}, 4, None),
    ]
    github = run_lint("--format", "github", "--select", "AL100", "nb", cwd=tmp_path)
    assert github.stdout == (
        f"::warning title=atenlens (AL100),file={tmp_path / 'nb' / 't.ipynb'},line=1,col=1,endLine=1,endColumn=1::"
        f"nb/t.ipynb:cell 4:3:11: AL100 {ITEM}\n"
    )
    piped = run_lint("--stdin-filename", "nb/t.ipynb", cwd=tmp_path, stdin=notebook(*cells))
    assert piped.stdout.splitlines()[0] == f"nb/t.ipynb:cell 4:3:11: AL100 {ITEM}"
    write(tmp_path / "nb" / "broken.ipynb", "{not json")
    broken = run_lint("nb", cwd=tmp_path)
    assert broken.returncode == 1
    assert (
        broken.stderr
        == "nb/broken.ipynb: not a notebook: not JSON (Expecting property name enclosed in double quotes, line 1); skipped\n"
    )


def test_a_file_level_noqa_comment_exempts_the_file_as_ruffs_does(tmp_path: Path) -> None:
    write(tmp_path / "some.py", "# atenlens: noqa: AL302\n" + LOOP)
    write(tmp_path / "none.py", LOOP + "\n    # atenlens: noqa\n")
    write(tmp_path / "inline.py", LOOP.replace("import torch", "import torch  # atenlens: noqa"))
    result = run_lint("--select", "AL", ".", cwd=tmp_path)
    # only on a line of its own: a trailing `# atenlens: noqa` is not a file exemption
    assert found(result) == ["inline.py:3 AL100", "inline.py:4 AL302", "some.py:4 AL100"]


def test_gitlab_code_quality_report_has_stable_distinct_fingerprints(tmp_path: Path) -> None:
    source = "for x in xs.cuda():\n    v = x.item()\n    w = x.item()\nfor y in ys.cuda():\n    u = y.item()\n"
    write(tmp_path / "src" / "t.py", source)
    env_run = subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", "--no-cache", "--format", "gitlab", "t.py"],
        cwd=tmp_path / "src",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CI_PROJECT_DIR": str(tmp_path)},
    )
    report = json.loads(env_run.stdout)
    again_read = f"{ITEM}, but the value was read on line 2 just before: no new wait"
    assert env_run.returncode == 1
    assert [{k: v for k, v in r.items() if k != "fingerprint"} for r in report] == [
        {
            "check_name": "AL100",
            "description": f"AL100: {message}",
            "severity": severity,  # an information-level finding is GitLab's "info"
            "location": {
                "path": "src/t.py",  # relative to $CI_PROJECT_DIR, as GitLab reads it
                "positions": {"begin": {"line": row, "column": 11}, "end": {"line": row, "column": 17}},
            },
        }
        for row, message, severity in ((2, ITEM, "major"), (3, again_read, "info"), (5, ITEM, "major"))
    ]
    fingerprints = [r["fingerprint"] for r in report]
    assert len(set(fingerprints)) == 3 and {len(f) for f in fingerprints} == {16}
    # the same findings after a line inserted above them: the same fingerprints (GitLab matches
    # issues across pipelines by them)
    write(tmp_path / "src" / "t.py", "import os\n" + source)
    again = json.loads(run_lint("--format", "gitlab", "src/t.py", cwd=tmp_path).stdout)
    assert [r["fingerprint"] for r in again] == fingerprints


def test_quiet_prints_only_the_findings_and_silent_nothing(tmp_path: Path) -> None:
    write(tmp_path / "t.py", LOOP)
    write(tmp_path / "ok.py", "x = 1\n")
    quiet = run_lint("-q", "t.py", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout) == (1, f"t.py:3:11: AL100 {ITEM}\nt.py:4:24: AL302 {ZEROS}\n")
    concise = run_lint("--quiet", "--format", "concise", "ok.py", cwd=tmp_path)
    assert (concise.returncode, concise.stdout) == (0, "")  # no "All checks passed!"
    grouped = run_lint("-q", "--format", "grouped", "t.py", cwd=tmp_path)
    assert grouped.stdout == f"t.py:\n  3:11 AL100 {ITEM}\n  4:24 AL302 [*] {ZEROS}\n\n"
    silent = run_lint("--silent", "t.py", cwd=tmp_path)
    assert (silent.returncode, silent.stdout, silent.stderr) == (1, "", "")
    fixed = run_lint("-q", "--fix", "t.py", cwd=tmp_path)
    assert (fixed.returncode, fixed.stdout) == (1, f"t.py:3:11: AL100 {ITEM}\n")  # no "Fixed 1 problem"
    assert 'torch.zeros(3, device="cuda")' in (tmp_path / "t.py").read_text(encoding="utf-8")


def test_a_file_that_cannot_be_read_fails_the_run_as_ruffs_e902(tmp_path: Path) -> None:
    # ruff 0.17 on a broken symbolic link: `E902 No such file or directory (os error 2)`, exit 1
    write(tmp_path / "t.py", LOOP)
    (tmp_path / "broken.py").symlink_to(tmp_path / "gone.py")
    result = run_lint("--select", "AL100", ".", cwd=tmp_path)
    assert (result.returncode, found(result)) == (1, ["t.py:3 AL100"])
    assert result.stderr == "broken.py: cannot read (No such file or directory); skipped\n"
    alone = run_lint("broken.py", cwd=tmp_path)
    assert (alone.returncode, alone.stdout) == (1, "")


def test_show_files_lists_what_a_run_would_lint(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nextend-exclude = ['legacy']\n")
    for name in ("b.py", "a/n.ipynb", "legacy/l.py", ".venv/v.py", "notes.txt"):
        write(tmp_path / name, "x = 1\n")
    shown = run_lint("--show-files", ".", cwd=tmp_path)
    assert (shown.returncode, shown.stdout) == (0, f"{tmp_path / 'a' / 'n.ipynb'}\n{tmp_path / 'b.py'}\n")
