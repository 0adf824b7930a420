"""The server's stdio transport: LSP frames in, one message at a time to the protocol, and a clean
end at `exit` or at the end of input.

pygls 2.1's reader accepts only `Content-Length: N\\r\\n` exactly as written (a lowercase name, a
double space or LF-only line ends were never matched, and every later message was lost with it:
the server went deaf without a word), passed any length to a read (`Content-Length:
1000000000000000` ended the server with a traceback), and parsed bodies with the protocol's
message hook on *every* object, so an object shaped like a message inside a request's params was
taken for a message and could be answered. Its `exit` left through `sys.exit` inside the event
loop, so the exit code was lost (always 0) and the interpreter then waited for the thread of a
running trace, up to the trace's hard timeout.

Here a frame's header is found however it is written (any case, any spaces, CRLF or LF); a frame
that cannot be read (too long, not JSON) is a protocol error written to the log, and reading goes
on at the next header; only the top-level object of a body is a message. At `exit` or end of input
the trace worker (and the trace it runs) is ended at once and the process leaves with os._exit
(0 after `shutdown`, 1 otherwise, as the specification says), so nothing outlives the editor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any, BinaryIO, Callable, Optional

from atenlens.lsp.frames import HEADER, FrameReader, parse_body

logger = logging.getLogger(__name__)


class StdioTransport:
    """Reads stdin in a thread, hands each message to `dispatch` on the event loop, and ends the
    process when the protocol says `exit` or the input ends."""

    def __init__(
        self,
        dispatch: Callable[[Any], None],
        on_protocol_error: Callable[[str], None],
        stdin_fd: int = 0,
        already_read: bytes = b"",
    ) -> None:
        self.dispatch = dispatch
        self.on_protocol_error = on_protocol_error
        self.stdin_fd = stdin_fd
        self.already_read = already_read  # what was read off the input before (serve --tcp's check)
        self.frames = FrameReader()

    async def run(self) -> str:
        """Serves until the input ends ("eof") or `stop()` is called (its reason)."""
        loop = asyncio.get_running_loop()
        self._done: asyncio.Future[str] = loop.create_future()
        if self.already_read:
            self._received(self.already_read)
        threading.Thread(target=self._read, args=(loop,), name="atenlens-stdin", daemon=True).start()
        return await self._done

    def stop(self, reason: str) -> None:
        if not self._done.done():
            self._done.set_result(reason)

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                chunk = os.read(self.stdin_fd, 1 << 16)
            except OSError:
                chunk = b""
            try:
                loop.call_soon_threadsafe(self._received, chunk)
            except RuntimeError:  # the loop is closed: the server is ending
                return
            if not chunk:
                return

    def _received(self, chunk: bytes) -> None:
        if not chunk:
            self.stop("eof")
            return
        self.frames.feed(chunk)
        while not self._done.done() and (item := self.frames.next()) is not None:
            if isinstance(item, str):
                self.on_protocol_error(item)
                continue
            try:
                value, rest = parse_body(item)
            except (ValueError, RecursionError) as error:
                self.on_protocol_error(f"a frame's body is not JSON ({_short(error)}); it was skipped")
                self._resync(item)
                continue
            if rest.strip():
                self.on_protocol_error(
                    f"a frame's body has {len(rest):,} bytes after its message "
                    "(a wrong Content-Length?); reading on after the message"
                )
                self.frames.unread(rest)  # the stream after the message (the next frame, or its start)
            self.dispatch(value)

    def _resync(self, data: bytes) -> None:
        """A body that ran into the next frame: read on from that frame's header."""
        match = HEADER.search(data)
        if match:
            self.frames.unread(data[match.start() :])


def _short(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 100 else text[:97] + "..."


def serve_stdio(server: Any, stdin_fd: int = 0, stdout: Optional[BinaryIO] = None, already_read: bytes = b"") -> int:
    """Runs `server` (an AtenlensServer) on stdio (or on the input fd and output stream given, which
    `already_read` came from); never returns: the process ends here."""
    from pygls.io_ import StdoutWriter  # here: the frame reader above serves lsp/early.py, before pygls

    protocol = server.protocol
    protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    code = 1
    try:
        code = asyncio.run(_serve(server, stdin_fd, already_read))
    except BaseException:  # noqa: BLE001 - whatever happens, the process ends cleanly
        logger.exception("the server's event loop failed")
    finally:
        _leave(code)
    return code  # not reached


async def _serve(server: Any, stdin_fd: int, already_read: bytes = b"") -> int:
    protocol = server.protocol
    transport = StdioTransport(protocol.dispatch_json, protocol.protocol_error, stdin_fd, already_read)
    protocol.on_exit = lambda: transport.stop("exit")
    reason = await transport.run()
    code = 0 if protocol.shutdown_received else 1
    logger.info("ending at %s (exit code %d)", reason, code)
    try:
        server.traces.terminate()
    except Exception:  # noqa: BLE001 - the process ends anyway
        logger.exception("ending the trace worker failed")
    return code


def _leave(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(code)
