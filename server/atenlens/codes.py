"""The stable diagnostic codes, in a module of their own: the lint's rules name them, and the
language server's first diagnostics (lsp/early.py) must not wait for the report's dataclasses.
`atenlens.report.Code` is this class."""

from __future__ import annotations


class Code:
    """Stable diagnostic codes. The static lint and the engine use the same code where both
    find the same thing (docs/diagnostics.md, docs/rules.md)."""

    SYNC = "AL100"  # host waits for the GPU (.item(), .cpu(), nonzero, ...)
    SYNC_API = "AL101"  # torch.cuda.synchronize() / Event/Stream.synchronize()
    PAGEABLE_COPY = "AL200"  # non_blocking H2D copy from pageable memory
    UNSYNCED_D2H_READ = "AL201"  # non_blocking D2H result read before a synchronize
    EMPTY_CACHE_IN_LOOP = "AL300"  # torch.cuda.empty_cache() in a loop (lint only)
    UNSYNCED_TIMING = "AL301"  # wall-clock timing of CUDA work without a synchronize (lint only)
    CREATE_THEN_MOVE = "AL302"  # torch.randn(...).to(device) (lint only)
    EXCEPTION = "AL900"  # the traced code raised
    NEEDS_INPUTS = "AL901"  # the function needs arguments and has no example call
    TIMEOUT = "AL902"  # the trace ran past its time budget
    WORKER_DIED = "AL903"  # the process running the trace exited, crashed or ran out of memory
    LOAD_TIMEOUT = "AL904"  # the module's top level ran past its time budget
    UNORDERED_STREAM_READ = "AL500"  # a tensor written on one stream is read on another with no wait in between
    UNORDERED_STREAM_WRITE = "AL503"  # a tensor read on one stream is overwritten on another with no wait in between
    UNSYNCED_ELAPSED_TIME = "AL501"  # Event.elapsed_time() before the host waited for the end event
    MISSING_RECORD_STREAM = "AL502"  # a tensor used on a stream other than its allocation stream, no record_stream()
    UNSUPPORTED_IN_CAPTURE = "AL510"  # a sync (or a default-stream capture) inside a CUDA graph capture: a GPU raises
    CPU_IN_CAPTURE = "AL511"  # a CPU tensor used inside a CUDA graph capture (not replayed / fixed host address)
    CAPTURE_WITHOUT_WARMUP = "AL512"  # a CUDA graph capture with no warm-up on a side stream before it
    CAPTURE_SUMMARY = "AL513"  # a CUDA graph capture: ops captured, replays, whether it is capturable
    CAPTURE_UNREGISTERED_GENERATOR = "AL514"  # a random op in a capture draws from an unregistered CUDA generator
    CAPTURED_OUTPUT_BEFORE_REPLAY = "AL515"  # a captured output read before the graph's first replay
    STATIC_INPUT_REBOUND = "AL516"  # a captured input's name bound to a new tensor, replayed without a copy into it
    STATIC_OUTPUT_KEPT = "AL517"  # a reference to a captured output kept across a replay that overwrites it
    GRAPH_BREAK = "AL600"  # torch.compile: Dynamo breaks the compiled function's graph at this line
    CUDAGRAPH_SKIP = "AL602"  # torch.compile(mode="reduce-overhead"): CUDA graphs would skip a graph
    COMPILE_SUMMARY = "AL601"  # torch.compile: how many graphs, breaks and guards a compiled callable has
    OUT_OF_MEMORY = "AL400"  # the forecast peak memory exceeds the selected GPU's memory
    DEVICE_FALLBACK = "AL905"  # simulated CUDA unavailable; traced on cpu instead
    ASSUMED_VALUE = "AL906"  # a value fake tensors cannot know was assumed on the common path
    DATALOADER_WORKERS = "AL907"  # DataLoader(num_workers>0): its workers' work ran in the trace's process
    SIMULATED_RANKS = "AL908"  # init_process_group ran on torch's fake backend as one of the simulated ranks
    DDP_SYNC_EVERY_BACKWARD = "AL909"  # DDP all-reduced gradients in several backward() calls before one optimizer step
    HOST_WAITS_FOR_COLLECTIVE = "AL910"  # the host read a collective's result (or called barrier()): all ranks stall
    PER_PARAMETER_COLLECTIVES = "AL911"  # one line issued a collective per parameter (a Python loop over them)
    FSDP_ROOT_ONLY = "AL912"  # FSDP2 wraps only the root of a model made of blocks: one huge all-gather
    NAMED_DIMS = "AL920"  # the directive's `dims:` could not be used: shapes are shown with concrete sizes
    SHAPE_GUARD = "AL921"  # a condition on named dims the symbolic trace had to assume ("T > 8")
