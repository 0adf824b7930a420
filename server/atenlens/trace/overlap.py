"""How much of a step's communication the compute hides: an estimate on two streams with ideal overlap
(docs/distributed.md, "Overlap").

The model: one compute stream and one communication stream, each running its work in program order,
each op for its estimate (`Event.estimate_seconds`). Collectives, and ops the program issues on a
stream other than the default one (FSDP2's all-gather copy-in, its reduce-scatter's input copy), run
on the communication stream; every other op that launches a kernel runs on the compute stream. An op
starts when its stream is free and the tensors it reads are written (the last op writing their
storage has finished), nothing else: the host is always ahead of the GPU and no other wait orders the
streams. So a collective starts as soon as its inputs are ready and the communication stream is idle,
and the compute stream waits for it at the first op that reads or writes one of its tensors (a
`wait_tensor`, FSDP2's copy-out of an all-gather, the optimizer reading a reduce-scattered gradient).
The time the compute stream waits is the collective's exposed time; what a collective still has to
run when the step's last compute op ends is exposed too. A collective's hidden time is the rest of
its estimate. Real streams wait on events more coarsely than data, so this is the least exposure the
program order allows (the most overlap).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from atenlens.trace.torch_compat import storage_key, tree_leaves

_Tensor = torch.Tensor
NO_COLLECTIVE = -1


def _storages(value: Any) -> list[int]:
    keys = []
    for leaf in tree_leaves(value):
        if isinstance(leaf, _Tensor):
            key = storage_key(leaf)
            if key is not None:
                keys.append(key)
    return keys


class Overlap:
    """The two-stream schedule of one trace, built op by op."""

    def __init__(self) -> None:
        self.compute = 0.0  # when the compute stream is free
        self.communication = 0.0  # when the communication stream is free
        self._ready: dict[int, float] = {}  # storage -> when the last op writing it finishes
        self.estimates: list[float] = []  # per collective, in issue order
        self.exposed: list[float] = []
        self._runs: list[tuple[float, float]] = []  # per collective: (start, end) on the communication stream
        self._finished = False

    def op(self, seconds: float, reads: Any, writes: Any, collective: bool, side_stream: bool) -> Optional[int]:
        """One op (or collective) with its estimate, its arguments and its outputs; the collective's
        index when it is one."""
        ready = self._ready
        inputs = max((ready.get(key, 0.0) for key in _storages(reads)), default=0.0)
        index = None
        if collective or side_stream:
            start = max(self.communication, inputs)
            end = self.communication = start + seconds
            if collective:
                index = len(self.estimates)
                self.estimates.append(seconds)
                self.exposed.append(0.0)
                self._runs.append((start, end))
        else:
            if inputs > self.compute:
                self._wait(inputs)
            end = self.compute = self.compute + seconds
        for key in _storages(writes):
            ready[key] = end
        return index

    def _wait(self, until: float) -> None:
        """The compute stream waits from now until `until` for the communication stream: each
        collective running meanwhile is exposed for the time it overlaps the wait."""
        clock = self.compute
        for index in range(len(self._runs) - 1, -1, -1):
            start, end = self._runs[index]
            if end <= clock:
                break
            self.exposed[index] += max(0.0, min(end, until) - max(start, clock))
        self.compute = until

    def finish(self) -> None:
        """The step ends when both streams are done: what runs past the last compute op is exposed."""
        if self._finished:
            return
        self._finished = True
        if self.communication > self.compute:
            self._wait(self.communication)

    @property
    def exposed_seconds(self) -> float:
        return sum(self.exposed)

    @property
    def step_seconds(self) -> float:
        """The two-stream step: when both streams are done."""
        return max(self.compute, self.communication)
