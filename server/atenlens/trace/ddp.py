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


class _BucketState:
    """One DDP model's hook state: its group, and the backward passes it all-reduced since the last
    optimizer step (two or more: gradient accumulation without `no_sync()`, AL909)."""

    def __init__(self, process_group: Any, on_pass: Any) -> None:
        self.process_group = process_group
        self.passes = 0
        self.on_pass = on_pass
        self.bucket_bytes = 0  # the gradients all-reduced per pass


def _all_reduce_bucket(state, bucket):  # type: ignore[no-untyped-def]
    # no annotations: DDP checks that a hook's are GradBucket / Future, and this module's are strings
    import torch
    import torch.distributed as dist

    buffer = bucket.buffer()
    dist.all_reduce(buffer, group=state.process_group)
    if bucket.is_last():
        state.passes += 1
        state.on_pass(state)
    future: torch.futures.Future = torch.futures.Future()
    future.set_result(buffer)
    return future


@contextlib.contextmanager
def ddp_on_fake_backend(sink: Any, collectives: Any = None) -> Iterator[None]:
    """`sink`: the trace's DiagnosticSink (a program's own comm hook is replaced, and says so);
    `collectives`: where the latest all-reduce was recorded (AL909 stands at its line)."""
    from torch.nn.parallel import DistributedDataParallel

    from atenlens.trace import torch_compat

    # the hook is registered before the reducer is wrapped (registration hands the reducer to C++)
    with _bucket_hook(DistributedDataParallel, sink, collectives), torch_compat.ddp_on_fake_tensors():
        yield


@contextlib.contextmanager
def _bucket_hook(DistributedDataParallel: Any, sink: Any, collectives: Any) -> Iterator[None]:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from atenlens.cost import format_bytes
    from atenlens.report import Code

    states: list[_BucketState] = []

    def on_pass(state: _BucketState) -> None:
        if state.passes < 2:
            return
        stack = collectives.last_stack if collectives is not None else ()
        sink.add(
            "ddp-no-sync",
            Code.DDP_SYNC_EVERY_BACKWARD,
            "DDP all-reduces the gradients in every backward() before the optimizer step: accumulating "
            "gradients over micro-steps, wrap all but the last backward in `with model.no_sync():` "
            f"(each pass sends {format_bytes(state.bucket_bytes)} per rank)",
            stack=stack,
        )

    def stepped(optimizer: Any, args: Any, kwargs: Any) -> None:
        for state in states:
            state.passes = 0

    real_init = DistributedDataParallel.__init__
    real_register = DistributedDataParallel.register_comm_hook

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        state = _BucketState(self.process_group, on_pass)
        state.bucket_bytes = sum(p.numel() * p.element_size() for p in self.parameters() if p.requires_grad)
        states.append(state)
        real_register(self, state, _all_reduce_bucket)
        self._atenlens_hook = True

    def register_comm_hook(self: Any, state: Any, hook: Any) -> None:
        # the program's own hook cannot be run (its all-reduce futures would hold nothing): the bucket
        # all-reduce above stays in place
        if not getattr(self, "_atenlens_hook", False):
            real_register(self, state, hook)
            return
        name = getattr(hook, "__qualname__", repr(hook))
        sink.add(
            "simulated-ranks",
            Code.SIMULATED_RANKS,
            f"DDP comm hook {name} is not run on the simulated ranks: each gradient bucket is all-reduced "
            "as DDP's default hook does (its bytes and time are those of the uncompressed bucket)",
            severity="information",
        )

    DistributedDataParallel.__init__ = __init__  # type: ignore[method-assign]
    DistributedDataParallel.register_comm_hook = register_comm_hook  # type: ignore[method-assign]
    step_hook = register_optimizer_step_post_hook(stepped)
    try:
        yield
    finally:
        step_hook.remove()
        DistributedDataParallel.__init__ = real_init  # type: ignore[method-assign]
        DistributedDataParallel.register_comm_hook = real_register  # type: ignore[method-assign]
