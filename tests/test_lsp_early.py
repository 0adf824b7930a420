"""The first diagnostics before the server is imported (lsp/early.py): the answer to `initialize`
and the diagnostics' JSON are the server's own, byte for byte or value for value, and the server
that takes over sends neither again."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp.clients
from pygls.io_ import StdoutWriter

from atenlens.lint import lint_source
from atenlens.lsp import convert
from atenlens.lsp.early import capabilities, finding_json
from atenlens.lsp.server import create_server
from atenlens.lsp.text import UTF8, UTF16, UTF32

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from gen_corpus import generate  # noqa: E402

CLIENTS = sorted(Path(pytest_lsp.clients.__file__).parent.glob("*.json"))
ODD_CLIENTS = [
    {},
    {"general": {"positionEncodings": ["utf-32", "utf-8"]}},
    {"general": {"positionEncodings": ["latin-1"]}},
    {"textDocument": {"synchronization": {"willSave": False}}},
    {"textDocument": {"synchronization": {"willSaveWaitUntil": True}}, "notebookDocument": {"synchronization": {}}},
]


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _messages(data: bytes) -> list[dict]:
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


def _servers_answer(client: dict) -> dict:
    async def answer() -> bytes:
        server = create_server()
        out = io.BytesIO()
        server.protocol.set_writer(StdoutWriter(out))
        server.protocol.dispatch_json(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": client}}
        )
        for _ in range(100):
            if out.getvalue():
                break
            await asyncio.sleep(0.01)  # ok: polls for the answer pygls writes from its own task, 1 s at most
        return out.getvalue()

    [message] = _messages(asyncio.run(answer()))
    return message["result"]


@pytest.mark.parametrize(
    "client", CLIENTS + ODD_CLIENTS, ids=lambda c: c.stem if isinstance(c, Path) else json.dumps(c)
)
def test_the_early_answer_to_initialize_is_the_servers(client):
    caps = json.loads(client.read_text())["capabilities"] if isinstance(client, Path) else client
    assert capabilities(caps) == _servers_answer(caps)


TEXT_WITH_WIDE_CHARACTERS = """import torch


def step(model, loader, device):
    for x in loader:  # 🔥 per batch: ümlauts and 𝒳
        loss = model(x.to(device)).sum()
        print("𝒳 loss", loss.item())  # 🔥🔥
        n = torch.zeros(3).cuda()
