"""Trust: with `trace.enabled` false the real server runs no user code whatever arrives (no worker
process ever starts, the module's top level never runs), and when tracing does run, the traced
code sees only the environment the worker passes on, not the editor's secrets; through the server
and through `atenlens trace`."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
from typing import Any, Optional

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

import lsp_helpers as lh
from reliability_helpers import (
    FIXTURES,
    INVALID_PARAMS,
    ROOT,
    ProcessSampler,
    children_of,
    hover,
    open_document,
    position,
    server_info,
    span,
    start_server,
    trace,
)
from source_lines import lsp_line

# What an editor's environment may hold and user code must not see (names without the
# ATENLENS_ prefix, which the worker passes on by design: docs/security.md).
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-1234",
    "GITHUB_TOKEN": "ghp_secret5678",
    "MY_SERVICE_PASSWORD": "hunter2",
}


def copy_marker(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    path = folder / "marker.py"
    shutil.copy(FIXTURES / "marker.py", path)
    return path, path.with_suffix(".ran")


def assert_no_secrets(environment: dict[str, str]) -> None:
    assert "PATH" in environment  # the marker really recorded an environment
    leaked = {name for name, value in environment.items() if name in SECRETS or value in SECRETS.values()}
    assert leaked == set(), f"the traced code saw {sorted(leaked)}"


def test_with_tracing_disabled_no_user_code_runs(tmp_path, reliability):
    reliability.record(
        "Trust",
        "trace.enabled false: no user code runs",
        "every command and request that could trace (by name, by position, 20 at once, on save, "
        "insert directive, restart worker, settings changes), child processes sampled every 5 ms; "
        "then tracing enabled as a control",
    )
    server = start_server({"trace": {"enabled": False, "onSave": True, "device": "cpu"}}, env=SECRETS)
    try:
        path, marker = copy_marker(tmp_path)
        text = path.read_text()
        uri = open_document(server, path, text)
        server.diagnostics(uri, 1)
        step = lsp_line(text, "def step")
        attempts = 0
        with ProcessSampler(server.pid) as sampler:
            for argument in ({"uri": uri, "qualname": "step"}, {"uri": uri, "position": position(step + 1, 4)}):
                answer = server.result(
                    "workspace/executeCommand", {"command": "atenlens.trace", "arguments": [argument]}
                )
                assert answer["status"] == "disabled" and "no code was run" in answer["message"]
                attempts += 1
            ids = [
                server.request_async(
                    "workspace/executeCommand",
                    {"command": "atenlens.trace", "arguments": [{"uri": uri, "qualname": "step"}]},
                )
                for _ in range(20)
            ]
            assert all(server.response(i)["result"]["status"] == "disabled" for i in ids)
            attempts += 20
            for command in ("atenlens.insertDirective", "atenlens.restartWorker"):
                server.request(
                    "workspace/executeCommand", {"command": command, "arguments": [{"uri": uri, "qualname": "step"}]}
                )
                attempts += 1
            # a save with trace-on-save set, edits, settings that change everything but `enabled`
            server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
            server.notify(
                "workspace/didChangeConfiguration",
                {
                    "settings": {
                        "atenlens": {
                            "trace": {
                                "enabled": False,
                                "onSave": True,
                                "timeoutSeconds": 5,
                                "device": "cuda",
                                "memoryLimitMb": 512,
                            }
                        }
                    }
                },
            )
            server.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": 2},
                    "contentChanges": [{"range": span((step + 1, 4), (step + 1, 4)), "text": "x = 1\n    "}],
                },
            )
            server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
            attempts += 3
            # settings that are invalid fall back to the defaults, but never to "enabled"
            server.notify(
                "workspace/didChangeConfiguration",
                {"settings": {"atenlens": {"trace": {"enabled": "yes", "timeoutSeconds": -1}}}},
            )
            lenses = server.result("textDocument/codeLens", {"textDocument": {"uri": uri}})
            assert [lens["command"]["command"] for lens in lenses if lens["command"]["command"]] == [], lenses
            answer = server.result(
                "workspace/executeCommand",
                {"command": "atenlens.trace", "arguments": [{"uri": uri, "qualname": "step"}]},
            )
            attempts += 1
            hover(server, uri, step + 1, 4)
            server.result("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": span((0, 0), (20, 0))})
            server.result(
                "textDocument/codeAction",
                {"textDocument": {"uri": uri}, "range": span((0, 0), (20, 0)), "context": {"diagnostics": []}},
            )
            # a file that is not open cannot be traced either way
            other = server.request(
                "workspace/executeCommand",
                {
                    "command": "atenlens.trace",
                    "arguments": [{"uri": (tmp_path / "elsewhere.py").as_uri(), "qualname": "step"}],
                },
            )
            assert other["error"]["code"] == INVALID_PARAMS
            info = server_info(server)
        assert answer["status"] == "disabled", "an invalid `enabled` turned tracing on"
        assert info["workerStarts"] == 0 and info["torchImported"] is False
        assert sampler.max_children == 0, "a process was started while tracing was disabled"
        assert sampler.samples >= 1
        assert not marker.exists(), "the module's code ran while tracing was disabled"

        # The control: the same module, once tracing is enabled, does run (and leaves its marker),
        # in exactly one worker process, with none of the editor's secrets.
        server.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"atenlens": {"trace": {"enabled": True, "device": "cpu"}}}},
        )
        assert trace(server, uri, "step")["result"]["status"] == "ok"
        assert marker.exists()
        assert len(children_of(server.pid)) == 1
        server_environment = pathlib.Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        assert b"GITHUB_TOKEN=ghp_secret5678" in server_environment  # the server itself had them
        assert_no_secrets(json.loads(marker.read_text()))
        reliability.number("attempts to run code while disabled", attempts)
        reliability.number(
            "process samples while disabled / max child processes", f"{sampler.samples} / {sampler.max_children}"
        )
    finally:
        server.stop()


def test_atenlens_trace_passes_no_secrets(tmp_path, reliability):
    reliability.record(
        "Trust",
        "the worker's environment (`atenlens trace`)",
        f"`atenlens trace` run with {len(SECRETS)} secret variables set; the traced module records "
        "the environment it sees",
    )
    path, marker = copy_marker(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{path}::step", "--device", "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **SECRETS},
    )
    assert result.returncode == 0, result.stderr
    environment = json.loads(marker.read_text())
    assert_no_secrets(environment)
    reliability.number("variables the traced code saw", len(environment))


# -- the trust switch: tracing runs only while the last explicit, valid trace.enabled is true ---------

OFF, ON = {"trace": {"enabled": False}}, {"trace": {"enabled": True}}
NOTHING = object()  # a source that is not sent at all
# (case, initializationOptions, didChangeConfiguration settings or NOTHING, what workspace/configuration
#  answers if the server asks, whether a trace runs, what the server's last log line about it says)
SWITCH_CASES = [
    ("no options at all", None, NOTHING, None, False, "initializationOptions does not set it (no settings)"),
    (
        "options without trace.enabled",
        {"hints": {"maxLength": 20}},
        NOTHING,
        None,
        False,
        "initializationOptions does not set it (no trace section)",
    ),
    (
        "options: trace.enabled null",
        {"trace": {"enabled": None}},
        NOTHING,
        None,
        False,
        "initializationOptions: trace.enabled is null, not true or false",
    ),
    (
        "options: trace null",
        {"trace": None},
        NOTHING,
        None,
        False,
        "initializationOptions: trace is null, not an object",
    ),
    (
        "options: a list",
        ["trace", {"enabled": True}],
        NOTHING,
        None,
        False,
        "initializationOptions: settings are list, not an object",
    ),
    (
        'options: trace.enabled "true"',
        {"trace": {"enabled": "true"}},
        NOTHING,
        None,
        False,
        "initializationOptions: trace.enabled is 'true', not true or false",
    ),
    (
        "off, then a change of another setting",
        OFF,
        {"atenlens": {"hints": {"maxLength": 20}}},
        None,
        False,
        "workspace/didChangeConfiguration does not set it (no trace section); as before: "
        "initializationOptions: trace.enabled is false",
    ),
    (
        "off, then a change with {} (server asks; answer null)",
        OFF,
        {},
        [None],
        False,
        "workspace/configuration does not set it (no settings)",
    ),
    (
        "off, then a change with null (server asks; answer null)",
        OFF,
        None,
        None,
        False,
        "workspace/configuration (an error or an answer that is not a list) does not set it (no settings); "
        "as before: initializationOptions: trace.enabled is false",
    ),
    (
        "off, then a change with trace.enabled null",
        OFF,
        {"atenlens": {"trace": {"enabled": None}}},
        None,
        False,
        "workspace/didChangeConfiguration: trace.enabled is null, not true or false",
    ),
    (
        "off, then the server asks and gets other settings",
        OFF,
        {},
        [{"hints": {"maxLength": 20}}],
        False,
        "workspace/configuration does not set it (no trace section)",
    ),
    (
        "on, then a change with trace null",
        ON,
        {"atenlens": {"trace": None}},
        None,
        False,
        "workspace/didChangeConfiguration: trace is null, not an object",
    ),
    (
        "on, then a change with trace.enabled 1",
        ON,
        {"trace": {"enabled": 1}},
        None,
        False,
        "workspace/didChangeConfiguration: trace.enabled is 1, not true or false",
    ),
    (
        "on, then the server asks and gets false",
        ON,
        {},
        [{"trace": {"enabled": False}}],
        False,
        "workspace/configuration: trace.enabled is false",
    ),
    (
        "on, then a change of another setting (control)",
        ON,
        {"atenlens": {"hints": {"maxLength": 20}}},
        None,
        True,
        "workspace/didChangeConfiguration does not set it (no trace section); as before: "
        "initializationOptions: trace.enabled is true",
    ),
    (
        "off, then the server asks and gets true (control)",
        OFF,
        {},
        [{"trace": {"enabled": True, "device": "cpu"}}],
        True,
        "workspace/configuration: trace.enabled is true",
    ),
]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "atenlens", "serve"]))
async def lsp(lsp_client: LanguageClient):
    lsp_client.editor = "neovim"  # Neovim's capabilities: it answers workspace/configuration
    lsp_client.recorder = lh.install_recorder(lsp_client)
    features = lsp_client.protocol.fm.features
    keep_log = features[types.WINDOW_LOG_MESSAGE]

    def log_message(params: types.LogMessageParams) -> None:
        keep_log(params)
        lsp_client.recorder.note()

    features[types.WINDOW_LOG_MESSAGE] = log_message
    yield
    await lsp_client.shutdown_session()


@pytest.mark.parametrize(
    "case, options, change, answer, runs, decided", SWITCH_CASES, ids=[case[0] for case in SWITCH_CASES]
)
async def test_trace_switch_fails_closed(lsp, tmp_path, reliability, case, options, change, answer, runs, decided):
    reliability.record(
        "Trust",
        f"trace.enabled: {case}",
        f"real LSP client (pytest-lsp, Neovim's capabilities); initializationOptions "
        f"{json.dumps(options)}"
        + ("" if change is NOTHING else f", then didChangeConfiguration {json.dumps(change)}")
        + (f", workspace/configuration answered {json.dumps(answer)}" if change in ({}, None) else "")
        + f"; then a trace: must {'run' if runs else 'be refused'}",
    )
    asked: list[types.ConfigurationParams] = []

    def configuration(params: types.ConfigurationParams) -> Any:
        asked.append(params)
        lsp.recorder.note()
        return answer

    lsp.protocol.fm.features[types.WORKSPACE_CONFIGURATION] = configuration
    await lh.initialize(lsp, options, exactly=True)
    path, marker = copy_marker(tmp_path)
    uri = await lh.open_document(lsp, path, path.read_text())
    if change is not NOTHING:
        # the server logs its first decision at `initialized`, which it handles after the document's
        # first diagnostics when those were published before it started (lsp/early.py): a change
        # sent before that log came must not take it for the change's own
        await lsp.recorder.until(lambda: any("tracing is" in m.message for m in lsp.log_messages))
        seen = len(lsp.log_messages)
        lsp.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=change))
        # the server has applied the change once it logs what decided tracing
        await lsp.recorder.until(lambda: any("tracing is" in m.message for m in lsp.log_messages[seen:]))
        assert bool(asked) == (change in ({}, None))  # it asked for the values only when none came
    outcome = await lh.execute(lsp, "atenlens.trace", {"uri": uri, "qualname": "step"})
    lines = [m.message for m in lsp.log_messages if "tracing is" in m.message]
    assert decided in lines[-1], lines
    assert lines[-1].startswith(f"atenlens: tracing is {'on' if runs else 'off'}: "), lines
    info = await lh.server_info(lsp)
    if runs:
        assert outcome["status"] == "ok", outcome
        assert marker.exists() and info["workerStarts"] == 1
    else:
        assert outcome["status"] == "disabled" and "no code was run" in outcome["message"]
        assert not marker.exists() and info["workerStarts"] == 0 and children_of(info["pid"]) == []
        assert await lh.code_lenses(lsp, uri) == []
    reliability.number("tracing log line", lines[-1])


# -- the workspace's files named like the standard library: never imported by the server or worker ----

SHADOWED = ("logging", "copy", "random", "selectors")
# The traced module reports what its process sees: sys.path and where those modules came from.
SEES = """\
import json, pathlib, sys
import copy, logging, random, selectors
import torch
pathlib.Path(__file__).with_suffix(".seen").write_text(json.dumps({
    "path": sys.path, "files": {m.__name__: m.__file__ for m in (copy, logging, random, selectors)}}))


