"""LSP frames: a byte stream split into message bodies, and a body parsed as one JSON value.
Used by the stdio transport (lsp/stdio.py, whose docstring says what is accepted) and by the
reader that answers before the server starts (lsp/early.py): no asyncio, no pygls."""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any, Optional

MAX_FRAME_BYTES = 256 * 1024 * 1024  # a frame's body; a longer one is refused (a 10 MB file is ~10 MB)
MAX_HEADER_LINE_BYTES = 64 * 1024  # junk without a line end is dropped past this
HEADER = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)", re.IGNORECASE)
_OTHER_HEADER = re.compile(rb"^[A-Za-z][A-Za-z0-9-]*[ \t]*:")


class FrameReader:
    """Splits a byte stream into LSP message bodies. `feed` returns what became complete: the
    bodies, and protocol errors (strings) for what had to be skipped to find them."""

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._length: Optional[int] = None  # of the frame whose headers are being read
        self._in_body = False
        self._skipped = 0  # junk bytes skipped since the last good header
        self._errors: deque[str] = deque()  # protocol errors not yet returned

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next(self) -> bytes | str | None:
        """The next complete body, a protocol error (a string) for what had to be skipped to
        find it, or None until more data arrives."""
        while not self._errors:
            if self._in_body:
                assert self._length is not None
                if len(self._buffer) < self._length:
                    return None
                body = bytes(self._buffer[: self._length])
                del self._buffer[: self._length]
                self._in_body, self._length = False, None
                return body
            newline = self._buffer.find(b"\n")
            if newline < 0:
                if len(self._buffer) > MAX_HEADER_LINE_BYTES:
                    keep = 32  # a header may start in the last bytes
                    self._skipped += len(self._buffer) - keep
                    del self._buffer[:-keep]
                return None
            line = bytes(self._buffer[:newline]).rstrip(b"\r")
            del self._buffer[: newline + 1]
            self._header_line(line)
        return self._errors.popleft()

    def unread(self, data: bytes) -> None:
        """Puts `data` back in front of what is still to be read (the start of a frame found
        inside a body that was too long)."""
        self._buffer[:0] = data

    def _header_line(self, line: bytes) -> None:
        if not line.strip():
            if self._length is not None:
                self._in_body = True  # the blank line that ends the headers
            return
        match = HEADER.search(line)
        if match:
            skipped = self._skipped + match.start()
            self._skipped = 0
            if skipped:
                self._errors.append(f"skipped {skipped:,} bytes that were not part of a frame")
            length = int(match.group(1))
            if length > self.max_frame:
                self._errors.append(
                    f"a frame of {length:,} bytes (Content-Length) is over the limit of "
                    f"{self.max_frame:,} bytes; it was skipped"
                )
                self._length = None
                return
            self._length = length
            return
        if self._length is not None and _OTHER_HEADER.match(line):
            return  # Content-Type and the like
        self._skipped += len(line) + 1
        self._length = None  # a frame's headers do not contain junk


def parse_body(body: bytes) -> tuple[Any, bytes]:
    """(the body's JSON value, what follows it). Raises ValueError for a body that is not JSON or
    that holds NaN/Infinity (not JSON, and an id of NaN would be echoed back as invalid JSON)."""
    text = body.decode("utf-8")
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    stripped = text.lstrip()
    value, end = decoder.raw_decode(stripped)
    return value, stripped[end:].encode("utf-8")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
