"""The cost forecast in the editor through the real server, worker and engine, as VS Code and as Neovim:
the hints.time / hints.memory settings and the atenlens.exportMemoryTimeline command (docs/lsp.md)."""

from __future__ import annotations

import json
import pathlib
import shutil

from lsprotocol import types

from lsp_helpers import execute, initialize, inlay_hints, open_document
from source_lines import lsp_line

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "train_step.py"


async def test_cost_hints_and_the_memory_timeline_export(client, tmp_path):
    await initialize(client)
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    lines = text.split("\n")
    fc1, step_line = lsp_line(text, "h = F.relu(self.fc1(x))"), lsp_line(text, "opt.step()")

    # nothing traced yet: the command says so and writes nothing
    out = tmp_path / "timeline.json"
    refused = await execute(
        client, "atenlens.exportMemoryTimeline", {"uri": uri, "qualname": "train_step", "path": str(out)}
    )
    message = (
        "train_step has no completed trace yet: trace it first (its code lens, or atenlens: Trace the "
        "function at the cursor)"
    )
    assert refused == {"written": False, "qualname": "train_step", "message": message}
    assert not out.exists()
    assert [m.message for m in client.messages if m.type == types.MessageType.Warning] == [f"atenlens: {message}"]

    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"})
    assert outcome["status"] == "ok", outcome
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(lines))}
    assert hints[fc1] == "addmm, relu f32[8, 32] · ∇ threshold_backward, mm, sum"  # cost hints off by default

    # on: the line's estimated time and share (5 kernels at the 4 µs launch floor, of the 60 µs step)
    # and what its ops allocated; the ops make room within hints.maxLength
    refreshes = client.recorder.refreshes.count("inlayHint")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"atenlens": {"hints": {"time": True, "memory": True, "maxLength": 100}}}
        )
    )
    await client.recorder.until(lambda: client.recorder.refreshes.count("inlayHint") > refreshes)
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(lines))}
    assert hints[fc1] == "addmm, relu f32[8, 32] · ∇ threshold_backward, mm, sum · ~20 µs 33% · alloc 5.5 KiB"
    assert hints[step_line] == "opt _foreach_add_ · ~4 µs 7%"  # updates in place: allocates nothing
    refreshes = client.recorder.refreshes.count("inlayHint")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"hints": {"time": True, "memory": False}}})
    )
    await client.recorder.until(lambda: client.recorder.refreshes.count("inlayHint") > refreshes)
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(lines))}
    assert hints[fc1] == "addmm +1 f32[8, 32] · ∇ threshold_backward +2 · ~20 µs 33%"  # within 60 characters

    # the export: a Chrome trace-event file of the last trace, one slice per kernel and the memory counter
    written = await execute(
        client, "atenlens.exportMemoryTimeline", {"uri": uri, "qualname": "train_step", "path": str(out)}
    )
    assert written == {
        "written": True,
        "qualname": "train_step",
        "path": str(out),
        "events": written["events"],
        "peak_bytes": 10752,
    }
    data = json.loads(out.read_text())
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    counters = [e["args"]["live bytes"] for e in data["traceEvents"] if e["ph"] == "C"]
    assert len(slices) == 15 and {s["dur"] for s in slices} == {4.0}  # 15 kernels of 4 µs: 60 µs
    assert written["events"] == len(slices) + len(counters) and max(counters) == 10752
    assert (slices[0]["name"], slices[0]["ts"], slices[0]["args"]["line"]) == (
        "aten.addmm.default",
        0.0,
        f"{path}:{fc1 + 1}",
    )  # MLP.forward's first GEMM
    assert (
        f"atenlens: the memory timeline of train_step is in {out}; open it in https://ui.perfetto.dev or "
        "chrome://tracing" in [m.message for m in client.messages]
    )

    # a relative path is refused by name; no file appears
    bad = await execute(
        client, "atenlens.exportMemoryTimeline", {"uri": uri, "qualname": "train_step", "path": "timeline.json"}
    )
    assert bad["written"] is False and bad["message"] == "path must be an absolute file path, not 'timeline.json'"
