"""The log line of every trace the server runs (from a lens, the command, or on save) and the lens of a
trace in flight. Protocol-free: the server sends the line with `window/logMessage` at `severity`.

A trace that failed (its function raised, it timed out, its worker gave no report) is logged as an
error, one that needs inputs as a warning, the rest (done, cancelled) as information, so that an
editor's log level filter (Neovim's `:LspLog`, VS Code's output channel) shows the failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

SEVERITY = {"ok": "info", "cancelled": "info", "closed": "info", "needs-inputs": "warning"}  # else "error"


@dataclass(frozen=True)
class LogLine:
    severity: str  # "error" | "warning" | "info"
    message: str


def trace_log_line(result: dict[str, Any], trigger: str, seconds: float) -> LogLine:
    """`result` is what the trace command answers ({"status", "qualname", "message", "summary"?})."""
    status, qualname = result["status"], result["qualname"]
    head = f"atenlens: trace of {qualname} ({trigger})"
    if status == "ok":
        text = f"{head} done in {seconds:.1f} s: {result.get('summary', '')}"
    elif status in ("cancelled", "closed"):
        text = f"{head} stopped after {seconds:.1f} s: {result.get('message') or status}"
    else:
        text = f"{head} {status} after {seconds:.1f} s: {result.get('message') or result.get('summary', '')}"
    return LogLine(SEVERITY.get(status, "error"), text)


def running_title(started: Optional[float], now: float) -> str:
    """The lens of a trace in flight: `tracing… 3.1 s`, or `waiting to trace…` behind another trace."""
    if started is None:
        return "waiting to trace…"
    return f"tracing… {now - started:.1f} s"
