"""The language server honours `[tool.atenlens]` in pyproject.toml (real server process, real client)."""

from __future__ import annotations

from lsprotocol import types

from lsp_helpers import initialize, open_document, simple, wait_for_diagnostics

LOOP = """import torch


def train(loader, model):
    for x in loader:
        loss = model(x.cuda())
        print(loss.item())
        torch.cuda.empty_cache()
"""


async def test_a_finding_ignored_in_pyproject_is_not_shown_and_a_config_change_applies_on_save(client, tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.atenlens]\nignore = ["AL100"]\n', encoding="utf-8")
    await initialize(client, root=tmp_path)
    uri = await open_document(client, tmp_path / "pkg" / "loop.py", LOOP)
    assert simple(client.diagnostics[uri]) == [(7, 8, 7, 32, "AL300", "atenlens")]
    # The editor saves an edited pyproject.toml: the open documents are linted again under it.
    published = len(client.recorder.published)
    pyproject.write_text('[tool.atenlens]\nselect = ["AL1"]\n', encoding="utf-8")
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=pyproject.as_uri()))
    )
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    assert [d.code for d in diagnostics] == ["AL100"]


async def test_per_file_ignores_exclude_and_the_editor_settings_combine(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.atenlens]\nexclude = ["generated"]\nper-file-ignores = { "tests/*" = ["AL3"] }\n', encoding="utf-8"
    )
    await initialize(client, {"lint": {"ignore": ["AL100"]}}, root=tmp_path)
    excluded = await open_document(client, tmp_path / "generated" / "g.py", LOOP)
    assert list(client.diagnostics[excluded]) == []
    test_file = await open_document(client, tmp_path / "tests" / "test_loop.py", LOOP)
    assert list(client.diagnostics[test_file]) == []  # AL100 by the editor, AL300 by the file
    plain = await open_document(client, tmp_path / "src" / "loop.py", LOOP)
    assert [d.code for d in client.diagnostics[plain]] == ["AL300"]


async def test_a_bad_pyproject_is_reported_once_and_the_editor_settings_still_lint(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.atenlens]\nselect = ["AL999"]\n', encoding="utf-8")
    await initialize(client, root=tmp_path)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    assert [d.code for d in client.diagnostics[uri]] == ["AL100", "AL300"]
    other = await open_document(client, tmp_path / "other.py", LOOP)
    assert [d.code for d in client.diagnostics[other]] == ["AL100", "AL300"]
    warnings = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert warnings == [
        f"atenlens: {tmp_path / 'pyproject.toml'}: [tool.atenlens] select: unknown rule code "
        "'AL999' (known: AL100, AL101, AL200, AL201, AL300, AL301, AL302); linting with the "
        "editor's settings only"
    ]


async def test_a_check_table_and_a_lint_table_apply_in_the_editor_and_default_excludes_hold(client, tmp_path):
    # [tool.atenlens.check] is `atenlens check`'s: once an "unknown key" warning, the file then unused
    (tmp_path / "pyproject.toml").write_text(
        '[tool.atenlens.lint]\nignore = ["AL300"]\n[tool.atenlens.check]\nfunctions = { "t.py::f" = { syncs = 0 } }\n',
        encoding="utf-8",
    )
    await initialize(client, root=tmp_path)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    assert [d.code for d in client.diagnostics[uri]] == ["AL100"]
    # a file opened from the environment (go to definition into a library) is in ruff's default exclude
    library = await open_document(client, tmp_path / ".venv" / "lib" / "site-packages" / "lib.py", LOOP)
    assert list(client.diagnostics[library]) == []
    assert [m.message for m in client.messages if m.type == types.MessageType.Warning] == []


async def test_a_pyproject_changed_on_disk_relints_the_open_documents(client, tmp_path):
    # a `git checkout` rewrites pyproject.toml without the editor saving it: the client's file
    # watcher sends workspace/didChangeWatchedFiles (ruff's server does the same)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.atenlens]\nignore = ["AL100"]\n', encoding="utf-8")
    await initialize(client, root=tmp_path)
    uri = await open_document(client, tmp_path / "loop.py", LOOP)
    assert [d.code for d in client.diagnostics[uri]] == ["AL300"]
    published = len(client.recorder.published)
    pyproject.write_text('[tool.atenlens]\nignore = ["AL300"]\n', encoding="utf-8")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)]
        )
    )
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    assert [d.code for d in diagnostics] == ["AL100"]
