"""DistributedDataParallel on torch's fake backend.

DDP's reducer all-reduces each gradient bucket through the process group and reads the result from
the returned Work's future; the fake backend's Work has no tensor result, and torch 2.13 fails in
backward with `result.isTensor() || result.isTensorList() INTERNAL ASSERT FAILED ... comm.cpp`.
DDP's own way round a process group is a communication hook: while a trace runs, every DDP model
gets one (torch's public `register_comm_hook`) that issues the bucket's all-reduce on the fake group
(so the trace records it, at the `backward()` line, with the bucket's bytes) and returns a completed
future holding the bucket, which DDP then copies into the gradients, as after a real all-reduce.
Construction needs its cross-rank checks replaced too (trace/torch_compat.py `ddp_on_fake_tensors`):
the parameters' broadcast from rank 0 is recorded at the `DDP(...)` line, one broadcast per tensor.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator


def _all_reduce_bucket(process_group, bucket):    # type: ignore[no-untyped-def]
    # no annotations: DDP checks that a hook's are GradBucket / Future, and this module's are strings
    import torch
    import torch.distributed as dist

    buffer = bucket.buffer()
    dist.all_reduce(buffer, group=process_group)
    future: torch.futures.Future = torch.futures.Future()
    future.set_result(buffer)
    return future


@contextlib.contextmanager
def ddp_on_fake_backend(sink: Any) -> Iterator[None]:
    """`sink`: the trace's DiagnosticSink (a program's own comm hook is replaced, and says so)."""
    from torch.nn.parallel import DistributedDataParallel

    from atenlens.trace import torch_compat

    # the hook is registered before the reducer is wrapped (registration hands the reducer to C++)
    with _bucket_hook(DistributedDataParallel, sink), torch_compat.ddp_on_fake_tensors():
        yield


@contextlib.contextmanager
def _bucket_hook(DistributedDataParallel: Any, sink: Any) -> Iterator[None]:
    from atenlens.report import Code

    real_init = DistributedDataParallel.__init__
    real_register = DistributedDataParallel.register_comm_hook

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        real_register(self, self.process_group, _all_reduce_bucket)
        self._atenlens_hook = True

    def register_comm_hook(self: Any, state: Any, hook: Any) -> None:
        # the program's own hook cannot be run (its all-reduce futures would hold nothing): the bucket
        # all-reduce above stays in place
        if not getattr(self, "_atenlens_hook", False):
            real_register(self, state, hook)
            return
        name = getattr(hook, "__qualname__", repr(hook))
        sink.add("simulated-ranks", Code.SIMULATED_RANKS,
                 f"DDP comm hook {name} is not run on the simulated ranks: each gradient bucket is all-reduced "
                 "as DDP's default hook does (its bytes and time are those of the uncompressed bucket)",
                 severity="information")

    DistributedDataParallel.__init__ = __init__            # type: ignore[method-assign]
    DistributedDataParallel.register_comm_hook = register_comm_hook  # type: ignore[method-assign]
    try:
        yield
    finally:
        DistributedDataParallel.__init__ = real_init         # type: ignore[method-assign]
        DistributedDataParallel.register_comm_hook = real_register  # type: ignore[method-assign]
