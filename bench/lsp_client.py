"""A minimal asyncio LSP client for benchmarks: JSON-RPC over a child's stdio, Content-Length framing.

It stamps every message with `time.perf_counter()` the moment its frame is parsed, answers the
server's requests (configuration, registrations, progress, refreshes) at once, and lets a caller
wait for the first message that matches a predicate. It is deliberately small: the time it adds is
the same for every server measured.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

Message = dict[str, Any]
Predicate = Callable[[Message], bool]


@dataclass
class Received:
    at: float  # perf_counter() when the frame was parsed
    message: Message


@dataclass
class _Waiter:
    predicate: Predicate
    future: asyncio.Future


@dataclass
class LspClient:
    argv: list[str]
    cwd: Optional[str] = None
    env: Optional[dict[str, str]] = None
    # Answers to server->client requests by method; anything else gets `null`.
    request_answers: dict[str, Callable[[Message], Any]] = field(default_factory=dict)

    process: Optional[asyncio.subprocess.Process] = None
    spawned_at: float = 0.0
    initialize_answered_at: float = 0.0
    received: list[Received] = field(default_factory=list)
    server_capabilities: dict[str, Any] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _pending: dict[int, asyncio.Future] = field(default_factory=dict)
    _waiters: list[_Waiter] = field(default_factory=list)
    _reader: Optional[asyncio.Task] = None
    keep_history: bool = False  # keep every message in `received` (off: large diagnostics lists pile up)
    stderr_path: Optional[str] = None  # the server's stderr goes here (default: discarded)

    async def start(self) -> None:
        stderr = open(self.stderr_path, "ab") if self.stderr_path else asyncio.subprocess.DEVNULL
        self.spawned_at = time.perf_counter()
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=self.cwd,
            env=self.env,
            limit=64 * 1024 * 1024,
        )
        if not isinstance(stderr, int):
            stderr.close()
        self._reader = asyncio.create_task(self._read_loop())

    # -- sending ------------------------------------------------------------------------------

    @property
    def _stdin(self) -> asyncio.StreamWriter:
        assert self.process is not None and self.process.stdin is not None, "the server was not started"
        return self.process.stdin

    def _write(self, payload: Message) -> float:
        body = json.dumps(payload, separators=(",", ":")).encode()
        self._stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return time.perf_counter()

    async def notify(self, method: str, params: Any) -> float:
        """Send a notification; returns the time it was handed to the pipe."""
        sent = self._write({"jsonrpc": "2.0", "method": method, "params": params})
        await self._stdin.drain()
        return sent

    async def request(self, method: str, params: Any, timeout: float = 120.0) -> tuple[float, Received]:
        """Send a request; returns (sent_at, response)."""
        rid = next(self._ids)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        sent = self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        await self._stdin.drain()
        response: Received = await asyncio.wait_for(future, timeout)
        if "error" in response.message:
            raise RuntimeError(f"{self.argv[0]}: {method} failed: {response.message['error']}")
        return sent, response

    def expect(self, predicate: Predicate) -> asyncio.Future:
        """A future for the first message from now on that matches. Register BEFORE sending."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiters.append(_Waiter(predicate, future))
        return future

    # -- receiving ----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        try:
            while True:
                length = None
                while True:
                    line = await stdout.readline()
                    if not line:
                        raise EOFError
                    line = line.strip()
                    if not line:
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                if length is None:
                    raise ValueError("a message without Content-Length")
                body = await stdout.readexactly(length)
                received = Received(time.perf_counter(), json.loads(body))
                self._dispatch(received)
        except (EOFError, asyncio.IncompleteReadError, ConnectionResetError):
            error = ConnectionError(f"{self.argv} closed its stdout")
            for future in list(self._pending.values()) + [w.future for w in self._waiters]:
                if not future.done():
                    future.set_exception(error)
                    future.exception()  # retrieved here: a waiter nobody awaits any more is no error

    def _dispatch(self, received: Received) -> None:
        message = received.message
        if self.keep_history:
            self.received.append(received)
        if "id" in message and "method" not in message:  # a response to us
            future = self._pending.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(received)
            return
        if "id" in message:  # a request from the server
            answer = self.request_answers.get(message["method"], lambda m: None)(message)
            self._write({"jsonrpc": "2.0", "id": message["id"], "result": answer})
        for waiter in list(self._waiters):
            if waiter.future.done():  # cancelled by its owner
                self._waiters.remove(waiter)
            elif waiter.predicate(message):
                waiter.future.set_result(received)
                self._waiters.remove(waiter)

    # -- session ------------------------------------------------------------------------------

    async def initialize(self, root: str, capabilities: dict[str, Any], initialization_options: Any = None) -> Received:
        params = {
            "processId": os.getpid(),
            "rootUri": f"file://{root}",
            "rootPath": root,
            "workspaceFolders": [{"uri": f"file://{root}", "name": os.path.basename(root)}],
            "capabilities": capabilities,
            "clientInfo": {"name": "atenlens-bench", "version": "1"},
        }
        if initialization_options is not None:
            params["initializationOptions"] = initialization_options
        _, response = await self.request("initialize", params)
        self.server_capabilities = response.message["result"].get("capabilities", {})
        self.initialize_answered_at = response.at
        await self.notify("initialized", {})
        return response

    async def shutdown(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        try:
            await self.request("shutdown", None, timeout=timeout)
            await self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), timeout)
        except (asyncio.TimeoutError, ConnectionError, RuntimeError, BrokenPipeError):
            self.kill()
            await self.process.wait()
        if self._reader is not None:
            self._reader.cancel()

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid
