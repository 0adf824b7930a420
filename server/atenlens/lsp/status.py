"""What an editor's status bar says about one file, and which Python and torch the server runs with.

`atenlens/fileStatus` is a notification the server sends after each publication of a file's diagnostics,
to clients that ask for it with `capabilities.experimental.atenlensFileStatus = true` (the VS Code
extension does; others never see it). Its params:

    {"uri", "version", "problems": N,                  # published diagnostics but hints (what Problems lists)
     "traces": [{"qualname", "status", "summary", "brief", "stale"}, ...]}   # the file's traces, latest last

(`summary` is the summary lens's text; `brief` its counts alone, short enough for a status bar.)

The status bar then follows the active file (traced, N problems, not traced, stale) without asking.

`interpreter_facts` answers, for `atenlens/serverInfo`, which Python runs the server (and the trace
worker, which the server starts with the same interpreter) and whether torch is there, without
importing torch: the server never does (DESIGN.md).
"""

from __future__ import annotations

import importlib.machinery
import platform
import sys
from typing import Any, Optional, Sequence

from lsprotocol import types

from atenlens.lsp.document_traces import DocumentTraces, TracedFunction
from atenlens.lsp.labels import summary_label

FILE_STATUS = "atenlens/fileStatus"
FILE_STATUS_CAPABILITY = "atenlensFileStatus"


def wants_file_status(capabilities: Optional[types.ClientCapabilities]) -> bool:
    experimental = getattr(capabilities, "experimental", None)
    return isinstance(experimental, dict) and experimental.get(FILE_STATUS_CAPABILITY) is True


def file_status(
    uri: str, version: Optional[int], traces: DocumentTraces, diagnostics: Sequence[types.Diagnostic]
) -> dict[str, Any]:
    problems = sum(1 for d in diagnostics if d.severity != types.DiagnosticSeverity.Hint)
    return {
        "uri": uri,
        "version": version,
        "problems": problems,
        "traces": [
            {
                "qualname": traced.qualname,
                "status": traced.report.status,
                "summary": traced.summary,
                "brief": brief(traced),
                "stale": traced.stale,
            }
            for traced in traces.summaries()
        ],
    }


def brief(traced: TracedFunction) -> str:
    """`fwd 9 · bwd 24 · opt 1 · 0 syncs · 22.5 kFLOP`, or `trace error` / `trace timeout` for a trace that did not finish."""
    return summary_label(traced.report.summary) if traced.report.status == "ok" else f"trace {traced.report.status}"


def torch_facts(path: Optional[list[str]] = None) -> Optional[dict[str, str]]:
    """Where torch would be imported from on `path` (default sys.path) and its version, or None when
    there is none. Finds the package and reads its metadata; imports nothing."""
    from importlib import metadata  # on the first ask (it imports email, zipfile, csv: not needed to start)

    spec = importlib.machinery.PathFinder.find_spec("torch", path)
    if spec is None:
        return None
    found = next(iter(metadata.distributions(name="torch", path=path if path is not None else sys.path)), None)
    location = list(spec.submodule_search_locations or [])
    return {
        "version": found.version if found is not None else "unknown",
        "location": location[0] if location else (spec.origin or ""),
    }


def interpreter_facts() -> dict[str, Any]:
    return {"python": {"executable": sys.executable, "version": platform.python_version()}, "torch": torch_facts()}
