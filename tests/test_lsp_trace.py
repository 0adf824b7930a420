"""Tracing from the editor through the real server, the real trace worker and the real engine
(examples/train_step.py on fake tensors), as VS Code and as Neovim."""

from __future__ import annotations

import pathlib
import shutil

from lsprotocol import types

from lsp_helpers import (
    change,
    children_of,
    code_lenses,
    encoding_of,
    execute,
    initialize,
    inlay_hints,
    open_document,
    server_info,
    simple,
    units,
    wait_for_diagnostics,
)
from source_lines import lsp_line
from test_lsp_hover import NEOVIM_ROLLUP

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_step.py"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "lsp"


async def test_trace_train_step(client, tmp_path):
    result = await initialize(client)
    encoding = encoding_of(result)
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    lines = text.split("\n")
    uri = await open_document(client, path, text)

    fwd, loss_line, backward_line, step_line = (
        lsp_line(text, s) for s in ("logits = model(x)", "loss = F.cross_entropy", "loss.backward()", "opt.step()")
    )
    fc1, fc2 = lsp_line(text, "h = F.relu(self.fc1(x))"), lsp_line(text, "return self.fc2(h)")
    defs = {name: lsp_line(text, f"def {name}(") for name in ("__init__", "forward", "setup", "train_step", "train")}

    assert await code_lenses(client, uri) == [  # not on MLP.__init__ (lenses.functions "steps")
        (defs["forward"], "Add an example call to trace", "atenlens.insertDirective"),
        (defs["setup"], "Trace this step", "atenlens.trace"),
        (defs["train_step"], "Trace this step", "atenlens.trace"),
        (defs["train"], "Trace this step", "atenlens.trace"),
    ]
    assert await inlay_hints(client, uri, len(lines)) == []

    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"})
    assert outcome["status"] == "ok", outcome
    expected_refreshes = {"inlayHint", "codeLens"} if client.editor == "visual-studio-code" else {"inlayHint"}
    assert set(client.recorder.refreshes) == expected_refreshes

    at_end = lambda line: units(lines[line], encoding)  # noqa: E731
    # bookkeeping ops (t, view, detach: no memory, no compute) are not named (hints.showBookkeeping)
    expected = [
        (fc1, "addmm, relu f32[8, 32] · ∇ threshold_backward, mm, sum"),
        (fc2, "addmm f32[8, 4] · ∇ mm×2, sum"),
        (fwd, "6 ops -> f32[8, 4] · ∇ 16 ops"),  # calls into MLP.forward: a roll-up; -> what MLP returned
        (loss_line, "_log_softmax +1 f32[] · ∇ nll_loss_backward +1"),
        (backward_line, "∇ ones_like"),
        (step_line, "opt _foreach_add_"),
    ]
    assert await inlay_hints(client, uri, len(lines)) == [(line, at_end(line), label) for line, label in expected]

    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=fc1, character=8)
        )
    )
    markdown = hover.contents.value
    assert "**API calls:** `torch.nn.functional.linear`, `torch.nn.functional.relu`" in markdown
    if (
        client.editor == "visual-studio-code"
    ):  # its markdown draws tables; Neovim gets aligned columns (test_lsp_hover.py)
        assert "| `addmm` | f32[32] cuda:0, f32[8, 16] cuda:0, f32[16, 32] cuda:0 | f32[8, 32] cuda:0 |" in markdown
        assert (
            "| `threshold_backward` | `ReluBackward0` | f32[8, 32] cuda:0, f32[8, 32] cuda:0 | f32[8, 32] cuda:0 |"
            in markdown
        )
    else:
        assert "\naddmm  f32[32] cuda:0, f32[8, 16] cuda:0, f32[16, 32] cuda:0  f32[8, 32] cuda:0\n" in markdown
        assert (
            "\nthreshold_backward  ReluBackward0   f32[8, 32] cuda:0, f32[8, 32] cuda:0  f32[8, 32] cuda:0\n"
            in markdown
        )
    assert "**FLOPs:** 16.4 kFLOP" in markdown
    # the cost section: estimates on the selected GPU (atenlens.trace.gpu, default H100 SXM; docs/cost.md)
    assert (
        "**Cost** (estimate)\n- time: ~20 µs, 33.3% of the step (forward 8 µs, backward 12 µs)\n"
        "- memory: allocates 5.5 KiB; 3.5 KiB still held when the line is done (gradients 2.5 KiB, "
        "saved by ReluBackward0 1 KiB)"
    ) in markdown
    assert (hover.range.start.line, hover.range.end.line, hover.range.end.character) == (fc1, fc1, at_end(fc1))

    lenses = await code_lenses(client, uri)
    summary = (
        defs["train_step"],
        "fwd 9 · bwd 24 · opt 1 · 0 syncs · 22.5 kFLOP · "
        f"peak 10.5 KiB @ line {fc1 + 1} (backward) · ~60 µs/step on H100 SXM",
        "",
    )
    assert summary in lenses

    # Tracing the loop confirms the sync the lint finds: one diagnostic, the trace's message (its
    # count) at the lint's columns (`item()`), under the trace's source.
    item = lsp_line(text, "total += loss.item()")
    (lint_item,) = client.diagnostics[uri]
    assert (lint_item.range.start.line, lint_item.code, lint_item.source) == (item, "AL100", "atenlens")
    published = len(client.recorder.published)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train"})
    assert outcome["status"] == "ok", outcome
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    item_column = units(lines[item][: lines[item].index("item()")], encoding)
    assert [(d.range.start.line, d.code, d.source) for d in diagnostics] == [(item, "AL100", "atenlens trace")]
    (traced,) = diagnostics
    assert (traced.range.start.character, traced.range.end.character) == (item_column, item_column + len("item()"))
    assert traced.message.endswith("(×3 in this trace)")
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=item, character=8)
        )
    )
    if client.editor == "visual-studio-code":
        assert "| `_local_scalar_dense` ×3 | f32[] cuda:0 | — |" in hover.contents.value
        assert "**Diagnostics**\n\n- `AL100` `.item()` copies a value of cuda f32[] to the host" in hover.contents.value
    else:
        assert "\n_local_scalar_dense ×3  f32[] cuda:0  —\n" in hover.contents.value
        assert (
            "**Diagnostics**\n\n- `AL100` `.item()` copies a value of cuda `f32[]` to the host" in hover.contents.value
        )

    # The latest trace (three steps of the loop) now speaks for the lines it covers.
    call = lsp_line(text, "loss = train_step(model, opt, x, y)")
    latest = [(line, label) for line, _, label in await inlay_hints(client, uri, len(lines))]
    assert [line for line, _ in latest] == [fc1, fc2, fwd, loss_line, backward_line, step_line, call, item]
    # what a plain function call returned is not recorded: no `->` rather than the last op's output
    assert dict(latest)[call] == "30 ops · ∇ 72 ops"
    assert dict(latest)[item] == "_local_scalar_dense×3 · sync×3"  # the host waits here, 3 times

    # Edits: a line inserted above the class moves every hint down by one; editing the loss line
    # removes its hint and makes the traces that ran it stale; editing `train` withdraws its trace
    # diagnostics, and the lint's finding is shown again.
    published = len(client.recorder.published)
    change(client, uri, 2, (0, 0), (0, 0), "# a new first line\n")
    lines.insert(0, "# a new first line")
    moved = [(line + 1, label) for line, label in latest]
    assert await inlay_hints(client, uri, len(lines)) == [(line, at_end(line), label) for line, label in moved]
    change(client, uri, 3, (loss_line + 1, 4), (loss_line + 1, 8), "loss2")
    lines[loss_line + 1] = lines[loss_line + 1].replace("loss", "loss2", 1)
    # both traces ran that line: their other hints stay, marked as about the earlier text
    assert await inlay_hints(client, uri, len(lines)) == [
        (line, at_end(line), label + " (stale)") for line, label in moved if line != loss_line + 1
    ]
    change(client, uri, 4, (item + 1, 0), (item + 1, 0), "        pass\n")
    diagnostics = await wait_for_diagnostics(client, uri, 4, after=published)
    assert [(d.range.start.line, d.code, d.source) for d in diagnostics] == [(item + 2, "AL100", "atenlens")]

    info = await server_info(client)
    assert info["torchImported"] is False
    assert info["workerStarts"] == 1
    assert info["positionEncoding"] == encoding


