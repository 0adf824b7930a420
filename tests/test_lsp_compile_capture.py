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


ON_REQUEST = pathlib.Path(__file__).resolve().parent / "fixtures" / "compile" / "on_request.py"


async def _trace_in(client, uri: str, qualname: str, lines: range) -> list[tuple[int, str, object]]:
    """The trace's diagnostics within `lines` (the document keeps those of the functions traced before): the
    server publishes them before it answers the command (a lint run a settings change started may publish
    in between, so the last publication counts)."""
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": qualname})
    assert outcome["status"] == "ok", outcome
    diagnostics = [p for p in client.recorder.published if p.uri == uri][-1].diagnostics
    return sorted(
        (d.range.start.line, d.code, d.severity)
        for d in diagnostics
        if d.source == "atenlens trace" and d.range.start.line in lines
    )


async def test_the_compile_setting_and_the_directive_report_graph_breaks_in_the_editor(client, tmp_path):
    """atenlens.trace.compile runs every trace as torch.compile would; `compile` at the end of a directive
    does it for that function alone."""
    await initialize(client)
    path = tmp_path / "on_request.py"
    shutil.copy(ON_REQUEST, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    warning, information = types.DiagnosticSeverity.Warning, types.DiagnosticSeverity.Information
    branch, step_def = lsp_line(text, "if y.sum() > 0:"), lsp_line(text, "def step(model, x):")
    step_lines = range(step_def - 1, lsp_line(text, "# atenlens: already_compiled(*setup())"))
    assert [(line, code) for line, code, _ in await _trace_in(client, uri, "step", step_lines)] == [(branch, "AL100")]

    directive_branch = lsp_line(text, "if y.mean() > 0:")
    directive_def = lsp_line(text, "def step_by_directive(model, x):")
    directive_lines = range(directive_def - 1, len(text.splitlines()))
    assert await _trace_in(client, uri, "step_by_directive", directive_lines) == [
        (directive_def, "AL601", information),
        (directive_branch, "AL100", warning),
        (directive_branch, "AL600", warning),
    ]

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"trace": {"compile": True}}})
    )
    assert await _trace_in(client, uri, "step", step_lines) == [
        (step_def, "AL601", information),
        (branch, "AL100", warning),
        (branch, "AL600", warning),
    ]


async def test_a_rebound_static_input_and_a_kept_static_output_are_warnings_at_their_replays(client, tmp_path):
    await initialize(client)
    path = tmp_path / "capture_graphs.py"
    shutil.copy(CORPUS / "capture_graphs.py", path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    lines = text.splitlines()

    def replay_in(function: str) -> int:
        """The 0-based line of the first `g.replay()` after `def function`."""
        start = lsp_line(text, f"def {function}(")
        return next(i for i in range(start, len(lines)) if lines[i].strip().startswith("g.replay()"))

    for qualname, code, anchor, message in (
        (
            "case_each_batch_bound_to_the_static_input_name",
            "AL516",
            "al516--static-input-rebound-kind-capture",
            "`static_x` is bound to a new tensor f32[8, 32] since the CUDA graph captured at line {line} read the "
            "one it held, and nothing was written into that one before this replay: the graph reads the address it "
            "captured, so the new data is never seen, with no error; copy into the captured tensor instead: "
            "`static_x.copy_(new_data)`",
        ),
        (
            "case_static_outputs_appended_in_a_replay_loop",
            "AL517",
            "al517--static-output-kept-across-a-replay-kind-capture",
            "`outs` (a list) keeps a reference to a static output of the CUDA graph captured at line {line}, and "
            "this replay overwrites that output in place before anything read it: every reference kept shows the "
            "last replay's values, with no error; keep a copy instead: `static_y.clone()`",
        ),
    ):
        outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": qualname})
        assert outcome["status"] == "ok", outcome
        published = [p for p in client.recorder.published if p.uri == uri][-1].diagnostics
        (found,) = [d for d in published if d.code == code]
        replay = replay_in(qualname)
        begin = next(i for i in range(replay, 0, -1) if "with torch.cuda.graph(g):" in lines[i])
        if code == "AL517":  # captured by the helper `captured()`
            begin = lsp_line(text, "def captured(model, static_x):") + 4
        assert (found.range.start.line, found.severity, found.source) == (
            replay,
            types.DiagnosticSeverity.Warning,
            "atenlens trace",
        )
        assert found.message == message.format(line=begin + 1)
        assert found.code_description.href == f"{DOCS}#{anchor}"
