"""What the .vsix bundles for the server (client/bundle_server.py, client/bundled-requirements.txt) and
how the extension starts it (client/serve.py): a user environment with no package at all still gets
lint, and no file of the workspace shadows a module of the server."""

from __future__ import annotations

import asyncio
import platform
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from lsprotocol import types
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "client" / "bundled-requirements.txt"
LOOP_WITH_ITEM = "def train(loss_fn, steps):\n    total = 0.0\n    for _ in range(steps):\n        total += loss_fn().cuda().item()\n    return total\n"


def pinned() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in PINS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def installed_closure(names: list[str]) -> set[str]:
    """The distributions these need at run time in this environment, themselves included."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_every_runtime_dependency_but_torch_is_pinned() -> None:
    pins = pinned()
    assert "torch" not in pins
    server_needs = [r for r in runtime_requirements() if canonicalize_name(r.name) != "torch"]
    for requirement in server_needs:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is a runtime dependency but is not bundled"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} does not satisfy {requirement}"
    missing = installed_closure([r.name for r in server_needs]) - set(pins)
    assert not missing, f"needed at run time but not bundled: {sorted(missing)}"


async def test_bundled_server_lints_in_an_environment_without_packages(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "client" / "bundle_server.py")], check=True, capture_output=True, timeout=600
    )
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = bare / "bin" / "python"
    nothing = subprocess.run([str(python), "-c", "import pygls"], capture_output=True, text=True)
    assert "No module named 'pygls'" in nothing.stderr

    workspace = tmp_path / "ws"
    workspace.mkdir()
    # A workspace whose files are named like the server's modules must not break the server.
    (workspace / "pygls.py").write_text("raise SystemExit('the workspace shadowed pygls')\n")
    (workspace / "atenlens.py").write_text("raise SystemExit('the workspace shadowed atenlens')\n")
    source = workspace / "train.py"
    source.write_text(LOOP_WITH_ITEM)

    client = LanguageClient("bundle-test", "1")
    published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait(params)

    await client.start_io(str(python), str(ROOT / "client" / "serve.py"), cwd=str(workspace))
    try:
        await asyncio.wait_for(
            client.initialize_async(
                types.InitializeParams(
                    capabilities=types.ClientCapabilities(),
                    root_uri=workspace.as_uri(),
                    initialization_options={"trace": {"enabled": False}},
                )
            ),
            60,
        )
        client.initialized(types.InitializedParams())
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=source.as_uri(), language_id="python", version=1, text=LOOP_WITH_ITEM
                )
            )
        )
        params = await asyncio.wait_for(published.get(), 60)
        assert params.uri == source.as_uri()
        found = [(d.code, d.range.start.line, d.range.start.character) for d in params.diagnostics]
        assert ("AL100", 3, 34) in found, found  # the `item` of `.item()` on a CUDA tensor
        info = await asyncio.wait_for(client.protocol.send_request_async("atenlens/serverInfo", {}), 30)
        assert info.torchImported is False
        # what the extension shows (status tooltip, log, the one "no torch" message): this Python, no torch
        assert (info.python.executable, info.python.version) == (str(python), platform.python_version())
        assert info.torch is None
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    finally:
        server = client._server  # the server process; stop() waits for it to exit
        if server is not None and server.returncode is None:
            try:
                await asyncio.wait_for(server.wait(), 10)
            except asyncio.TimeoutError:
                server.kill()
        await client.stop()