async def test_hint_sits_at_the_end_of_a_line_with_wide_characters(client, tmp_path):
    result = await initialize(client, {"trace": {"onSave": True}})
    encoding = encoding_of(result)
    path = tmp_path / "unicode_step.py"
    shutil.copy(FIXTURES / "unicode_step.py", path)
    text = path.read_text()
    lines = text.split("\n")
    uri = await open_document(client, path, text)
    outcome = await execute(
        client, "atenlens.trace", {"uri": uri, "position": {"line": lsp_line(text, "return h"), "character": 4}}
    )
    assert outcome["status"] == "ok", outcome
    linear, relu = lsp_line(text, "形状 🚀"), lsp_line(text, "return h.relu()")
    # 形 and 状 are one UTF-16 unit and three UTF-8 bytes each, 🚀 is two UTF-16 units (a surrogate pair)
    assert units(lines[linear], encoding) == {"utf-8": 44, "utf-16": 38, "utf-32": 37}[encoding]
    assert await inlay_hints(client, uri, len(lines)) == [
        (linear, units(lines[linear], encoding), "mm f32[8, 32]"),
        (relu, units(lines[relu], encoding), "relu f32[8, 32]"),
    ]

    # Editing the last line drops its hint and marks the others stale; saving traces the function
    # again (trace.onSave).
    change(client, uri, 2, (relu, 13), (relu, 17), "sigmoid")
    lines[relu] = lines[relu].replace("relu", "sigmoid")
    assert await inlay_hints(client, uri, len(lines)) == [
        (linear, units(lines[linear], encoding), "mm f32[8, 32] (stale)")
    ]
    refreshes = client.recorder.refreshes.count("inlayHint")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.recorder.until(lambda: client.recorder.refreshes.count("inlayHint") > refreshes)
    assert await inlay_hints(client, uri, len(lines)) == [
        (linear, units(lines[linear], encoding), "mm f32[8, 32]"),
        (relu, units(lines[relu], encoding), "sigmoid f32[8, 32]"),
    ]

    # Bookkeeping shown on request; a narrower hints.maxLength cuts view-like ops first and counts them.
    refreshes = client.recorder.refreshes.count("inlayHint")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"atenlens": {"hints": {"maxLength": 12, "showBookkeeping": True}, "trace": {"onSave": True}}}
        )
    )
    await client.recorder.until(lambda: client.recorder.refreshes.count("inlayHint") > refreshes)
    assert [label for _, _, label in await inlay_hints(client, uri, len(lines))] == [
        "mm +1 f32[8, 32]",
        "sigmoid f32[8, 32]",
    ]


