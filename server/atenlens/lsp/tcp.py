"""`atenlens serve --tcp HOST:PORT`: the language server on a TCP port, for debugging the server
(run it under a debugger, attach an editor to it).

Whoever talks to the server can have code traced as the user who started it, so:
- it listens on loopback addresses only (127.0.0.0/8, ::1, `localhost`); any other host is refused;
- the client must give the token in its `initialize` request, as
  `initializationOptions.tcpToken`. The token is ATENLENS_TCP_TOKEN when that is set (it is then
  removed from the environment, so the trace worker never sees it), else a random one printed
  once to stderr. A connection whose first message is not such an `initialize` is answered with an
  error and closed; the server goes on listening;
- it serves ONE client: once a client has given the token the port is closed, and the server ends
  when that client disconnects (as a server on stdio ends with its editor's pipe).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import socket
import sys
from typing import Any, Optional

from atenlens.lsp.stdio import FrameReader, parse_body, serve_stdio

TOKEN_ENV = "ATENLENS_TCP_TOKEN"
TOKEN_OPTION = "tcpToken"
FIRST_MESSAGE_SECONDS = 10.0  # a connection that sends no initialize in time is closed
FIRST_MESSAGE_BYTES = 1 << 20


class TcpError(Exception):
    """--tcp cannot serve as asked; the message is for the user."""


def loopback_address(spec: str) -> tuple[str, int]:
    """HOST:PORT -> (host, port), refusing hosts that are not loopback addresses."""
    host, _, port = spec.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise TcpError(f"--tcp expects HOST:PORT, got {spec!r}")
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)}
    except socket.gaierror as error:
        raise TcpError(f"--tcp: cannot resolve {host!r}: {error.strerror}") from None
    if not addresses or not all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses):
        raise TcpError(
            f"--tcp listens on loopback addresses only (127.0.0.1, ::1, localhost), not {host!r}: "
            "whoever reaches the port could have code traced as you"
        )
    return host, int(port)


def serve_tcp(server: Any, spec: str) -> int:
    """Listens on `spec`, serves the first client that gives the token, and ends with it."""
    try:
        host, port = loopback_address(spec)
    except TcpError as error:
        print(f"atenlens serve: {error}", file=sys.stderr)
        return 2
    from_env = os.environ.pop(TOKEN_ENV, "")  # popped: the trace worker's environment never has it
    token = from_env or secrets.token_urlsafe(24)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        print(f"atenlens serve: --tcp cannot listen on {host}:{port}: {error.strerror}", file=sys.stderr)
        return 2
    listener.listen(4)
    bound = listener.getsockname()
    print(
        f"atenlens: listening on {bound[0]}:{bound[1]} for one client; it must send "
        f"initializationOptions.{TOKEN_OPTION} = " + (f"the value of {TOKEN_ENV}" if from_env else json.dumps(token)),
        file=sys.stderr,
        flush=True,
    )
    while True:
        connection, peer = listener.accept()
        already_read = _first_message(connection, token)
        if already_read is not None:
            break
        print(
            f"atenlens: refused a connection from {peer[0]}:{peer[1]}: no valid {TOKEN_OPTION}",
            file=sys.stderr,
            flush=True,
        )
    listener.close()  # one client: nobody else can connect from now on
    print(f"atenlens: serving {peer[0]}:{peer[1]}", file=sys.stderr, flush=True)
    return serve_stdio(
        server, stdin_fd=connection.fileno(), stdout=connection.makefile("wb"), already_read=already_read
    )


def _first_message(connection: socket.socket, token: str) -> Optional[bytes]:
    """Everything read up to and including the client's first message when that message is an
    `initialize` carrying the token; otherwise None (the client has been answered and closed)."""
    connection.settimeout(FIRST_MESSAGE_SECONDS)
    frames, received = FrameReader(max_frame=FIRST_MESSAGE_BYTES), bytearray()
    message: Any = None
    try:
        while message is None and len(received) <= FIRST_MESSAGE_BYTES:
            chunk = connection.recv(1 << 16)
            if not chunk:
                break
            received += chunk
            frames.feed(chunk)
            while (item := frames.next()) is not None:
                if isinstance(item, bytes):
                    message = parse_body(item)[0]
                    break
    except (OSError, ValueError, RecursionError):
        message = None
    options = message.get("params", {}).get("initializationOptions") if _is_initialize(message) else None
    offered = options.get(TOKEN_OPTION) if isinstance(options, dict) else None
    if isinstance(offered, str) and hmac.compare_digest(offered.encode(), token.encode()):
        connection.settimeout(None)
        return bytes(received)
    _refuse(connection, message)
    return None


def _is_initialize(message: Any) -> bool:
    return (
        isinstance(message, dict) and message.get("method") == "initialize" and isinstance(message.get("params"), dict)
    )


def _refuse(connection: socket.socket, message: Any) -> None:
    try:
        if isinstance(message, dict) and "id" in message:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {
                        "code": -32600,
                        "message": f"atenlens serve --tcp: the first message must be initialize with "
                        f"initializationOptions.{TOKEN_OPTION} (the token the server printed "
                        f"when it started, or {TOKEN_ENV})",
                    },
                }
            ).encode()
            connection.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    finally:
        connection.close()
