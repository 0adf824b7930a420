"""CUDA's caching allocator replayed over a trace's storages: the memory it reserves from the GPU (its
segments: what `torch.cuda.memory_reserved()` counts) for the blocks the memory model says are live.

A model of c10/cuda/CUDACachingAllocator.cpp with the default PYTORCH_CUDA_ALLOC_CONF (constants
from c10/core/AllocatorConfig.h):
- a request is rounded up to a multiple of 512 B (kMinBlockSize);
- requests up to 1 MiB (kSmallSize) come from the small pool, whose segments are 2 MiB (kSmallBuffer);
  larger ones from the large pool: under 10 MiB (kMinLargeAlloc) a new segment is 20 MiB (kLargeBuffer),
  from 10 MiB on it is the request rounded up to 2 MiB (kRoundLarge);
- a request takes the smallest free block of its pool that fits (ties: the older segment, the lower
  offset, for the lower address); the rest is split off as a free block when it is at least 512 B
  (small pool) or more than 1 MiB (large pool), else the request holds the whole block;
- a freed block merges with the free blocks next to it in its segment and stays cached: reserved
  memory does not shrink;
- when a new segment would pass the GPU's memory, the allocator releases its cached segments that are
  wholly free and tries again; when that fails too, the program runs out of memory.
Not modelled: one pool per stream (every block is on one stream here), the CUDA context and library
workspaces, and the allocator settings (expandable_segments, max_split_size_mb,
roundup_power2_divisions, garbage_collection_threshold).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterable, Optional

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the largest request of the small pool
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: a large-pool segment for requests under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge: larger segments are the request rounded up to this


def round_size(nbytes: int) -> int:
    """The block size the allocator hands out for a request (round_size)."""
    return max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    """The size of the segment cudaMalloc'd for a rounded request no cached block fits (get_allocation_size)."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class _Block:
    __slots__ = ("size", "segment", "offset", "prev", "next", "free")

    def __init__(self, size: int, segment: int, offset: int) -> None:
        self.size = size
        self.segment = segment  # creation order of its segment
        self.offset = offset
        self.prev: Optional[_Block] = None
        self.next: Optional[_Block] = None
        self.free = True

    def key(self) -> tuple[int, int, int]:
        return (self.size, self.segment, self.offset)


class CachingAllocator:
    """Blocks allocated and freed in program order; `reserved` is the bytes of all segments."""

    def __init__(self, capacity: Optional[int] = None) -> None:
        self.capacity = capacity  # the GPU's memory; None: unlimited
        self.reserved = 0
        self.out_of_memory = False  # a request failed even after releasing the cached segments
        self._segments = 0
        self._free: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}  # small? -> sorted keys
        self._blocks: dict[tuple[int, int, int], _Block] = {}  # free blocks by key
        self._heads: dict[int, tuple[bool, _Block]] = {}  # segment -> (small pool?, its first block)

    def malloc(self, nbytes: int) -> _Block:
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        block = self._best_fit(small, size)
        if block is None:
            wanted = segment_size(size)
            if self.capacity is not None and self.reserved + wanted > self.capacity:
                self._release_cached()
                if self.reserved + wanted > self.capacity:
                    self.out_of_memory = True  # counted as if it had succeeded: the forecast goes on
            block = _Block(wanted, self._segments, 0)
            self._heads[self._segments] = (small, block)
            self._segments += 1
            self.reserved += wanted
        else:
            self._take(small, block)
        remaining = block.size - size
        if remaining >= MIN_BLOCK if small else remaining > SMALL_SIZE:
            rest = _Block(remaining, block.segment, block.offset + size)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._put(small, rest)
        block.free = False
        return block

    def free(self, block: _Block) -> None:
        small = self._heads[block.segment][0]
        block.free = True
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._take(small, neighbour)
                if neighbour is block.prev:  # absorbed into its free predecessor
                    neighbour.size += block.size
                    neighbour.next = block.next
                    if block.next is not None:
                        block.next.prev = neighbour
                    block = neighbour  # (a segment's first block is never absorbed: it has no predecessor)
                else:
                    block.size += neighbour.size
                    block.next = neighbour.next
                    if neighbour.next is not None:
                        neighbour.next.prev = block
        self._put(small, block)

    def _best_fit(self, small: bool, size: int) -> Optional[_Block]:
        keys = self._free[small]
        index = bisect.bisect_left(keys, (size, -1, -1))
        return self._blocks[keys[index]] if index < len(keys) else None

    def _put(self, small: bool, block: _Block) -> None:
        key = block.key()
        bisect.insort(self._free[small], key)
        self._blocks[key] = block

    def _take(self, small: bool, block: _Block) -> None:
        key = block.key()
        keys = self._free[small]
        del keys[bisect.bisect_left(keys, key)]
        del self._blocks[key]

    def _release_cached(self) -> None:
        """release_cached_blocks: segments whose one block is free go back to the GPU."""
        for segment, (small, head) in list(self._heads.items()):
            if head.free and head.next is None:
                self._take(small, head)
                del self._heads[segment]
                self.reserved -= head.size


@dataclass(frozen=True)
class Reserved:
    peak_bytes: int  # the most reserved at once (since the process started: what max_memory_reserved() says)
    at_peak_bytes: int  # reserved when the allocated bytes peaked
    out_of_memory: bool  # the allocator could not find the memory even after releasing its cache


def replay(storages: Iterable[Any], peak_tick: int, capacity: Optional[int], until: Optional[int] = None) -> Reserved:
    """Run the allocator over the memory model's storage records (`nbytes`, `alloc_tick`,
    `free_tick`) in the order they were allocated and freed, up to tick `until`. `peak_tick`: the
    allocation that made the allocated peak. `capacity`: the GPU's memory."""
    events: list[tuple[int, bool, Any]] = []
    for record in storages:
        if record.nbytes > 0 and (until is None or record.alloc_tick < until):
            events.append((record.alloc_tick, True, record))
            if record.free_tick is not None and (until is None or record.free_tick < until):
                events.append((record.free_tick, False, record))
    events.sort(key=lambda event: event[0])
    allocator = CachingAllocator(capacity)
    blocks: dict[int, _Block] = {}
    peak = at_peak = 0
    for tick, allocated, record in events:
        if allocated:
            blocks[id(record)] = allocator.malloc(record.nbytes)
        else:
            allocator.free(blocks.pop(id(record)))
        peak = max(peak, allocator.reserved)
        if tick <= peak_tick:
            at_peak = allocator.reserved
    return Reserved(peak_bytes=peak, at_peak_bytes=at_peak, out_of_memory=allocator.out_of_memory)