async def progress_begun(client, title: str) -> str:
    """Wait until the server begins a work-done progress with `title` that no earlier call
    returned; its token."""
    seen = client.__dict__.setdefault("seen_progress", set())

    def begun():
        for token, reports in client.progress_reports.items():
            if (
                token not in seen
                and reports
                and isinstance(reports[0], types.WorkDoneProgressBegin)
                and reports[0].title == title
            ):
                return token
        return None

    token = await client.recorder.until(begun)
    seen.add(token)
    return token


async def test_progress_cancel_edit_and_supersede(client, tmp_path):
    import asyncio

    await initialize(client, {"trace": {"timeoutSeconds": 120}})
    path = tmp_path / "spin.py"
    shutil.copy(FIXTURES / "spin.py", path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    target = {"uri": uri, "qualname": "spin"}

    # The user cancels the progress: the running trace is killed.
    running = asyncio.ensure_future(execute(client, "atenlens.trace", target))
    token = await progress_begun(client, "atenlens: tracing spin")
    assert client.progress_reports[token][0].cancellable is True
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    assert await running == {"status": "cancelled", "qualname": "spin", "message": "cancelled by the user"}
    assert isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd)

    # A second request for the same function supersedes the first.
    first = asyncio.ensure_future(execute(client, "atenlens.trace", target))
    token = await progress_begun(client, "atenlens: tracing spin")
    second = asyncio.ensure_future(execute(client, "atenlens.trace", target))
    assert await first == {"status": "cancelled", "qualname": "spin", "message": "superseded by a newer request"}

    # Another function waits for its turn (one worker, one trace at a time) ...
    token = await progress_begun(client, "atenlens: tracing spin")
    other = asyncio.ensure_future(execute(client, "atenlens.trace", {"uri": uri, "qualname": "quick"}))
    waiting = await progress_begun(client, "atenlens: tracing quick")
    assert client.progress_reports[waiting][0].message == "waiting for another trace to finish"
    assert not other.done()
    # ... until an edit inside `spin` kills its trace; an edit outside it does not.
    change(client, uri, 2, (0, 12), (0, 12), "  # an edit outside both functions")
    change(client, uri, 3, (lsp_line(text, "x = x + 1"), 8), (lsp_line(text, "x = x + 1"), 9), "y")
    assert await second == {"status": "cancelled", "qualname": "spin", "message": "the function was edited"}
    quick = await other
    assert quick["status"] == "ok" and quick["summary"].startswith("fwd 2 · 0 syncs"), quick
    assert [type(r).__name__ for r in client.progress_reports[waiting]] == [
        "WorkDoneProgressBegin",
        "WorkDoneProgressReport",
        "WorkDoneProgressEnd",
    ]
    assert client.progress_reports[waiting][1].message == "running on fake tensors"

    info = await server_info(client)
    assert info["torchImported"] is False
    assert info["workerStarts"] == 1


