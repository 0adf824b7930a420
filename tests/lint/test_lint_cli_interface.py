"""`atenlens lint` as a team adding it to CI next to ruff uses it: formats, exit codes, stdin,
--statistics, --exit-zero, --fix/--diff, non-regular files. A real subprocess each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atenlens.lint import RULES, lint_source
from atenlens.lint.fixes import apply_edits, offered_fixes

ROOT = Path(__file__).resolve().parents[2]
LOOP = "import torch\nfor x in xs.cuda():\n    v = x.item()\n    n = torch.zeros(3).cuda()\n"
ITEM = "`.item()` inside a loop: the host waits for the GPU on every iteration"
ZEROS = "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`"


def run_lint(*args: str, cwd: Path, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_concise_marks_fixable_findings_and_counts_them(tmp_path: Path) -> None:
    write(tmp_path / "t.py", LOOP)
    result = run_lint("t.py", "--output-format", "concise", cwd=tmp_path)  # ruff's spelling of --format
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"t.py:3:11: AL100 {ITEM}",
        f"t.py:4:24: AL302 [*] {ZEROS}",
        "Found 2 problems.",
        "[*] 1 fixable with `--fix`.",
    ]
    write(tmp_path / "ok.py", "x = 1\n")
    clean = run_lint("ok.py", "--format", "concise", cwd=tmp_path)
    assert (clean.returncode, clean.stdout) == (0, "All checks passed!\n")


def test_github_format_is_one_workflow_annotation_per_finding(tmp_path: Path) -> None:
    write(tmp_path / "t.py", LOOP.replace("():", "():  # 100%, a: b"))
    result = run_lint("t.py", "--format", "github", cwd=tmp_path)
    assert result.returncode == 1
    path = tmp_path / "t.py"
    assert result.stdout.splitlines() == [
        f"::warning title=atenlens (AL100),file={path},line=3,col=11,endLine=3,endColumn=17::t.py:3:11: AL100 {ITEM}",
        f"::warning title=atenlens (AL302),file={path},line=4,col=24,endLine=4,endColumn=30::t.py:4:24: AL302 {ZEROS}",
    ]


def test_github_format_escapes_what_workflow_commands_reserve(tmp_path: Path) -> None:
    weird = tmp_path / "a,b:c%"
    write(weird / "t.py", LOOP)
    result = run_lint("a,b:c%/t.py", "--format", "github", "--select", "AL100", cwd=tmp_path)
    escaped = str(weird).replace("%", "%25").replace(":", "%3A").replace(",", "%2C") + "/t.py"
    assert result.stdout == (
        f"::warning title=atenlens (AL100),file={escaped},line=3,col=11,endLine=3,"
        f"endColumn=17::a,b:c%25/t.py:3:11: AL100 {ITEM}\n"
    )


def test_sarif_is_2_1_0_with_rules_results_regions_and_fixes(tmp_path: Path) -> None:
    write(tmp_path / "src" / "t.py", LOOP)
    result = run_lint("src/t.py", "--format", "sarif", cwd=tmp_path)
    assert result.returncode == 1
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0"
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "atenlens"
    assert [r["id"] for r in driver["rules"]] == ["AL100", "AL101", "AL200", "AL201", "AL300", "AL301", "AL302"]
    assert (
        driver["rules"][0]["helpUri"]
        == "https://github.com/atenlens/atenlens/blob/main/docs/rules.md#al100-sync-in-loop"
    )
    assert driver["rules"][0]["fullDescription"]["text"].startswith("## AL100 `sync-in-loop`\n")
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.as_uri() + "/"}}
    location = {"uri": "src/t.py", "uriBaseId": "%SRCROOT%"}
    assert run["results"] == [
        {
            "ruleId": "AL100",
            "ruleIndex": 0,
            "level": "warning",
            "message": {"text": ITEM},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": location,
                        "region": {"startLine": 3, "startColumn": 11, "endLine": 3, "endColumn": 17},
                    }
                }
            ],
        },
        {
            "ruleId": "AL302",
            "ruleIndex": 6,
            "level": "warning",
            "message": {"text": ZEROS},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": location,
                        "region": {"startLine": 4, "startColumn": 24, "endLine": 4, "endColumn": 30},
                    }
                }
            ],
            "fixes": [
                {
                    "description": {"text": 'Create the tensor on the device (`device="cuda"`)'},
                    "artifactChanges": [
                        {
                            "artifactLocation": location,
                            "replacements": [
                                {
                                    "deletedRegion": {"startLine": 4, "startColumn": 9, "endLine": 4, "endColumn": 30},
                                    "insertedContent": {"text": 'torch.zeros(3, device="cuda")'},
                                }
                            ],
                        }
                    ],
                }
            ],
        },
    ]


def test_statistics_count_per_code_in_text_and_json(tmp_path: Path) -> None:
    write(tmp_path / "a.py", LOOP)
    write(tmp_path / "b.py", "for x in xs.cuda():\n    x.cpu()\n    x.tolist()\n")
    result = run_lint(".", "--statistics", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "3\tAL100\t[ ] sync-in-loop",
        "1\tAL302\t[*] create-then-move",
        "Found 4 problems.",
        "[*] 1 fixable with `--fix`.",  # ruff's closing line
    ]
    as_json = run_lint(".", "--statistics", "--format", "json", cwd=tmp_path)
    assert json.loads(as_json.stdout) == [
        {"code": "AL100", "name": "sync-in-loop", "count": 3, "fixable": False, "fixable_count": 0},
        {"code": "AL302", "name": "create-then-move", "count": 1, "fixable": True, "fixable_count": 1},
    ]


def test_exit_codes_are_ruffs(tmp_path: Path) -> None:
    write(tmp_path / "t.py", LOOP)
    write(tmp_path / "ok.py", "x = 1\n")
    assert run_lint("ok.py", cwd=tmp_path).returncode == 0
    assert run_lint("t.py", cwd=tmp_path).returncode == 1
    zero = run_lint("t.py", "--exit-zero", cwd=tmp_path)
    assert (zero.returncode, zero.stdout.splitlines()[-1]) == (0, "Found 2 problems in 1 file.")
    assert run_lint("t.py", "--select", "AL999", cwd=tmp_path).returncode == 2
    assert run_lint("t.py", "--select", "AL999", "--exit-zero", cwd=tmp_path).returncode == 2
    write(tmp_path / "pyproject.toml", "[tool.atenlens]\nselect = 'AL100'\n")
    bad = run_lint("t.py", "--exit-zero", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == (
        f"atenlens lint: {tmp_path / 'pyproject.toml'}: [tool.atenlens] select must be a list "
        "of rule codes, got 'AL100'\n"
    )


def test_stdin_is_linted_under_its_stdin_filename(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.atenlens]\nper-file-ignores = { "tests/*" = ["AL100"] }\n')
    named = run_lint("-", "--stdin-filename", "tests/test_x.py", cwd=tmp_path, stdin=LOOP)
    assert (named.returncode, named.stdout.splitlines()) == (
        1,
        [f"tests/test_x.py:4:24: AL302 {ZEROS}", "Found 1 problem in 1 file."],
    )
    anonymous = run_lint("-", "--format", "concise", cwd=tmp_path, stdin=LOOP)
    assert anonymous.stdout.splitlines()[:2] == [f"-:3:11: AL100 {ITEM}", f"-:4:24: AL302 [*] {ZEROS}"]
    # --stdin-filename without a path reads stdin, as in ruff
    implied = run_lint("--stdin-filename", "tests/test_x.py", cwd=tmp_path, stdin=LOOP)
    assert implied.stdout == named.stdout
    fixed = run_lint("-", "--fix", cwd=tmp_path, stdin=LOOP)
    assert fixed.stdout == LOOP.replace("torch.zeros(3).cuda()", 'torch.zeros(3, device="cuda")')
    assert fixed.stderr.splitlines() == [
        f"-:3:11: AL100 {ITEM}",
        "Found 1 problem in 1 file.",
        "Fixed 1 problem (1 remaining).",
    ]
    assert fixed.returncode == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_a_fifo_and_a_symlink_to_a_device_are_skipped_with_a_message(tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "a.py", LOOP)
    os.mkfifo(tmp_path / "pkg" / "pipe.py")
    os.symlink("/dev/zero", tmp_path / "pkg" / "zero.py")
    result = run_lint("pkg", "--select", "AL100", cwd=tmp_path, timeout=30)
    assert result.stderr.splitlines() == [
        "pkg/pipe.py: a FIFO, not a regular file; skipped",
        "pkg/zero.py: a character device (through a symbolic link), not a regular file; skipped",
    ]
    assert result.stdout.splitlines() == [f"pkg/a.py:3:11: AL100 {ITEM}", "Found 1 problem in 1 file."]
    assert result.returncode == 1
    named = run_lint("pkg/pipe.py", cwd=tmp_path, timeout=30)
    assert (named.returncode, named.stdout, named.stderr) == (
        0,
        "",
        "pkg/pipe.py: a FIFO, not a regular file; skipped\n",
    )


def test_fix_applies_exactly_the_edits_the_editor_offers(tmp_path: Path) -> None:
    source = (ROOT / "tests" / "lint" / "fixtures" / "AL302_create_then_move.py").read_text(encoding="utf-8")
    target = write(tmp_path / "make.py", source)
    # What the editor's quick fixes give, one after the other (each re-linted, as in the editor).
    editor = source
    while True:
        offered = offered_fixes(lint_source(editor))
        if not offered:
            break
        editor = apply_edits(editor, offered[0][1].edits)
    before = lint_source(source)
    result = run_lint("make.py", cwd=tmp_path)
    assert result.returncode == 1
    fixed = run_lint("make.py", "--fix", cwd=tmp_path)
    after = target.read_text(encoding="utf-8")
    assert after == editor != source
    compile(after, "make.py", "exec")  # still parses
    remaining = lint_source(after)
    assert [f for f in remaining if f.fix is not None] == []
    assert len(remaining) == len(before) - len(offered_fixes(before))
    assert fixed.stdout.splitlines()[-1] == f"Fixed {len(offered_fixes(before))} problems ({len(remaining)} remaining)."
    assert fixed.returncode == (1 if remaining else 0)


def test_diff_prints_the_fixes_and_changes_nothing(tmp_path: Path) -> None:
    target = write(tmp_path / "t.py", LOOP)
    result = run_lint("t.py", "--diff", cwd=tmp_path)
    assert result.stdout == (
        "--- t.py\n+++ t.py\n@@ -1,4 +1,4 @@\n import torch\n for x in xs.cuda():\n     v = x.item()\n"
        '-    n = torch.zeros(3).cuda()\n+    n = torch.zeros(3, device="cuda")\nWould fix 1 problem.\n'
    )
    assert result.returncode == 1
    assert target.read_text(encoding="utf-8") == LOOP
    write(tmp_path / "ok.py", "x = 1\n")
    nothing = run_lint("ok.py", "--diff", cwd=tmp_path)
    assert (nothing.returncode, nothing.stdout) == (0, "Would fix 0 problems.\n")


def test_the_pre_commit_hook_entry_lints_the_files_pre_commit_passes(tmp_path: Path) -> None:
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    entries = {line.split(":", 1)[1].strip() for line in hooks.splitlines() if line.strip().startswith("entry:")}
    assert entries == {"atenlens lint --force-exclude", "atenlens check"}  # atenlens-check: tests/test_check.py
    assert hooks.count("types: [python]") == 2 and hooks.count("- id:") == 3
    write(tmp_path / "a.py", LOOP)
    write(tmp_path / "b.py", "x = 1\n")
    # pre-commit appends the staged file names to the entry
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", *"atenlens lint --force-exclude".split()[1:], "a.py", "b.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout.splitlines()[-1]) == (1, "Found 2 problems in 1 file.")


def test_rule_prints_the_rules_section_of_docs_rules_md(tmp_path: Path) -> None:
    rules_md = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    by_code = subprocess.run(
        [sys.executable, "-m", "atenlens", "rule", "AL101"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    section = (
        "## AL101 `synchronize-in-loop`\n"
        + rules_md.split("## AL101 `synchronize-in-loop`\n", 1)[1].split("\n## ", 1)[0].rstrip("\n")
        + "\n"
    )
    assert (by_code.returncode, by_code.stdout) == (0, section)
    summary = next(rule.summary for rule in RULES if rule.code == "AL101")
    assert section.splitlines()[2] == summary[:1].upper() + summary[1:].rstrip(".") + "."
    by_name = subprocess.run(
        [sys.executable, "-m", "atenlens", "rule", "synchronize-in-loop"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert by_name.stdout == section
    unknown = subprocess.run(
        [sys.executable, "-m", "atenlens", "rule", "AL999"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == (
        "atenlens rule: unknown rule 'AL999' (known: AL100, AL101, AL200, AL201, AL300, AL301, AL302)\n"
    )
    every = subprocess.run(
        [sys.executable, "-m", "atenlens", "rule", "--all"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert every.stdout == rules_md[rules_md.index("## AL100 ") :]
