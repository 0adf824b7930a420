"""Hostile user code traced through the real language server (`atenlens.trace`) and through the
real `atenlens trace` command: an infinite loop, sys.exit, os._exit, a segfault, a torch abort, a
million printed lines, LSP-looking bytes, memory until it runs out, unbounded recursion, a spinning
non-daemon thread, a fork. After each: the server is alive, one clear diagnostic sits at the right
line, the next lint, trace and hover are answered, and no process is left behind.

(The worker's own tests cover the same programs at the TraceWorker level; these cover what an
editor and a terminal see.)"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Optional

import pytest

from reliability_helpers import (
    FIXTURES,
    Server,
    children_of,
    descendants_of,
    hover,
    open_document,
    server_info,
    start_server,
    trace,
    wait_until,
)
from source_lines import lsp_line

MEMORY_LIMIT_MB = 1024
TIMEOUT_SECONDS = 20.0
TRACE_SOURCE = "atenlens trace"
TEXT = (FIXTURES / "hostile.py").read_text()


@dataclass(frozen=True)
class Case:
    qualname: str
    what: str
    status: str  # the trace's status
    code: Optional[str]  # the one diagnostic's code, None when the trace is fine
    at: Optional[str]  # text of the line it must point at
    message: str = ""  # a fragment of its message
    timeout: float = TIMEOUT_SECONDS
    in_loop: bool = False  # the line above (the loop's `while`) counts too: a timeout stops either

    @property
    def line(self) -> Optional[int]:
        """0-based line of the diagnostic."""
        return lsp_line(TEXT, self.at) if self.at else None

    @property
    def lines(self) -> set[int]:
        line = self.line
        return set() if line is None else {line, line - 1} if self.in_loop else {line}


CASES = [
    Case(
        "infinite_loop",
        "an infinite loop",
        "timeout",
        "AL902",
        "x = x + 1",
        "ran past its 1 s budget",
        timeout=1,
        in_loop=True,
    ),
    Case("exits", "sys.exit(3)", "error", "AL900", "sys.exit(3)", "SystemExit(3)"),
    Case("exits_hard", "os._exit(7)", "error", "AL903", "def exits_hard", "exited with exit code 7"),
    Case(
        "segfaults",
        "a segfault (ctypes.string_at(0))",
        "error",
        "AL903",
        "ctypes.string_at(0)",
        "segmentation fault (SIGSEGV)",
    ),
    Case(
        "torch_aborts", "a torch abort (torch._C._abort())", "error", "AL903", "torch._C._abort()", "aborted (SIGABRT"
    ),
    Case("floods_stdout", "a million lines printed to stdout", "ok", None, None, timeout=120),
    Case("writes_lsp_bytes", "LSP-looking frames written to fds 1 and 2 and sys.stdout", "ok", None, None),
    Case("eats_memory", "memory allocated until it runs out", "error", "AL900", "blocks.append(", "MemoryError"),
    Case("recurses", "unbounded recursion", "error", "AL900", "return down(n + 1) + 1", "RecursionError"),
    Case("leaves_a_thread", "a spinning non-daemon thread", "ok", None, None),
    Case("forks", "a fork whose child spins forever", "ok", None, None),
]
IDS = [case.qualname for case in CASES]


# -- through the language server ----------------------------------------------------------------------


def settings(timeout: float) -> dict:
    return {"trace": {"device": "cpu", "timeoutSeconds": timeout, "memoryLimitMb": MEMORY_LIMIT_MB}}


@pytest.fixture(scope="module")
def server():
    started = start_server(settings(TIMEOUT_SECONDS))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def document(server, tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile.py"
    shutil.copy(FIXTURES / "hostile.py", path)
    uri = open_document(server, path, TEXT)
    server.diagnostics(uri, 1)
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"  # the worker is warm
    return {"uri": uri, "version": 1, "lines": TEXT.split("\n")}


def trace_diagnostics(server: Server, uri: str, after: int = 0, before: Optional[int] = None) -> list[dict]:
    """The trace diagnostics of the last publishDiagnostics for `uri` among messages [after, before)."""
    with server.condition:
        window = [
            m.data["params"]
            for m in server.messages[after:before]
            if m.data.get("method") == "textDocument/publishDiagnostics"
        ]
    published = [p for p in window if p["uri"] == uri]
    assert published, "no diagnostics were published"
    return [d for d in published[-1]["diagnostics"] if d["source"] == TRACE_SOURCE]


def new_items(after: list[dict], before: list[dict]) -> list[dict]:
    left = list(before)
    fresh = []
    for item in after:
        if item in left:
            left.remove(item)
        else:
            fresh.append(item)
    return fresh


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hostile_code_through_the_server(server, document, case: Case, reliability):
    reliability.record(
        "Hostile code (server)",
        case.what,
        f"`atenlens.trace` of `{case.qualname}` through the server, then a lint, a trace and a hover",
    )
    uri = document["uri"]
    worker = children_of(server.pid)
    assert len(worker) == 1
    if case.timeout != TIMEOUT_SECONDS:
        server.notify("workspace/didChangeConfiguration", {"settings": {"atenlens": settings(case.timeout)}})
    mark = server.mark()
    started = time.monotonic()
    answer = trace(server, uri, case.qualname)
    traced = time.monotonic() - started
    if case.timeout != TIMEOUT_SECONDS:
        server.notify("workspace/didChangeConfiguration", {"settings": {"atenlens": settings(TIMEOUT_SECONDS)}})
    assert "error" not in answer, answer
    assert answer["result"]["status"] == case.status, answer
    assert server.alive and not server.closed

    # exactly one new diagnostic from this trace, at the right line
    mine = new_items(trace_diagnostics(server, uri, mark), trace_diagnostics(server, uri, 0, mark))
    if case.code is None:
        assert mine == [], mine
    else:
        assert len(mine) == 1, mine
        (diagnostic,) = mine
        assert (diagnostic["code"], diagnostic["severity"]) == (case.code, 1)
        assert diagnostic["range"]["start"]["line"] in case.lines, (diagnostic, case.at)
        assert case.message in diagnostic["message"], diagnostic["message"]
        assert case.message in answer["result"]["message"]

    # nothing survives the trace: the worker kills and reaps what the trace started (after it has
    # answered), and the server's only descendant is the warm worker again
    wait_until(lambda: descendants_of(server.pid) == worker, "a process outlived its trace")
    # the stream from the server is intact (LSP-looking output never reaches it)
    assert "capabilities" in server.responses[1].data["result"]

    # the next lint, trace and hover are answered
    document["version"] += 1
    lines = document["lines"]
    started = time.monotonic()
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
                    "text": f"# after {case.qualname}\n",
                }
            ],
        },
    )
    lines.insert(len(lines) - 1, f"# after {case.qualname}")
    server.diagnostics(uri, document["version"], after=mark)
    linted = time.monotonic() - started
    started = time.monotonic()
    assert trace(server, uri, "fine_step")["result"]["status"] == "ok"
    retraced = time.monotonic() - started
    started = time.monotonic()
    answer = hover(server, uri, lsp_line(TEXT, "return x @ torch.ones(8, 2)"), 4)
    hovered = time.monotonic() - started
    assert "`mm`" in answer["result"]["contents"]["value"], answer
    wait_until(lambda: descendants_of(server.pid) == worker, "a process outlived its trace")
    reliability.number(
        "result", f"{case.status}" + (f", {case.code} at line {(case.line or 0) + 1}" if case.code else "")
    )
    reliability.number("trace answered in", f"{traced:.1f} s")
    reliability.number(
        "next lint / trace / hover", f"{linted * 1000:.0f} ms / {retraced:.1f} s / {hovered * 1000:.0f} ms"
    )


def test_a_killed_worker_is_replaced(server, document, reliability):
    reliability.record(
        "Hostile code (server)",
        "the trace worker itself killed (SIGKILL, as the OOM killer would)",
        "SIGKILL to the warm worker process, then a trace, a hover and a lint",
    )
    uri = document["uri"]
    (worker,) = children_of(server.pid)
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: children_of(server.pid) != [worker], "the killed worker was not reaped")
    started = time.monotonic()
    answer = trace(server, uri, "fine_step")
    seconds = time.monotonic() - started
    assert answer["result"]["status"] == "ok", answer
    (replacement,) = children_of(server.pid)
    assert replacement != worker
    assert "`mm`" in hover(server, uri, lsp_line(TEXT, "return x @ torch.ones(8, 2)"), 4)["result"]["contents"]["value"]
    assert server.alive and server_info(server)["torchImported"] is False
    reliability.number("next trace (with a fresh worker) answered in", f"{seconds:.1f} s")


# -- through `atenlens trace` -------------------------------------------------------------------------

RUN_TOKEN = f"ATENLENS_RELIABILITY_RUN={uuid.uuid4().hex}"  # inherited by every process of these runs


def processes_with_token() -> list[int]:
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environment = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if RUN_TOKEN.encode() in environment.split(b"\0") and state not in ("Z", "X"):
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Every case through `atenlens trace --json`, three at a time (each is a separate command
    with its own worker): case -> (exit code, stdout, stderr, seconds)."""
    folder = tmp_path_factory.mktemp("hostile-cli")
    path = folder / "hostile.py"
    shutil.copy(FIXTURES / "hostile.py", path)
    name, _, value = RUN_TOKEN.partition("=")

    def run(case: Case):
        started = time.monotonic()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "atenlens",
                "trace",
                f"{path}::{case.qualname}",
                "--device",
                "cpu",
                "--json",
                "--timeout",
                str(case.timeout),
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, name: value},
        )
        seconds = time.monotonic() - started
        return result.returncode, result.stdout, result.stderr, seconds

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        results = dict(zip(IDS, pool.map(run, CASES)))
    return results, path


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hostile_code_through_atenlens_trace(cli_runs, case: Case, reliability):
    reliability.record(
        "Hostile code (`atenlens trace`)",
        case.what,
        f"`atenlens trace hostile.py::{case.qualname} --json` as a subprocess",
    )
    results, path = cli_runs
    code, stdout, stderr, seconds = results[case.qualname]
    assert code == (0 if case.status == "ok" else 1), (code, stdout[-2000:], stderr[-2000:])
    report = json.loads(stdout)
    assert report["status"] == case.status, report["message"]
    if case.code is None:
        assert report["diagnostics"] == []
    else:
        (diagnostic,) = report["diagnostics"]
        assert (diagnostic["code"], diagnostic["file"]) == (case.code, str(path))
        assert diagnostic["line"] - 1 in case.lines, (diagnostic, case.at)
        assert case.message in diagnostic["message"]
    if case.qualname == "floods_stdout":
        assert report["stdout"].startswith("line 0\n") and report["stdout"].endswith("line 999999\n")
        assert len(report["stdout"]) < 100_000
        reliability.number("stdout kept", f"{len(report['stdout']):,} characters, head and tail")
    if case.qualname == "writes_lsp_bytes":
        assert report["stdout"].count("Content-Length:") == 2 and report["stderr"].count("Content-Length:") == 1
    if case.qualname == "forks":
        forked = int(report["stdout"].split()[1])
        assert not pathlib.Path(f"/proc/{forked}").exists() or pathlib.Path(f"/proc/{forked}/stat").read_text().rsplit(
            ")", 1
        )[1].split()[0] in ("Z", "X")
    # when the command has exited, nothing it started is still running (worker, trace, thread, fork)
    assert processes_with_token() == []
    reliability.number(
        "result",
        f"exit {code}, {report['status']}" + (f", {case.code} at line {(case.line or 0) + 1}" if case.code else ""),
    )
    reliability.number("command took", f"{seconds:.1f} s")


