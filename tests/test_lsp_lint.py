"""Lint while typing, through the real server process (as VS Code and as Neovim)."""

from __future__ import annotations

from lsprotocol import types

from lsp_helpers import change, encoding_of, initialize, open_document, server_info, simple, units, wait_for_diagnostics

LOOP = """import torch


def train(loader, model, device):
    for x in loader:
        loss = model(x)
        print(loss.item())
"""


async def test_diagnostics_on_open_and_change(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    assert simple(client.diagnostics[uri]) == [(6, 19, 6, 25, "AL100", "atenlens")]

    published = len(client.recorder.published)
    change(client, uri, 2, (6, 0), (6, 0), "        torch.cuda.empty_cache()\n")
    diagnostics = await wait_for_diagnostics(client, uri, 2, after=published)
    assert simple(diagnostics) == [(6, 8, 6, 32, "AL300", "atenlens"), (7, 19, 7, 25, "AL100", "atenlens")]


async def test_only_the_latest_version_is_published(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    published = len(client.recorder.published)
    # Type ", loss" one character at a time: the burst is linted once, at its last version.
    for version, char in enumerate(", loss", start=2):
        column = len("        print(loss.item()") + version - 2
        change(client, uri, version, (6, column), (6, column), char)
    diagnostics = await wait_for_diagnostics(client, uri, 7, after=published)
    assert simple(diagnostics) == [(6, 8, 6, 32, "AL100", "atenlens"), (6, 19, 6, 25, "AL100", "atenlens")]
    versions = [p.version for p in client.recorder.published[published:] if p.uri == uri]
    assert versions == sorted(versions) and versions[-1] == 7
    assert len(versions) < 6


async def test_syntax_error_elsewhere_still_lints_the_rest(client, tmp_path):
    await initialize(client)
    text = "def broken(:\n    y = loss.\n\n" + LOOP
    uri = await open_document(client, tmp_path / "broken.py", text)
    lint = [d for d in client.diagnostics[uri] if d.code == "AL100"]
    assert simple(lint) == [(9, 19, 9, 25, "AL100", "atenlens")]
    # A file that has never parsed has no functions to trace yet, so no code lenses; once it has
    # parsed, its lenses outlive a later syntax error (test_code_lenses_survive_a_half_typed_line).
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert list(lenses) == []


async def test_quick_fix_creates_on_the_device(client, tmp_path):
    result = await initialize(client)
    text = (
        'import torch\n\n\ndef make(device):\n    label = "形状 🚀"\n    return torch.randn(3, 4).to(device), label\n'
    )
    uri = await open_document(client, tmp_path / "move.py", text)
    encoding = encoding_of(result)
    line = text.splitlines()[5]
    start = units(line[: line.index("torch.randn")], encoding)
    end = units(line[: line.index(", label")], encoding)
    assert simple(client.diagnostics[uri]) == [
        (5, units(line[: line.index(".to(") + 1], encoding), 5, end, "AL302", "atenlens")
    ]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=5, character=0), end=types.Position(line=5, character=0)),
            context=types.CodeActionContext(diagnostics=list(client.diagnostics[uri])),
        )
    )
    # as in ruff: the fix and "Disable for this line" titled with the code, and "Fix all"
    assert [(a.title, a.kind) for a in actions] == [
        ("atenlens (AL302): Create the tensor on the device (`device=device`)", types.CodeActionKind.QuickFix),
        ("atenlens (AL302): Disable for this line", types.CodeActionKind.QuickFix),
        ("atenlens: Fix all auto-fixable problems", types.CodeActionKind.SourceFixAll),
    ]
    fix, disable, fix_all = actions
    assert fix.diagnostics[0].code == "AL302"
    (edit,) = fix.edit.changes[uri]
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character) == (
        5,
        start,
        5,
        end,
    )
    assert edit.new_text == "torch.randn(3, 4, device=device)"
    (edit,) = disable.edit.changes[uri]
    assert (edit.range.start.line, edit.range.start.character, edit.new_text) == (
        5,
        units(line, encoding),
        "  # noqa: AL302",
    )
    (edit,) = fix_all.edit.changes[uri]
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line) == (0, 0, 6)
    assert edit.new_text == text.replace("torch.randn(3, 4).to(device)", "torch.randn(3, 4, device=device)")
    # the diagnostic links to its rule's documentation
    assert (
        client.diagnostics[uri][0].code_description.href
        == "https://github.com/atenlens/atenlens/blob/main/docs/rules.md#al302-create-then-move"
    )
    # asked for source.fixAll only (VS Code's "fix all on save"): only that one
    only = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll]),
        )
    )
    assert [a.title for a in only] == ["atenlens: Fix all auto-fixable problems"]

    # "Disable for this line" on a line that already has `# noqa: AL100` adds the code to it
    published = len(client.recorder.published)
    noqa_line = "    return torch.randn(3, 4).to(device), label  # noqa: AL100"
    change(client, uri, 2, (5, 0), (5, len(line)), noqa_line)
    (diagnostic,) = await wait_for_diagnostics(client, uri, 2, after=published)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=5, character=0), end=types.Position(line=5, character=0)),
            context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix]),
        )
    )
    (edit,) = actions[1].edit.changes[uri]
    assert (actions[1].title, edit.range.start.character, edit.new_text) == (
        "atenlens (AL302): Disable for this line",
        units(noqa_line, encoding),
        ", AL302",
    )


