"""bench/lint_tree.py in its smoke mode: every runner measured, in one run, with ratios to ruff."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_tree_benchmark_measures_both_atenlens_runs_and_ruff_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "tree.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "lint_tree.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    (table,) = result["tables"]
    assert table["columns"] == ["run", "wall: median", "spread", "x ruff", "CPU: median", "x ruff"]
    jobs = result["raw"]["jobs"]
    assert [row[0] for row in table["rows"]] == [
        "atenlens, 1 process",
        f"atenlens, {jobs} processes",
        "ruff check",
        "atenlens, cached",
        "ruff check, cached",
    ]
    assert table["rows"][2][3] == "1.00" and table["rows"][4][3] == "1.00"
    assert result["raw"]["files"] == 40
    assert all(len(v) == 1 and v[0] > 0 for v in result["raw"]["seconds"].values())
    (target,) = result["targets"]
    assert target["what"] == f"atenlens ({jobs} processes) <= 2 x ruff" and target["status"] in ("met", "MISSED")