# -- a file that is not UTF-8 on disk, traced -------------------------------------------------------------

LATIN1_STEP = (
    'import torch\n\n\ndef step():\n    name = "café ÿ"\n    x = torch.ones(4, 8)\n    return x @ torch.ones(8, 2)\n'
)
DECLARATION = "# -*- coding: latin-1 -*-\n"


def test_a_file_that_is_not_utf8_traced(server, tmp_path, reliability):
    reliability.record(
        "Bad input",
        "a file that is not UTF-8 on disk (traced)",
        "a Latin-1 file without a coding declaration traced through the server (the editor's "
        "text is traced) and by `atenlens trace` (refused in one line); one with a declaration "
        "traced by `atenlens trace`",
    )
    undeclared, declared = tmp_path / "undeclared.py", tmp_path / "declared.py"
    undeclared.write_bytes(LATIN1_STEP.encode("latin-1"))
    declared.write_bytes((DECLARATION + LATIN1_STEP).encode("latin-1"))
    # the editor decoded the file (as Latin-1, or with replacement characters): the server traces
    # that text, never the bytes on disk
    for text in (LATIN1_STEP, undeclared.read_bytes().decode("utf-8", errors="replace")):
        uri = open_document(server, undeclared, text)
        server.diagnostics(uri, 1)
        assert trace(server, uri, "step")["result"]["status"] == "ok"
        answer = hover(server, uri, lsp_line(LATIN1_STEP, "return x @"), 4)
        assert "`mm`" in answer["result"]["contents"]["value"]
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    refused = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{undeclared}::step", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(f"atenlens trace: cannot read {undeclared}: 'utf-8' codec can't decode byte 0xe9")
    traced = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{declared}::step", "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert traced.returncode == 0, traced.stderr
    report = json.loads(traced.stdout)
    matmul = lsp_line(DECLARATION + LATIN1_STEP, "return x @") + 1
    assert "aten.mm.default" in [e["name"] for e in report["events"] if e["line"] == matmul]
    reliability.number("result", "server: traced twice (ok); CLI: exit 2 without a declaration, exit 0 with one")
