"""The trace worker process: `python -m atenlens.worker`.

It imports torch once, warms up fake tensors, and then serves trace requests, each in a forked
child (a zygote: every trace starts from the same warm state and nothing a user's module does
reaches the next trace). The protocol (docs/worker.md) is newline-delimited JSON: requests on
stdin, responses on the original stdout, which the worker moves to a private file descriptor
first, so that nothing torch or user code prints can ever corrupt it.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import signal
import sys
import time
import traceback
from collections import deque
from typing import Any, Callable, Literal, Optional

from atenlens.report import TraceReport, TraceRequest, from_jsonable
from atenlens.worker.limits import DEFAULT_MEMORY_LIMIT_MB
from atenlens.worker.supervise import ChildEnd, report_for, run_supervised


class ProtocolOut:
    """Writes one JSON object per line to the private protocol descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


class ControlIn:
    """Newline-delimited JSON messages on stdin, read without Python's buffering so the worker
    can also watch stdin with a selector while a trace runs."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._queue: deque[dict] = deque()
        self.eof = False

    def _read_once(self) -> None:
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.eof = True
            return
        self._buffer += chunk
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                break
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict):
                self._queue.append(message)
            else:
                print(f"atenlens worker: ignoring a malformed message: {line[:200]!r}", file=sys.stderr)

    def next_message(self) -> Optional[dict]:
        """Blocks for the next message; None at end of input."""
        while not self._queue:
            if self.eof:
                return None
            self._read_once()
        return self._queue.popleft()

    def on_readable(self, running_id: Any) -> Optional[str]:
        self._read_once()
        command = None
        kept: deque[dict] = deque()
        for message in self._queue:
            if "cancel" in message:
                if message.get("id") == running_id:
                    command = "cancel"
                # a cancel for anything else has nothing left to cancel
            else:
                kept.append(message)
        self._queue = kept
        if self.eof:
            return "eof"
        return command


def _take_protocol_stream() -> int:
    """Moves the protocol off fd 1: the returned private fd is the only way to the client, and
    fd 1 (what torch, C extensions and print() write to) now goes to stderr."""
    protocol_fd = os.dup(1)
    os.set_inheritable(protocol_fd, False)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    return protocol_fd


def _warm_up(preload: str) -> tuple[str, tuple[str, ...]]:
    """Imports torch and the engine and pays the first-FakeTensorMode cost (~2 s) once, here, so
    that every forked trace starts warm. Returns (torch version, preload notes)."""
    from atenlens.trace import device

    notes = tuple(device.preload_before_torch(preload)) if preload != "none" else ()
    import torch

    torch.set_num_threads(1)  # fake tensors do no arithmetic; a thread pool would not survive fork
    from atenlens.trace.torch_compat import FakeTensorMode

    with FakeTensorMode():
        layer = torch.nn.Linear(4, 4)
        inputs = torch.randn(2, 4, requires_grad=True)
        layer(inputs).relu().sum()
        # No backward here: the first backward starts autograd's device threads (one per simulated
        # CUDA device), and a child forked after that refuses to run backward at all
        # ("Unable to handle autograd's threading in combination with fork-based multiprocessing").
        # Each child starts them itself, at its first backward.
    _warm_up_engine(("cuda", "cpu") if preload == "cuda" else ("cpu",))
    gc.collect()
    gc.freeze()  # children's collections skip (and so never copy) the warm heap
    return torch.__version__, notes


def _warm_up_engine(devices: tuple[Literal["cpu", "cuda"], ...]) -> None:
    """One real trace per device of atenlens's own warm-up step, in this process: a child forked
    after it finds the engine's imports and torch's caches ready (about half of a small trace's time)."""
    from atenlens.trace.runner import run_trace
    from atenlens.worker import warmup_step

    for device in devices:
        run_trace(TraceRequest(file=warmup_step.__file__, qualname="warmup_step", device=device))


def _load_runner() -> Callable[[TraceRequest], TraceReport]:
    from atenlens.trace.runner import run_trace

    return run_trace


def _with_preload_notes(data: dict, request: TraceRequest, notes: tuple[str, ...]) -> dict:
    if request.device != "cpu" and notes:
        present = list(data.get("notes") or [])
        data["notes"] = present + [note for note in notes if note not in present]
    return data


def _checked(request: TraceRequest) -> TraceRequest:
    """Rejects a request whose fields have the wrong types (JSON does not enforce them, and an
    integer `file` would be opened as a file descriptor of the worker)."""
    if not isinstance(request.file, str) or not isinstance(request.qualname, str):
        raise TypeError("'file' and 'qualname' must be strings")
    if request.device not in ("cpu", "cuda"):
        raise ValueError(f'\'device\' must be "cpu" or "cuda", not {request.device!r}')
    if isinstance(request.timeout_seconds, bool) or not isinstance(request.timeout_seconds, (int, float)):
        raise TypeError("'timeout_seconds' must be a number")
    for name in ("call", "source"):
        if getattr(request, name) is not None and not isinstance(getattr(request, name), str):
            raise TypeError(f"'{name}' must be a string or null")
    if request.argv is not None and not (
        isinstance(request.argv, tuple) and all(isinstance(a, str) for a in request.argv)
    ):
        raise TypeError("'argv' must be a list of strings or null")
    return request


def serve(
    protocol: ProtocolOut,
    control: ControlIn,
    memory_limit_mb: int,
    preload_notes: tuple[str, ...],
    runner: Callable[[TraceRequest], TraceReport],
    inherited_fds: tuple[int, ...],
) -> None:
    while True:
        message = control.next_message()
        if message is None:
            return
        if "cancel" in message:
            continue  # nothing is running
        request_id = message.get("id")
        try:
            request: TraceRequest = _checked(from_jsonable(TraceRequest, message["request"]))
        except (KeyError, TypeError, ValueError) as error:
            protocol.send({"id": request_id, "error": f"malformed request: {type(error).__name__}: {error}"})
            continue

        def on_started(pid: int, request_id: Any = request_id) -> None:
            protocol.send({"id": request_id, "event": "started", "pid": pid})

        def on_end(end: ChildEnd, request: TraceRequest = request, request_id: Any = request_id) -> None:
            data = _with_preload_notes(report_for(request, end, memory_limit_mb), request, preload_notes)
            protocol.send({"id": request_id, "report": data})

        run_supervised(
            request,
            runner,
            memory_limit_mb=memory_limit_mb,
            inherited_fds=inherited_fds,
            on_started=on_started,
            on_end=on_end,
            control=control,
            request_id=request_id,
        )
        if control.eof:
            return


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m atenlens.worker")
    parser.add_argument(
        "--memory-limit-mb",
        type=int,
        default=DEFAULT_MEMORY_LIMIT_MB,
        help="data segment limit of each trace (0: none)",
    )
    parser.add_argument(
        "--preload",
        choices=("cuda", "none"),
        default="cuda",
        help="load the simulated CUDA shims before torch (default: cuda)",
    )
    args = parser.parse_args(argv)

    protocol = ProtocolOut(_take_protocol_stream())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client decides when the worker ends
    started = time.monotonic()
    try:
        torch_version, notes = _warm_up(args.preload)
        runner = _load_runner()
    except BaseException as error:  # noqa: BLE001 - report why, then exit
        protocol.send(
            {"event": "fatal", "message": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        )
        return 1
    protocol.send(
        {
            "event": "ready",
            "pid": os.getpid(),
            "torch": torch_version,
            "notes": list(notes),
            "seconds": round(time.monotonic() - started, 3),
        }
    )
    serve(protocol, ControlIn(0), args.memory_limit_mb, notes, runner, inherited_fds=(protocol.fd,))
    return 0
