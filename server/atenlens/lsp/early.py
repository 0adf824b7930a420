"""The first diagnostics before pygls is imported.

Importing pygls's server (its protocol types above all) takes most of the server's start-up, and
the editor waits for it twice: to get the `initialize` answer, and then, after it opens a file, for
that file's diagnostics. So `atenlens serve` on stdio first reads the input itself: it answers
`initialize` with the capabilities the server announces (the same answer pygls gives, computed in
`capabilities`; a test compares the two for several clients), lints the first document opened
and publishes its diagnostics, and only then imports pygls. Every byte read is then handed to the
full server (lsp/stdio.py's `already_read`), which handles each message as if it came now: its
answer to `initialize` and its publication of the same diagnostics are not sent again
(lsp/protocol.py), and whatever differs is sent and logged.

Anything this reader does not know how to answer exactly as the server would ends it at once,
before it answers: a message other than `initialize`, `initialized`,
`workspace/didChangeConfiguration` and the first `textDocument/didOpen`, a frame it cannot read,
a document that is not a file or is large (lsp/large.py lints those elsewhere), settings or a
`[tool.atenlens]` table with a problem (the server shows it before the diagnostics), or a pause of WAIT_SECONDS after
`initialize` without the document (the server is then started meanwhile). Windows has no
`select` on pipes: there the server starts as before. Protocol-free: no pygls, no lsprotocol.
"""

from __future__ import annotations

import json
import os
import select
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO, Optional
from urllib.parse import unquote, urlparse

from atenlens import __version__
from atenlens.lsp.frames import FrameReader, parse_body

WAIT_SECONDS = 0.25  # after `initialize`: how long a pause in the input may be before the server starts
_ENCODINGS = ("utf-8", "utf-16", "utf-32")  # pygls's, in the client's order of preference
_INITIALIZE_FIELDS = frozenset(
    {
        "processId",
        "clientInfo",
        "locale",
        "rootPath",
        "rootUri",
        "capabilities",
        "initializationOptions",
        "trace",
        "workspaceFolders",
        "workDoneToken",
    }
)
# What the server announces (pygls computes it from the handlers registered in handlers.py and
# the protocol's built-in features); only the position encoding depends on the client.
COMMANDS = (
    "atenlens.trace",
    "atenlens.insertDirective",
    "atenlens.cancelTrace",
    "atenlens.restartWorker",
    "atenlens.exportMemoryTimeline",
)
CONTENT_TYPE = "application/vscode-jsonrpc; charset=utf-8"


@dataclass
class Early:
    """What the early reader did, for the server that takes over."""

    read: bytes = b""  # every byte read off the input, to be handled again by the server
    initialize_id: Any = None  # the id of the `initialize` it answered (None: it answered nothing)
    initialize_result: Optional[dict[str, Any]] = None
    published: Optional[bytes] = None  # the publishDiagnostics frame it wrote
    modules: Optional[list[str]] = None  # what was imported when it was written
    lint_config: Any = None  # the WorkspaceLintConfig it read the pyproject.toml with
    # (uri, version, text, findings) of the document it linted: the server takes them as its
    # first lint of that document when the same didOpen reaches it
    lint: Optional[tuple[str, int, str, list[Any]]] = None


def capabilities(client: Any) -> dict[str, Any]:
    """The `initialize` result the server gives a client with `client` capabilities."""
    encoding = "utf-16"
    general = client.get("general") if isinstance(client, dict) else None
    encodings = general.get("positionEncodings") if isinstance(general, dict) else None
    if isinstance(encodings, list):
        encoding = next((e for e in encodings if e in _ENCODINGS), encoding)
    sync: dict[str, Any] = {"openClose": True, "change": 2}
    # pygls announces willSave / willSaveWaitUntil as false to a client that states either (the
    # server handles neither), and leaves them out otherwise
    text_document = client.get("textDocument") if isinstance(client, dict) else None
    stated = text_document.get("synchronization") if isinstance(text_document, dict) else None
    for name in ("willSave", "willSaveWaitUntil"):
        if isinstance(stated, dict) and stated.get(name) is not None:
            sync[name] = False
    sync["save"] = True
    return {
        "capabilities": {
            "positionEncoding": encoding,
            "textDocumentSync": sync,
            "hoverProvider": True,
            "codeActionProvider": {"codeActionKinds": ["quickfix", "source.fixAll"]},
            "codeLensProvider": {"resolveProvider": False},
            "executeCommandProvider": {"commands": list(COMMANDS)},
            "inlayHintProvider": {"resolveProvider": False},
            "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}},
        },
        "serverInfo": {"name": "atenlens", "version": __version__},
    }


