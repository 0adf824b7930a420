"""The boundary between the traced code and the server, through the real language server: a report
forged by the traced code (which can read the report pipe and its nonce from its own frames) is
that trace's error and nothing more; cancel, exit and end of input while a trace runs end it at
once and leave no process behind."""

from __future__ import annotations

import shutil
import time

import pytest

from reliability_helpers import (
    FIXTURES,
    descendants_of,
    hover,
    idle_worker,
    open_document,
    start_server,
    trace,
    wait_until,
)
from source_lines import lsp_line

TEXT = (FIXTURES / "boundary.py").read_text()
SETTINGS = {"trace": {"device": "cpu", "timeoutSeconds": 60}}


@pytest.fixture(scope="module")
def server():
    started = start_server(SETTINGS)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def document(server, tmp_path_factory):
    path = tmp_path_factory.mktemp("boundary") / "boundary.py"
    shutil.copy(FIXTURES / "boundary.py", path)
    uri = open_document(server, path, TEXT)
    server.diagnostics(uri, 1)
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"  # the worker is warm
    return {"uri": uri, "version": 1, "lines": TEXT.split("\n")}


FORGERIES = [
    (
        "forges_a_line",
        "a diagnostic whose line is a string",
        "report.diagnostics[0].line: expected an integer, got str 'seven'",
    ),
    ("forges_events", "events that are an object", "report.events: expected an array, got dict"),
    ("forges_a_summary", "a summary whose op counts are a list", "report.summary.ops: expected an object, got list"),
    ("forges_nesting", "100,000 nested arrays", "nested too deeply"),
    ("forges_not_json", "a truncated JSON object", "not JSON"),
]


@pytest.mark.parametrize("qualname, what, reason", FORGERIES, ids=[f[0] for f in FORGERIES])
def test_a_forged_report_is_that_traces_error(server, document, qualname, what, reason, reliability):
    reliability.record(
        "Boundary",
        f"a forged report: {what}",
        f"`{qualname}` finds the report pipe and nonce in its frames and writes a report; then a "
        "lint, a trace of another function and a hover in the same document",
    )
    uri = document["uri"]
    worker = idle_worker(server.pid)
    answer = trace(server, uri, qualname)["result"]
    assert answer["status"] == "error", answer
    assert "wrote a malformed report" in answer["message"] and reason in answer["message"], answer["message"]
    # the forged trace's one diagnostic sits at its `def` line
    published = server.notifications("textDocument/publishDiagnostics")[-1]
    ours = [d for d in published["diagnostics"] if d["source"] == "atenlens trace" and reason in d["message"]]
    assert [(d["code"], d["range"]["start"]["line"]) for d in ours] == [("AL903", lsp_line(TEXT, f"def {qualname}"))]

    # the document still works: a lint publishes, another function traces, its hover answers
    document["version"] += 1
    lines = document["lines"]
    mark = server.mark()
    server.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": document["version"]},
            "contentChanges": [
                {
                    "range": {
                        "start": {"line": len(lines) - 1, "character": 0},
                        "end": {"line": len(lines) - 1, "character": 0},
                    },
                    "text": f"# after {qualname}\n",
                }
            ],
        },
    )
    lines.insert(len(lines) - 1, f"# after {qualname}")
    server.diagnostics(uri, document["version"], after=mark)
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"
    answer = hover(server, uri, lsp_line(TEXT, "return x @ torch.ones(8, 2)"), 4)
    assert "`mm`" in answer["result"]["contents"]["value"], answer
    # and the forged trace can be run again: it fails the same way, it is not stuck
    again = trace(server, uri, qualname)["result"]
    assert again["status"] == "error" and reason in again["message"], again
    wait_until(lambda: descendants_of(server.pid) == worker, "a process outlived its trace")
    reliability.number("answer", answer_text(again["message"]))


def answer_text(message: str) -> str:
    return message if len(message) <= 120 else message[:117] + "..."


def start_sleeping_trace(server, uri: str, worker: list[int]) -> tuple[int, int]:
    """Sends a trace of `sleeps`; returns (request id, pid of the process running it) once it runs."""
    request_id = server.request_async(
        "workspace/executeCommand", {"command": "atenlens.trace", "arguments": [{"uri": uri, "qualname": "sleeps"}]}
    )
    (child,) = wait_until(lambda: [p for p in descendants_of(server.pid) if p not in worker], "the trace did not start")
    return request_id, child


