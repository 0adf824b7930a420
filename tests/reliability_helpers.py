"""A raw JSON-RPC client for the reliability tests: the real `atenlens serve` process on stdio,
driven byte by byte, so that a test can send what no well-behaved client library would (unknown
methods, malformed params, junk) and measure what comes back.

Synchronous on purpose: one reader thread collects every frame the server writes; the test
thread sends and waits on a condition variable for the answer or notification it expects.
Requests the server sends to the client (progress, refreshes, edits) are answered with `null`
(`workspace/applyEdit` with `{"applied": true}`) and recorded.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "reliability"
SERVER = [sys.executable, "-m", "atenlens", "serve"]
WAIT_SECONDS = 180.0  # a guard against a hang; never reached when things work

# JSON-RPC / LSP error codes (LSP specification, "ErrorCodes")
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600
PARSE_ERROR = -32700


@dataclass
class Message:
    data: dict
    received: float  # time.monotonic() when the reader thread got it


@dataclass
class Server:
    """One `atenlens serve` process and everything it has said."""

    process: subprocess.Popen
    messages: list[Message] = field(default_factory=list)
    responses: dict[int, Message] = field(default_factory=dict)
    server_requests: list[dict] = field(default_factory=list)
    stderr: bytearray = field(default_factory=bytearray)
    condition: threading.Condition = field(default_factory=threading.Condition)
    next_id: int = 1
    closed: bool = False
    send_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    # -- sending ---------------------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        with self.send_lock:
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def send(self, message: dict) -> None:
        body = json.dumps(message, ensure_ascii=False).encode("utf-8")
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def request_async(self, method: str, params: Any = None) -> int:
        with self.condition:
            request_id = self.next_id
            self.next_id += 1
        message: dict = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def response(self, request_id: int, timeout: float = WAIT_SECONDS) -> dict:
        message = self.wait(lambda: self.responses.get(request_id), timeout)
        return message.data

    def request(self, method: str, params: Any = None, timeout: float = WAIT_SECONDS) -> dict:
        """The whole response object: {"result": ...} or {"error": {...}}."""
        return self.response(self.request_async(method, params), timeout)

    def result(self, method: str, params: Any = None, timeout: float = WAIT_SECONDS) -> Any:
        answer = self.request(method, params, timeout)
        assert "error" not in answer, answer
        return answer["result"]

    # -- waiting -----------------------------------------------------------------------------------

    def wait(self, predicate: Callable[[], Any], timeout: float = WAIT_SECONDS) -> Any:
        deadline = time.monotonic() + timeout
        with self.condition:
            while not (found := predicate()):
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError(
                        f"the server did not answer (alive={self.alive}); stderr:\n"
                        + self.stderr.decode("utf-8", "replace")[-4000:]
                    )
                self.condition.wait(left)
            return found

    def notifications(self, method: str, after: int = 0) -> list[dict]:
        with self.condition:
            return [
                m.data["params"] for m in self.messages[after:] if m.data.get("method") == method and "id" not in m.data
            ]

    def mark(self) -> int:
        """A bookmark in the message list (for `after=`)."""
        with self.condition:
            return len(self.messages)

    def diagnostics(self, uri: str, version: int, after: int = 0) -> list[dict]:
        """The first diagnostics published for `uri` at `version` or later."""

        def found() -> Optional[list[dict]]:
            for params in self.notifications("textDocument/publishDiagnostics", after):
                if params["uri"] == uri and (params.get("version") or 0) >= version:
                    return params["diagnostics"] or [None]
            return None

        return [d for d in self.wait(found) if d is not None]

    # -- reading -----------------------------------------------------------------------------------

    def read_frames(self) -> None:
        stream = self.process.stdout
        try:
            while True:
                length = None
                while True:
                    header = stream.readline()
                    if not header:
                        return
                    header = header.strip()
                    if not header:
                        break
                    name, _, value = header.decode("ascii").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                assert length is not None, "a frame without Content-Length"
                data = json.loads(stream.read(length))
                message = Message(data, time.monotonic())
                if "method" in data and "id" in data:
                    self.answer_server_request(data)
                with self.condition:
                    self.messages.append(message)
                    if "id" in data and "method" not in data:
                        self.responses[data["id"]] = message
                    self.condition.notify_all()
        finally:
            with self.condition:
                self.closed = True
                self.condition.notify_all()

    def answer_server_request(self, data: dict) -> None:
        with self.condition:
            self.server_requests.append(data)
        result: Any = {"applied": True} if data["method"] == "workspace/applyEdit" else None
        self.send({"jsonrpc": "2.0", "id": data["id"], "result": result})

    def read_stderr(self) -> None:
        for chunk in iter(lambda: self.process.stderr.read1(1 << 14), b""):
            self.stderr += chunk

    # -- lifecycle ---------------------------------------------------------------------------------

    def stop(self) -> None:
        if self.alive:
            try:
                self.request("shutdown", timeout=60)
                self.notify("exit")
                self.process.wait(timeout=30)
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def trusted(options: Any) -> Any:
    """`options` with `trace.enabled: true` added where they do not set it: what an editor sends
    for a trusted workspace (the server traces only when told to: docs/security.md)."""
    if options is None:
        options = {}
    if not isinstance(options, dict) or not isinstance(options.get("trace", {}), dict):
        return options
    return {**options, "trace": {"enabled": True, **options.get("trace", {})}}


def start_server(
    options: Any = None,
    env: Optional[dict] = None,
    capabilities: Optional[dict] = None,
    exactly: bool = False,
    cwd: Optional[pathlib.Path] = None,
    command: Optional[list[str]] = None,
) -> Server:
    """Starts `atenlens serve` (`command`, in `cwd`: by default SERVER in the repository),
    initializes it (as a client with work-done progress, refresh support and a markdown parser, with `options` as
    initializationOptions, tracing enabled where they do not say otherwise unless `exactly`) and
    returns it."""
    process = subprocess.Popen(
        command or SERVER,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd or ROOT,
        env={**os.environ, **(env or {})},
    )
    server = Server(process)
    threading.Thread(target=server.read_frames, daemon=True).start()
    threading.Thread(target=server.read_stderr, daemon=True).start()
    caps = (
        capabilities
        if capabilities is not None
        else {
            "general": {"markdown": {"parser": "marked", "version": "1.1.0"}},  # as VS Code: hovers with tables
            "window": {"workDoneProgress": True},
            "workspace": {
                "inlayHint": {"refreshSupport": True},
                "codeLens": {"refreshSupport": True},
                "applyEdit": True,
                "configuration": False,
            },
            "textDocument": {
                "synchronization": {"didSave": True},
                "publishDiagnostics": {"versionSupport": True},
                "hover": {"contentFormat": ["markdown", "plaintext"]},
                "inlayHint": {},
                "codeLens": {},
            },
        }
    )
    server.result(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": None,
            "capabilities": caps,
            "initializationOptions": options if exactly else trusted(options),
        },
    )
    server.notify("initialized", {})
    return server


# -- LSP shorthands ----------------------------------------------------------------------------------


def position(line: int, character: int) -> dict:
    return {"line": line, "character": character}


def span(start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": position(*start), "end": position(*end)}


def open_document(server: Server, path: pathlib.Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    server.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}}
    )
    return uri


def change(server: Server, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
    server.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": span(start, end), "text": text}],
        },
    )


def hover(server: Server, uri: str, line: int, character: int = 0) -> dict:
    return server.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": position(line, character)})


def trace(server: Server, uri: str, qualname: str, timeout: float = WAIT_SECONDS) -> dict:
    return server.request(
        "workspace/executeCommand",
        {"command": "atenlens.trace", "arguments": [{"uri": uri, "qualname": qualname}]},
        timeout,
    )


def server_info(server: Server) -> dict:
    return server.result("atenlens/serverInfo", {})


# -- processes -----------------------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    """Processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def descendants_of(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        children = [c for p in frontier for c in children_of(p)]
        found += children
        frontier = children
    return found


def idle_worker(pid: int) -> list[int]:
    """The server's children once no trace runs under them: a trace's process that a test before
    left to be reaped (the worker kills and reaps it after answering) is not part of the worker."""
    wait_until(lambda: descendants_of(pid) == children_of(pid), "a trace's process outlived the test before")
    return children_of(pid)


def wait_until(predicate: Callable[[], Any], message: str, timeout: float = 30.0) -> Any:
    """Polls a condition that no event announces (processes ending), until it holds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not (result := predicate()):
        assert time.monotonic() < deadline, message
        pause.wait(0.01)  # ok: the interval of a poll on /proc, not a wait for a result
    return result


def rss_kib(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


class ProcessSampler:
    """Samples the server's child and descendant processes until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.max_children = 0
        self.max_descendants = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.max_children = max(self.max_children, len(children_of(self.pid)))
            self.max_descendants = max(self.max_descendants, len(descendants_of(self.pid)))
            self.samples += 1
            self._stop.wait(0.005)  # ok: a sampling interval, not a wait for a result

    def __enter__(self) -> "ProcessSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