def frame(body: str) -> bytes:
    """One message as pygls writes it (the body is ASCII: json.dumps escapes the rest)."""
    return f"Content-Length: {len(body)}\r\nContent-Type: {CONTENT_TYPE}\r\n\r\n{body}".encode("utf-8")


def publish_frame(uri: str, version: Optional[int], diagnostics: list[str]) -> bytes:
    """`textDocument/publishDiagnostics` of diagnostics already in JSON, framed as pygls frames it."""
    params = '{"uri": %s, %s"diagnostics": [%s]}' % (
        json.dumps(uri),
        "" if version is None else '"version": %d, ' % version,
        ", ".join(diagnostics),
    )
    return frame('{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": %s}' % params)


def file_path(uri: str) -> Optional[str]:
    """The file a `file:` URI names (pygls's `to_fs_path` on POSIX), else None."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc or not parsed.path:
        return None
    return unquote(parsed.path)


def finding_json(finding: Any, lines: list[str], encoding: str) -> str:
    """A lint finding's diagnostic as the JSON text the server sends for it (convert.py's
    `lsp_finding_diagnostic` through the protocol's converter; a test compares the two)."""
    from atenlens.lint.formats import rule_url
    from atenlens.lint.rules import RULES
    from atenlens.lsp.text import column_to_units

    def position(line: int, column: int) -> dict[str, int]:
        if not lines:
            return {"line": 0, "character": 0}
        if line >= len(lines):
            return {"line": len(lines) - 1, "character": column_to_units(lines[-1], len(lines[-1]), encoding)}
        line = max(line, 0)
        return {"line": line, "character": column_to_units(lines[line], column, encoding)}

    value: dict[str, Any] = {
        "range": {
            "start": position(finding.line - 1, finding.column),
            "end": position(finding.end_line - 1, finding.end_column),
        },
        "message": finding.message,
        "severity": {"error": 1, "warning": 2, "information": 3, "info": 3, "hint": 4}.get(finding.severity, 2),
        "code": finding.code,
    }
    rule = next((r for r in RULES if r.code == finding.code), None)
    if rule is not None:
        value["codeDescription"] = {"href": rule_url(rule)}
    value["source"] = "atenlens"
    return json.dumps(value)


