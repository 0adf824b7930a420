"""Ordering between simulated CUDA streams, as a happens-before relation (vector clocks).

Each stream counts the ops queued on it; each stream also knows, per other stream, how far that
stream had got when it last waited on it (`wait_stream`, `wait_event` of an event recorded there,
or a host synchronize, after which all queued work has finished). A CUDA tensor's storage
remembers the stream and count of its last write; a read on another stream that does not know
that count yet is a read the GPU may run before the write finishes (AL500).

Nothing is tracked until a stream other than the default one is first used: until then all work
is on one in-order queue and needs no bookkeeping, so the common trace pays one attribute test per
op. Storages not written since then are taken as written on the default stream just before the
side stream was first used, and the message says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves

Clock = dict[int, int]             # stream number -> ops of that stream known to have finished


@dataclass
class Write:
    storage: StorageWeakRef
    stream: int
    count: int
    line: Optional[int]
    reported: bool = False


class StreamOrder:
    """The per-trace state; `tracker.streams` holds one once a side stream is used."""

    def __init__(self, default: Any) -> None:
        self._numbers: dict[int, int] = {}
        self._keep: list[Any] = []             # streams stay alive, so their ids stay theirs
        self._lines: dict[int, Optional[int]] = {}
        self._clocks: list[Clock] = []
        self.default = self.number(default, None)
        self._clocks[self.default][self.default] = 1   # untracked writes: count 1 on the default stream
        self._writes: dict[int, Write] = {}
        self._allocated: dict[int, int] = {}      # storage -> the stream it was allocated on
        self._recorded: dict[int, set[int]] = {}  # storage -> streams named by record_stream
        self.cross_uses: dict[tuple[int, int], Any] = {}   # (storage, stream) -> what the tracker keeps
        self._event_clocks: dict[int, Clock] = {}

    def number(self, stream: Any, line: Optional[int]) -> int:
        key = id(stream)
        found = self._numbers.get(key)
        if found is None:
            found = self._numbers[key] = len(self._clocks)
            self._keep.append(stream)
            self._lines[found] = line
            self._clocks.append({found: 0})
        return found

    def describe(self, number: int) -> str:
        if number == self.default:
            return "the default stream"
        line = self._lines.get(number)
        return f"side stream {number}" + (f" (created at line {line})" if line is not None else "")

    # -- ordering ---------------------------------------------------------------------------------
    @staticmethod
    def _merge(into: Clock, other: Clock) -> None:
        for stream, count in other.items():
            if into.get(stream, 0) < count:
                into[stream] = count

    def wait_stream(self, waiter: int, other: int) -> None:
        self._merge(self._clocks[waiter], self._clocks[other])

    def record_event(self, event: Any, stream: int) -> None:
        self._event_clocks[id(event)] = dict(self._clocks[stream])

    def wait_event(self, waiter: int, event: Any) -> None:
        clock = self._event_clocks.get(id(event))
        if clock is not None:                  # waiting on a never-recorded event orders nothing
            self._merge(self._clocks[waiter], clock)

    def host_waited(self, clock: Optional[Clock]) -> None:
        """The host waited for `clock`'s work (None: for everything): work queued after that, on any
        stream, starts after it."""
        if clock is None:
            clock = {}
            for c in self._clocks:
                self._merge(clock, c)
        for c in self._clocks:
            self._merge(c, clock)

    def stream_clock(self, stream: int) -> Clock:
        return self._clocks[stream]

    def event_clock(self, event: Any) -> Optional[Clock]:
        return self._event_clocks.get(id(event))

    # -- ops --------------------------------------------------------------------------------------
    def op(self, stream: int, args: tuple, kwargs: dict, out: Any, line: Optional[int]
           ) -> tuple[list[tuple[torch.Tensor, Write]], list[tuple[torch.Tensor, int, int]]]:
        """Queue one op on `stream`: the unordered reads it makes (tensor, its last write) and its
        first uses of tensors allocated on another stream that no record_stream names (tensor,
        storage, allocating stream); then its outputs become the last writes of their storages."""
        clock = self._clocks[stream]
        count = clock[stream] = clock[stream] + 1
        unordered = []
        foreign = []
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and t.device.type == "cuda":
                key = _key(t)
                if key is None:
                    continue
                write = self._writes.get(key)
                if write is None:
                    write = self._writes[key] = Write(StorageWeakRef(t.untyped_storage()), self.default, 1, None)
                elif write.storage.expired():
                    del self._writes[key]
                    continue
                if write.stream != stream and not write.reported and clock.get(write.stream, 0) < write.count:
                    write.reported = True
                    unordered.append((t, write))
                allocated = self._allocated.get(key, self.default)
                if allocated != stream and (key, stream) not in self.cross_uses \
                        and stream not in self._recorded.get(key, ()):
                    foreign.append((t, key, allocated))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.device.type == "cuda":
                key = _key(t)
                if key is not None:
                    previous = self._writes.get(key)
                    if previous is None or previous.storage.expired():   # a new storage: allocated here
                        self._allocated[key] = stream
                        self._recorded.pop(key, None)
                        for other in range(len(self._clocks)):
                            self.cross_uses.pop((key, other), None)
                    self._writes[key] = Write(StorageWeakRef(t.untyped_storage()), stream, count, line)
        return unordered, foreign

    def record_stream(self, t: torch.Tensor, stream: int) -> None:
        key = _key(t)
        if key is not None:
            self._recorded.setdefault(key, set()).add(stream)
            self.cross_uses.pop((key, stream), None)


def _key(t: torch.Tensor) -> Optional[int]:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None