def step():
    return torch.ones(2) + 1
"""


def plant_shadows(folder: pathlib.Path, names: tuple[str, ...], fail: bool = True) -> None:
    """Files named like the standard library's modules that leave a marker when imported (and,
    with `fail`, then raise, as a broken shadow would)."""
    for name in names:
        (folder / f"{name}.py").write_text(
            f"open({str(folder / ('ran-' + name))!r}, 'w').close()\n"
            + (f"raise ImportError('the workspace {name}.py was imported')\n" if fail else "")
        )


def ran(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ran-*"))


@pytest.mark.parametrize("how", ["python -m atenlens serve", "atenlens serve"])
def test_workspace_files_named_like_the_standard_library_never_run(tmp_path, reliability, how):
    reliability.record(
        "Trust",
        f"stdlib-named files in the workspace: `{how}`",
        f"the server started as `{how}` in a workspace whose root holds "
        f"{', '.join(n + '.py' for n in SHADOWED)} (each leaves a marker and raises); a file "
        "in a subfolder traced through the server's worker",
    )
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    plant_shadows(workspace, SHADOWED)
    model = workspace / "src" / "model.py"
    model.write_text(SEES)
    command = (
        [sys.executable, "-m", "atenlens", "serve"]
        if how.startswith("python")
        else [str(pathlib.Path(sys.executable).parent / "atenlens"), "serve"]
    )
    server = start_server({"trace": {"device": "cpu"}}, cwd=workspace, command=command)
    try:
        uri = open_document(server, model, SEES)
        answer = trace(server, uri, "step")
        assert answer["result"]["status"] == "ok", answer
        assert ran(workspace) == [], "a workspace file named like the standard library ran"
        seen = json.loads(model.with_suffix(".seen").read_text())
        # the traced file's own folder is on its sys.path, on purpose; the workspace root is not
        assert str(workspace / "src") in seen["path"] and str(workspace) not in seen["path"]
        assert all(not f.startswith(str(workspace)) for f in seen["files"].values()), seen["files"]
        reliability.number("workspace files run", len(ran(workspace)))
    finally:
        server.stop()


def test_python_m_refuses_to_start_after_runpy_imported_a_workspace_module(tmp_path, reliability):
    reliability.record(
        "Trust",
        "`python -m` when runpy's own imports are shadowed",
        "a workspace `warnings.py` (imported by Python's -m machinery before atenlens runs): "
        "`python -m atenlens serve` there, then `python -P -m atenlens serve`",
    )
    plant_shadows(tmp_path, ("warnings",), fail=False)
    started = subprocess.run(
        [sys.executable, "-m", "atenlens", "serve"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2 and started.stdout == ""
    assert started.stderr.startswith(f"atenlens: warnings came from {os.path.realpath(tmp_path)} ")
    assert "`python -P -m atenlens ...`" in started.stderr
    assert ran(tmp_path) == ["ran-warnings"]  # it did run: Python imported it before atenlens began
    (tmp_path / "ran-warnings").unlink()
    server = start_server(None, cwd=tmp_path, command=[sys.executable, "-P", "-m", "atenlens", "serve"])
    try:
        assert server_info(server)["torchImported"] is False
    finally:
        server.stop()
    assert ran(tmp_path) == []
    reliability.number("exit status of `python -m` there", started.returncode)


# -- serve --tcp: loopback only, a token, one client ------------------------------------------------------


def tcp_frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def tcp_read(stream) -> Optional[dict]:
    """The next message from a socket's file, or None when the server closed the connection."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if not line.strip():
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length))


def tcp_answer(stream, request_id: int) -> dict:
    while (message := tcp_read(stream)) is not None:
        if message.get("id") == request_id and "method" not in message:
            return message
    raise AssertionError("the connection closed before the answer")


def tcp_initialize(options: Any) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options},
    }


def start_tcp_server(env: dict) -> tuple[subprocess.Popen, int, str]:
    process = subprocess.Popen(
        [sys.executable, "-P", "-m", "atenlens", "serve", "--tcp", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
        cwd=ROOT,
    )
    line = process.stderr.readline().decode()
    match = re.match(
        r"atenlens: listening on 127\.0\.0\.1:(\d+) for one client; it must send "
        r"initializationOptions\.tcpToken = (.*)\n",
        line,
    )
    assert match, line
    return process, int(match.group(1)), match.group(2)


def test_serve_tcp_refuses_other_hosts_and_clients_without_the_token(reliability):
    reliability.record(
        "Trust",
        "`serve --tcp`: loopback, token, one client",
        "`--tcp` on 0.0.0.0, 192.0.2.1 and [2001:db8::1]; then on 127.0.0.1 real sockets: an initialize "
        "without the token, one with a wrong token, junk, the right token, a second client while the "
        "first is served, the first client's disconnect",
    )
    for host in ("0.0.0.0", "192.0.2.1", "[2001:db8::1]"):
        refused = subprocess.run(
            [sys.executable, "-P", "-m", "atenlens", "serve", "--tcp", f"{host}:0"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert refused.returncode == 2
        assert refused.stderr.startswith("atenlens serve: --tcp listens on loopback addresses only"), refused.stderr
    process, port, token = start_tcp_server({})
    token = json.loads(token)
    try:
        refusals = 0
        for options in (None, {"tcpToken": "guess"}, {"tcpToken": token[:-1]}, {"trace": {"enabled": True}}):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
                client.sendall(tcp_frame(tcp_initialize(options)))
                stream = client.makefile("rb")
                answer = tcp_read(stream)
                assert answer["error"]["code"] == -32600 and "tcpToken" in answer["error"]["message"], answer
                assert tcp_read(stream) is None  # and closed
            refusals += 1
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(b"GET / HTTP/1.1\r\n\r\n")
            client.shutdown(socket.SHUT_WR)
            assert client.makefile("rb").read() == b""
        refusals += 1
        assert process.poll() is None
        served = socket.create_connection(("127.0.0.1", port), timeout=60)
        served.sendall(tcp_frame(tcp_initialize({"tcpToken": token})))
        stream = served.makefile("rb")
        assert "capabilities" in tcp_answer(stream, 1)["result"]
        served.sendall(tcp_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        served.sendall(tcp_frame({"jsonrpc": "2.0", "id": 2, "method": "atenlens/serverInfo", "params": {}}))
        assert tcp_answer(stream, 2)["result"]["pid"] == process.pid
        try:  # one client: the port is closed while it is served
            socket.create_connection(("127.0.0.1", port), timeout=10).close()
            second = "connected"
        except ConnectionRefusedError:
            second = "refused"
        assert second == "refused"
        stream.close()  # its disconnect ends the server, as stdio's end does
        served.close()
        assert process.wait(timeout=60) == 1
        log = process.stderr.read().decode()
        assert log.count("atenlens: refused a connection from 127.0.0.1:") == refusals, log
        reliability.number("connections refused", refusals)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_serve_tcp_token_from_the_environment_is_not_printed_nor_passed_to_traced_code(tmp_path, reliability):
    reliability.record(
        "Trust",
        "`serve --tcp` with ATENLENS_TCP_TOKEN",
        "the token given in the environment; a trace through the TCP connection records the "
        "environment the traced code sees",
    )
    secret = "tcp-token-0123456789"
    process, port, said = start_tcp_server({"ATENLENS_TCP_TOKEN": secret})
    try:
        assert said == "the value of ATENLENS_TCP_TOKEN" and secret not in said
        path, marker = copy_marker(tmp_path)
        with socket.create_connection(("127.0.0.1", port), timeout=300) as client:
            stream = client.makefile("rb")
            client.sendall(tcp_frame(tcp_initialize({"tcpToken": secret, "trace": {"enabled": True, "device": "cpu"}})))
            tcp_answer(stream, 1)
            client.sendall(tcp_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            client.sendall(
                tcp_frame(
                    {
                        "jsonrpc": "2.0",
                        "method": "textDocument/didOpen",
                        "params": {
                            "textDocument": {
                                "uri": path.as_uri(),
                                "languageId": "python",
                                "version": 1,
                                "text": path.read_text(),
                            }
                        },
                    }
                )
            )
            client.sendall(
                tcp_frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "workspace/executeCommand",
                        "params": {
                            "command": "atenlens.trace",
                            "arguments": [{"uri": path.as_uri(), "qualname": "step"}],
                        },
                    }
                )
            )
            assert tcp_answer(stream, 2)["result"]["status"] == "ok"
            client.sendall(tcp_frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
            tcp_answer(stream, 3)
            client.sendall(tcp_frame({"jsonrpc": "2.0", "method": "exit"}))
            assert process.wait(timeout=60) == 0
        seen = json.loads(marker.read_text())
        assert "ATENLENS_TCP_TOKEN" not in seen and secret not in json.dumps(seen)
        assert secret not in process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


# -- the compiled-shim cache: only what this user built is loaded ----------------------------------------

# Loads the shims (as the worker does before torch) and says what happened; it never imports torch.
LOAD_SHIMS = """
import json, os, sys
from atenlens.trace.gpu import shims
status = shims.load_shims()
print(json.dumps({"available": status.available, "built": status.built, "cache_dir": status.cache_dir,
                  "reason": status.reason, "notes": list(status.notes)}))
sys.stdout.flush()
os._exit(0)
"""
# A library whose constructor leaves a marker: what another account could plant in a shared cache.
PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) { FILE *f = fopen(MARKER, "w"); if (f) fclose(f); }
"""


def load_shims(cache: pathlib.Path) -> dict:
    from atenlens.worker.client import worker_environment

    done = subprocess.run(
        [sys.executable, "-c", LOAD_SHIMS],
        capture_output=True,
        text=True,
        timeout=600,
        env=worker_environment({"ATENLENS_CACHE_DIR": str(cache)}),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_shim_cache_loads_only_what_this_user_built(tmp_path, reliability):
    reliability.record(
        "Trust",
        "compiled-shim cache: planted library, group-writable folder",
        "a .so whose constructor leaves a marker planted over a cached shim (its recorded hash no "
        "longer matches); then the build folder made group-writable (chmod 0770)",
    )
    from atenlens.trace.gpu import shims

    cache = tmp_path / "cache"
    cold = load_shims(cache)
    assert (cold["available"], cold["built"], cold["notes"]) == (True, True, []), cold
    folder = pathlib.Path(cold["cache_dir"])
    assert [oct(p.stat().st_mode & 0o777) for p in (cache, cache / "shims", folder)] == ["0o700"] * 3

    marker = tmp_path / "planted-ran"
    source = tmp_path / "planted.c"
    source.write_text(PLANTED.replace("MARKER", json.dumps(str(marker))))
    guard = folder / "fake_cuda_guard.so"
    subprocess.run(
        [shims.find_compiler(), "-x", "c", "-shared", "-fPIC", str(source), "-o", str(guard)], check=True, timeout=120
    )
    planted_hash = shims._sha256(str(guard))
    rebuilt = load_shims(cache)
    assert not marker.exists(), "the planted library was loaded"
    assert (rebuilt["available"], rebuilt["built"]) == (True, True)
    assert rebuilt["notes"] == [
        "the cached fake_cuda_guard.so does not match the hash recorded when it was built: not loaded, rebuilt"
    ]
    assert shims._sha256(str(guard)) != planted_hash
    assert (folder / "fake_cuda_guard.so.sha256").read_text().strip() == shims._sha256(str(guard))

    folder.chmod(0o770)
    refused = load_shims(cache)
    assert refused["available"] and refused["built"] and not marker.exists()
    assert refused["notes"] == [
        f"the shim cache is not used: {folder} is writable by group or others (mode 0770); "
        "the CUDA shims were built in a private temporary folder instead (make the cache "
        "folder yours and 0700, or set ATENLENS_CACHE_DIR)"
    ]
    assert pathlib.Path(refused["cache_dir"]).name.startswith("atenlens-shims-")
    assert not pathlib.Path(refused["cache_dir"]).exists()  # removed once loaded
    folder.chmod(0o700)
    warm = load_shims(cache)
    assert (warm["available"], warm["built"], warm["notes"]) == (True, False, [])

    if os.getuid() == 0:  # only root can give a file away (the test machines run as root)
        # a library (with the right hash) that another account owns: that account could change it
        hooks = folder / "fake_cuda_hooks.so"
        other = os.getuid() + 1
        os.chown(hooks, other, -1)
        owned = load_shims(cache)
        assert owned["built"] and owned["notes"] == [
            f"the cached fake_cuda_hooks.so is owned by uid {other}, not by this user (uid {os.getuid()}): "
            "not loaded, rebuilt"
        ]
        assert hooks.stat().st_uid == os.getuid()
    reliability.number("planted library loaded", marker.exists())
