"""One trace at a time through one warm worker process, on behalf of the language server.

Requests are keyed by (document uri, qualname). A new request for a key that is running kills the
running trace (`TraceWorker.cancel()`) and takes its place; one for a key that is waiting replaces
the waiting one; other keys wait in order. So there is never more than one worker process, and
never more than one trace per function in flight. The worker starts on the first trace, never
before: with tracing disabled, nothing here is ever constructed.

The blocking `TraceWorker.trace` call runs in a thread (`asyncio.to_thread`); everything else runs
on the server's event loop, so cancelling never races with the start of the next trace.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from atenlens.lsp.text import LineShift
from atenlens.report import TraceReport, TraceRequest

logger = logging.getLogger(__name__)

Key = tuple[str, str]
# At exit, how long the worker may take to end its trace and itself before it is killed.
EXIT_GRACE_SECONDS = 0.5


@dataclass
class TraceOutcome:
    report: Optional[TraceReport] = None
    cancelled: bool = False
    reason: str = ""  # why it was cancelled, or why no report came back
    error: Optional[str] = None


@dataclass(eq=False)
class TraceSpan:
    """Where the traced function is in its document, kept in step with the edits made while it is
    traced and while its view is built (0-based lines)."""

    uri: str
    first: int  # its first line (its directive's, when it has one)
    last: int
    def_line: int
    lines: list[str]  # the text that was traced
    shifts: list[LineShift] = field(default_factory=list)  # the edits since, in order

    def follow(self, shift: LineShift) -> bool:
        """Records one edit and moves the span along; returns whether the edit touched it."""
        self.shifts.append(shift)
        touched = shift.touches(self.first, self.last)
        first, last = shift.map(self.first), shift.map(self.last)
        self.first = first if first is not None else shift.start
        self.last = last if last is not None else shift.start
        return touched


@dataclass(eq=False)
class TraceJob:
    key: Key
    request: TraceRequest
    future: "asyncio.Future[TraceOutcome]"
    span: Optional[TraceSpan] = None  # the server's: where the function is
    on_start: Optional[Callable[[], None]] = None  # called when the job leaves the queue to run
    started: Optional[float] = None  # loop time when it left the queue (None: waiting)
    cancelled: bool = False
    reason: str = ""


class TraceQueue:
    def __init__(self, make_worker: Callable[[], Any]) -> None:
        self._make_worker = make_worker
        self._worker: Any = None
        self._pending: collections.deque[TraceJob] = collections.deque()
        self._running: Optional[TraceJob] = None
        self._runner: Optional[asyncio.Task[None]] = None
        self.worker_starts = 0

    @property
    def running(self) -> Optional[TraceJob]:
        return self._running

    def worker_ready_info(self) -> dict[str, Any]:
        """What the current worker said when it became ready (pid, torch version); {} before that."""
        return self._worker.ready_info if self._worker is not None else {}

    def job_for(self, key: Key) -> Optional[TraceJob]:
        """The running or waiting job of `key` (at most one: a newer request replaces it)."""
        return next((job for job in self.jobs() if job.key == key and not job.future.done()), None)

    def jobs(self) -> list[TraceJob]:
        return ([self._running] if self._running else []) + list(self._pending)

    def submit(self, key: Key, request: TraceRequest, span: Optional[TraceSpan] = None) -> TraceJob:
        loop = asyncio.get_running_loop()
        job = TraceJob(key=key, request=request, future=loop.create_future(), span=span)
        for waiting in [j for j in self._pending if j.key == key]:
            self._pending.remove(waiting)
            self._finish(waiting, TraceOutcome(cancelled=True, reason="superseded by a newer request"))
        if self._running is not None and self._running.key == key:
            self.cancel(self._running, "superseded by a newer request")
        self._pending.append(job)
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._run())
        return job

    def cancel(self, job: TraceJob, reason: str) -> None:
        """Cancel a waiting job, or kill the running trace."""
        if job.future.done():
            return
        job.cancelled = True
        job.reason = reason
        if job in self._pending:
            self._pending.remove(job)
            self._finish(job, TraceOutcome(cancelled=True, reason=reason))
        elif job is self._running and self._worker is not None:
            try:
                self._worker.cancel()
            except Exception:  # the worker may already be gone; the trace thread reports that
                logger.exception("cancelling the running trace failed")

    def cancel_where(self, predicate: Callable[[TraceJob], bool], reason: str) -> None:
        for job in self.jobs():
            if predicate(job):
                self.cancel(job, reason)

    async def restart(self) -> None:
        """Drop the worker process; the next trace starts a fresh one."""
        worker, self._worker = self._worker, None
        if self._running is not None:
            self.cancel(self._running, "the trace worker was restarted")
        if worker is not None:
            await asyncio.to_thread(worker.close)

    def terminate(self) -> None:
        """Ends the worker and the trace it runs now, without waiting for the trace's thread (the
        server is exiting: nothing may outlive it)."""
        for job in self.jobs():
            job.cancelled, job.reason = True, "the server is exiting"
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close(grace=EXIT_GRACE_SECONDS)

    async def close(self) -> None:
        for job in self.jobs():
            self.cancel(job, "the server is shutting down")
        await self.restart()

    @staticmethod
    def _finish(job: TraceJob, outcome: TraceOutcome) -> None:
        if not job.future.done():
            job.future.set_result(outcome)

    async def _run(self) -> None:
        while self._pending:
            job = self._pending.popleft()
            self._running = job
            job.started = asyncio.get_running_loop().time()
            if job.on_start is not None:
                job.on_start()
            try:
                if self._worker is None:
                    worker = self._make_worker()
                    await asyncio.to_thread(worker.start)
                    self._worker = worker
                    self.worker_starts += 1
                if job.cancelled:
                    outcome = TraceOutcome(cancelled=True, reason=job.reason)
                else:
                    # A cancel that lands while this call is on its way to the thread (before the
                    # worker knows the trace) is seen through is_cancelled; cancel() sets the flag first.
                    def is_cancelled(job: TraceJob = job) -> bool:
                        return job.cancelled

                    report = await asyncio.to_thread(self._worker.trace, job.request, is_cancelled=is_cancelled)
                    outcome = (
                        TraceOutcome(cancelled=True, reason=job.reason)
                        if job.cancelled
                        else TraceOutcome(report=report)
                    )
            except Exception as exc:  # a worker that cannot start or answer must not stop the server
                logger.exception("trace failed")
                outcome = (
                    TraceOutcome(cancelled=True, reason=job.reason)
                    if job.cancelled
                    else TraceOutcome(error=f"{type(exc).__name__}: {exc}")
                )
            finally:
                self._running = None
            self._finish(job, outcome)
