"""The `atenlens.exportMemoryTimeline` command: the memory timeline of a function's last trace, written
as a Chrome trace-event file (the CLI's `--memory-timeline`), which https://ui.perfetto.dev and
chrome://tracing open: one slice per op at its estimated time and a "device memory" counter.

Arguments: `[{"uri", "qualname" | "position", "path"?}]`. `path`: where to write (the VS Code command
asks with a save dialog); without it, `atenlens-<file>-<function>-memory.json` in the system's temporary
folder. Nothing is traced: a function not traced yet (or traced without the cost forecast) gets a
message saying so, and a file that cannot be written gets the operating system's reason."""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from lsprotocol import types

CMD_EXPORT_MEMORY_TIMELINE = "atenlens.exportMemoryTimeline"
VIEWERS = "open it in https://ui.perfetto.dev or chrome://tracing"


def default_path(file: str, qualname: str) -> str:
    stem = os.path.splitext(os.path.basename(file))[0]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"atenlens-{stem}-{qualname}-memory.json")
    return os.path.join(tempfile.gettempdir(), name)


async def export_memory_timeline(ls: Any, *arguments: Any) -> dict[str, Any]:
    document, info = ls.resolve_target(list(arguments))
    target = arguments[0] if arguments else None
    state = ls.documents.get(document.uri)
    traced = state.traces.functions.get(info.qualname) if state is not None else None
    if traced is None or traced.report.status != "ok":
        return _refuse(
            ls,
            info.qualname,
            f"{info.qualname} has no completed trace yet: trace it first "
            "(its code lens, or atenlens: Trace the function at the cursor)",
        )
    report = traced.report
    if report.summary.memory is None:
        return _refuse(ls, info.qualname, f"the last trace of {info.qualname} has no memory forecast")
    path = target.get("path") if isinstance(target, dict) else None
    if path is not None and (not isinstance(path, str) or not os.path.isabs(path)):
        return _refuse(ls, info.qualname, f"path must be an absolute file path, not {path!r}")
    path = path or default_path(document.path, info.qualname)
    from atenlens.plot import chrome_trace  # on first use: start-up does not need it

    data = chrome_trace(report)
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
    except OSError as error:
        return _refuse(ls, info.qualname, f"could not write {path}: {error.strerror or error}")
    ls.show(f"atenlens: the memory timeline of {info.qualname} is in {path}; {VIEWERS}")
    return {
        "written": True,
        "qualname": info.qualname,
        "path": path,
        "events": sum(1 for e in data["traceEvents"] if e["ph"] != "M"),
        "peak_bytes": report.summary.memory.peak_bytes,
    }


def _refuse(ls: Any, qualname: str, message: str) -> dict[str, Any]:
    ls.show(f"atenlens: {message}", types.MessageType.Warning)
    return {"written": False, "qualname": qualname, "message": message}