class _Reader:
    def __init__(self, stdin_fd: int, stdout: BinaryIO) -> None:
        self.fd = stdin_fd
        self.stdout = stdout
        self.early = Early()
        self.read = bytearray()
        self.frames = FrameReader()
        self.settings: Any = None  # the editor's settings so far (lsp/settings.py), once known
        self.settings_problem = False  # some were rejected: the server says so before any diagnostics
        self.client: dict[str, Any] = {}
        self.encoding = "utf-16"

    def run(self) -> Early:
        try:
            self._run()
        except Exception as error:  # noqa: BLE001 - whatever failed here, the server takes over and answers
            print(f"atenlens: reading before start-up failed ({error!r}); the server takes over", file=sys.stderr)
        finally:
            self.early.read = bytes(self.read)
        return self.early

    def _run(self) -> None:
        while True:
            timeout = None if self.early.initialize_id is None else WAIT_SECONDS
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return
            self.read += chunk
            self.frames.feed(chunk)
            while (item := self.frames.next()) is not None:
                if isinstance(item, str):
                    return
                try:
                    message, rest = parse_body(item)
                except (ValueError, RecursionError):
                    return
                if rest.strip() or not isinstance(message, dict) or not self._handle(message):
                    return

    def _handle(self, message: dict[str, Any]) -> bool:
        """Handles one message; False: the server takes over from here (this one included)."""
        method, params = message.get("method"), message.get("params")
        if self.early.initialize_id is None:
            return method == "initialize" and self._initialize(message.get("id"), params)
        if method == "initialized" and "id" not in message:
            return True
        if method == "workspace/didChangeConfiguration" and "id" not in message and isinstance(params, dict):
            return self._configuration(params.get("settings"))
        if method == "textDocument/didOpen" and "id" not in message and isinstance(params, dict):
            self._open(params.get("textDocument"))
        return False

    def _initialize(self, msg_id: Any, params: Any) -> bool:
        valid_id = isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))
        if not valid_id or not isinstance(params, dict) or not set(params) <= _INITIALIZE_FIELDS:
            return False
        if not isinstance(params.get("capabilities"), dict) or not _plain_initialize(params):
            return False
        from atenlens.lsp.settings import settings_from_json

        self.client = params["capabilities"]
        self.settings, problems = settings_from_json(params.get("initializationOptions"), enabled_before=True)
        self.settings_problem = bool(problems)
        result = capabilities(self.client)
        self.encoding = result["capabilities"]["positionEncoding"]
        self._write(frame(json.dumps({"id": msg_id, "jsonrpc": "2.0", "result": result})))
        self.early.initialize_id, self.early.initialize_result = msg_id, result
        # while the client reads the answer and opens its files: what linting the first one needs
        import atenlens.lint  # noqa: F401
        import atenlens.lsp.large  # noqa: F401
        import atenlens.lsp.lint_config  # noqa: F401

        return True

    def _configuration(self, data: Any) -> bool:
        """As handlers.workspace_did_change_configuration: values sent replace the settings; none
        sent, from a client that can be asked, leave them until its answer (which re-lints)."""
        workspace = self.client.get("workspace")
        pulls = isinstance(workspace, dict) and bool(workspace.get("configuration"))
        if data or not pulls:
            from atenlens.lsp.settings import settings_from_json

            self.settings, problems = settings_from_json(data, enabled_before=True)
            self.settings_problem = self.settings_problem or bool(problems)
        return True

    def _open(self, document: Any) -> None:
        if not isinstance(document, dict):
            return
        uri, text, version = document.get("uri"), document.get("text"), document.get("version")
        if not isinstance(uri, str) or not isinstance(text, str) or type(version) is not int:
            return
        from atenlens.lsp.large import LARGE_DOCUMENT_CHARS

        path = file_path(uri)
        if path is None or len(text) > LARGE_DOCUMENT_CHARS or self.settings_problem:
            return
        from atenlens.lines import split_lines
        from atenlens.lint import RULES, lint_source
        from atenlens.lsp.lint_config import WorkspaceLintConfig

        lint = self.settings.lint
        config = WorkspaceLintConfig(tuple(rule.code for rule in RULES))
        findings: list[Any] = []
        if lint.enabled:
            codes, problem = config.codes(path, lint)
            if problem:
                return  # the server reads the pyproject.toml again and shows it
            findings = lint_source(text, path, codes, incremental=True)
        lines = split_lines(text)
        published = publish_frame(uri, version, [finding_json(f, lines, self.encoding) for f in findings])
        self._write(published)
        self.early.published = published
        self.early.lint = (uri, version, text, findings)
        self.early.lint_config = config
        self.early.modules = sorted(sys.modules)

    def _write(self, data: bytes) -> None:
        self.stdout.write(data)
        self.stdout.flush()


def _plain_initialize(params: dict[str, Any]) -> bool:
    """The fields pygls reads from `initialize` have the types it expects (a client that sends
    other types gets the server's own answer: its error)."""
    kinds: dict[str, tuple[type, ...]] = {
        "processId": (int, type(None)),
        "rootUri": (str, type(None)),
        "rootPath": (str, type(None)),
        "workspaceFolders": (list, type(None)),
        "clientInfo": (dict,),
        "locale": (str,),
        "trace": (str,),
    }
    for name, allowed in kinds.items():
        if name in params and (not isinstance(params[name], allowed) or isinstance(params[name], bool)):
            return False
    folders = params.get("workspaceFolders") or []
    return all(
        isinstance(f, dict) and isinstance(f.get("uri"), str) and isinstance(f.get("name"), str) for f in folders
    )


def read_early(stdin_fd: int = 0, stdout: Optional[BinaryIO] = None) -> Optional[Early]:
    """Answers `initialize` and publishes the first document's diagnostics off the input
    (see above); None where it cannot (Windows)."""
    if sys.platform == "win32":
        return None
    return _Reader(stdin_fd, stdout or sys.stdout.buffer).run()
