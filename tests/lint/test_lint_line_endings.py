"""Files with Windows line ends (`\r\n`) get the findings and fixes of the same file with `\n`:
the rules read lines ending in `\n` (torchattacks ships its sources with `\r\n`, and a throttle
`if counter == k: ...; counter = 0` was missed there while its `\n` copy was found)."""

from __future__ import annotations

from pathlib import Path

from atenlens.lint.command import lint_text
from atenlens.lint.engine import lint_source_strict
from atenlens.lint.findings import Finding

HERE = Path(__file__).parent
REAL_FILES = sorted(
    p for folder in ("corpus_real", "corpus_heldout") for p in (HERE / folder).glob("*.py") if p.name != "conftest.py"
)


def shown(findings: list[Finding]) -> list[tuple]:
    return [(f.line, f.column, f.end_line, f.end_column, f.code, f.severity, f.message, f.fix) for f in findings]


def test_real_files_with_windows_line_ends_get_the_same_findings() -> None:
    compared = 0
    for path in REAL_FILES:
        source = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        expected = shown(lint_source_strict(source))
        assert shown(lint_source_strict(source.replace("\n", "\r\n"))) == expected, path.name
        compared += len(expected)
    assert len(REAL_FILES) >= 170 and compared >= 250


THROTTLED = (
    "import torch\n"
    "\n"
    "\n"
    "def attack(model, x, steps, k, device):\n"
    "    x = x.to(device)\n"
    "    counter = 0\n"
    "    best = torch.zeros(x.shape[0]).to(device)\n"
    "    for i in range(steps):\n"
    "        best = torch.maximum(best, model(x).sum(1))\n"
    "        counter += 1\n"
    "        if counter == k:\n"
    "            check = best.cpu().numpy()\n"
    "            counter = 0\n"
    "            k = max(k // 2, 1)\n"
    "    return best\n"
)


def test_a_throttle_and_a_fix_in_a_file_with_windows_line_ends() -> None:
    windows = THROTTLED.replace("\n", "\r\n")
    assert [(f.line, f.code, f.severity) for f in lint_source_strict(windows)] == [
        (7, "AL302", "warning"),
        (12, "AL100", "information"),
    ]
    fixed = lint_text(windows, "attack.py", ["AL302"], "fix")
    assert fixed.fixed_source == windows.replace(
        "torch.zeros(x.shape[0]).to(device)", "torch.zeros(x.shape[0], device=device)"
    )
