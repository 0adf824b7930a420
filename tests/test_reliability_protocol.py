"""The LSP transport and the protocol's corners, through the real server process (raw bytes on its
stdin): frames written wrongly (a huge, short or long Content-Length, a lowercase header, LF-only
line ends, a double space) neither kill the server nor make it deaf; ids that are not ids,
notifications sent with an id, requests before `initialize` and after `shutdown`, a reversed
didChange range, a client that never answers `window/workDoneProgress/create`, and message-shaped
objects inside params each get the answer the specification asks for (or none), and nothing else."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
import time

import pytest

from reliability_helpers import (
    FIXTURES,
    INVALID_REQUEST,
    ROOT,
    SERVER,
    Server,
    change,
    open_document,
    rss_kib,
    server_info,
    start_server,
    trace,
)

SERVER_NOT_INITIALIZED = -32002
HOVER_PARAMS = {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}}


@pytest.fixture(scope="module")
def server():
    started = start_server()
    yield started
    started.stop()


def body(message: dict) -> bytes:
    return json.dumps(message).encode("utf-8")


def request_body(server: Server, method: str = "atenlens/serverInfo", params: object = None) -> tuple[int, bytes]:
    with server.condition:
        request_id = server.next_id
        server.next_id += 1
    return request_id, body({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})


def protocol_errors(server: Server, after: int) -> list[str]:
    return [p["message"] for p in server.notifications("window/logMessage", after) if "protocol error" in p["message"]]


def still_serving(server: Server) -> None:
    assert server.alive
    assert server_info(server)["torchImported"] is False


# -- framing -----------------------------------------------------------------------------------------


def frame_huge(data: bytes) -> bytes:
    return b"Content-Length: 1000000000000000\r\n\r\n" + data


def frame_short(data: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(data) - 3) + data


def frame_long(data: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(data) + 20) + data


def frame_lowercase(data: bytes) -> bytes:
    return b"content-length: %d\r\n\r\n" % len(data) + data


def frame_lf_only(data: bytes) -> bytes:
    return b"Content-Length: %d\n\n" % len(data) + data


def frame_double_space(data: bytes) -> bytes:
    return b"Content-Length:  %d\r\n\r\n" % len(data) + data


def frame_with_content_type(data: bytes) -> bytes:
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(data) + data


# (name, what, framing, whether the badly framed request itself can be answered, a protocol error is logged)
FRAMINGS = [
    ("huge-length", "Content-Length: 1000000000000000", frame_huge, False, True),
    ("short-length", "a Content-Length 3 bytes short", frame_short, False, True),
    ("long-length", "a Content-Length 20 bytes long (the next frame follows)", frame_long, True, True),
    ("lowercase", "a lowercase `content-length` header", frame_lowercase, True, False),
    ("lf-only", "LF-only line ends", frame_lf_only, True, False),
    ("double-space", "two spaces after the colon", frame_double_space, True, False),
    ("content-type", "a Content-Type header after the length", frame_with_content_type, True, False),
]


@pytest.mark.parametrize("name, what, framing, answered, logged", FRAMINGS, ids=[f[0] for f in FRAMINGS])
def test_a_badly_framed_message(server, name, what, framing, answered, logged, reliability):
    reliability.record(
        "Protocol", f"framing: {what}", "a request framed this way, then a well-framed request and a lint"
    )
    mark = server.mark()
    bad_id, bad = request_body(server)
    server.send_bytes(framing(bad))
    good = server.request("atenlens/serverInfo", {})  # answered: the server is not deaf
    assert good["result"]["torchImported"] is False
    if answered:
        assert server.response(bad_id)["result"]["torchImported"] is False
    else:
        assert bad_id not in server.responses  # it could not be read; the next one could
    errors = protocol_errors(server, mark)
    assert bool(errors) == logged, errors
    assert "Traceback" not in server.stderr.decode("utf-8", "replace")
    still_serving(server)
    reliability.number("the request itself", "answered" if answered else "skipped")
    if errors:
        reliability.number("logged", errors[0].removeprefix("atenlens: "))


def test_junk_between_frames_is_skipped(server, reliability):
    reliability.record(
        "Protocol",
        "framing: junk between frames",
        "4 KiB of bytes without a line end, a line of text and a stray blank line between two requests",
    )
    mark = server.mark()
    first_id, first = request_body(server)
    second_id, second = request_body(server)
    server.send_bytes(
        b"Content-Length: %d\r\n\r\n" % len(first)
        + first
        + b"x" * 4096
        + b"\r\nhello\r\n\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(second)
        + second
    )
    assert server.response(first_id)["result"]["torchImported"] is False
    assert server.response(second_id)["result"]["torchImported"] is False
    (error,) = protocol_errors(server, mark)
    assert "skipped 4,103 bytes" in error, error
    reliability.number("logged", error.removeprefix("atenlens: "))


# -- ids, notifications, nesting -------------------------------------------------------------------------


def test_ids_that_are_not_ids(server, reliability):
    reliability.record(
        "Protocol", "ids that are not ids", '`"id": NaN` (not JSON), `"id": 1.5`, `"id": true`, then a normal request'
    )
    mark = server.mark()
    server.send_bytes(frame_lowercase(b'{"jsonrpc":"2.0","id":NaN,"method":"atenlens/serverInfo"}'))
    for odd in (1.5, True):
        server.send_bytes(frame_lowercase(body({"jsonrpc": "2.0", "id": odd, "method": "atenlens/serverInfo"})))
    still_serving(server)
    with server.condition:
        answers = [m.data for m in server.messages[mark:] if "method" not in m.data]
    # no answer echoes NaN (it would not be JSON); the two odd ids get InvalidRequest with a null id
    assert not any(isinstance(a.get("id"), float) and math.isnan(a["id"]) for a in answers)
    refused = [a for a in answers if a.get("id") is None]
    assert [a["error"]["code"] for a in refused] == [INVALID_REQUEST, INVALID_REQUEST], refused
    errors = protocol_errors(server, mark)
    assert any("NaN is not JSON" in e for e in errors), errors
    reliability.number("answers", "NaN: none (a protocol error is logged); 1.5 and true: InvalidRequest, id null")


def test_a_notification_sent_with_an_id(server, tmp_path, reliability):
    reliability.record(
        "Protocol", "a notification sent with an id", "`textDocument/didOpen` and `initialized` sent with ids"
    )
    uri = (tmp_path / "with-id.py").as_uri()
    opened = {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}}
    with server.condition:
        first, second = server.next_id, server.next_id + 1
        server.next_id += 2
    server.send({"jsonrpc": "2.0", "id": first, "method": "textDocument/didOpen", "params": opened})
    server.send({"jsonrpc": "2.0", "id": second, "method": "initialized", "params": {}})
    for request_id, method in ((first, "textDocument/didOpen"), (second, "initialized")):
        answer = server.response(request_id)
        assert answer["error"]["code"] == INVALID_REQUEST, answer
        assert f"{method} is a notification" in answer["error"]["message"]
    # not run: the document was not opened
    assert server.result("atenlens/debug/documentText", {"uri": uri}) is None
    reliability.number("answers", "InvalidRequest (-32600) x2; not run")


def test_message_shaped_objects_in_params(server, tmp_path, reliability):
    reliability.record(
        "Protocol",
        "message-shaped objects nested in params",
        "a request whose params hold a request object and a didOpen notification object",
    )
    uri = (tmp_path / "nested.py").as_uri()
    nested_request = {"jsonrpc": "2.0", "id": 777777, "method": "textDocument/hover", "params": {"x": 1}}
    nested_open = {
        "jsonrpc": "2.0",
        "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "y = 2\n"}},
    }
    answer = server.request("atenlens/serverInfo", {"a": nested_request, "b": [nested_open]})
    assert answer["result"]["torchImported"] is False
    assert server.result("atenlens/debug/documentText", {"uri": uri}) is None  # the nested didOpen did nothing
    assert 777777 not in server.responses  # nor was the nested request answered


def test_a_reversed_range_in_did_change(server, tmp_path, reliability):
    reliability.record(
        "Protocol",
        "a reversed range in didChange",
        "didChange version 2 whose range ends (0:1) before it starts (1:3), then a good change version 3",
    )
    text = "a = 1\nbb = 2\n"
    uri = open_document(server, tmp_path / "reversed.py", text)
    server.diagnostics(uri, 1)
    mark = server.mark()
    change(server, uri, 2, (1, 3), (0, 1), "ZZZ")
    held = server.result("atenlens/debug/documentText", {"uri": uri})
    assert (held["version"], held["text"]) == (1, text)  # not applied, version kept
    (error,) = protocol_errors(server, mark)
    assert "ends (0:1) before it starts (1:3)" in error, error
    change(server, uri, 3, (0, 0), (0, 1), "A")
    held = server.result("atenlens/debug/documentText", {"uri": uri})
    assert (held["version"], held["text"]) == (3, "A = 1\nbb = 2\n")
    reliability.number("logged", error.removeprefix("atenlens: ")[:120])


# -- lifecycle -----------------------------------------------------------------------------------------


def spawn() -> Server:
    """The real server, not initialized."""
    process = subprocess.Popen(
        SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=dict(os.environ)
    )
    server = Server(process)
    threading.Thread(target=server.read_frames, daemon=True).start()
    threading.Thread(target=server.read_stderr, daemon=True).start()
    return server


def test_requests_before_initialize_and_after_shutdown(reliability):
    reliability.record(
        "Protocol",
        "requests before `initialize` and after `shutdown`",
        "hover and a custom request before initialize; then initialize; after shutdown a hover, "
        "a custom request and a notification; then exit",
    )
    own = spawn()
    try:
        for method, params in (("textDocument/hover", HOVER_PARAMS), ("atenlens/serverInfo", {})):
            answer = own.request(method, params)
            assert answer["error"]["code"] == SERVER_NOT_INITIALIZED, answer
        own.result("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}})
        own.notify("initialized", {})
        assert own.result("textDocument/hover", HOVER_PARAMS) is None
        assert own.request("shutdown")["result"] is None
        for method, params in (("textDocument/hover", HOVER_PARAMS), ("atenlens/serverInfo", {})):
            answer = own.request(method, params)
            assert answer["error"]["code"] == INVALID_REQUEST, answer
            assert "has been shut down" in answer["error"]["message"]
        own.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": "file:///late.py", "languageId": "python", "version": 1, "text": "x = 1\n"}},
        )
        own.notify("exit")
        assert own.process.wait(timeout=30) == 0
        assert "Traceback" not in own.stderr.decode("utf-8", "replace"), own.stderr.decode()
    finally:
        if own.alive:
            own.process.kill()
    reliability.number(
        "answers",
        "before initialize: ServerNotInitialized (-32002) x2; after shutdown: InvalidRequest (-32600) x2; exit code 0",
    )


class SilentProgressServer(Server):
    """A client that never answers `window/workDoneProgress/create`."""

    def answer_server_request(self, data: dict) -> None:
        if data["method"] == "window/workDoneProgress/create":
            with self.condition:
                self.server_requests.append(data)
            return
        super().answer_server_request(data)


def test_a_client_that_never_answers_progress_create(tmp_path, reliability):
    reliability.record(
        "Protocol",
        "a client that never answers `window/workDoneProgress/create`",
        "a trace command (without a workDoneToken) from a client that declares workDoneProgress "
        "support and never answers the server's create request",
    )
    own = start_server({"trace": {"device": "cpu", "timeoutSeconds": 60}})
    own.__class__ = SilentProgressServer
    try:
        path = tmp_path / "boundary.py"
        shutil.copy(FIXTURES / "boundary.py", path)
        uri = open_document(own, path, path.read_text())
        started = time.monotonic()
        answer = trace(own, uri, "fine_step")
        seconds = time.monotonic() - started
        assert answer["result"]["status"] == "ok", answer
        assert any(r["method"] == "window/workDoneProgress/create" for r in own.server_requests)
    finally:
        own.stop()
    reliability.number("answered in (a worker start included)", f"{seconds:.1f} s")


# -- large documents -------------------------------------------------------------------------------------


def test_a_10_mb_document(tmp_path, reliability):
    reliability.record(
        "Large documents",
        "a 10 MB document (200,000 functions)",
        "didOpen of 10 MB, then at once its code lenses and a hover in another document; the "
        "lenses once analysed; then didClose",
    )
    own = start_server()
    try:
        small = "import torch\n\n\ndef g():\n    return torch.ones(2)\n"
        small_uri = open_document(own, tmp_path / "small.py", small)
        own.diagnostics(small_uri, 1)
        rss_before = rss_kib(own.pid)
        # `x=1`: traceable as they are, so each gets a lens under the default `lenses.functions`
        body = "".join(f"def f{i}(x=1):\n    y = x + 1\n    return y * 2.0\n\n\n" for i in range(200_000))
        text = "import torch\n\n\n" + body + "def step(xs):\n    for x in xs.cuda():\n        x.sum().item()\n"
        assert len(text) > 10_000_000
        mark = own.mark()
        uri = open_document(own, tmp_path / "big.py", text)
        lens_id = own.request_async("textDocument/codeLens", {"textDocument": {"uri": uri}})
        hover_id = own.request_async(
            "textDocument/hover", {"textDocument": {"uri": small_uri}, "position": {"line": 4, "character": 4}}
        )
        hovered = own.wait(lambda: own.responses.get(hover_id))
        lensed = own.wait(lambda: own.responses.get(lens_id))
        assert hovered.data["result"] is None and lensed.data["result"] == []  # not analysed yet: no lenses
        # the analysis (lint and functions) ends with the document's diagnostics, after both answers
        diagnostics = own.diagnostics(uri, 1, after=mark)
        published = next(
            m
            for m in own.messages[mark:]
            if m.data.get("method") == "textDocument/publishDiagnostics" and m.data["params"]["uri"] == uri
        )
        assert hovered.received < published.received and lensed.received < published.received
        assert [(d["range"]["start"]["line"], d["code"]) for d in diagnostics] == [(text.count("\n") - 1, "AL100")]
        # then the client is told to ask again, and the lenses are there, bounded
        own.wait(lambda: any(r["method"] == "workspace/codeLens/refresh" for r in own.server_requests[0:]))
        lenses = own.result("textDocument/codeLens", {"textDocument": {"uri": uri}})
        assert len(lenses) == 20_000
        assert lenses[-1]["range"]["start"]["line"] == 3 + 5 * 19_999
        (note,) = [p["message"] for p in own.notifications("window/logMessage", mark) if "code lenses" in p["message"]]
        assert "has 200,001 functions; code lenses are shown for the first 20,000" in note, note
        rss_open = rss_kib(own.pid)
        own.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        info = server_info(own)
        assert info["openDocuments"] == 1  # dropped from the server's store
        assert own.result("atenlens/debug/documentText", {"uri": uri}) is None
        rss_closed = rss_kib(own.pid)
    finally:
        own.stop()
    reliability.number("hover and first lenses answered", "before the analysis ended")
    reliability.number(
        "server RSS before open / open / after close",
        f"{rss_before / 1024:.0f} / {rss_open / 1024:.0f} / {rss_closed / 1024:.0f} MiB",
    )
