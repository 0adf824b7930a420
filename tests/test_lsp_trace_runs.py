"""Trace runs you can see and stop, through the real server and the real trace worker, as VS Code and as
Neovim: the lens counts the seconds of a trace in flight and offers a Cancel, the cancel command stops it,
and every trace (from the command or on save) leaves one log line, failures as errors."""

from __future__ import annotations

import asyncio
import pathlib
import re
import shutil

from lsprotocol import types

from lsp_helpers import code_lenses, execute, initialize, open_document

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "lsp"
RUNNING = re.compile(r"tracing… \d+\.\d s")


def trace_logs(client) -> list[tuple[int, str]]:
    return [(m.type, m.message) for m in client.log_messages if m.message.startswith("atenlens: trace of ")]


def without_seconds(text: str) -> str:
    return re.sub(r"\d+\.\d s", "N s", text)


async def test_a_trace_in_flight_shows_its_seconds_and_stops_on_cancel(client, tmp_path):
    await initialize(client, {"trace": {"timeoutSeconds": 120}})
    path = tmp_path / "spin.py"
    shutil.copy(FIXTURES / "spin.py", path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    spin = text.split("\n").index("def spin():")
    assert (spin, "Trace this step", "atenlens.trace") in await code_lenses(client, uri)

    running = asyncio.ensure_future(execute(client, "atenlens.trace", {"uri": uri, "qualname": "spin"}))
    if client.editor == "visual-studio-code":
        # it asks VS Code to redraw the lenses while the trace runs (every second)
        await client.recorder.until(lambda: client.recorder.refreshes.count("codeLens") >= 3)

    async def lenses_of_spin():
        return [(title, command) for line, title, command in await code_lenses(client, uri) if line == spin]

    while not RUNNING.fullmatch((await lenses_of_spin())[0][0]):  # "waiting to trace…" while the worker starts
        await asyncio.sleep(0.2)  # ok: polls the lens the client asks for, as an editor does on refresh
    (title, shown), cancel = await lenses_of_spin()
    assert shown == "" and cancel == ("Cancel", "atenlens.cancelTrace")
    first = float(title.split()[1])
    await asyncio.sleep(1.1)  # ok: the lens counts seconds; the test lets one pass on the wall clock
    later = float((await lenses_of_spin())[0][0].split()[1])
    assert later >= first + 1.0

    assert await execute(client, "atenlens.cancelTrace", {"uri": uri, "qualname": "spin"}) == {"cancelled": 1}
    assert await running == {"status": "cancelled", "qualname": "spin", "message": "cancelled by the user"}
    assert (await lenses_of_spin()) == [("Trace this step", "atenlens.trace")]
    assert [(kind, without_seconds(message)) for kind, message in trace_logs(client)] == [
        (types.MessageType.Info, "atenlens: trace of spin (command) stopped after N s: cancelled by the user")
    ]


async def test_every_trace_is_logged_failures_as_errors(client, tmp_path):
    await initialize(client, {"trace": {"onSave": True}})
    path = tmp_path / "spin.py"
    shutil.copy(FIXTURES / "spin.py", path)
    uri = await open_document(client, path, path.read_text())
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "quick"})
    assert outcome["status"] == "ok", outcome
    # saved: the function traced before is traced again, and that is logged too
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.recorder.until(lambda: len(trace_logs(client)) == 2)
    raises = tmp_path / "raises.py"
    shutil.copy(FIXTURES / "raises.py", raises)
    other = await open_document(client, raises, raises.read_text())
    failed = await execute(client, "atenlens.trace", {"uri": other, "qualname": "boom"})
    assert failed["status"] == "error"
    message = "RuntimeError: a and b must have same reduction dim, but got [2, 3] X [2, 3]."
    assert [(kind, without_seconds(text)) for kind, text in trace_logs(client)] == [
        (types.MessageType.Info, f"atenlens: trace of quick (command) done in N s: {outcome['summary']}"),
        (types.MessageType.Info, f"atenlens: trace of quick (on save) done in N s: {outcome['summary']}"),
        (types.MessageType.Error, f"atenlens: trace of boom (command) error after N s: {message}"),
    ]
