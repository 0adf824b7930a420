"""The labelled GPU hazard corpus (tests/corpus/gpu), traced on simulated CUDA in the real worker:
every labelled line is reported with exactly its codes and severities, and nothing else is."""

from __future__ import annotations

from pathlib import Path

import pytest

from atenlens.worker.client import TraceWorker
from gpu_helpers import Finding, case_functions, corpus_files, cuda_request, labelled_findings, reported_findings

HAZARD_CODES = {
    "AL100",
    "AL101",
    "AL200",
    "AL201",
    "AL500",
    "AL501",
    "AL502",
    "AL503",
    "AL510",
    "AL511",
    "AL512",
    "AL514",
    "AL515",
    "AL516",
    "AL517",
    "AL600",
    "AL602",
}


SUMMARY_CODES = {"AL601", "AL513"}


def _trace_file(worker: TraceWorker, path: Path) -> set[Finding]:
    found: set[Finding] = set()
    for qualname in case_functions(path):
        report = worker.trace(cuda_request(path, qualname))
        assert (report.status, report.device) == ("ok", "cuda"), f"{path.name}::{qualname}: {report.message}"
        assert report.notes == ()
        # AL601 and AL513 summarise each compiled callable and each CUDA graph capture; they are not
        # hazards (test_compile.py and test_gpu_capture.py assert them exactly)
        found |= {f for f in reported_findings(report, path) if f.code not in SUMMARY_CODES}
    return found


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_every_labelled_site_is_found_and_nothing_else(worker, path):
    expected = labelled_findings(path)
    if path.name.startswith("clean_"):
        assert expected == set(), "clean files carry no labels"
    else:
        assert expected, "a hazard file without labels tests nothing"
    found = _trace_file(worker, path)
    assert sorted(expected - found) == [], "labelled but not reported"
    assert sorted(found - expected) == [], "reported but not labelled"


def test_the_corpus_covers_every_hazard_code_inside_and_outside_loops():
    labels = {(path.name, f) for path in corpus_files() for f in labelled_findings(path)}
    assert {f.code for _, f in labels} == HAZARD_CODES
    sources = {path.name: path.read_text().splitlines() for path in corpus_files()}

    def in_loop(name: str, line: int) -> bool:
        """A `for`/`while` header above the line, at a smaller indent, inside the same function."""
        lines = sources[name]
        indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
        for text in reversed(lines[: line - 1]):
            stripped = text.lstrip()
            depth = len(text) - len(stripped)
            if stripped and depth < indent:
                if stripped.startswith(("for ", "while ")):
                    return True
                if stripped.startswith("def "):
                    return False
                indent = depth
        return False

    for code in HAZARD_CODES:
        where = {in_loop(name, f.line) for name, f in labels if f.code == code}
        assert where == {True, False}, f"{code} needs cases inside and outside loops"
