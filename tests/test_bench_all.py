"""bench/all writes into an existing docs/benchmarks.md only what its run measured: the sections of
the benchmarks it ran, their rows of the targets table, the machine and the analysis; the sections
of benchmarks it did not run (the whole-tree lint runs, the simulated ranks) stay as they were.
Small made-up documents and results: no benchmark runs here."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")
sys.path.insert(0, BENCH)

import harness  # noqa: E402


def _load_all():
    loader = importlib.machinery.SourceFileLoader("bench_all", os.path.join(BENCH, "all"))
    spec = importlib.util.spec_from_loader("bench_all", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


bench_all = _load_all()

WHOLE_TREE = """## Whole tree: atenlens lint against ruff check

`python bench/lint_tree.py --tree DIR`

| tool | median |
|------|--------|
| atenlens | 7.10 s |

- written by hand from a run on transformers 5.24.0
"""
RANKS = """## Simulated ranks: FSDP2 on 64 ranks

`python bench/trace_ranks.py --rounds 3`

| run | CPU |
|-----|-----|
| 64 ranks | 11.2 s |
"""
OLD_EDITOR = """## Editor round trip: trace command to inlay hints (examples/train_step.py::train_step)

`python bench/editor_roundtrip.py`

| worker | median |
|--------|--------|
| warm   | 183 |

_(200 s)_
"""
OLD_LINT = """## Lint latency while typing (5000-line file, 200 edits)

`python bench/lint_latency.py`

| server | p95 |
|--------|-----|
| atenlens | 83.3 |
"""
EXISTING = (
    "# Benchmarks\n\nold preamble; last run 2026-11-29 17:43 UTC.\n\n"
    "## Machine and versions\n\n| | |\n|--|--|\n| cores | 2 |\n\n"
    "## Targets\n\n"
    "| benchmark | target | measured | limit | status |\n"
    "|---|---|---|---|---|\n"
    "| lint_latency | atenlens p95 <= 2 x ruff p95 | 83.3 ms | 77.8 ms | MISSED |\n"
    "| editor_roundtrip | warm trace -> hints refresh, median | 183 ms | 300 ms | met |\n"
    "| editor_roundtrip | inlay hints from cache, p95 | 1.07 ms | 5.00 ms | met |\n"
    "| lint_tree | atenlens <= 2 x ruff (wall) | 3.30 | 2.00 | MISSED |\n\n"
    + OLD_LINT
    + "\n"
    + OLD_EDITOR
    + "\n"
    + WHOLE_TREE
    + "\n"
    + RANKS
    + "\n## Analysis: causes and floors\n\nold analysis\n\n### Load\n\nold load\n"
)
NEW_EDITOR = """## Editor round trip: trace command to inlay hints (examples/train_step.py::train_step)

`python bench/editor_roundtrip.py`

| worker | median |
|--------|--------|
| warm   | 120 |

_(measured 2026-12-01 20:40 UTC, 190 s)_
"""
NEW_STAYING = """## Staying power: 50 traces in one warm worker

`python bench/staying_power.py`

