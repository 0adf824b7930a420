"""Shared helpers for the engine tests: write a user file, trace it in-process, query events."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

from atenlens.report import Event, TraceReport, TraceRequest
from atenlens.trace.runner import run_trace

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def trace(
    path: Path, qualname: str, *, call: Optional[str] = None, timeout: float = 60.0, source: Optional[str] = None
) -> TraceReport:
    return run_trace(
        TraceRequest(file=str(path), qualname=qualname, device="cpu", call=call, timeout_seconds=timeout, source=source)
    )


def ops(
    report: TraceReport, *, line: Optional[int] = None, phase: Optional[str] = None, file: Optional[Path] = None
) -> list[Event]:
    return [
        e
        for e in report.events
        if e.kind == "op"
        and (line is None or e.line == line)
        and (phase is None or e.phase == phase)
        and (file is None or e.file == str(file))
    ]


def calls(report: TraceReport, *, line: Optional[int] = None) -> list[Event]:
    return [e for e in report.events if e.kind == "call" and (line is None or e.line == line)]


def names(events: list[Event]) -> list[str]:
    return [e.name for e in events]


def label(event: Event) -> str:
    return ", ".join(f"{o.dtype}{list(o.shape)}" for o in event.outputs)
