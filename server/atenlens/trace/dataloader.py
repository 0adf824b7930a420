"""`DataLoader(num_workers > 0)` in a trace: the workers' work runs in the trace's own process.

Worker processes cannot carry fake tensors (they would run outside the trace's modes, and their
batches cross a process boundary as shared memory), so while a trace runs a DataLoader with workers
is iterated as `num_workers=0` iterates it: the same sampler order, batches, collate function and
`pin_memory` (batches are pinned, as the pin-memory thread would pin them). What the workers would
have done is said once per iteration, an information diagnostic (AL907) at the line that starts it.
Not simulated: `worker_init_fn` (there is no worker to start), `get_worker_info()` (None, as in the
main process, so an IterableDataset that shards by worker yields all of its items once), `timeout`,
and the overlap of loading with the step.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from torch.utils.data import DataLoader

from atenlens.report import Code
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.torch_compat import SingleProcessDataLoaderIter


def _message(loader: Any) -> str:
    workers = loader.num_workers
    prefetch = loader.prefetch_factor if loader.prefetch_factor is not None else 2
    text = (
        f"DataLoader(num_workers={workers}): on a real run {workers} worker "
        f"{'processes load' if workers > 1 else 'process loads'} and collate"
        f"{'' if workers > 1 else 's'} the batches, up to {workers * prefetch} ahead "
        f"(prefetch_factor={prefetch}), while the step runs; the trace loads them here, in this process, "
        "in the same order, and traces that work where it happens"
    )
    if loader.pin_memory:
        text += "; pin_memory=True: a pin-memory thread pins each batch (done here in this thread, pinned as there)"
    if loader.worker_init_fn is not None:
        text += "; worker_init_fn is not called (no worker starts)"
    return text


@contextlib.contextmanager
def workers_in_process(sink: DiagnosticSink) -> Iterator[None]:
    original = DataLoader._get_iterator

    def _get_iterator(self: Any) -> Any:
        if self.num_workers == 0:
            return original(self)
        sink.add("dataloader-workers", Code.DATALOADER_WORKERS, _message(self), severity="information")
        workers, timeout = self.num_workers, self.timeout
        self.num_workers, self.timeout = 0, 0
        try:
            return SingleProcessDataLoaderIter(self)
        finally:
            self.num_workers, self.timeout = workers, timeout

    DataLoader._get_iterator = _get_iterator  # type: ignore[method-assign]
    try:
        yield
    finally:
        DataLoader._get_iterator = original  # type: ignore[method-assign]