async def test_trace_disabled_runs_nothing(client, tmp_path):
    await initialize(client, {"trace": {"enabled": False}})
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    assert await code_lenses(client, uri) == []  # no "Trace this step" where tracing is off
    for argument in ({"uri": uri, "qualname": "train_step"}, {"uri": uri, "position": {"line": 33, "character": 0}}):
        outcome = await execute(client, "atenlens.trace", argument)
        assert outcome["status"] == "disabled"
    warnings = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert len(warnings) == 2 and "tracing is disabled" in warnings[0]
    assert await execute(client, "atenlens.restartWorker") == {"restarted": True}
    info = await server_info(client)
    assert info["workerStarts"] == 0 and info["torchImported"] is False
    assert children_of(info["pid"]) == []  # no worker process, not even an idle one
    # Turning it on again (the workspace became trusted) brings the lenses back.
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"trace": {"enabled": True}}})
    )
    lenses = await code_lenses(client, uri)
    assert (lsp_line(text, "def train_step("), "Trace this step", "atenlens.trace") in lenses


async def test_add_an_example_call(client, tmp_path):
    await initialize(client)
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    forward = lsp_line(text, "def forward(")
    outcome = await execute(client, "atenlens.insertDirective", {"uri": uri, "qualname": "MLP.forward"})
    assert outcome == {"applied": True, "directive": "# atenlens: MLP().forward(x)", "placeholders": ["x"]}
    (applied,) = client.recorder.applied_edits
    (edit,) = applied.edit.changes[uri]
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character) == (
        forward,
        0,
        forward,
        0,
    )
    assert edit.new_text == "    # atenlens: MLP().forward(x)\n"
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=forward, character=8), end=types.Position(line=forward, character=8)
            ),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    titles = [a.title for a in actions]
    assert titles == ["Add an atenlens example call for MLP.forward"]
    in_the_body = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=forward + 1, character=8), end=types.Position(line=forward + 1, character=8)
            ),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert list(in_the_body or []) == []
    assert actions[0].edit.changes[uri][0].new_text == "    # atenlens: MLP().forward(x)\n"


