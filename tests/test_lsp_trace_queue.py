"""The server's trace queue with a real trace worker: a cancel that lands while a trace is being
handed to its thread (after the queue decided to run it, before the worker knows it) runs nothing."""

from __future__ import annotations

import asyncio

from atenlens.lsp.trace_queue import TraceOutcome, TraceQueue
from atenlens.worker.client import TraceWorker
from worker_helpers import fixture, request

LOOP = fixture("hostile", "infinite_loop.py")
TINY = fixture("worker", "tiny.py")


async def test_a_cancel_while_the_trace_is_handed_to_its_thread_runs_nothing():
    loop = asyncio.get_running_loop()
    forked: list[int] = []
    queue: TraceQueue

    class HandedOver(TraceWorker):
        """A real worker; its trace() first lets the user cancel: exactly the moment between the
        queue's own check of the job and the worker registering the trace."""

        def trace(self, req, on_started=None, is_cancelled=None):
            if req.qualname == "step":
                cancelled = asyncio.run_coroutine_threadsafe(cancel_running(), loop)
                cancelled.result()
            return super().trace(req, on_started=forked.append, is_cancelled=is_cancelled)

    async def cancel_running() -> None:
        running = queue.running
        assert running is not None
        queue.cancel(running, "cancelled by the user")

    queue = TraceQueue(HandedOver)
    try:
        # a short timeout: a cancel that is lost lets the loop run until it (and the test then fails)
        job = queue.submit(("file:///loop.py", "step"), request(LOOP, "step", timeout=2))
        assert await job.future == TraceOutcome(cancelled=True, reason="cancelled by the user")
        assert forked == []  # no child process ever ran the loop
        after = queue.submit(("file:///tiny.py", "linear_step"), request(TINY, "linear_step"))
        outcome = await after.future
        assert outcome.report is not None and outcome.report.status == "ok", outcome
        assert len(forked) == 1 and queue.worker_starts == 1
    finally:
        await queue.close()
