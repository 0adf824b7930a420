"""What the status bar is told about each file (`atenlens/fileStatus`) and which Python and torch the server
runs with (`atenlens/serverInfo`), through the real server, worker and engine, as VS Code (which asks for the
notification) and as Neovim (which does not, and never gets it)."""

from __future__ import annotations

import asyncio
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import (
    SERVER,
    change,
    editor_capabilities,
    execute,
    install_recorder,
    open_document,
    server_info,
    trusted,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_step.py"
TRAIN_BRIEF = "fwd 30 · bwd 72 · opt 3 · 3 syncs · 67.6 kFLOP"
TRAIN_STEP_BRIEF = "fwd 9 · bwd 24 · opt 1 · 0 syncs · 22.5 kFLOP"


def plain(value: Any) -> Any:
    """pygls hands unknown notifications over as namedtuples: back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), params=["visual-studio-code", "neovim"])
async def client(lsp_client: LanguageClient, request):
    lsp_client.editor = request.param
    lsp_client.recorder = install_recorder(lsp_client)
    lsp_client.statuses = []

    @lsp_client.feature("atenlens/fileStatus")
    def file_status(params: Any) -> None:
        lsp_client.statuses.append(plain(params))
        lsp_client.recorder.note()

    capabilities = editor_capabilities(request.param)
    if request.param == "visual-studio-code":
        capabilities.experimental = {"atenlensFileStatus": True}
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=trusted(None))
    )
    yield
    await lsp_client.shutdown_session()


async def status_at(client: LanguageClient, uri: str, version: int, **expected: Any) -> dict[str, Any]:
    """The first status of `uri` at `version` with the `expected` fields."""

    def found() -> Any:
        return next(
            (
                s
                for s in client.statuses
                if s["uri"] == uri and s["version"] == version and all(s[k] == v for k, v in expected.items())
            ),
            None,
        )

    try:
        return await asyncio.wait_for(client.recorder.until(found), 120)
    except TimeoutError:
        raise AssertionError(f"no status {expected} of {uri} at {version}; got {client.statuses[-3:]}") from None


async def test_file_status_follows_lint_trace_and_edits(client, tmp_path):
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    other = tmp_path / "other.py"
    other.write_text("import torch\n\n\ndef f(x):\n    return x * 2\n")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=other.as_uri(), language_id="python", version=1, text=other.read_text()
            )
        )
    )
    if client.editor == "neovim":
        outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train"})
        assert outcome["status"] == "ok", outcome
        assert client.statuses == []  # never sent to a client that did not ask
        return

    # before any trace: the lint's one problem (`.item()` in the loop), nothing traced; the other file clean
    assert await status_at(client, uri, 1) == {"uri": uri, "version": 1, "problems": 1, "traces": []}
    assert await status_at(client, other.as_uri(), 1) == {
        "uri": other.as_uri(),
        "version": 1,
        "problems": 0,
        "traces": [],
    }

    # a trace that runs the `.item()` line confirms the lint finding: still one problem
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train"})
    assert outcome["status"] == "ok", outcome
    traced = await status_at(
        client,
        uri,
        1,
        problems=1,
        traces=[
            {"qualname": "train", "status": "ok", "summary": outcome["summary"], "brief": TRAIN_BRIEF, "stale": False}
        ],
    )
    assert traced["traces"][0]["summary"].startswith(TRAIN_BRIEF + " · "), traced

    # a second trace comes last; an edit inside `train` makes its trace stale, and only its
    item_line = text.split("\n").index("        total += loss.item()")
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"})
    assert outcome["status"] == "ok", outcome
    await status_at(
        client,
        uri,
        1,
        traces=[
            {
                "qualname": "train",
                "status": "ok",
                "summary": traced["traces"][0]["summary"],
                "brief": TRAIN_BRIEF,
                "stale": False,
            },
            {
                "qualname": "train_step",
                "status": "ok",
                "summary": outcome["summary"],
                "brief": TRAIN_STEP_BRIEF,
                "stale": False,
            },
        ],
    )
    end = len(text.split("\n")[item_line])
    # the worker's torch and Python, logged once for the two traces it ran
    import torch  # here, not at the top: the test's own process, not the server's

    worker_lines = [m.message for m in client.log_messages if "the trace worker (pid" in m.message]
    assert len(worker_lines) == 1, worker_lines
    assert worker_lines[0].endswith(
        f") runs torch {torch.__version__} on Python {platform.python_version()} ({sys.executable})"
    ), worker_lines
    change(client, uri, 2, (item_line, end), (item_line, end), "  # edited")
    edited = await status_at(client, uri, 2)
    assert [(t["qualname"], t["stale"]) for t in edited["traces"]] == [("train", True), ("train_step", False)]
    # the edited trace's diagnostics are withdrawn; the lint's finding of the line stays, once
    assert edited["problems"] == 1


async def test_server_info_names_python_and_torch(client):
    info = await server_info(client)
    assert plain(info["python"]) == {"executable": sys.executable, "version": platform.python_version()}
    torch = plain(info["torch"])
    assert torch["version"] == metadata.version("torch")
    assert Path(torch["location"]) == Path(metadata.distribution("torch").locate_file("torch"))
    assert info["torchImported"] is False


# The first diagnostics are published before the server itself is imported (lsp/early.py): what
# they need is the lint (any module of atenlens.lint), its pyproject.toml configuration, the
# editor's settings and the frame reader; not pygls, its protocol types or the event loop (most
# of start-up), nor the hover and its listing renderer, the example-call proposer, the memory
# timeline export, package metadata, the trace worker's client or torch.
FIRST_DIAGNOSTICS_MODULES = [
    "atenlens",
    "atenlens.cli",
    "atenlens.codes",
    "atenlens.dims",
    "atenlens.gpus",
    "atenlens.lines",
    "atenlens.lsp",
    "atenlens.lsp.early",
    "atenlens.lsp.frames",
    "atenlens.lsp.large",
    "atenlens.lsp.lint_config",
    "atenlens.lsp.settings",
    "atenlens.lsp.text",
    "atenlens.startpath",
    "atenlens.traceable",
    "atenlens.worker",
    "atenlens.worker.limits",
]
NOT_NEEDED_FOR_FIRST_DIAGNOSTICS = (
    "torch",
    "atenlens.report",
    "importlib.metadata",
    "asyncio",
    "pygls",
    "lsprotocol",
    "lsprotocol.types",
    "atenlens.lsp.server",
    "atenlens.lsp.hover",
    "atenlens.render",
    "atenlens.plot",
    "atenlens.example_call",
    "atenlens.worker.client",
)


async def test_the_first_diagnostics_are_published_before_modules_they_do_not_need_are_imported(client):
    await open_document(client, EXAMPLE, EXAMPLE.read_text(encoding="utf-8"))
    modules = list((await server_info(client))["modulesAtFirstDiagnostics"])
    assert "atenlens.lint.engine" in modules and "tree_sitter" in modules  # what they do need
    outside_lint = [m for m in modules if m.split(".")[0] == "atenlens" and not m.startswith("atenlens.lint")]
    assert outside_lint == FIRST_DIAGNOSTICS_MODULES
    assert [name for name in NOT_NEEDED_FOR_FIRST_DIAGNOSTICS if name in modules] == []
