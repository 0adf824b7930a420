"""The caching-allocator model (trace/allocator.py) against the rules of torch's CUDACachingAllocator, in
exact bytes: segment sizes per pool, best fit, splits, merges on free, cached frees, release of wholly
free segments before running out; and the reserved bytes of a traced function on simulated CUDA."""

from __future__ import annotations

from pathlib import Path

from atenlens.report import TraceRequest
from atenlens.trace.allocator import CachingAllocator, round_size, segment_size

MiB = 2**20
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cost" / "mlp_adamw.py"


def test_requests_round_to_512_bytes_and_segments_follow_the_pool_sizes() -> None:
    assert [round_size(n) for n in (1, 512, 513, 4000)] == [512, 512, 1024, 4096]
    assert segment_size(512) == segment_size(MiB) == 2 * MiB  # small pool: 2 MiB segments
    assert segment_size(MiB + 512) == segment_size(10 * MiB - 512) == 20 * MiB  # under 10 MiB: 20 MiB
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(30 * MiB + 512) == 32 * MiB  # from 10 MiB: rounded up to 2 MiB


def test_small_blocks_share_a_segment_and_a_freed_block_is_reused_not_returned() -> None:
    allocator = CachingAllocator()
    blocks = [allocator.malloc(100 * 1024) for _ in range(20)]  # 20 x 100 KiB = 2,000 KiB: one 2 MiB segment
    assert allocator.reserved == 2 * MiB
    allocator.malloc(100 * 1024)  # the 21st passes 2 MiB: a second segment
    assert allocator.reserved == 4 * MiB
    for block in blocks:
        allocator.free(block)
    assert allocator.reserved == 4 * MiB  # freed blocks stay cached
    allocator.malloc(MiB)  # the merged free space of the first segment takes it
    assert allocator.reserved == 4 * MiB


def test_a_large_block_is_split_only_when_more_than_1_mib_is_left() -> None:
    allocator = CachingAllocator()
    b = allocator.malloc(3 * MiB)  # a 20 MiB segment; 17 MiB split off
    c = allocator.malloc(12 * MiB + 1)  # fits the 17 MiB rest: 12 MiB + 512 B, the rest split off again
    assert (allocator.reserved, b.size, c.size) == (20 * MiB, 3 * MiB, 12 * MiB + 512)
    allocator.free(b)
    d = allocator.malloc(2 * MiB)  # best fit is b's 3 MiB block; 1 MiB left is not split off
    assert (d.size, d.segment, d.offset, allocator.reserved) == (3 * MiB, 0, 0, 20 * MiB)


def test_wholly_free_cached_segments_are_released_before_running_out() -> None:
    allocator = CachingAllocator(capacity=64 * MiB)
    first = allocator.malloc(40 * MiB)
    allocator.free(first)  # cached: 40 MiB still reserved
    allocator.malloc(50 * MiB)  # 40 + 50 > 64: the cached segment goes back, then 50 MiB fits
    assert (allocator.reserved, allocator.out_of_memory) == (50 * MiB, False)
    allocator.malloc(20 * MiB)  # 50 + 20 > 64 with nothing cached to release
    assert (allocator.reserved, allocator.out_of_memory) == (70 * MiB, True)


def test_a_split_segment_is_not_released_so_fragmentation_can_run_out_of_memory() -> None:
    allocator = CachingAllocator(capacity=48 * MiB)
    small = allocator.malloc(2 * MiB)  # a 20 MiB segment
    big = allocator.malloc(24 * MiB)  # a 24 MiB segment: 44 MiB reserved
    allocator.free(big)
    allocator.free(small)
    kept = allocator.malloc(MiB + 512)  # best fit: the 20 MiB segment's block, now split
    assert (kept.segment, allocator.reserved) == (0, 44 * MiB)
    allocator.malloc(30 * MiB)  # 44 + 30 > 48: the 24 MiB segment is released, but 20 + 30 > 48 too
    # 31 MiB + 512 B allocated in all, and still out of memory: the 1 MiB block holds its 20 MiB segment
    assert (allocator.reserved, allocator.out_of_memory) == (50 * MiB, True)


def test_a_trace_reports_what_the_allocator_reserves_next_to_what_is_allocated(worker) -> None:
    report = worker.trace(TraceRequest(file=str(FIXTURE), qualname="segments", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    memory = report.summary.memory
    # a: 4,000 B -> a 4,096 B block of a 2 MiB small-pool segment; b: 3 MiB of a 20 MiB segment;
    # c: 30 MiB + 1 B -> 30 MiB + 512 B, fitting no free block: a segment rounded up to 32 MiB
    assert memory.peak_bytes == 4096 + 3 * MiB + 30 * MiB + 512
    assert (
        memory.peak_line
        == FIXTURE.read_text()
        .splitlines()
        .index('    c = torch.empty(30 * 2**20 + 1, dtype=torch.uint8, device="cuda")')
        + 1
    )
    assert memory.reserved_at_peak_bytes == (2 + 20 + 32) * MiB
    # del b; d (2 MiB) takes b's freed block (merged back into the whole 20 MiB): no new segment
    assert memory.reserved_peak_bytes == 54 * MiB
    assert not [d for d in report.diagnostics if d.kind == "out-of-memory"]


def test_the_peak_lines_hover_shows_allocated_and_reserved() -> None:
    from atenlens.lsp.cost_hover import cost_section
    from atenlens.lsp.document_traces import LineTrace
    from atenlens.report import MemorySummary, PeakCategories

    peak = MemorySummary(
        peak_bytes=34 * MiB,
        peak_file="/x/model.py",
        peak_line=5,
        peak_phase="forward",
        at_peak=PeakCategories(0, 0, 0, 0, 34 * MiB, 0),
        device_bytes=48 * MiB,
        reserved_peak_bytes=54 * MiB,
        reserved_at_peak_bytes=50 * MiB,
    )
    assert cost_section(LineTrace(text="c = torch.empty(n)", peak=peak)) == (
        "**Cost** (estimate)\n"
        "- the step's memory peak (forward): 34 MiB allocated, 50 MiB reserved (a model of CUDA's caching "
        "allocator: its segments; at most 54 MiB over the step) of 48 MiB — does not fit"
    )
