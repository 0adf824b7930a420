"""`.atenlens_cache/`: a file whose bytes and codes are unchanged takes its findings from the
cache of the last run; any change to either lints it again. A real subprocess each time.

That a run read the cache is shown by editing the cached message: only a run that read it can
print the edited text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

LOOP = "import torch\nfor x in xs.cuda():\n    v = x.item()\n    n = torch.zeros(3).cuda()\n"
ITEM = "`.item()` inside a loop: the host waits for the GPU on every iteration"
ZEROS = "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`"
EXPECTED = [
    f"t.py:3:11: AL100 {ITEM}",
    f"t.py:4:24: AL302 [*] {ZEROS}",
    "Found 2 problems.",
    "[*] 1 fixable with `--fix`.",
]


def run_lint(*args: str, cwd: Path, env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "ATENLENS_CACHE_DIR"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", "--format", "concise", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )


def cache_file(folder: Path) -> Path:
    (found,) = folder.glob("lint-*.json")
    return found


def edit_cached_message(folder: Path, old: str, new: str) -> None:
    path = cache_file(folder)
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_second_run_reads_the_findings_from_the_cache(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(LOOP, encoding="utf-8")
    first = run_lint("t.py", cwd=tmp_path)
    assert (first.returncode, first.stdout.splitlines()) == (1, EXPECTED)
    folder = tmp_path / ".atenlens_cache"
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "CACHEDIR.TAG", cache_file(folder).name]
    assert (folder / ".gitignore").read_text(encoding="utf-8") == "*\n"
    assert (
        (folder / "CACHEDIR.TAG")
        .read_text(encoding="utf-8")
        .startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    )
    (entry,) = json.loads(cache_file(folder).read_text(encoding="utf-8")).values()
    assert entry[1] == "AL100,AL101,AL200,AL201,AL300,AL301,AL302"
    assert [finding[:6] for finding in entry[2]] == [
        ["AL100", ITEM, 3, 10, 3, 16],
        ["AL302", ZEROS, 4, 23, 4, 29],
    ]
    edit_cached_message(folder, ITEM, "from the cache")
    second = run_lint("t.py", cwd=tmp_path)
    assert second.stdout.splitlines()[:2] == ["t.py:3:11: AL100 from the cache", f"t.py:4:24: AL302 [*] {ZEROS}"]


def test_the_quick_fix_comes_back_from_the_cache_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(LOOP, encoding="utf-8")
    first = run_lint("t.py", "--format", "json", cwd=tmp_path)
    second = run_lint("t.py", "--format", "json", cwd=tmp_path)
    assert second.stdout == first.stdout
    (_, zeros) = json.loads(second.stdout)
    assert zeros["fix"]["edits"] == [  # `torch.zeros(3).cuda()` at 1-based columns 9-30
        {
            "content": 'torch.zeros(3, device="cuda")',
            "location": {"row": 4, "column": 9},
            "end_location": {"row": 4, "column": 30},
        }
    ]


def test_changed_bytes_are_linted_again_even_with_the_same_size_and_time(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text(LOOP, encoding="utf-8")
    run_lint("t.py", cwd=tmp_path)
    stat = path.stat()
    path.write_text(LOOP.replace("x.item()", "x.cpu() "), encoding="utf-8")  # same length
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = run_lint("t.py", cwd=tmp_path)
    assert again.stdout.splitlines()[0] == (
        "t.py:3:11: AL100 `.cpu()` inside a loop: the host waits for the GPU on every iteration"
    )


def test_other_codes_are_linted_again(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(LOOP, encoding="utf-8")
    run_lint("t.py", "--select", "AL100", cwd=tmp_path)
    edit_cached_message(tmp_path / ".atenlens_cache", ITEM, "from the cache")
    both = run_lint("t.py", cwd=tmp_path)
    assert both.stdout.splitlines() == EXPECTED


def test_no_cache_neither_reads_nor_writes_it(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(LOOP, encoding="utf-8")
    fresh = run_lint("t.py", "--no-cache", cwd=tmp_path)
    assert fresh.stdout.splitlines() == EXPECTED
    assert not (tmp_path / ".atenlens_cache").exists()
    run_lint("t.py", cwd=tmp_path)
    edit_cached_message(tmp_path / ".atenlens_cache", ITEM, "from the cache")
    assert run_lint("t.py", "--no-cache", cwd=tmp_path).stdout.splitlines() == EXPECTED


def test_cache_dir_and_its_environment_variable_move_it(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(LOOP, encoding="utf-8")
    run_lint("t.py", "--cache-dir", "build/lint-cache", cwd=tmp_path)
    cache_file(tmp_path / "build" / "lint-cache")
    run_lint("t.py", cwd=tmp_path, env={"ATENLENS_CACHE_DIR": str(tmp_path / "elsewhere")})
    cache_file(tmp_path / "elsewhere")
    assert not (tmp_path / ".atenlens_cache").exists()


def test_a_damaged_cache_is_ignored_and_replaced(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(LOOP, encoding="utf-8")
    run_lint("t.py", cwd=tmp_path)
    folder = tmp_path / ".atenlens_cache"
    cache_file(folder).write_text('{"truncated', encoding="utf-8")
    damaged = run_lint("t.py", cwd=tmp_path)
    assert (damaged.returncode, damaged.stdout.splitlines(), damaged.stderr) == (1, EXPECTED, "")
    assert len(json.loads(cache_file(folder).read_text(encoding="utf-8"))) == 1


def test_fix_and_diff_lint_the_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text(LOOP, encoding="utf-8")
    run_lint("t.py", cwd=tmp_path)
    edit_cached_message(tmp_path / ".atenlens_cache", ITEM, "from the cache")
    diff = run_lint("t.py", "--diff", cwd=tmp_path)
    assert "from the cache" not in diff.stdout
    fixed = run_lint("t.py", "--fix", cwd=tmp_path)
    assert fixed.stdout.splitlines()[0] == f"t.py:3:11: AL100 {ITEM}"
    assert 'torch.zeros(3, device="cuda")' in path.read_text(encoding="utf-8")


def test_entries_of_deleted_files_are_dropped(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOOP, encoding="utf-8")
    (tmp_path / "b.py").write_text(LOOP, encoding="utf-8")
    run_lint(".", cwd=tmp_path)
    folder = tmp_path / ".atenlens_cache"
    assert sorted(json.loads(cache_file(folder).read_text(encoding="utf-8"))) == [
        str(tmp_path / "a.py"),
        str(tmp_path / "b.py"),
    ]
    (tmp_path / "b.py").unlink()
    (tmp_path / "c.py").write_text("x = 1\n", encoding="utf-8")
    run_lint(".", cwd=tmp_path)
    assert sorted(json.loads(cache_file(folder).read_text(encoding="utf-8"))) == [
        str(tmp_path / "a.py"),
        str(tmp_path / "c.py"),
    ]
