"""Shared helpers for the simulated-CUDA tests: the labelled corpus and a worker per test module.

Simulated CUDA needs its shims loaded before torch is imported, so these tests trace in the real
trace worker (a fresh process that preloads them), never in the pytest process.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from atenlens.report import TraceReport, TraceRequest
from atenlens.traceable import find_functions

CORPUS = Path(__file__).resolve().parent / "corpus" / "gpu"
_LABEL = re.compile(r"#\s*expect:\s*(.+)$")
_ITEM = re.compile(r"(AL\d{3}):(error|warning|information|hint)")


@dataclass(frozen=True, order=True)
class Finding:
    line: int
    code: str
    severity: str


def labelled_findings(path: Path) -> set[Finding]:
    """What the file's `# expect: CODE:severity, ...` comments say must be reported."""
    found: set[Finding] = set()
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        match = _LABEL.search(text)
        if match:
            items = _ITEM.findall(match.group(1))
            assert items, f"{path.name}:{number}: unreadable label {match.group(1)!r}"
            found |= {Finding(number, code, severity) for code, severity in items}
    return found


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.py"))


def case_functions(path: Path) -> list[str]:
    return [f.qualname for f in find_functions(path.read_text()) if f.name.startswith("case_") and not f.is_method]


def cuda_request(path: Path | str, qualname: str, timeout: float = 60.0, call: Optional[str] = None) -> TraceRequest:
    return TraceRequest(file=str(path), qualname=qualname, device="cuda", call=call, timeout_seconds=timeout)


def reported_findings(report: TraceReport, path: Path) -> set[Finding]:
    return {
        Finding(d.line, d.code, d.severity) for d in report.diagnostics if d.file == str(path) and d.line is not None
    }


def ops_named(report: TraceReport, prefix: str, phase: Optional[str] = None) -> list[str]:
    return [
        e.name
        for e in report.events
        if e.kind == "op" and e.name.startswith(prefix) and (phase is None or e.phase == phase)
    ]


def isolated_cache(tmp: Path) -> dict[str, str]:
    """Worker environment that builds the shims into `tmp` instead of the user's cache."""
    return {"ATENLENS_CACHE_DIR": str(tmp)}


def env_without(*names: str) -> Iterator[tuple[str, str]]:
    return ((k, v) for k, v in os.environ.items() if k not in names)