def test_cancel_request_kills_the_trace(server, document, reliability):
    reliability.record(
        "Boundary",
        "`$/cancelRequest` for a running trace",
        "a trace of a function that sleeps 600 s (60 s budget), cancelled with `$/cancelRequest` "
        "once its process runs; then a trace of another function",
    )
    uri = document["uri"]
    worker = idle_worker(server.pid)
    request_id, child = start_sleeping_trace(server, uri, worker)
    started = time.monotonic()
    server.notify("$/cancelRequest", {"id": request_id})
    answer = server.response(request_id)
    assert answer["error"]["code"] == -32800, answer  # RequestCancelled
    wait_until(lambda: child not in descendants_of(server.pid), "the cancelled trace kept running")
    killed = time.monotonic() - started
    assert descendants_of(server.pid) == worker  # the warm worker is kept
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"
    next_trace = time.monotonic() - started
    reliability.number("trace process gone after the cancel", f"{killed:.2f} s")
    reliability.number("next trace answered after the cancel", f"{next_trace:.2f} s")


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


ENDINGS = [
    ("exit", "an `exit` notification (no `shutdown`)", 1),
    ("shutdown-exit", "`shutdown` (answered at once) then `exit`", 0),
    ("eof", "the end of the server's input (the editor closed the pipe)", 1),
]


@pytest.mark.parametrize("how, what, code", ENDINGS, ids=[e[0] for e in ENDINGS])
def test_the_server_ends_while_a_trace_runs(tmp_path, how, what, code, reliability):
    reliability.record(
        "Boundary",
        f"{what} while a trace runs",
        "a trace of a function that sleeps 600 s (60 s budget) runs; then "
        + what
        + "; the server, the worker and the trace's process must be gone",
    )
    own = start_server(SETTINGS)
    try:
        path = tmp_path / "boundary.py"
        shutil.copy(FIXTURES / "boundary.py", path)
        uri = open_document(own, path, TEXT)
        assert trace(own, uri, "fine_step")["result"]["status"] == "ok"
        worker = idle_worker(own.pid)
        _, child = start_sleeping_trace(own, uri, worker)
        processes = [own.pid] + worker + [child]
        started = time.monotonic()
        if how == "exit":
            own.notify("exit")
        elif how == "shutdown-exit":
            assert own.request("shutdown")["result"] is None
            own.notify("exit")
        else:
            own.process.stdin.close()
        assert own.process.wait(timeout=30) == code
        ended = time.monotonic() - started
        wait_until(lambda: not any(alive(pid) for pid in processes), "a process outlived the server")
        gone = time.monotonic() - started
    finally:
        if own.alive:
            own.process.kill()
    reliability.number("exit code", code)
    reliability.number("server gone / all processes gone", f"{ended:.2f} s / {gone:.2f} s")


def test_a_spinning_loop_keeps_a_bounded_report(server, document, reliability):
    budget = 30
    reliability.record(
        "Boundary",
        f"a loop spinning until its {budget} s budget (the default) runs out",
        "`while True: x = x + 1` traced through the server; the report must come back, bounded, "
        "with the events it kept",
    )
    uri = document["uri"]
    server.notify(
        "workspace/didChangeConfiguration",
        {"settings": {"atenlens": {"trace": {"device": "cpu", "timeoutSeconds": budget}}}},
    )
    mark = server.mark()
    started = time.monotonic()
    try:
        answer = trace(server, uri, "spins")["result"]
    finally:
        server.notify("workspace/didChangeConfiguration", {"settings": {"atenlens": SETTINGS}})
    seconds = time.monotonic() - started
    assert answer["status"] == "timeout", answer
    assert answer["message"] == f"the trace ran past its {budget} s budget; events so far are kept"
    (note,) = [
        p["message"]
        for p in server.notifications("window/logMessage", mark)
        if p["message"].startswith("atenlens: trace of spins: kept the first")
    ]
    kept, dropped = (int(word) for word in note.split() if word.isdigit())
    assert kept == 20000 and dropped > 0, note  # recorder.MAX_EVENTS, and the rest counted
    # the events kept are there: the loop's line has its hint and its hover
    line = lsp_line(TEXT, "        x = x + 1")
    shown = hover(server, uri, line, 8)["result"]["contents"]["value"]
    assert "`add`" in shown, shown
    reliability.number("events kept / counted only", f"{kept:,} / {dropped:,}")
    reliability.number("answered after the budget", f"{seconds - budget:.1f} s")


