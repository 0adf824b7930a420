"""What a trace report says a function does, in the quantities a budget or a baseline names,
each with the lines responsible (so a failure points at the `.item()`, not at the function)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from atenlens.check.units import format_seconds
from atenlens.report import TraceReport

SYNC_CODES = ("AL100", "AL101")
PAGEABLE_COPY = "AL200"
UNSYNCED_READ = "AL201"
NOTE_SEVERITIES = ("information", "hint")  # the trace's notes (assumptions), not problems


@dataclass(frozen=True)
class Site:
    """A line responsible for (part of) a measured quantity."""

    file: Optional[str]
    line: Optional[int]
    column: int
    message: str
    count: int = 1
    code: str = ""  # the diagnostic's code, when the line is one


@dataclass(frozen=True)
class Measurement:
    syncs: int
    codes: dict[str, int]  # diagnostic code -> times it happened (notes left out)
    peak_bytes: Optional[int]  # None: no memory forecast (a cpu trace)
    step_seconds: Optional[float]
    flops: int
    collective_bytes: int
    gpu: Optional[str]
    sites: dict[str, tuple[Site, ...]] = field(default_factory=dict)  # code, or "peak", "collectives"

    def count(self, code: str) -> int:
        return self.codes.get(code, 0)


def measure(report: TraceReport) -> Measurement:
    codes: Counter[str] = Counter()
    sites: dict[str, list[Site]] = {}
    for d in report.diagnostics:
        if d.severity in NOTE_SEVERITIES:
            continue
        codes[d.code] += d.count
        sites.setdefault(d.code, []).append(Site(d.file, d.line, d.column or 0, d.message, d.count, d.code))
    summary = report.summary
    memory, time = summary.memory, summary.time
    if memory is not None and memory.peak_line is not None:
        sites["peak"] = [Site(memory.peak_file, memory.peak_line, 0, "the peak of device memory is reached here")]
    by_line: dict[tuple[str, int], float] = {}
    for event in report.events:
        if event.estimate_seconds and event.file is not None and event.line is not None:
            by_line[(event.file, event.line)] = by_line.get((event.file, event.line), 0.0) + event.estimate_seconds
    if by_line:
        (file, line), seconds = max(by_line.items(), key=lambda item: (item[1], item[0]))
        sites["time"] = [Site(file, line, 0, f"the line with the most estimated time ({format_seconds(seconds)})")]
    collective_bytes = 0
    for event in report.events:
        if event.kind == "collective":
            collective_bytes += event.bytes
            sites.setdefault("collectives", []).append(
                Site(event.file, event.line, 0, f"{event.name}: {event.bytes} bytes per rank")
            )
    return Measurement(
        syncs=summary.syncs,
        codes=dict(sorted(codes.items())),
        peak_bytes=memory.peak_bytes if memory is not None else None,
        step_seconds=time.step_seconds if time is not None else None,
        flops=summary.flops,
        collective_bytes=collective_bytes,
        gpu=time.gpu if time is not None else None,
        sites={key: tuple(value) for key, value in sites.items()},
    )