async def test_an_exception_is_a_diagnostic_at_its_line(client, tmp_path):
    result = await initialize(client)
    encoding = encoding_of(result)
    path = tmp_path / "raises.py"
    shutil.copy(FIXTURES / "raises.py", path)
    text = path.read_text()
    lines = text.split("\n")
    uri = await open_document(client, path, text)
    published = len(client.recorder.published)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "boom"})
    message = "RuntimeError: a and b must have same reduction dim, but got [2, 3] X [2, 3]."
    assert outcome == {"status": "error", "qualname": "boom", "summary": f"trace error: {message}", "message": message}
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    matmul = lsp_line(text, "return x @ x")
    assert simple(diagnostics) == [
        (matmul, units(lines[matmul][:11], encoding), matmul, units(lines[matmul], encoding), "AL900", "atenlens trace")
    ]
    assert diagnostics[0].severity == types.DiagnosticSeverity.Error and diagnostics[0].message == message
    # what ran before the exception is still shown
    assert await inlay_hints(client, uri, len(lines)) == [
        (lsp_line(text, "torch.ones"), units(lines[lsp_line(text, "torch.ones")], encoding), "ones f32[2, 3]")
    ]
    assert (lsp_line(text, "def boom"), f"trace error: {message}", "") in await code_lenses(client, uri)


def count_progress_creates(client) -> list:
    """The tokens of the `window/workDoneProgress/create` requests the server sends from now on."""
    features = client.protocol.fm.features
    answer = features[types.WINDOW_WORK_DONE_PROGRESS_CREATE]
    created: list = []

    def create(params: types.WorkDoneProgressCreateParams):
        created.append(params.token)
        return answer(params)

    features[types.WINDOW_WORK_DONE_PROGRESS_CREATE] = create
    return created


def kinds(reports: list) -> list[str]:
    """A progress's kinds in order, reports left out (a trace that waited for the queue reports when it runs)."""
    return [r.kind for r in reports if r.kind != "report"]


async def test_progress_under_the_clients_work_done_token(client, tmp_path):
    import asyncio

    await initialize(client, {"trace": {"timeoutSeconds": 120}})
    created = count_progress_creates(client)
    path = tmp_path / "spin.py"
    shutil.copy(FIXTURES / "spin.py", path)
    uri = await open_document(client, path, path.read_text())

    # The client's token (as VS Code sends with every command): the trace reports under it, no token is created,
    # and cancelling that token kills the trace.
    token = "client-token-7"
    client.progress_reports[token] = []  # a client knows the tokens it hands out
    running = asyncio.ensure_future(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="atenlens.trace", arguments=[{"uri": uri, "qualname": "spin"}], work_done_token=token
            )
        )
    )
    assert await progress_begun(client, "atenlens: tracing spin") == token
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    assert await running == {"status": "cancelled", "qualname": "spin", "message": "cancelled by the user"}
    assert kinds(client.progress_reports[token]) == ["begin", "end"]
    assert client.progress_reports[token][0].cancellable is True
    assert created == []

    # Without one, the server creates its own (both editors declare window.workDoneProgress).
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "quick"})
    assert outcome["status"] == "ok", outcome
    (own,) = created
    assert own != token
    assert kinds(client.progress_reports[own]) == ["begin", "end"]
    assert client.progress_reports[own][0].title == "atenlens: tracing quick"


async def test_trace_notes_in_the_lens_the_hover_and_the_log(client, tmp_path):
    await initialize(client)
    path = tmp_path / "noted.py"
    shutil.copy(FIXTURES / "noted.py", path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "batches"})
    assert outcome["status"] == "ok", outcome
    note = "the generator was traced for its first 100 items"

    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    (summary,) = [lens.command for lens in lenses if lens.command.command == ""]
    assert (summary.title, summary.tooltip) == (outcome["summary"] + " · 1 note", note)

    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=lsp_line(text, "yield x.sum(0)"), character=8),
        )
    )
    assert hover.contents.value.startswith(f"_Note: {note}_\n\n**API calls:** `torch.Tensor.sum`")
    assert [m.message for m in client.log_messages if m.message.startswith("atenlens: trace of batches:")] == [
        f"atenlens: trace of batches: {note}"
    ]

    # A trace without notes keeps the plain summary and no note in its hovers.
    change(client, uri, 2, (0, 0), (0, 0), "def plain():\n    return torch.ones(2)\n\n\n")
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "plain"})
    assert outcome["status"] == "ok", outcome
    assert (0, outcome["summary"], "") in await code_lenses(client, uri)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=1, character=8)
        )
    )
    assert "Note" not in hover.contents.value

    # with no trace lenses wanted (lenses.functions "none"), the traces' summaries stay
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"lenses": {"functions": "none"}}})
    )
    assert [(line, command) for line, _, command in await code_lenses(client, uri)] == [
        (0, ""),
        (lsp_line(text, "def batches") + 4, ""),
    ]