"""


@pytest.mark.parametrize("encoding", [UTF8, UTF16, UTF32])
def test_the_early_diagnostics_are_the_servers_json(encoding):
    server = create_server()
    wide = lint_source(TEXT_WITH_WIDE_CHARACTERS, "/nowhere/step.py")
    assert [(f.code, f.line) for f in wide] == [("AL100", 7), ("AL302", 8)]  # after a 𝒳 on line 7
    for text in (generate(5000), TEXT_WITH_WIDE_CHARACTERS):
        findings = lint_source(text, "/nowhere/training_utils.py")
        lines = text.split("\n")
        for finding in findings:
            expected = server.protocol.json_of(convert.lsp_finding_diagnostic(finding, lines, encoding))
            assert finding_json(finding, lines, encoding) == expected


class _Server:
    """`atenlens serve` as an editor starts it, spoken to in raw frames."""

    def __init__(self, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "atenlens", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self.received: list[dict] = []

    def send(self, *messages: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(_frame(m) for m in messages))
        self.process.stdin.flush()

    def read_until(self, done) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while not done(self.received):
            length = 0
            while (line := stdout.readline().strip()) != b"":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.received.append(json.loads(stdout.read(length)))

    def end(self) -> str:
        self.send({"jsonrpc": "2.0", "id": 99, "method": "shutdown"})
        self.read_until(lambda got: any(m.get("id") == 99 for m in got))
        self.send({"jsonrpc": "2.0", "method": "exit"})
        assert self.process.wait(timeout=60) == 0
        assert self.process.stderr is not None
        return self.process.stderr.read().decode()


def _published(received: list[dict]) -> list[dict]:
    return [m["params"] for m in received if m.get("method") == "textDocument/publishDiagnostics"]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "initialized", "params": {}}


def test_the_server_that_takes_over_answers_initialize_once_and_publishes_the_first_diagnostics_once(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.atenlens]\nignore = ["AL302"]\n')
    path = tmp_path / "step.py"
    path.write_text(TEXT_WITH_WIDE_CHARACTERS, encoding="utf-8")
    uri = path.as_uri()
    item = {"uri": uri, "languageId": "python", "version": 1, "text": TEXT_WITH_WIDE_CHARACTERS}
    change = {"range": {"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 0}}, "text": "\n"}
    server = _Server(tmp_path)
    server.send(
        INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
    )
    server.read_until(_published)
    # the server has taken over once it answers a request
    server.send({"jsonrpc": "2.0", "id": 2, "method": "atenlens/serverInfo", "params": {}})
    server.read_until(lambda got: any(m.get("id") == 2 for m in got))
    server.send(
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]},
        }
    )
    server.read_until(lambda got: len(_published(got)) == 2)
    stderr = server.end()
    kinds = [
        m.get("method") or f"response {m['id']}" for m in server.received if m.get("method") != "window/logMessage"
    ]
    assert kinds[:2] == ["response 1", "textDocument/publishDiagnostics"]
    assert kinds.count("response 1") == 1
    assert [
        (p["version"], [(d["code"], d["range"]["start"]["line"]) for d in p["diagnostics"]])
        for p in _published(server.received)
    ] == [
        (1, [("AL100", 6)]),  # the pyproject.toml's ignore applies: no AL302 for line 8's .cuda()
        (2, [("AL100", 7)]),
    ]
    [info] = [m["result"] for m in server.received if m.get("id") == 2]
    assert info["lintsStarted"] == [{"uri": uri, "count": 1}]
    assert "pygls" not in info["modulesAtFirstDiagnostics"]
    assert "differ" not in stderr


def test_a_document_that_is_not_a_file_is_linted_by_the_server(tmp_path):
    item = {"uri": "untitled:Untitled-1", "languageId": "python", "version": 1, "text": TEXT_WITH_WIDE_CHARACTERS}
    server = _Server(tmp_path)
    server.send(
        INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
    )
    server.read_until(_published)
    server.send({"jsonrpc": "2.0", "id": 2, "method": "atenlens/serverInfo", "params": {}})
    server.read_until(lambda got: any(m.get("id") == 2 for m in got))
    stderr = server.end()
    assert [[d["code"] for d in p["diagnostics"]] for p in _published(server.received)] == [["AL100", "AL302"]]
    [info] = [m["result"] for m in server.received if m.get("id") == 2]
    assert "pygls" in info["modulesAtFirstDiagnostics"]  # published by the server, after its start
    assert [m.get("id") for m in server.received if "id" in m] == [1, 2, 99]
    assert "differ" not in stderr


def test_a_pause_after_initialize_or_another_request_first_leaves_the_first_diagnostics_to_the_server(tmp_path):
    path = tmp_path / "step.py"
    path.write_text(TEXT_WITH_WIDE_CHARACTERS, encoding="utf-8")
    item = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": TEXT_WITH_WIDE_CHARACTERS}
    hover = {"textDocument": {"uri": path.as_uri()}, "position": {"line": 0, "character": 0}}
    for first in (
        [INITIALIZE, INITIALIZED],  # then nothing for longer than the early reader waits (0.25 s)
        [INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": hover}],
    ):
        server = _Server(tmp_path)
        server.send(*first)
        # the server has taken over when it logs (at `initialized`, which it handles again)
        server.read_until(lambda got: any(m.get("method") == "window/logMessage" for m in got))
        server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}})
        server.read_until(_published)
        server.send({"jsonrpc": "2.0", "id": 2, "method": "atenlens/serverInfo", "params": {}})
        server.read_until(lambda got: any(m.get("id") == 2 for m in got))
        stderr = server.end()
        assert [[d["code"] for d in p["diagnostics"]] for p in _published(server.received)] == [["AL100", "AL302"]]
        [info] = [m["result"] for m in server.received if m.get("id") == 2]
        assert "pygls" in info["modulesAtFirstDiagnostics"]
        answered = [m["id"] for m in server.received if "id" in m]
        assert answered == [1, 5, 2, 99] if len(first) == 3 else answered == [1, 2, 99]
        assert "differ" not in stderr