LINE_BREAKERS = (
    "import torch\n\x0c\n# a comment with a line separator \u2028 and a next-line \x85 in it\n"
    "x = 1  # a vertical tab \x0b too\n\n\n# atenlens: double(torch.ones(3))\ndef double(t):\n"
    "    return t * 2\n"
)


def test_characters_only_str_splitlines_breaks_at(server, tmp_path, reliability):
    reliability.record(
        "Line numbers",
        "a form feed, U+2028, U+0085 and a vertical tab above a directive",
        "a document with those characters above `# atenlens: double(torch.ones(3))`: its code lens, "
        "its quick fixes and a trace through the server",
    )
    path = tmp_path / "breakers.py"
    path.write_text(LINE_BREAKERS, encoding="utf-8")
    uri = open_document(server, path, LINE_BREAKERS)
    server.diagnostics(uri, 1)
    def_line = lsp_line(LINE_BREAKERS, "def double")
    lenses = server.result("textDocument/codeLens", {"textDocument": {"uri": uri}})
    assert [(lens["range"]["start"]["line"], lens["command"]["title"]) for lens in lenses] == [
        (def_line, "Trace this step")
    ]  # not "...: add an example call": the directive is seen
    actions = server.result(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": def_line, "character": 0}, "end": {"line": def_line, "character": 0}},
            "context": {"diagnostics": []},
        },
    )
    assert [a["title"] for a in actions] == []  # no "add an example call"
    answer = trace(server, uri, "double")["result"]
    assert answer["status"] == "ok", answer
    shown = hover(server, uri, lsp_line(LINE_BREAKERS, "return t * 2"), 4)["result"]["contents"]["value"]
    assert "`mul`" in shown and "f32[3]" in shown, shown
    reliability.number("trace", f"{answer['status']} with the directive's call, hover at line {def_line + 2}")


LIMITED = {"trace": {"device": "cpu", "timeoutSeconds": 60, "memoryLimitMb": 1024}}


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    started = start_server(LIMITED)
    path = tmp_path_factory.mktemp("limited") / "boundary.py"
    shutil.copy(FIXTURES / "boundary.py", path)
    uri = open_document(started, path, TEXT)
    started.diagnostics(uri, 1)
    assert trace(started, uri, "fine_step")["result"]["status"] == "ok"
    yield started, uri
    started.stop()


def trace_diagnostic(server, uri: str, mark: int, fragment: str) -> dict:
    published = [p for p in server.notifications("textDocument/publishDiagnostics", mark) if p["uri"] == uri]
    (found,) = [d for d in published[-1]["diagnostics"] if fragment in d["message"]]
    return found


def test_shared_memory_past_the_limit(limited, reliability):
    reliability.record(
        "Boundary",
        "a 3 GB shared anonymous mmap written page by page (1 GB limit)",
        "`mmap.mmap(-1, 3 << 30, flags=MAP_SHARED)` (outside RLIMIT_DATA), every page written; then another trace",
    )
    server, uri = limited
    mark = server.mark()
    answer = trace(server, uri, "maps_shared_memory")["result"]
    assert answer["status"] == "error", answer
    assert "over the trace's memory limit of 1,024 MB, and was killed" in answer["message"], answer
    used = int(answer["message"].split(" used ")[1].split(" MB")[0].replace(",", ""))
    assert used > 1024
    diagnostic = trace_diagnostic(server, uri, mark, "memory limit")
    assert diagnostic["code"] == "AL903"
    assert diagnostic["range"]["start"]["line"] in {
        lsp_line(TEXT, "shared[offset] = 1"),
        lsp_line(TEXT, "for offset in range(0, len(shared)"),
    }
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"
    reliability.number("answer", answer["message"])


def test_closed_descriptors_are_named(limited, reliability):
    reliability.record(
        "Boundary",
        "the traced code closes file descriptors 0-10",
        "`os.closerange(0, 11)` (the report pipe and the output pipes among them); then another trace",
    )
    server, uri = limited
    answer = trace(server, uri, "closes_descriptors")["result"]
    assert answer["status"] == "error", answer
    assert "the traced code closed the file descriptors the trace writes to" in answer["message"], answer
    assert "os._exit" not in answer["message"]
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"
    reliability.number("answer", answer["message"])
