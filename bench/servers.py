"""The language servers compared: how to start each, configure it and get its diagnostics.

Diagnostics are taken the way an editor that supports both models gets them: pulled
(`textDocument/diagnostic`) from a server that advertises a `diagnosticProvider`, otherwise waited
for as pushed `textDocument/publishDiagnostics` of the document version just sent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from harness import ruff_binary
from lsp_client import LspClient, Message

# What a current VS Code announces for the parts that matter here (pull + push diagnostics,
# incremental sync, inlay-hint refresh, work-done progress).
CLIENT_CAPABILITIES: dict[str, Any] = {
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {
        "synchronization": {"dynamicRegistration": True, "didSave": True},
        "publishDiagnostics": {
            "relatedInformation": True,
            "versionSupport": True,
            "codeDescriptionSupport": True,
            "dataSupport": True,
        },
        "diagnostic": {"dynamicRegistration": True, "relatedDocumentSupport": False},
        "hover": {"contentFormat": ["markdown", "plaintext"]},
        "inlayHint": {"dynamicRegistration": True},
        "codeLens": {"dynamicRegistration": True},
    },
    "workspace": {
        "configuration": True,
        "didChangeConfiguration": {"dynamicRegistration": True},
        "workspaceFolders": True,
        "inlayHint": {"refreshSupport": True},
        "codeLens": {"refreshSupport": True},
        "diagnostics": {"refreshSupport": True},
        "executeCommand": {"dynamicRegistration": True},
    },
    "window": {"workDoneProgress": True},
}

# pylsp's diagnostics with pyflakes only (its defaults also run pycodestyle and mccabe).
PYLSP_SETTINGS = {
    "pylsp": {
        "plugins": {
            "pyflakes": {"enabled": True},
            "pycodestyle": {"enabled": False},
            "mccabe": {"enabled": False},
            "pydocstyle": {"enabled": False},
            "pylint": {"enabled": False},
            "flake8": {"enabled": False},
            "autopep8": {"enabled": False},
            "yapf": {"enabled": False},
        }
    }
}


@dataclass(frozen=True)
class ServerSpec:
    name: str
    argv: Callable[[], Optional[list[str]]]  # None: not installed here
    settings: Optional[dict[str, Any]] = None  # sent with workspace/didChangeConfiguration
    initialization_options: Optional[dict[str, Any]] = None
    absent_hint: str = ""

    def command(self) -> Optional[list[str]]:
        return self.argv()


def _atenlens() -> Optional[list[str]]:
    if importlib.util.find_spec("atenlens.lsp.server") is None:
        return None
    return [sys.executable, "-m", "atenlens", "serve"]


def _ruff() -> Optional[list[str]]:
    binary = ruff_binary()
    return [binary, "server"] if binary else None


def _pylsp() -> Optional[list[str]]:
    if importlib.util.find_spec("pylsp") is None or importlib.util.find_spec("pyflakes") is None:
        return None
    return [sys.executable, "-m", "pylsp"]


ATENLENS = ServerSpec("atenlens", _atenlens, absent_hint="atenlens.lsp.server not importable")
RUFF = ServerSpec("ruff", _ruff, absent_hint="pip install ruff")
PYLSP = ServerSpec("pylsp", _pylsp, settings=PYLSP_SETTINGS, absent_hint="pip install 'python-lsp-server[pyflakes]'")
ALL = [ATENLENS, RUFF, PYLSP]


def available(specs: list[ServerSpec]) -> tuple[list[ServerSpec], list[str]]:
    """(the servers installed here, a note per absent one)."""
    present, absent = [], []
    for spec in specs:
        if spec.command() is None:
            absent.append(f"{spec.name} is not installed here ({spec.absent_hint}); not measured")
        else:
            present.append(spec)
    return present, absent


def _configuration_answer(settings: Optional[dict[str, Any]]) -> Callable[[Message], Any]:
    def answer(message: Message) -> list[Any]:
        items = message.get("params", {}).get("items", [])
        out = []
        for item in items:
            section = item.get("section")
            value: Any = settings or {}
            for part in section.split(".") if section else []:
                value = value.get(part, None) if isinstance(value, dict) else None
            out.append(value)
        return out

    return answer


@dataclass
class Session:
    """One running server with one open document, and the way to wait for its diagnostics."""

    spec: ServerSpec
    client: LspClient
    uri: str = ""
    lines: list[str] = field(default_factory=list)
    version: int = 0
    _awaiting: Optional[asyncio.Future] = None

    @property
    def pulls(self) -> bool:
        return bool(self.client.server_capabilities.get("diagnosticProvider"))

    @property
    def incremental(self) -> bool:
        sync = self.client.server_capabilities.get("textDocumentSync", 1)
        kind = sync.get("change", 1) if isinstance(sync, dict) else sync
        return kind == 2

    async def open(self, path: str, text: str) -> float:
        """didOpen; returns the time diagnostics of version 1 arrived."""
        self.uri = f"file://{path}"
        self.lines = text.split("\n")
        self.version = 1
        waiting = self._expect_push(1)
        sent = await self.client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": self.uri, "languageId": "python", "version": 1, "text": text}},
        )
        return await self._diagnostics_after(sent, waiting)

    async def change(self, edits: list[tuple[int, int, int, str]]) -> tuple[float, Optional[asyncio.Future]]:
        """Apply (line, start_col, end_col, new_text) edits as one didChange; returns (sent_at, pending)."""
        changes = []
        for line, start, end, new in edits:
            old = self.lines[line]
            self.lines[line] = old[:start] + new + old[end:]
            changes.append(
                {
                    "range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
                    "text": new,
                }
            )
        if not self.incremental:
            changes = [{"text": "\n".join(self.lines)}]
        self.version += 1
        waiting = self._expect_push(self.version)
        sent = await self.client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": self.uri, "version": self.version}, "contentChanges": changes},
        )
        return sent, waiting

    async def diagnostics(self, sent: float, waiting: Optional[asyncio.Future]) -> float:
        """Seconds from `sent` to the diagnostics of the latest version."""
        return await self._diagnostics_after(sent, waiting) - sent

    def _expect_push(self, version: int) -> Optional[asyncio.Future]:
        if self._awaiting is not None and not self._awaiting.done():
            self._awaiting.cancel()  # superseded: only the latest version is waited for
        if self.pulls:
            return None
        uri = self.uri

        def matches(message: Message) -> bool:
            if message.get("method") != "textDocument/publishDiagnostics":
                return False
            params = message["params"]
            # A server that omits the version: the first publish after the change is taken.
            return params["uri"] == uri and params.get("version", version) == version

        self._awaiting = self.client.expect(matches)
        return self._awaiting

    async def _diagnostics_after(self, sent: float, waiting: Optional[asyncio.Future], timeout: float = 60.0) -> float:
        if waiting is not None:
            try:
                received = await asyncio.wait_for(waiting, timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(
                    f"{self.spec.name} published no diagnostics for version {self.version} of "
                    f"{self.uri} within {timeout:g} s"
                ) from None
            return received.at
        _, received = await self.client.request(
            "textDocument/diagnostic", {"textDocument": {"uri": self.uri}}, timeout=timeout
        )
        return received.at


async def start_session(spec: ServerSpec, root: str) -> Session:
    argv = spec.command()
    assert argv is not None
    logs = os.environ.get("ATENLENS_BENCH_LOGS")  # a folder: keep each server's stderr there
    client = LspClient(
        argv,
        cwd=root,
        request_answers={"workspace/configuration": _configuration_answer(spec.settings)},
        stderr_path=os.path.join(logs, f"{spec.name}.stderr") if logs else None,
    )
    await client.start()
    await client.initialize(root, CLIENT_CAPABILITIES, spec.initialization_options)
    if spec.settings is not None:
        await client.notify("workspace/didChangeConfiguration", {"settings": spec.settings})
    return Session(spec, client)