async def test_lint_ignore_setting_takes_effect(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    assert [d.code for d in client.diagnostics[uri]] == ["AL100"]
    published = len(client.recorder.published)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"lint": {"ignore": ["AL100"]}}})
    )
    assert await wait_for_diagnostics(client, uri, 1, after=published) == []


async def test_invalid_settings_fall_back_with_one_message(client, tmp_path):
    await initialize(
        client, {"hints": {"maxLength": "wide"}, "trace": {"device": "tpu"}, "lint": {"ignore": ["AL100"]}}
    )
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    assert list(client.diagnostics[uri]) == []  # the valid part of the settings applies
    warnings = [m for m in client.messages if m.type == types.MessageType.Warning]
    assert len(warnings) == 1
    assert "atenlens.hints.maxLength" in warnings[0].message and "atenlens.trace.device" in warnings[0].message


async def test_code_lenses_survive_a_half_typed_line(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "loop.py", LOOP + "\n\ndef later():\n    return 1\n")
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    # `train` needs arguments and is no step (lenses.functions "steps"): no lens; `later` runs as it is
    assert [(lens.range.start.line, lens.command.title) for lens in lenses] == [(9, "Trace this step")]
    # A half-typed call above `later` (the file no longer parses) moves its lens down one line.
    change(client, uri, 2, (8, 0), (8, 0), "x = model(\n")
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [(lens.range.start.line, lens.command.title) for lens in lenses] == [(10, "Trace this step")]


async def lints_started(client, uri: str) -> int:
    """How many lints of `uri` the server has started (`atenlens/serverInfo`)."""
    counts = [entry.count for entry in (await server_info(client))["lintsStarted"] if entry.uri == uri]
    assert len(counts) == 1, counts
    return counts[0]


async def test_a_burst_of_50_changes_is_linted_once_at_its_last_version(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    before = await lints_started(client, uri)
    published = len(client.recorder.published)
    typed = "        t = loss.cpu();  torch.cuda.synchronize()\n"
    assert len(typed) == 50
    # 50 didChange notifications back to back, one character each, as a paste typed out or an
    # editor replaying edits sends them; no wait between them.
    for index, char in enumerate(typed):
        change(client, uri, 2 + index, (6, index), (6, index), char)
    diagnostics = await wait_for_diagnostics(client, uri, 51, after=published)
    assert simple(diagnostics) == [
        (6, 17, 6, 22, "AL100", "atenlens"),
        (6, 25, 6, 49, "AL101", "atenlens"),
        (7, 19, 7, 25, "AL100", "atenlens"),
    ]
    lints = await lints_started(client, uri) - before  # answered after the burst
    versions = [p.version for p in client.recorder.published[published:] if p.uri == uri]
    # The final version's diagnostics once, and nothing of an older version after them; at most
    # one lint besides the final one: a lint that had already started when the burst went on
    # (a lint runs in a thread and cannot be stopped). Stale versions are never linted after it.
    assert versions[-1] == 51 and versions.count(51) == 1 and versions == sorted(versions)
    assert 1 <= lints <= 2, f"{lints} lints for a burst of 50 changes"


TWO = """import torch


def train(loader, model):
    for x in loader:
        loss = model(x)
        print(loss.item())


def evaluate(loader, model, device):
    for x in loader:
        x = x.to(device, non_blocking=True)
        print(model(x).cpu())
"""


async def test_diagnostics_kept_from_the_last_publication_are_those_of_a_fresh_open(client, tmp_path):
    """After edits, the diagnostics of the definitions an edit did not touch come from the last
    publication (their JSON is reused): every field equals that of the same text opened afresh."""
    await initialize(client)
    uri = await open_document(client, tmp_path / "two.py", TWO)
    published = len(client.recorder.published)
    change(client, uri, 2, (6, 0), (6, 0), "        total = loss.sum().item()\n")  # evaluate moves down
    await wait_for_diagnostics(client, uri, 2, after=published)
    published = len(client.recorder.published)
    change(client, uri, 3, (6, 8), (6, 13), "grand")  # only train's text changes; evaluate's stays
    edited = await wait_for_diagnostics(client, uri, 3, after=published)
    final = TWO.replace(
        "        print(loss.item())\n", "        grand = loss.sum().item()\n        print(loss.item())\n"
    )
    fresh_uri = await open_document(client, tmp_path / "fresh.py", final)
    fresh = client.diagnostics[fresh_uri]
    assert simple(edited) == [
        (6, 27, 6, 33, "AL100", "atenlens"),
        (7, 19, 7, 25, "AL100", "atenlens"),
        (13, 23, 13, 28, "AL100", "atenlens"),
    ]
    assert list(edited) == list(fresh)
