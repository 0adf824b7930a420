"""Shared pieces of the end-to-end language server tests: the real server process, driven as
VS Code and as Neovim (their published capabilities, spec warnings are errors: pyproject.toml)."""

from __future__ import annotations

import asyncio
import pathlib
import sys
from typing import Any, Callable, Optional

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from reliability_helpers import children_of, trusted  # noqa: F401  (children_of: re-exported for the LSP tests)

SERVER = [sys.executable, "-m", "atenlens", "serve"]
EDITORS = ["visual-studio-code", "neovim"]


def editor_capabilities(editor: str) -> types.ClientCapabilities:
    capabilities = client_capabilities(editor)
    if editor == "visual-studio-code":
        # pytest-lsp ships VS Code 1.65's capabilities; inlay hints arrived in 1.67 and every
        # current VS Code declares them.
        capabilities.workspace.inlay_hint = types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
        capabilities.text_document.inlay_hint = types.InlayHintClientCapabilities()
    return capabilities


class Recorder:
    """What the server sent that pytest-lsp does not keep (diagnostics with their versions,
    refresh requests, applied edits), with a way to wait for the next one."""

    def __init__(self) -> None:
        self.published: list[types.PublishDiagnosticsParams] = []
        self.refreshes: list[str] = []
        self.applied_edits: list[types.ApplyWorkspaceEditParams] = []
        self._changed = asyncio.Event()

    def note(self) -> None:
        self._changed.set()

    async def until(self, predicate: Callable[[], Any]) -> Any:
        while not (result := predicate()):
            self._changed.clear()
            await self._changed.wait()
        return result


def install_recorder(client: LanguageClient) -> Recorder:
    recorder = Recorder()
    features = client.protocol.fm.features
    keep_diagnostics = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        keep_diagnostics(params)
        recorder.published.append(params)
        recorder.note()

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish_diagnostics
    keep_progress = features[types.PROGRESS]

    def progress(params: types.ProgressParams) -> None:
        keep_progress(params)
        recorder.note()

    features[types.PROGRESS] = progress
    keep_log = features[types.WINDOW_LOG_MESSAGE]

    def log_message(params: types.LogMessageParams) -> None:
        keep_log(params)
        recorder.note()

    features[types.WINDOW_LOG_MESSAGE] = log_message

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_hint_refresh(params: None) -> None:
        recorder.refreshes.append("inlayHint")
        recorder.note()

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params: None) -> None:
        recorder.refreshes.append("codeLens")
        recorder.note()

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        recorder.applied_edits.append(params)
        recorder.note()
        return types.ApplyWorkspaceEditResult(applied=True)

    return recorder


async def initialize(
    client: LanguageClient,
    options: Optional[dict[str, Any]] = None,
    root: Optional[pathlib.Path] = None,
    exactly: bool = False,
) -> types.InitializeResult:
    """Initializes as `client.editor`, with `options` as initializationOptions; tracing enabled
    where they do not say otherwise (as the editors do in a trusted workspace: the server traces
    only when told to), unless `exactly`, which sends `options` as they are."""
    params = types.InitializeParams(
        capabilities=editor_capabilities(client.editor), initialization_options=options if exactly else trusted(options)
    )
    if root is not None:
        params.workspace_folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)]
    return await client.initialize_session(params)


def encoding_of(result: types.InitializeResult) -> str:
    encoding = result.capabilities.position_encoding
    return str(getattr(encoding, "value", encoding) or "utf-16")


def units(text: str, encoding: str) -> int:
    """Length of `text` in the negotiated position encoding, computed independently of the server."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le")) // 2


async def open_document(client: LanguageClient, path: pathlib.Path, text: str) -> str:
    """Open `text` as `path` and wait for its first diagnostics."""
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    await wait_for_diagnostics(client, uri, 1)
    return uri


async def wait_for_diagnostics(
    client: LanguageClient, uri: str, version: int, after: int = 0
) -> list[types.Diagnostic]:
    """The first diagnostics published for `uri` at `version` or later (among those published
    after the first `after` notifications)."""
    recorder: Recorder = client.recorder

    def found() -> Optional[types.PublishDiagnosticsParams]:
        for params in recorder.published[after:]:
            if params.uri == uri and params.version is not None and params.version >= version:
                return params
        return None

    return list((await recorder.until(found)).diagnostics)


def change(
    client: LanguageClient, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str
) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=start[0], character=start[1]),
                        end=types.Position(line=end[0], character=end[1]),
                    ),
                    text=text,
                )
            ],
        )
    )


def simple(diagnostics: list[types.Diagnostic]) -> list[tuple[int, int, int, int, str, str]]:
    return sorted(
        (
            d.range.start.line,
            d.range.start.character,
            d.range.end.line,
            d.range.end.character,
            str(d.code),
            d.source or "",
        )
        for d in diagnostics
    )


async def execute(client: LanguageClient, command: str, *arguments: Any) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments))
    )


async def server_info(client: LanguageClient) -> dict[str, Any]:
    info = await client.protocol.send_request_async("atenlens/serverInfo", {})
    return info._asdict() if hasattr(info, "_asdict") else dict(info)  # pygls answers unknown results as a namedtuple


async def inlay_hints(client: LanguageClient, uri: str, lines: int) -> list[tuple[int, int, str]]:
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=lines, character=0)),
        )
    )
    found = []
    for h in hints or []:
        assert isinstance(h.label, str), h.label  # the server's labels are plain text
        found.append((h.position.line, h.position.character, h.label))
    return found


async def code_lenses(client: LanguageClient, uri: str) -> list[tuple[int, str, str]]:
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return [(lens.range.start.line, lens.command.title, lens.command.command) for lens in lenses or []]
