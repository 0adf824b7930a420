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

from atenlens.trace import torch_compat as tc
from atenlens.trace.torch_compat import tree_leaves

Clock = dict[int, int]  # stream number -> ops of that stream known to have finished


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
        self._host_clock: Clock = {}  # what the host has waited for so far
        self._numbers: dict[int, int] = {}
        self._keep: list[Any] = []  # streams stay alive, so their ids stay theirs
        self._lines: dict[int, Optional[int]] = {}
        self._clocks: list[Clock] = []
        self.default = self.number(default, None)
        self._clocks[self.default][self.default] = 1  # untracked writes: count 1 on the default stream
        self._writes: dict[int, Write] = {}
        self._allocated: dict[int, int] = {}  # storage -> the stream it was allocated on
        self._recorded: dict[int, set[int]] = {}  # storage -> streams named by record_stream
        self.cross_uses: dict[tuple[int, int], Any] = {}  # (storage, stream) -> what the tracker keeps
        # (storage, stream) -> (the storage, the use's count on its stream, the allocating stream)
        self._use_marks: dict[tuple[int, int], tuple[StorageWeakRef, int, int]] = {}
        self._freed_unordered: list[Any] = []  # tracker values of uses whose storage was freed and reused
        self._event_clocks: dict[int, Clock] = {}
        # storage -> stream -> (that stream's count at its last read, the line): write-after-read checks
        self._reads: dict[int, dict[int, tuple[int, Optional[int]]]] = {}

    def number(self, stream: Any, line: Optional[int]) -> int:
        key = id(stream)
        found = self._numbers.get(key)
        if found is None:
            found = self._numbers[key] = len(self._clocks)
            self._keep.append(stream)
            self._lines[found] = line
            # work queued on a stream first used after the host waited starts after what it waited for
            self._clocks.append({**self._host_clock, found: 0})
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
        if clock is not None:  # waiting on a never-recorded event orders nothing
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
        self._merge(self._host_clock, clock)

    def stream_clock(self, stream: int) -> Clock:
        return self._clocks[stream]

    def event_clock(self, event: Any) -> Optional[Clock]:
        return self._event_clocks.get(id(event))

    # -- ops --------------------------------------------------------------------------------------
    def op(
        self, stream: int, args: tuple, kwargs: dict, out: Any, line: Optional[int]
    ) -> tuple[
        list[tuple[torch.Tensor, Write]],
        list[tuple[torch.Tensor, int, int]],
        list[tuple[torch.Tensor, int, Optional[int]]],
    ]:
        """Queue one op on `stream`: the unordered reads it makes (tensor, its last write), its
        first uses of tensors allocated on another stream that no record_stream names (tensor,
        storage, allocating stream), and its unordered overwrites of tensors another stream read
        (tensor, the reading stream, the read's line); then its outputs become the last writes of
        their storages."""
        clock = self._clocks[stream]
        count = clock[stream] = clock[stream] + 1
        unordered = []
        foreign = []
        overwrites: list[tuple[torch.Tensor, int, Optional[int]]] = []
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
                self._reads.setdefault(key, {})[stream] = (count, line)
                allocated = self._allocated.get(key, self.default)
                if allocated != stream:  # the last use on this stream is the one to be ordered after
                    self._use_marks[(key, stream)] = (
                        write.storage if write.storage is not None else StorageWeakRef(t.untyped_storage()),
                        count,
                        allocated,
                    )
                    if (key, stream) not in self.cross_uses and stream not in self._recorded.get(key, ()):
                        foreign.append((t, key, allocated))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.device.type == "cuda":
                key = _key(t)
                if key is not None:
                    previous = self._writes.get(key)
                    reads = self._reads.pop(key, {})
                    if previous is not None and not previous.storage.expired():  # an overwrite
                        for reader, (read_count, read_line) in reads.items():
                            if reader != stream and clock.get(reader, 0) < read_count:
                                overwrites.append((t, reader, read_line))
                    if previous is None or previous.storage.expired():  # a new storage: allocated here
                        self._allocated[key] = stream
                        self._recorded.pop(key, None)
                        for other in range(len(self._clocks)):
                            kept = self.cross_uses.pop((key, other), None)
                            if kept is not None and not self._ordered(key, other):
                                self._freed_unordered.append(kept)  # freed and reused: the hazard happened
                            self._use_marks.pop((key, other), None)
                    self._writes[key] = Write(StorageWeakRef(t.untyped_storage()), stream, count, line)
        return unordered, foreign, overwrites

    def _ordered(self, key: int, stream: int) -> bool:
        """Whether the allocating stream has waited for the use on `stream` (then a free is safe: work
        the allocator gives the block to is queued after the use)."""
        mark = self._use_marks.get((key, stream))
        return mark is None or self._clocks[mark[2]].get(stream, 0) >= mark[1]

    def unsafe_cross_uses(self) -> list[Any]:
        """At the end of the trace: the uses (tracker values) whose tensor was freed while the
        allocating stream had not waited for them. A tensor still alive (a parameter, a result) or one
        whose allocating stream waited for the use is safe without record_stream()."""
        found = list(self._freed_unordered)
        for (key, stream), kept in self.cross_uses.items():
            mark = self._use_marks.get((key, stream))
            if mark is not None and mark[0].expired() and not self._ordered(key, stream):
                found.append(kept)
        self.cross_uses.clear()
        self._freed_unordered.clear()
        return found

    def record_stream(self, t: torch.Tensor, stream: int) -> None:
        key = _key(t)
        if key is not None:
            self._recorded.setdefault(key, set()).add(stream)
            self.cross_uses.pop((key, stream), None)


def _key(t: torch.Tensor) -> Optional[int]:
    try:
        return tc.storage_id(t.untyped_storage())
    except (RuntimeError, NotImplementedError):
        return None