async def test_rollup_hover_and_hint_kinds(client, tmp_path):
    """The hover of a line that calls a model: its module tree, what the call ran (top ops), a link to
    the function it rolls up; each kind of hint switched off on its own (hints.ops/shapes/backward)."""
    await initialize(client)
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    lines = text.split("\n")
    uri = await open_document(client, path, text)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"})
    assert outcome["status"] == "ok", outcome
    fwd, forward_body = lsp_line(text, "logits = model(x)"), lsp_line(text, "h = F.relu(self.fc1(x))")
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=fwd, character=8)
        )
    )
    if client.editor == "neovim":  # no tables there (tests/test_lsp_hover.py)
        assert hover.contents.value == "\n".join(NEOVIM_ROLLUP).replace("{uri}", path.as_uri())
    else:
        assert hover.contents.value == "\n".join(
            [
                "**Modules**",
                "",
                "```",
                "MLP            f32[8, 4]         6 ops  10.2 kFLOP  676 params",
                "  fc1  Linear  f32[8, 32]        2 ops  8.19 kFLOP  544 params",
                "  fc2  Linear  f32[8, 4]         2 ops  2.05 kFLOP  132 params",
                "```",
                "",
                "**Inside calls from this line:** 6 forward, 16 backward aten ops · 22.5 kFLOP",
                "",
                f"in [MLP.forward]({path.as_uri()}#L{forward_body + 1})",
                "",
                "| op | phase | count | FLOPs |",
                "|---|---|---|---|",
                "| `mm` | backward | 3 | 12.3 kFLOP |",
                "| `addmm` | forward | 2 | 10.2 kFLOP |",
                "| `sum` | backward | 2 | — |",
                "| `relu` | forward | 1 | — |",
                "| `threshold_backward` | backward | 1 | — |",
                "",
                "**FLOPs:** 22.5 kFLOP inside calls",
                "",
                "**Cost** (estimate)",
                "- inside calls from this line: ~36 µs, 60.0% of the step",
            ]
        )

    step_line, backward_line = lsp_line(text, "opt.step()"), lsp_line(text, "loss.backward()")
    refreshes = client.recorder.refreshes.count("inlayHint")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"hints": {"shapes": False, "backward": False}}})
    )
    await client.recorder.until(lambda: client.recorder.refreshes.count("inlayHint") > refreshes)
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(lines))}
    assert (hints[forward_body], hints[fwd], hints[step_line]) == ("addmm, relu", "6 ops", "opt _foreach_add_")
    assert backward_line not in hints  # only backward ops ran there
    refreshes = client.recorder.refreshes.count("inlayHint")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"hints": {"ops": False}}})
    )
    await client.recorder.until(lambda: client.recorder.refreshes.count("inlayHint") > refreshes)
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(lines))}
    assert (hints[forward_body], hints[backward_line]) == ("2 ops f32[8, 32] · ∇ 3 ops", "∇ 1 op")


async def test_an_assumed_value_is_an_information_diagnostic_at_the_line_that_read_it(client, tmp_path):
    await initialize(client)
    path = tmp_path / "assumed.py"
    text = (
        'import torch\n\n\ndef step():\n    g = torch.randn(256, 256, device="cuda")\n'
        "    if torch.isnan(g).any():\n        raise FloatingPointError\n    return g * 2\n"
    )
    path.write_text(text)
    uri = await open_document(client, path, text)
    published = len(client.recorder.published)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "step"})
    assert outcome["status"] == "ok", outcome
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    [assumed] = [d for d in diagnostics if d.code == "AL906"]
    assert (assumed.range.start.line, assumed.severity, assumed.source, assumed.message) == (
        lsp_line(text, "torch.isnan(g)"),
        types.DiagnosticSeverity.Information,
        "atenlens trace",
        "value unknown on fake tensors: took `False` for `bool()` / `if tensor:` of b8[] "
        "(values assumed finite (no inf/nan))",
    )
