"""torch.compile graph breaks (AL600) and CUDA graph capture errors (AL510) in the editor: through the
real server, the real worker and the real engine, as VS Code and as Neovim see them."""

from __future__ import annotations

import pathlib
import shutil

from lsprotocol import types

from atenlens.lsp.convert import DIAGNOSTICS_URL as DOCS
from lsp_helpers import execute, initialize, open_document, wait_for_diagnostics
from source_lines import lsp_line

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus" / "gpu"


async def _traced(client, tmp_path, name: str, qualname: str) -> tuple[str, list[types.Diagnostic]]:
    await initialize(client)
    path = tmp_path / name
    shutil.copy(CORPUS / name, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    published = len(client.recorder.published)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": qualname})
    assert outcome["status"] == "ok", outcome
    return text, await wait_for_diagnostics(client, uri, 1, after=published)


async def test_graph_breaks_are_warnings_at_their_lines_linked_to_their_docs(client, tmp_path):
    text, diagnostics = await _traced(
        client, tmp_path, "compile_breaks.py", "case_item_and_branch_in_a_compiled_function"
    )
    breaks = [d for d in diagnostics if d.code == "AL600"]
    assert [(d.range.start.line, d.severity) for d in breaks] == [
        (lsp_line(text, "if y.sum() > 0:"), types.DiagnosticSeverity.Warning),
        (lsp_line(text, "return y * y.mean().item()"), types.DiagnosticSeverity.Warning),
    ]
    assert breaks[1].message.startswith("torch.compile graph break (GB0124): Unsupported Tensor.item() call")
    assert {d.code_description.href for d in breaks} == {f"{DOCS}#al600--graph-break"}
    summary = [d for d in diagnostics if d.code == "AL601"]
    assert [(d.range.start.line, d.severity) for d in summary] == [
        (lsp_line(text, "@torch.compile"), types.DiagnosticSeverity.Information)
    ]


async def test_a_sync_inside_a_capture_is_an_error_in_the_editor(client, tmp_path):
    text, diagnostics = await _traced(client, tmp_path, "capture_graphs.py", "case_item_inside_the_capture")
    item = lsp_line(text, "scale = static_y.abs().max().item()")
    # the trace's own findings: the sync is an error there, not an AL100 (the lint still reports the
    # other case's `if h.isnan().any():`, which this trace did not run)
    assert [
        (d.range.start.line, d.code, d.severity)
        for d in diagnostics
        if d.source == "atenlens trace" and d.code in ("AL510", "AL100")
    ] == [(item, "AL510", types.DiagnosticSeverity.Error)]
    assert [d.code for d in diagnostics if d.range.start.line == item] == ["AL510"]
    (summary,) = [d for d in diagnostics if d.code == "AL513"]
    assert summary.message.endswith(f"not capturable as written: a sync at line {item + 1} (AL510)")