| model | growth |
|-------|--------|
| GPT-2 | 3.75 MB |
"""
FRESH = (
    "# Benchmarks\n\nnew preamble\n\n"
    "## Machine and versions\n\n| | |\n|--|--|\n| cores | 16 |\n\n"
    "## Targets\n\n"
    "| benchmark | target | measured | limit | status |\n"
    "|---|---|---|---|---|\n"
    "| editor_roundtrip | warm trace -> hints refresh, median | 120 ms | 300 ms | met |\n"
    "| staying_power | GPT-2: memory growth over 50 traces | 3.75 MB | 50.0 MB | met |\n\n"
    + NEW_EDITOR
    + "\n"
    + NEW_STAYING
    + "\n## Analysis: causes and floors\n\nnew analysis\n\n### Load\n\nnew load\n"
)


def test_splice_replaces_the_measured_sections_and_keeps_the_others():
    spliced = bench_all.splice(EXISTING, FRESH, ["editor_roundtrip", "staying_power"])
    targets = harness.markdown_table(
        ["benchmark", "target", "measured", "limit", "status"],
        [
            ["lint_latency", "atenlens p95 <= 2 x ruff p95", "83.3 ms", "77.8 ms", "MISSED"],
            ["editor_roundtrip", "warm trace -> hints refresh, median", "120 ms", "300 ms", "met"],
            ["lint_tree", "atenlens <= 2 x ruff (wall)", "3.30", "2.00", "MISSED"],
            ["staying_power", "GPT-2: memory growth over 50 traces", "3.75 MB", "50.0 MB", "met"],
        ],
    )
    assert spliced == (
        "# Benchmarks\n\nnew preamble\n\n"
        "## Machine and versions\n\n| | |\n|--|--|\n| cores | 16 |\n\n"
        f"## Targets\n\n{targets}\n\n"
        + OLD_LINT
        + "\n"
        + NEW_EDITOR
        + "\n"
        + NEW_STAYING
        + "\n"
        + WHOLE_TREE
        + "\n"
        + RANKS
        + "\n## Analysis: causes and floors\n\nnew analysis\n\n### Load\n\nnew load\n"
    )


def test_a_failed_benchmark_replaces_its_section_and_its_targets():
    fresh = (
        "# Benchmarks\n\nnew preamble\n\n## Targets\n\n"
        "| benchmark | target | measured | limit | status |\n|---|---|---|---|---|\n"
        "| lint_latency | the benchmark failed (see below) | - | - | FAILED |\n\n"
        "## lint_latency: FAILED\n\n`python bench/lint_latency.py`\n\n```\nTraceback\n```\n\n"
    )
    spliced = bench_all.splice(EXISTING, fresh, ["lint_latency"])
    assert "## lint_latency: FAILED\n\n`python bench/lint_latency.py`\n\n```\nTraceback\n```\n\n" in spliced
    assert OLD_LINT not in spliced
    assert "| lint_latency     | the benchmark failed (see below)    | -        | -       | FAILED |" in spliced
    assert "| editor_roundtrip | warm trace -> hints refresh, median | 183 ms   | 300 ms  | met    |" in spliced
    for kept in (OLD_EDITOR, WHOLE_TREE, RANKS, "## Machine and versions\n\n| | |\n|--|--|\n| cores | 2 |\n"):
        assert kept in spliced


def test_render_from_kept_results_into_an_existing_document(tmp_path):
    result = harness.Result(
        "editor_roundtrip",
        "Editor round trip: trace command to inlay hints (examples/train_step.py::train_step)",
        "python bench/editor_roundtrip.py",
    )
    table = harness.Table("executeCommand atenlens.trace -> (ms)", ["worker", "inlayHint/refresh: median"])
    table.add("warm", 121.0)
    result.tables.append(table)
    result.targets.append(harness.Target("warm trace -> hints refresh, median", 121.0, 300.0, "ms"))
    results = tmp_path / "results"
    results.mkdir()
    (results / "editor_roundtrip.json").write_text(json.dumps(dict(result.to_json(), seconds=190.0)))
    document = tmp_path / "benchmarks.md"
    document.write_text(EXISTING)
    process = subprocess.run(
        [sys.executable, os.path.join(BENCH, "all"), "--render", str(results), "--output", str(document)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr
    text = document.read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Machine and versions",
        "## Targets",
        "## Lint latency while typing (5000-line file, 200 edits)",
        "## Editor round trip: trace command to inlay hints (examples/train_step.py::train_step)",
        "## Whole tree: atenlens lint against ruff check",
        "## Simulated ranks: FSDP2 on 64 ranks",
        "## Analysis: causes and floors",
    ]
    for kept in (OLD_LINT, WHOLE_TREE, RANKS):
        assert kept in text
    assert "| editor_roundtrip | warm trace -> hints refresh, median | 121 ms   | 300 ms  | met    |" in text
    assert "| editor_roundtrip | inlay hints from cache, p95" not in text  # this run measured only the one
    assert "| lint_tree        | atenlens <= 2 x ruff (wall)         | 3.30     | 2.00    | MISSED |" in text
    editor = text.split("## Editor round trip")[1].split("\n## ")[0]
    assert "| warm   | 121                       |" in editor and "183" not in editor
    assert "_(measured " in editor and ", 190 s)_" in editor
    with open(os.path.join(BENCH, "analysis.md"), encoding="utf-8") as f:
        assert text.endswith(f.read().rstrip() + "\n")
