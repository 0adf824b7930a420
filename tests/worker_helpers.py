"""Shared helpers for the worker tests: fixture paths and requests."""

from __future__ import annotations

import os

from atenlens.report import TraceRequest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def fixture(*parts: str) -> str:
    return os.path.join(FIXTURES, *parts)


def request(path: str, qualname: str, timeout: float = 30.0, device: str = "cpu") -> TraceRequest:
    return TraceRequest(file=path, qualname=qualname, device=device, timeout_seconds=timeout)  # type: ignore[arg-type]


def process_is_gone(pid: int) -> bool:
    """True when `pid` no longer runs: absent, or a zombie waiting to be reaped by init."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def exits_within(pid: int, seconds: float) -> bool:
    """Waits (on a pidfd, no polling) until `pid` exits; False if it still runs after `seconds`."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], seconds)
        return bool(readable) or process_is_gone(pid)
    finally:
        os.close(fd)
