"""Bad input through the real language server process (raw JSON-RPC over stdio) and the real
`atenlens lint`: unknown methods, malformed params and frames, positions past the end, a
100,000-line document, binary junk, a file that is not UTF-8. JSON-RPC errors where the protocol
says so; the server keeps serving and loses nothing."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from reliability_helpers import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ROOT,
    Server,
    change,
    hover,
    open_document,
    position,
    server_info,
    span,
    start_server,
)
from source_lines import lsp_line

LOOP_SYNC = "import torch\n\n\ndef step(xs):\n    total = 0.0\n    for x in xs.cuda():\n        total += x.sum().item()\n    return total\n"
SYNC_MESSAGE = "`.item()` inside a loop: the host waits for the GPU on every iteration"


@pytest.fixture(scope="module")
def server():
    started = start_server()
    yield started
    started.stop()


def document_text(server: Server, uri: str) -> str:
    return server.result("atenlens/debug/documentText", {"uri": uri})["text"]


def sync_lines(diagnostics: list[dict]) -> list[tuple[int, int, str]]:
    return [(d["range"]["start"]["line"], d["range"]["start"]["character"], d["code"]) for d in diagnostics]


def assert_serving(server: Server, uri: str, version: int, text: str) -> None:
    """The server answers a request and lints a change of `uri` (whose text is `text`, at
    `version`): a `.item()` loop appended at the end is reported at its line."""
    assert server.alive
    assert server_info(server)["torchImported"] is False
    lines = text.split("\n")
    mark = server.mark()
    change(
        server,
        uri,
        version + 1,
        (len(lines) - 1, len(lines[-1])),
        (len(lines) - 1, len(lines[-1])),
        "\nfor y in ys.cuda():\n    y.item()\n",
    )
    diagnostics = server.diagnostics(uri, version + 1, after=mark)
    assert (len(lines) + 1, 6, "AL100") in sync_lines(diagnostics), diagnostics


def test_unknown_methods(server, tmp_path, reliability):
    reliability.record(
        "Bad input",
        "unknown methods",
        "4 unknown requests (custom, $/-prefixed, misspelt LSP) and 3 unknown notifications",
    )
    uri = open_document(server, tmp_path / "a.py", LOOP_SYNC)
    server.diagnostics(uri, 1)
    for method in ("atenlens/noSuchRequest", "$/noSuchRequest", "textDocument/hoverr", "workspace/x"):
        answer = server.request(method, {"anything": [1, 2]})
        assert answer["error"]["code"] == METHOD_NOT_FOUND, answer
        assert method in answer["error"]["message"]
    mark = server.mark()
    for method in ("atenlens/noSuchNotification", "$/noSuchNotification", "textDocument/didTouch"):
        server.notify(method, {"uri": uri})
    assert_serving(server, uri, 1, LOOP_SYNC)
    # a notification is never answered, and nothing was shown to the user for it
    assert [m.data for m in server.messages[mark:] if m.data.get("method") == "window/showMessage"] == []
    reliability.number("answers", "MethodNotFound (-32601) x4; notifications ignored")


MALFORMED_REQUESTS = [
    ("textDocument/hover", {"textDocument": {}, "position": position(0, 0)}),
    ("textDocument/hover", {"bogus": 1}),
    ("textDocument/hover", None),
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": "x"}}),
    ("textDocument/inlayHint", {"textDocument": {"uri": "file:///x.py"}, "range": [0, 1]}),
    ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"}, "range": span((0, 0), (0, 0))}),
    ("textDocument/codeLens", {"textDocument": "file:///x.py"}),
    ("workspace/executeCommand", {"command": "atenlens.trace", "arguments": [5]}),
    ("workspace/executeCommand", {"command": "atenlens.trace", "arguments": [{"uri": "X"}]}),
    ("workspace/executeCommand", {"command": "atenlens.trace"}),
    ("workspace/executeCommand", {"command": "atenlens.trace", "arguments": [{"uri": "{uri}", "qualname": 7}]}),
    ("workspace/executeCommand", {"command": "atenlens.trace", "arguments": [{"uri": "{uri}", "qualname": "nope"}]}),
    ("workspace/executeCommand", {"command": "atenlens.insertDirective", "arguments": ["x", 5]}),
    ("workspace/executeCommand", {"command": "atenlens.noSuchCommand", "arguments": []}),
]


def test_malformed_params_get_invalid_params(server, tmp_path, reliability):
    reliability.record(
        "Bad input",
        "malformed params",
        f"{len(MALFORMED_REQUESTS)} requests with params of the wrong shape or type, "
        "3 notifications with broken params",
    )
    uri = open_document(server, tmp_path / "b.py", LOOP_SYNC)
    server.diagnostics(uri, 1)
    for method, params in MALFORMED_REQUESTS:
        if params is not None and "arguments" in params:
            params = {
                **params,
                "arguments": [
                    {k: (v.replace("{uri}", uri) if isinstance(v, str) else v) for k, v in a.items()}
                    if isinstance(a, dict)
                    else a
                    for a in params["arguments"]
                ],
            }
        answer = server.request(method, params)
        assert answer.get("error", {}).get("code") == INVALID_PARAMS, (method, params, answer)
    # notifications with broken params: dropped (no answer is possible), the document is intact
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri}, "contentChanges": 5})
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": "x"}, "contentChanges": []})
    server.notify("textDocument/didOpen", {"textDocument": None})
    assert document_text(server, uri) == LOOP_SYNC
    assert_serving(server, uri, 1, LOOP_SYNC)
    reliability.number("answers", f"InvalidParams (-32602) x{len(MALFORMED_REQUESTS)}")


JUNK_BODIES = {
    "broken-json": b"{{{{{",
    "truncated-object": b'{"jsonrpc":"2.0","i"',
    "array": b"[]",
    "null": b"null",
    "no-method": b'{"jsonrpc":"2.0"}',
    "method-not-a-string": b'{"jsonrpc":"2.0","method":5,"params":{}}',
    "odd-id": b'{"jsonrpc":"2.0","id":{},"x":1}',
    "not-utf8": b'{"jsonrpc":"2.0","method":"\xff\xfe"}',
}


@pytest.mark.parametrize("name", list(JUNK_BODIES))
def test_junk_frames_are_survived(server, tmp_path, name, reliability):
    body = JUNK_BODIES[name]
    reliability.record(
        "Bad input",
        f"junk JSON-RPC message: {name}",
        f"a well-framed body that is not a valid JSON-RPC message: `{body!r}`",
    )
    uri = open_document(server, tmp_path / f"junk-{name}.py", LOOP_SYNC)
    server.diagnostics(uri, 1)
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert_serving(server, uri, 1, LOOP_SYNC)


def test_positions_past_the_end(server, tmp_path, reliability):
    reliability.record(
        "Bad input",
        "positions past the end of the document",
        "hover, inlay hints, code actions, code lenses at line 10^6 / character 10^6; "
        "a didChange whose range lies past the end",
    )
    uri = open_document(server, tmp_path / "c.py", LOOP_SYNC)
    server.diagnostics(uri, 1)
    far = 1_000_000
    assert hover(server, uri, far, far) == {"jsonrpc": "2.0", "id": server.next_id - 1, "result": None}
    assert hover(server, uri, 2, far)["result"] is None
    hints = server.result("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": span((far, 0), (far, far))})
    assert hints == []
    actions = server.result(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": span((far, 0), (far, far)), "context": {"diagnostics": []}},
    )
    assert actions == []
    # a range past the end of the document is clamped to its end (LSP: positions past a line's end
    # mean its end): the text lands at the end, as any editor would put it
    change(server, uri, 2, (far, 0), (far, far), "# tail\n")
    assert document_text(server, uri) == LOOP_SYNC + "# tail\n"
    lenses = server.result("textDocument/codeLens", {"textDocument": {"uri": uri}})
    assert [(lens["range"]["start"]["line"], lens["command"]["title"]) for lens in lenses] == [
        (lsp_line(LOOP_SYNC, "def step"), "Add an example call to trace")
    ]
    assert_serving(server, uri, 2, LOOP_SYNC + "# tail\n")


def test_a_100000_line_document(server, tmp_path, reliability):
    reliability.record(
        "Bad input",
        "a 100,000-line document",
        "didOpen of 100,000 lines (10,000 functions, one `.item()` loop at the end), then an edit at its end",
    )
    body = "".join(
        f"def f{i}(x=0):\n    y = x + {i}\n    z = y * 2\n    w = z - 1\n    return w\n\n\n\n\n\n"
        for i in range(10_000)
    )
    text = body + LOOP_SYNC.replace("import torch\n", "")
    lines = text.split("\n")
    assert len(lines) >= 100_000
    started = time.monotonic()
    uri = open_document(server, tmp_path / "huge.py", text)
    diagnostics = server.diagnostics(uri, 1)
    opened = time.monotonic() - started
    item = lsp_line(text, ".item()")
    column = lines[item].index("item()")
    assert sync_lines(diagnostics) == [(item, column, "AL100")]
    started = time.monotonic()
    assert hover(server, uri, 50_000, 3)["result"] is None
    answered = time.monotonic() - started
    # an edit at the very end is linted too, and the function in the middle is still found
    change(server, uri, 2, (item, 0), (item, 0), "        pass\n")
    assert sync_lines(server.diagnostics(uri, 2)) == [(item + 1, column, "AL100")]
    lenses = server.result("textDocument/codeLens", {"textDocument": {"uri": uri}})
    assert len(lenses) == 10_001
    assert_serving(server, uri, 2, "\n".join(lines[:item] + ["        pass"] + lines[item:]))
    reliability.number("lines", f"{len(lines):,}")
    reliability.number("didOpen to diagnostics", f"{opened:.2f} s")
    reliability.number("hover right after", f"{answered * 1000:.0f} ms")


def test_binary_junk_in_a_document(server, tmp_path, reliability):
    reliability.record(
        "Bad input",
        "binary junk in a .py",
        "NUL bytes, control characters, 4 KiB of random bytes decoded with errors='replace', "
        "a BOM and Unicode line separators, between valid code; junk typed into a clean file",
    )
    generator = random.Random(7)
    junk = bytes(generator.randrange(256) for _ in range(4096)).decode("utf-8", errors="replace")
    text = "x = 1\0\0\0\n\x01\x02\x1b[31m\n" + junk + "\n" + LOOP_SYNC + "\ufeff\u2028\u0085\r\n\r\nz = 2\n"
    uri = open_document(server, tmp_path / "junk.py", text)
    diagnostics = server.diagnostics(uri, 1)
    assert document_text(server, uri) == text
    assert all(d["source"] == "atenlens" for d in diagnostics)
    # positions are in UTF-16 and within the document
    for d in diagnostics:
        assert 0 <= d["range"]["start"]["line"] <= d["range"]["end"]["line"] < len(text.split("\n")) + 2
    assert hover(server, uri, 3, 5)["result"] is None
    server.result("textDocument/codeLens", {"textDocument": {"uri": uri}})
    server.result("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": span((0, 0), (10, 0))})
    server.result(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": span((0, 0), (10, 0)), "context": {"diagnostics": []}},
    )
    # junk typed into the middle of a clean document, one character at a time
    clean = "import torch\n\nfor y in ys.cuda():\n    y.item()\n"
    uri = open_document(server, tmp_path / "typing.py", clean)
    assert sync_lines(server.diagnostics(uri, 1)) == [(3, 6, "AL100")]
    typed = "\0\x7f\ufffd\x00(\"'["
    for version, character in enumerate(typed, start=2):
        change(server, uri, version, (1, 0), (1, 0), character)
    now = "import torch\n" + "".join(reversed(typed)) + "\nfor y in ys.cuda():\n    y.item()\n"
    assert document_text(server, uri) == now
    assert sync_lines(server.diagnostics(uri, 1 + len(typed))) == [(3, 6, "AL100")]
    assert_serving(server, uri, 1 + len(typed), now)
    reliability.number("junk", f"{len(junk):,} characters")


def test_a_file_that_is_not_utf8_on_disk(tmp_path, reliability):
    reliability.record(
        "Bad input",
        "a file that is not UTF-8 on disk (`atenlens lint`)",
        "`atenlens lint` of a folder with a Latin-1 file with and one without a coding declaration, "
        "a file of random bytes and a UTF-8 file",
    )
    (tmp_path / "latin1.py").write_bytes('s = "café ÿþ"\nfor x in xs.cuda():\n    x.item()\n'.encode("latin-1"))
    generator = random.Random(3)
    (tmp_path / "random.py").write_bytes(bytes(generator.randrange(256) for _ in range(2048)))
    (tmp_path / "good.py").write_text("import torch\n\nfor y in ys.cuda():\n    y.cpu()\n", encoding="utf-8")
    # a coding declaration (PEP 263) makes a Latin-1 file valid Python: it is linted like one
    (tmp_path / "declared.py").write_bytes(
        '# -*- coding: latin-1 -*-\ns = "café"\nfor x in xs.cuda():\n    x.tolist()\n'.encode("latin-1")
    )
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    good, declared = tmp_path / "good.py", tmp_path / "declared.py"
    assert result.returncode == 1, result
    assert result.stdout.splitlines() == [
        f"{declared}:4:7: AL100 `.tolist()` inside a loop: the host waits for the GPU on every iteration",
        f"{good}:4:7: AL100 `.cpu()` inside a loop: the host waits for the GPU on every iteration",
        "Found 2 problems in 2 files.",
    ], result.stdout
    problems = sorted(result.stderr.splitlines())
    assert len(problems) == 2, result.stderr
    assert problems[0].startswith(f"{tmp_path / 'latin1.py'}: not UTF-8 (byte ")
    assert problems[1].startswith(f"{tmp_path / 'random.py'}: not UTF-8 (byte ")
    assert all(p.endswith("skipped") for p in problems)
    reliability.number(
        "files", "4 (2 linted, one of them Latin-1 with a coding declaration; 2 skipped with one line each)"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_lint_of_a_folder_with_a_fifo_and_a_link_to_a_device(tmp_path, reliability):
    reliability.record(
        "Bad input",
        "a FIFO and a link to /dev/zero named *.py (`atenlens lint`)",
        "`atenlens lint` of a folder holding a FIFO `pipe.py` (no writer: opening it blocks), a "
        "symbolic link `zero.py` to /dev/zero (reading never ends) and a UTF-8 file",
    )
    os.mkfifo(tmp_path / "pipe.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    (tmp_path / "good.py").write_text("import torch\n\nfor y in ys.cuda():\n    y.cpu()\n", encoding="utf-8")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "lint", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    seconds = time.monotonic() - started
    assert result.returncode == 1, result
    assert result.stdout.splitlines() == [
        f"{tmp_path / 'good.py'}:4:7: AL100 `.cpu()` inside a loop: the host waits for the GPU on every iteration",
        "Found 1 problem in 1 file.",
    ]
    assert result.stderr.splitlines() == [
        f"{tmp_path / 'pipe.py'}: a FIFO, not a regular file; skipped",
        f"{tmp_path / 'zero.py'}: a character device (through a symbolic link), not a regular file; skipped",
    ]
    reliability.number("files", "3 (1 linted; the FIFO and the device skipped with one line each)")
    reliability.number("run", f"{seconds:.1f} s")
