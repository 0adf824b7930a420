"""When each open document is linted: at once after a pause in typing, coalesced within a burst of
changes, never two lints of one document at a time. Protocol-free: what a lint does is the
`lint` coroutine the server passes in."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

LINT_DEBOUNCE_SECONDS = 0.03  # coalesces a burst of changes; lints only the latest version


class LintSchedule:
    def __init__(self, lint: Callable[[str], Awaitable[None]]) -> None:
        self._lint = lint
        self._latest: dict[str, asyncio.Task[None]] = {}  # the latest lint asked for, per document
        self._running: dict[str, asyncio.Task[None]] = {}  # the one whose thread is running
        self._last_change: dict[str, float] = {}  # loop time of the latest didChange
        # How many lints of each open document have started (`atenlens/serverInfo` reports it:
        # a burst of changes costs one lint, or two when one was already running).
        self.started: dict[str, int] = {}

    def changed(self, uri: str) -> None:
        """Lints after a change: a change after a pause (typing) at once; changes that follow each
        other within the debounce (a paste, a replace-all, an editor replaying edits) coalesced."""
        now = asyncio.get_running_loop().time()
        in_burst = now - self._last_change.get(uri, float("-inf")) < LINT_DEBOUNCE_SECONDS
        self._last_change[uri] = now
        self.schedule(uri, LINT_DEBOUNCE_SECONDS if in_burst else 0)

    def schedule(self, uri: str, delay: float = 0) -> None:
        """Lint `uri` after `delay`. A lint still waiting is superseded; a lint already running in
        its thread finishes (a thread cannot be interrupted) and the new one waits for it, so at
        most one lint per document runs and at most one waits."""
        latest = self._latest.get(uri)
        if latest is not None and not latest.done() and latest is not self._running.get(uri):
            latest.cancel()
        self._latest[uri] = asyncio.get_running_loop().create_task(self._lint_later(uri, delay))

    def forget(self, uri: str) -> None:
        """The document was closed: its waiting lint is dropped."""
        latest = self._latest.pop(uri, None)
        self._last_change.pop(uri, None)
        self.started.pop(uri, None)
        if latest is not None:
            latest.cancel()

    async def _lint_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)  # debounce: a newer change cancels this task
        while (running := self._running.get(uri)) is not None:
            await asyncio.wait([running])
        if uri not in self._latest:
            return  # closed meanwhile
        this = asyncio.current_task()
        assert this is not None
        self._running[uri] = this
        self.started[uri] = self.started.get(uri, 0) + 1
        try:
            await self._lint(uri)
        finally:
            del self._running[uri]
