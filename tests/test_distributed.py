"""Simulated ranks (docs/distributed.md): torch's fake process group, device meshes, FSDP2 and tensor
parallel traced through the real worker on simulated CUDA, their collectives as events with bytes
and ring-model estimates."""

from __future__ import annotations

from pathlib import Path

import pytest

from atenlens.lsp.document_traces import build_traced_function
from atenlens.lsp.hover import hover_markdown
from atenlens.lsp.labels import tensor_label_with_device
from atenlens.lsp.settings import HintSettings
from atenlens.report import TraceRequest
from atenlens.traceable import find_functions, parse_ranks_flags, ranks_directive
from source_lines import line_of

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ranks"
FSDP = FIXTURES / "fsdp_step.py"
TP = FIXTURES / "tp_step.py"
DDP = FIXTURES / "ddp_step.py"
FSDP_ADAMW = FIXTURES / "fsdp_adamw_step.py"
HAZARDS = FIXTURES / "hazards_step.py"
SP = FIXTURES / "sp_step.py"
ROOT_ONLY = FIXTURES / "fsdp_root_only.py"
HEADS = FIXTURES / "tp_heads.py"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fsdp_tp_step.py"
NVLINK = 450e9  # H100 SXM, one way (atenlens/gpus.py)
NETWORK = 50e9  # 400 Gb/s per GPU
# NCCL's ring latencies in µs (src/graph/tuning.cc) for its protocols LL, LL128, Simple: the base, per
# step on NVLink, per step on the network, and the share of the link's bandwidth that carries data
PROTOCOLS = ((6.6, 0.6, 2.7, 0.5), (14.0, 1.9, 4.0, 120 / 128), (8.4, 3.4, 14.0, 1.0))


def ring(moved: float, steps: int, bandwidth: float, network_steps: int = 0) -> float:
    """A ring's time by hand: `moved` bytes per rank ((n-1)/n of the bytes, twice for an all-reduce) in
    `steps` steps, the fastest protocol (LL128 only within a node)."""
    return min(
        (base + (steps - network_steps) * hop + network_steps * net) * 1e-6 + moved / (bandwidth * share)
        for base, hop, net, share in PROTOCOLS
        if not (network_steps and share == 120 / 128)
    )


def line_in(path: Path, function: str, text: str) -> int:
    """The first line containing `text` after `def function(`."""
    lines = path.read_text().splitlines()
    start = next(n for n, line in enumerate(lines, 1) if line.startswith(f"def {function}("))
    return next(n for n, line in enumerate(lines, 1) if n > start and text in line)


def collectives(report):
    return [(e.name, e.phase, e.line, e.bytes, e.group_size, e.link) for e in report.events if e.kind == "collective"]


def test_fsdp2_on_eight_ranks_gathers_each_block_and_reduce_scatters_its_gradients(worker):
    report = worker.trace(TraceRequest(file=str(FSDP), qualname="step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    assert (report.summary.world_size, report.summary.rank, report.summary.gpus_per_node) == (8, 0, 8)
    init = [d for d in report.diagnostics if d.code == "AL908"]
    assert [(d.line, d.severity) for d in init] == [(line_of(FSDP, "init_process_group"), "information")]
    assert "backend='nccl', init_method='env://'" in init[0].message and "rank 0 of 8" in init[0].message

    block = (256 * 1024 + 1024 + 1024 * 256 + 256) * 4  # one block's fp32 parameters: 2,102,272 B
    forward, backward = line_of(FSDP, "model(x).sum()"), line_of(FSDP, "loss.backward()")
    gather = ("all_gather_into_tensor", "forward", forward, block, 8, "nvlink")
    regather = ("all_gather_into_tensor", "backward", forward, block, 8, "nvlink")
    assert collectives(report) == [
        gather,
        gather,  # each block unshards (all-gathers its 1/8 shards) as it runs
        regather,  # backward: block 1, resharded after forward, is gathered again
        regather,  # block 0, prefetched before block 1's gradients are reduced
        ("reduce_scatter_tensor", "backward", forward, block, 8, "nvlink"),  # block 1's gradients
        # block 0's input needs no gradient, so its post-backward runs in the root's callback at the
        # end of backward(): its reduce-scatter stands at the backward() line
        ("reduce_scatter_tensor", "backward", backward, block, 8, "nvlink"),
    ]
    view = build_traced_function(report, str(FSDP), FSDP.read_text().splitlines(), "step", 0, 0, 0)
    assert (
        view.lines[forward - 1]
        .hint(HintSettings(max_length=400))
        .endswith(
            " · all_gather 8x 2 MiB ~38 µs NVLink ×2, ∇ all_gather 8x 2 MiB ~38 µs NVLink ×2, "
            "∇ reduce_scatter 8x 2 MiB ~19 µs NVLink"
        )
    )
    assert " · rank 0 of 8 · 6 collectives ~114 µs (~44.9 µs exposed) · peak " in view.summary  # the summary lens
    short = view.lines[forward - 1].hint(HintSettings(max_length=80))  # cut to the room left: counted
    assert short.endswith(" · all_gather 8x 2 MiB ~38 µs NVLink ×2 +2"), short
    events = [e for e in report.events if e.kind == "collective"]
    one = ring(7 / 8 * block, 7, NVLINK)  # LL: 10.8 µs of latency + 7/8 of 2 MiB at half of 450 GB/s
    assert one == pytest.approx(18.976e-6, rel=1e-4)
    assert all(e.estimate_seconds == pytest.approx(one) for e in events)
    assert report.summary.collectives == 6
    assert report.summary.communication_seconds == pytest.approx(6 * one)
    # communication is summed apart from the kernels' step time
    assert report.summary.time.step_seconds == pytest.approx(
        sum(e.estimate_seconds for e in report.events if e.kind == "op")
    )
    # the shards: each rank holds 1/8 of every parameter (DTensor locals of the sharded module)
    gathered = [e for e in events if e.name == "all_gather_into_tensor"]
    assert {e.inputs[1].shape for e in gathered} == {(block // 4 // 8,)}


def test_fsdp2_memory_per_rank_equals_fsdpmemtracker_on_the_same_run(worker):
    """8 ranks, two fully_shard'ed blocks + root, AdamW: the peak per rank and what holds it, against
    torch's FSDPMemTracker run around the same step inside the trace (both see the very same ops)."""
    import json

    tracked = worker.trace(
        TraceRequest(
            file=str(FSDP_ADAMW), qualname="train_step", device="cuda", call="tracked(*setup())", timeout_seconds=120
        )
    )
    assert tracked.status == "ok", tracked.message
    line = next(out for out in tracked.stdout.splitlines() if out.startswith("FSDPMEMTRACKER "))
    theirs = json.loads(line[len("FSDPMEMTRACKER ") :])
    report = worker.trace(TraceRequest(file=str(FSDP_ADAMW), qualname="train_step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    memory = report.summary.memory
    assert tracked.summary.memory.peak_bytes == memory.peak_bytes  # FSDPMemTracker changes nothing

    # by hand: each rank's shard of a block is 1/8 of every parameter, each its own 512-byte block
    # ([128, 256] + [128] + [32, 1024] + [32] fp32); a gathered block is the whole of it
    shards = 2 * (128 * 256 * 4 + 512 + 32 * 1024 * 4 + 512)  # both blocks: 526,336 B
    block = 1024 * 256 * 4 + 1024 * 4 + 256 * 1024 * 4 + 256 * 4  # 2,102,272 B
    assert memory.peak_bytes == theirs["Total"] == 7_555_072
    assert (memory.peak_line, memory.peak_phase) == (line_of(FSDP_ADAMW, "loss = model(x)"), "backward")
    at = memory.at_peak
    # at the peak, in backward: block 0 is being gathered again (its all-gather output and its
    # unsharded parameters) while block 1's full gradients wait for their reduce-scatter
    assert (at.parameters, at.unsharded_parameters, at.communication, at.unsharded_gradients) == (
        shards,
        block,
        block,
        block,
    )
    assert (at.gradients, at.optimizer_state, at.inputs) == (0, 0, 64 * 256 * 4)
    assert (theirs["Sharded Param"], theirs["Unsharded Param"], theirs["All Gather"], theirs["Inputs"]) == (
        at.parameters,
        at.unsharded_parameters,
        at.communication,
        at.inputs,
    )
    # FSDPMemTracker calls every backward tensor a Temp (the unsharded gradients too) and every forward
    # one an Activation; atenlens an activation only when autograd saved it
    assert theirs["Activation"] + theirs["Temp"] == at.activations + at.temporaries + at.unsharded_gradients
    assert theirs["Unsharded Grad"] == theirs["Sharded Grad"] == theirs["OptState"] == 0
    # the optimizer touches only the shards: AdamW's exp_avg and exp_avg_sq are two more of them
    optimizer = [
        e for e in report.events if e.kind == "op" and e.phase == "optimizer" and e.name == "aten._foreach_sqrt.default"
    ]
    assert [tuple(o.shape for o in e.outputs) for e in optimizer] == [
        ((128, 256), (128,), (32, 1024), (32,), (128, 256), (128,), (32, 1024), (32,))
    ]
    # after the step: the shards, AdamW's two state shards and the batch; nothing gathered is left (FSDP2
    # frees a gathered block by resizing its storage to 0) and zero_grad() dropped the gradient shards
    assert memory.end_bytes == 3 * shards + 64 * 256 * 4


def test_tensor_parallel_all_reduce_at_the_row_parallel_line_and_no_socket(worker):
    report = worker.trace(
        TraceRequest(
            file=str(TP),
            qualname="step",
            device="cuda",
            call="step(*setup())",
            world_size=4,
            rank=2,
            timeout_seconds=120,
        )
    )
    assert report.status == "ok", report.message
    assert report.stdout.splitlines() == [
        "sockets opened by init: 0",
        "rank 2 of 4, backend fake",
        "RANK=2 LOCAL_RANK=2 WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500",
    ]
    assert (report.summary.world_size, report.summary.rank) == (4, 2)
    down = line_of(TP, "return self.down(h)")
    # the row-parallel output [8, 64] fp32 is summed over the 4 ranks; nothing else communicates
    assert collectives(report) == [("all_reduce", "forward", down, 8 * 64 * 4, 4, "nvlink")]
    event = next(e for e in report.events if e.kind == "collective")
    assert [f.line for f in event.stack] == [line_of(TP, "model(x).sum()"), down]
    assert event.estimate_seconds == pytest.approx(ring(2 * 3 / 4 * 2048, 6, NVLINK))  # all latency: 10.2 µs

    # DTensor placements on the local shards: the column-parallel output is sharded on its last dim, the
    # row-parallel matmul's partial sums are summed over the ranks by the all-reduce at the same line
    up = line_of(TP, "h = torch.relu(self.up(x))")
    addmms = [(e.line, e.outputs[0]) for e in report.events if e.kind == "op" and e.name == "aten.addmm.default"]
    assert [(line, meta.shape, meta.placements, meta.global_shape) for line, meta in addmms] == [
        (up, (8, 32), "Shard(1)", (8, 128)),
        (down, (8, 64), "Partial(sum)", (8, 64)),
    ]
    assert tensor_label_with_device(addmms[0][1]) == "f32[8, 32] Shard(1) cuda:0 of f32[8, 128]"
    # ColwiseParallel hands its output back as a plain tensor (use_local_output=True): the view to_local()
    # makes and the relu on it hold this rank's 32 of the 128 features, and their labels say so
    shard = "f32[8, 32] local Shard(1) cuda:0 of f32[8, 128]"
    assert [
        (e.name, tensor_label_with_device(e.outputs[0]))
        for e in report.events
        if e.kind == "op" and e.line == up and e.phase == "forward"
    ] == [
        ("aten.view.default", "f32[8, 64] cuda:0"),  # the input, made a replicated DTensor
        ("aten.t.default", "f32[64, 32] cuda:0"),
        ("aten.addmm.default", "f32[8, 32] Shard(1) cuda:0 of f32[8, 128]"),
        ("aten.view.default", shard),
        ("aten.relu.default", shard),
        ("aten.detach.default", shard),
    ]

    # the editor: the line's hint ends with the collective, its hover has a table of them
    view = build_traced_function(report, str(TP), TP.read_text().splitlines(), "step", 0, 0, 0)
    assert view.lines[up - 1].hint(HintSettings()) == "addmm +1 f32[8, 32] local Shard(1) · ∇ threshold_backward +2"
    line = view.lines[down - 1]
    assert line.hint(HintSettings()).endswith(" · all_reduce 4x 2 KiB ~10.2 µs NVLink")
    assert (
        "**Collectives** (estimates: NCCL ring and tree model; exposed: not hidden by compute on two streams, "
        "docs/distributed.md)\n\n"
        "| phase | collective | group | ranks | bytes per rank | time | exposed | link | count |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        # the sum of the row-parallel output waits for its all-reduce at once: all of it exposed
        "| forward | `all_reduce` | default_pg | 4 | 2 KiB | 10.2 µs | 10.2 µs | NVLink | 1 |" in hover_markdown(line)
    )


def test_views_of_a_local_shard_are_labelled_with_the_sharded_dimension_they_keep(worker):
    """ColwiseParallel's plain local output [8, 32] of [8, 128], split into heads of 8 features, the heads
    moved first, flattened: each view says which of its dimensions holds this rank's part."""
    report = worker.trace(TraceRequest(file=str(HEADS), qualname="step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    qkv, split, flat, last = (
        line_of(HEADS, "h = self.qkv(x)"),
        line_of(HEADS, "heads = h.view("),
        line_of(HEADS, "flat = heads.contiguous()"),
        line_of(HEADS, "return flat.flatten()"),
    )
    forward = [
        (e.line, e.name, tensor_label_with_device(e.outputs[0]))
        for e in report.events
        if e.kind == "op" and e.phase == "forward" and e.outputs
    ]
    assert [row for row in forward if row[0] == qkv][-1] == (
        qkv,
        "aten.view.default",  # to_local()'s view
        "f32[8, 32] local Shard(1) cuda:0 of f32[8, 128]",
    )
    assert [row for row in forward if row[0] in (split, flat, last)] == [
        (split, "aten.view.default", "f32[8, 4, 8] local Shard(1) cuda:0 of f32[8, 16, 8]"),  # 4 of 16 heads
        (split, "aten.transpose.int", "f32[4, 8, 8] local Shard(0) cuda:0 of f32[16, 8, 8]"),
        (flat, "aten.clone.default", "f32[4, 8, 8] local Shard(0) cuda:0 of f32[16, 8, 8]"),  # same shape
        (flat, "aten.view.default", "f32[4, 64] local Shard(0) cuda:0 of f32[16, 64]"),
        (last, "aten.view.default", "f32[256] local Shard(0) cuda:0 of f32[1024]"),  # the heads outermost
    ]


@pytest.mark.parametrize(
    "placements, global_shape, local, out, expected",
    [
        ("Shard(1)", (8, 128), ((8, 32), (32, 1)), ((8, 4, 8), (32, 8, 1)), ("Shard(1)", (8, 16, 8))),
        ("Shard(1)", (8, 128), ((8, 32), (32, 1)), ((32, 8), (1, 32)), ("Shard(0)", (128, 8))),  # .t()
        ("Shard(2)", (2, 16, 128), ((2, 16, 32), (512, 32, 1)), ((32, 32), (32, 1)), ("Shard(1)", (32, 128))),
        ("Replicate(), Shard(0)", (64, 8), ((16, 8), (8, 1)), ((8, 16), (1, 8)), ("Replicate(), Shard(1)", (8, 64))),
        ("Shard(1)", (8, 128), ((8, 32), (32, 1)), ((256,), (1,)), None),  # merged with the batch outside it
        ("Shard(1)", (8, 128), ((8, 32), (32, 1)), ((8, 1, 32), (32, 32, 1)), None),  # a new size-1 dim
        ("Shard(1)", (8, 128), ((8, 32), (32, 1)), ((8, 16), (32, 1)), None),  # half of the shard (a slice)
        ("Shard(0), Shard(1)", (8, 128), ((4, 32), (32, 1)), ((128,), (1,)), None),  # sharded twice
    ],
)
def test_shard_through_view_follows_the_sharded_dimension_by_its_strides(
    placements, global_shape, local, out, expected
):
    from atenlens.trace.ranks import shard_through_view

    assert shard_through_view(placements, global_shape, *local, *out) == expected


def test_sequence_parallel_all_gathers_and_reduce_scatters_the_sequence_instead_of_an_all_reduce(worker):
    """4 ranks, each holding 32 of 128 tokens: the column-parallel Linear all-gathers the normalized
    sequence, the row-parallel one reduce-scatters its partial sums back to sequence shards; backward
    does the converse. Each moves the whole [8, 128, 64] fp32 activation: 262,144 B per rank."""
    report = worker.trace(TraceRequest(file=str(SP), qualname="step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    up, down = line_of(SP, "torch.relu(self.up(h))"), line_of(SP, "return self.down(h)")
    activation = 8 * 128 * 64 * 4
    assert collectives(report) == [
        ("all_gather_into_tensor", "forward", up, activation, 4, "nvlink"),
        ("reduce_scatter_tensor", "forward", down, activation, 4, "nvlink"),
        ("all_gather_into_tensor", "backward", down, activation, 4, "nvlink"),  # the reduce-scatter's gradient
        ("reduce_scatter_tensor", "backward", up, activation, 4, "nvlink"),  # the all-gather's
    ]
    events = [e for e in report.events if e.kind == "collective"]
    assert [(e.inputs[0].shape, e.outputs[0].shape) for e in events[:2]] == [
        ((8, 32, 64), (32, 32, 64)),
        ((32, 32, 64), (8, 32, 64)),
    ]  # gathered along dim 0, then re-laid
    assert all(e.estimate_seconds == pytest.approx(ring(3 / 4 * activation, 3, NVLINK)) for e in events)
    assert not [e for e in events if e.name == "all_reduce"]


def test_fsdp2_overlap_exposes_what_compute_cannot_hide_on_two_streams(worker):
    """trace/overlap.py: one compute and one communication stream, ideal overlap. Every kernel of this
    small model costs one launch (L), every collective the same ring estimate (E)."""
    report = worker.trace(TraceRequest(file=str(FSDP), qualname="step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    launch = report.summary.time.launch_seconds
    assert launch == pytest.approx(4e-6)
    assert {e.estimate_seconds for e in report.events if e.kind == "op" and e.estimate_seconds} == {launch}
    events = [e for e in report.events if e.kind == "collective"]
    one = events[0].estimate_seconds
    assert [e.exposed_seconds for e in events] == pytest.approx(
        [
            # block 0's all-gather: nothing runs before it but its copy-in (on the side stream, not
            # communication): all of it exposed
            one,
            # block 1's: starts after its copy-in (L), behind block 0's copy-out and 3 kernels (4 L):
            # 3 L of it hidden
            one - 3 * launch,
            # backward: both re-gathers are prefetched behind block 1's backward, block 1's
            # reduce-scatter runs behind block 0's backward
            0.0,
            0.0,
            0.0,
            # block 0's reduce-scatter ends the step: nothing left to hide it
            one,
        ],
        abs=1e-12,
    )
    assert report.summary.exposed_communication_seconds == pytest.approx(3 * one - 3 * launch)
    assert report.summary.communication_seconds == pytest.approx(6 * one)


def test_ddp_all_reduces_all_gradient_bytes_in_each_backward(worker):
    """DDP cannot run on the fake backend as it is (its reducer reads the all-reduce's result from a Work
    that holds none); the trace's bucket hook all-reduces each bucket and hands it back."""
    report = worker.trace(TraceRequest(file=str(DDP), qualname="step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    gradients = (256 * 1024 + 1024 + 1024 * 256 + 256) * 4
    backward = line_in(DDP, "step", "loss.backward()")
    all_reduce = ("all_reduce", "backward", backward, gradients, 8, "nvlink")
    assert collectives(report) == [all_reduce, all_reduce]  # one bucket per step, two steps
    assert [e.inputs[0].shape for e in report.events if e.kind == "collective"] == [(gradients // 4,)] * 2
    assert report.summary.communication_seconds == pytest.approx(2 * ring(2 * 7 / 8 * gradients, 14, NVLINK))
    # the one bucket is ready when backward has nothing left to run, and the copy of its result into
    # the gradients waits for it: each all-reduce is exposed in full (trace/overlap.py)
    assert [e.exposed_seconds for e in report.events if e.kind == "collective"] == pytest.approx(
        [e.estimate_seconds for e in report.events if e.kind == "collective"], abs=1e-12
    )
    assert report.summary.ops["optimizer"] > 0  # both steps ran to the update
    assert not [d for d in report.diagnostics if d.code == "AL909"]  # one backward per step


def test_gradient_accumulation_without_no_sync_is_reported_and_with_it_not(worker):
    without = worker.trace(TraceRequest(file=str(DDP), qualname="accumulate", device="cuda", timeout_seconds=120))
    assert without.status == "ok", without.message
    backward = line_in(DDP, "accumulate", "loss.backward()")
    assert [(d.line, d.severity, d.count) for d in without.diagnostics if d.code == "AL909"] == [
        (backward, "warning", 3)
    ]  # the 2nd, 3rd and 4th all-reduced backward
    assert len([e for e in without.events if e.kind == "collective"]) == 4
    with_no_sync = worker.trace(
        TraceRequest(file=str(DDP), qualname="accumulate_with_no_sync", device="cuda", timeout_seconds=120)
    )
    assert with_no_sync.status == "ok", with_no_sync.message
    assert not [d for d in with_no_sync.diagnostics if d.code == "AL909"]
    assert len([e for e in with_no_sync.events if e.kind == "collective"]) == 1  # only the last micro-step


def hazard_diagnostics(worker, function):
    report = worker.trace(TraceRequest(file=str(HAZARDS), qualname=function, device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    return [
        (d.code, d.line, d.severity, d.count, d.message) for d in report.diagnostics if d.code in ("AL910", "AL911")
    ]


def test_reading_a_reduced_loss_on_the_host_every_step_is_reported_and_keeping_it_on_device_not(worker):
    reduce = line_in(HAZARDS, "log_every_step", "dist.all_reduce(reduced)")
    read = line_in(HAZARDS, "log_every_step", ".item()")
    assert hazard_diagnostics(worker, "log_every_step") == [
        (
            "AL910",
            read,
            "warning",
            1,
            f"reading the result of all_reduce at line {reduce} on the host waits until every rank has sent its part: "
            "each step stalls all ranks' hosts for the communication and the slowest rank; log it every N steps, or "
            "keep it on the device and reduce it when you log [aten._local_scalar_dense]",
        )
    ]
    assert hazard_diagnostics(worker, "keep_on_device") == []  # the same all_reduce, never read here


def test_a_barrier_every_step_is_reported(worker):
    assert hazard_diagnostics(worker, "barrier_every_step") == [
        (
            "AL910",
            line_in(HAZARDS, "barrier_every_step", "dist.barrier()"),
            "warning",
            1,
            "dist.barrier() blocks the host until all 8 ranks reach it: each rank waits for the slowest (on NCCL, it "
            "also waits for the GPU to finish its queued work) [barrier]",
        )
    ]


def test_a_collective_per_parameter_is_reported_and_one_flattened_bucket_not(worker):
    # Linear(64, 256) + Linear(256, 8), fp32: 4 gradients, 74,792 B per rank, all-reduced on 8 ranks
    sizes = [256 * 64 * 4, 256 * 4, 8 * 256 * 4, 8 * 4]
    each = sum(ring(2 * 7 / 8 * n, 14, NVLINK) for n in sizes)
    one = ring(2 * 7 / 8 * sum(sizes), 14, NVLINK)
    assert (round(each * 1e6, 1), round(one * 1e6, 1)) == (60.6, 15.6)  # mostly latency: 4 x 15 µs
    assert hazard_diagnostics(worker, "per_parameter") == [
        (
            "AL911",
            line_in(HAZARDS, "per_parameter", "dist.all_reduce(p.grad)"),
            "warning",
            1,
            "4 all_reduce calls at this line, one per parameter (4 tensors, 73 KiB per rank): ~60.6 µs in all, where "
            "one all_reduce of the same bytes flattened into one buffer takes ~15.6 µs; each call pays the "
            "collective's latency. Flatten them (torch._utils._flatten_dense_tensors), or let DDP or FSDP2 bucket "
            "them",
        )
    ]
    assert hazard_diagnostics(worker, "flattened") == []


def test_fsdp2_on_the_root_only_is_reported_and_wrapped_blocks_not(worker):
    report = worker.trace(TraceRequest(file=str(ROOT_ONLY), qualname="step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    model = 3 * (256 * 1024 * 4 + 1024 * 4 + 1024 * 256 * 4 + 256 * 4)  # 6,306,816 B: 6.01 MiB
    forward = line_of(ROOT_ONLY, "model(x).sum()")
    # one all-gather of all of it, in forward only (the root keeps its parameters for backward)
    assert collectives(report) == [
        ("all_gather_into_tensor", "forward", forward, model, 8, "nvlink"),
        ("reduce_scatter_tensor", "backward", line_of(ROOT_ONLY, "loss.backward()"), model, 8, "nvlink"),
    ]
    assert report.summary.memory.at_peak.unsharded_parameters == model
    assert [(d.code, d.line, d.severity, d.message) for d in report.diagnostics if d.code == "AL912"] == [
        (
            "AL912",
            forward,
            "warning",
            "fully_shard wraps only the root module: its 3 blocks' parameters (6.01 MiB unsharded) are gathered by "
            "one all-gather before the forward: every rank holds the whole unsharded model at once, and no "
            "communication overlaps compute; call fully_shard on each block (each transformer layer) before the "
            "root",
        )
    ]
    wrapped = worker.trace(TraceRequest(file=str(FSDP), qualname="step", device="cuda", timeout_seconds=120))
    assert wrapped.status == "ok", wrapped.message
    assert not [d for d in wrapped.diagnostics if d.code == "AL912"]


def test_fsdp_and_ddp_collectives_are_not_the_programs_own(worker):
    """FSDP2's per-block all-gathers and DDP's bucket all-reduces run inside module calls and backward():
    neither hazard applies to them."""
    for path, function in ((FSDP, "step"), (DDP, "step")):
        report = worker.trace(TraceRequest(file=str(path), qualname=function, device="cuda", timeout_seconds=120))
        assert report.status == "ok", report.message
        assert len([e for e in report.events if e.kind == "collective"]) >= 2
        assert [d.code for d in report.diagnostics if d.code in ("AL910", "AL911")] == []


def test_the_fsdp_tp_example_on_a_two_dimensional_mesh(worker):
    """examples/fsdp_tp_step.py: 8 ranks as dp=2 x tp=4. Each layer's weights are tensor-parallel shards
    (1/4) that FSDP2 shards again over dp (1/2): its all-gather's output is the TP-local layer."""
    report = worker.trace(TraceRequest(file=str(EXAMPLE), qualname="train_step", device="cuda", timeout_seconds=120))
    assert report.status == "ok", report.message
    layer = 2 * 512 * 2048 * 4 // 4  # up + down, fp32, 1/4 of it on this TP rank
    activation = 8 * 128 * 512 * 4  # [8, 128, 512] fp32
    call_layer, up, down = (
        line_of(EXAMPLE, text) for text in ("x = layer(x)", "h = torch.relu(self.up(x))", "return x + self.down(h)")
    )
    backward = line_of(EXAMPLE, "loss.backward()")
    gather = ("all_gather_into_tensor", "forward", call_layer, layer, 2, "nvlink")
    row_sum = ("all_reduce", "forward", down, activation, 4, "nvlink")
    assert collectives(report) == [
        gather,
        row_sum,  # layer 0: unshard, then the row-parallel sum
        gather,
        row_sum,  # layer 1
        ("all_gather_into_tensor", "backward", down, layer, 2, "nvlink"),  # layer 1 again
        ("all_gather_into_tensor", "backward", down, layer, 2, "nvlink"),  # layer 0, prefetched
        # the column-parallel input's gradient is summed over tp: only layer 1's input needs one
        ("all_reduce", "backward", up, activation, 4, "nvlink"),
        ("reduce_scatter_tensor", "backward", call_layer, layer, 2, "nvlink"),  # layer 1's gradients
        ("reduce_scatter_tensor", "backward", backward, layer, 2, "nvlink"),  # layer 0's, at the end
    ]
    assert {e.group for e in report.events if e.kind == "collective"} == {"mesh_dp", "mesh_tp"}


def test_a_data_parallel_group_across_nodes_is_priced_on_the_network(worker):
    """16 ranks, 4 GPUs per node: each tp group (4 consecutive ranks) is one node, each dp group
    (ranks 0, 4, 8, 12) spans four."""
    report = worker.trace(
        TraceRequest(
            file=str(EXAMPLE), qualname="train_step", device="cuda", world_size=16, gpus_per_node=4, timeout_seconds=120
        )
    )
    assert report.status == "ok", report.message
    layer = 2 * 512 * 2048 * 4 // 4
    found = {
        (e.name, e.group, e.group_size, e.link, e.bytes, round(e.estimate_seconds * 1e9))
        for e in report.events
        if e.kind == "collective"
    }
    across = round(ring(3 / 4 * layer, 3, NETWORK, network_steps=3) * 1e9)  # every step crosses nodes
    activation = 8 * 128 * 512 * 4
    assert found == {
        ("all_gather_into_tensor", "mesh_dp", 4, "network", layer, across),
        ("reduce_scatter_tensor", "mesh_dp", 4, "network", layer, across),
        ("all_reduce", "mesh_tp", 4, "nvlink", activation, round(ring(2 * 3 / 4 * activation, 6, NVLINK) * 1e9)),
    }
    assert (report.summary.world_size, report.summary.gpus_per_node) == (16, 4)


def test_groups_across_nodes_are_priced_on_the_network():
    from atenlens.gpus import find_gpu
    from atenlens.trace.collectives import Collectives
    from atenlens.trace.ranks import Ranks

    prices = Collectives(Ranks(16, 0, 8, requested=True), find_gpu("h100-sxm"))
    assert prices._link(range(8)) == "nvlink"
    assert prices._link(range(16)) == "network"
    assert prices._link([0, 8]) == "network"
    gib = 2**30
    # 1 GiB: Simple, the bandwidth term and a little latency; across 2 nodes 1 of the 15 steps crosses,
    # over the 8 NICs of the group's 8 ranks on each node
    assert prices.estimate("all_gather_into_tensor", gib, 16, "network", 2) == pytest.approx(
        (8.4 + 14 * 3.4 + 14.0) * 1e-6 + 15 / 16 * gib / (8 * NETWORK)
    )
    assert prices.estimate("all_reduce", gib, 8, "nvlink") == pytest.approx(
        (8.4 + 14 * 3.4) * 1e-6 + 2 * 7 / 8 * gib / NVLINK
    )
    # 64 KiB: LL, nearly all latency
    assert prices.estimate("all_gather_into_tensor", 64 * 1024, 8, "nvlink") == pytest.approx(
        (6.6 + 7 * 0.6) * 1e-6 + 7 / 8 * 64 * 1024 / (NVLINK / 2)
    )
    assert prices.estimate("barrier", 0, 8, "nvlink") == pytest.approx((6.6 + 14 * 0.6) * 1e-6)
    assert prices.estimate("all_reduce", gib, 1, "nvlink") == 0.0
    pcie_only = Collectives(Ranks(4, 0, 8, requested=True), find_gpu("l4"))
    assert pcie_only._link(range(4)) == "pcie"
    assert pcie_only.estimate("broadcast", gib, 4, "pcie") == pytest.approx((8.4 + 3 * 5.7) * 1e-6 + gib / 32e9)


def test_all_reduce_across_nodes_takes_the_tree_when_faster_and_groups_use_a_nic_per_rank_on_a_node():
    """NCCL's tree all-reduce across nodes (2 x (ranks per node - 1) NVLink steps and 2 x log2(nodes)
    network steps) against its ring; a group with m ranks on each node moves data over m NICs (rails)."""
    from atenlens.gpus import find_gpu
    from atenlens.trace.collectives import Collectives
    from atenlens.trace.ranks import Ranks

    prices = Collectives(Ranks(64, 0, 8, requested=True), find_gpu("h100-sxm"))
    kib64, gib = 64 * 1024, 2**30
    rails = min(NVLINK, 8 * NETWORK)  # 8 ranks on each node: 8 NICs of 50 GB/s, under NVLink's 450
    # 64 ranks on 8 nodes, 64 KiB: tree LL (2 x (7 x 0.6 + 3 x 5.0) µs of steps), not the ring's 126 steps
    assert prices.estimate("all_reduce", kib64, 64, "network", 8) == pytest.approx(
        (6.8 + 2 * (7 * 0.6 + 3 * 5.0)) * 1e-6 + 2 * kib64 / (rails / 3.8)
    )
    # 1 GiB: the ring's bandwidth term (2 x 63/64 of the bytes) beats the tree's (2 x the bytes at 0.92)
    assert prices.estimate("all_reduce", gib, 64, "network", 8) == pytest.approx(
        (8.4 + 112 * 3.4 + 14 * 14.0) * 1e-6 + 2 * 63 / 64 * gib / rails
    )
    assert prices.estimate("all_gather_into_tensor", gib, 64, "network", 8) == pytest.approx(
        (8.4 + 56 * 3.4 + 7 * 14.0) * 1e-6 + 63 / 64 * gib / rails
    )
    # one rank on each of 8 nodes (a data-parallel group of HSDP): one NIC each, the tree's 3 network levels
    assert prices.estimate("all_reduce", kib64, 8, "network", 8) == pytest.approx(
        (6.8 + 2 * 3 * 5.0) * 1e-6 + 2 * kib64 / (NETWORK / 3.8)
    )
    assert prices.estimate("all_gather_into_tensor", gib, 8, "network", 8) == pytest.approx(
        (8.4 + 7 * 14.0) * 1e-6 + 7 / 8 * gib / NETWORK
    )


def test_torchrun_variables_of_a_rank_on_the_second_node():
    from atenlens.trace.ranks import _torchrun_environment, ranks_of

    ranks = ranks_of(16, 11, 8)
    assert ranks.describe() == "rank 11 of 16 (2 nodes of 8 GPUs)"
    assert _torchrun_environment(ranks) == {
        "RANK": "11",
        "WORLD_SIZE": "16",
        "LOCAL_RANK": "3",
        "LOCAL_WORLD_SIZE": "8",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }


def test_ranks_directive_sits_above_the_example_call():
    source = FSDP.read_text()
    info = next(i for i in find_functions(source) if i.qualname == "step")
    assert ranks_directive(source, info) == {"world_size": 8}
    assert parse_ranks_flags("--world-size 64 --rank=3 --gpus-per-node 4") == {
        "world_size": 64,
        "rank": 3,
        "gpus_per_node": 4,
    }
    with pytest.raises(ValueError, match="unknown flag '--ranks'"):
        parse_ranks_flags("--ranks 8")
    with pytest.raises(ValueError, match="--rank needs a whole number, got 'x'"):
        parse_ranks_flags("--rank x")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rank", "1"], "--rank and --gpus-per-node need --world-size"),
        (["--world-size", "4", "--rank", "4"], "the rank must be between 0 and 3 for a world size of 4, got 4"),
        (["--world-size", "0"], "the world size must be 1 or more, got 0"),
        (["--world-size", "8", "--gpus-per-node", "0"], "the GPUs per node must be 1 or more, got 0"),
    ],
)
def test_impossible_ranks_are_usage_errors(argv, message):
    from atenlens.cli import build_parser
    from atenlens.trace_command import UsageError, build_request

    args = build_parser().parse_args(["trace", f"{FSDP}::step", *argv])
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        build_request(args)


def test_cli_flags_reach_the_trace_and_the_listing_shows_the_collective():
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "atenlens",
            "trace",
            f"{TP}::step",
            "--call",
            "step(*setup())",
            "--world-size",
            "4",
            "--rank",
            "1",
            "--gpus-per-node",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=FIXTURES,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # 4 ranks at 2 GPUs per node: the tensor-parallel group spans two nodes; 2 of the all-reduce's 6 ring
    # steps cross them (LL: 6.6 + 4 x 0.6 + 2 x 2.7 µs of latency)
    rows = [line for line in lines if " all_reduce " in line]
    assert len(rows) == 1 and "4x 2 KiB · ~14.5 µs network" in rows[0], rows
    assert any("rank 1 of 4 · 1 collective ~14.5 µs" in line for line in lines if line.startswith("totals"))


@pytest.mark.parametrize("rows, ranks, dim", [(10, 4, 0), (3, 8, 0), (7, 3, 0), (4096, 64, 0), (12, 4, 1)])
def test_fsdp2_chunks_made_when_read_are_the_views_torch_chunk_makes(rows, ranks, dim):
    """fully_shard's chunks of a parameter (one per rank, empty ones padding a short split) are made
    only when read during a trace (torch_compat.spmd_setup_shortcuts); each is the view torch makes."""
    import torch
    from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty

    from atenlens.trace.torch_compat import _ChunksByIndex

    tensor = torch.empty(rows, 5) if dim == 0 else torch.empty(5, rows)
    expected = _chunk_with_empty(tensor, ranks, dim)
    chunks = _ChunksByIndex(tensor, ranks, dim)
    assert len(chunks) == len(expected) == ranks

    def view(t):
        return (t.shape, t.stride(), t.storage_offset(), t.untyped_storage().data_ptr() == tensor.data_ptr())

    def padding(t):  # _chunk_with_empty's padding is a new empty tensor
        return (t.shape, t.dtype, t.numel())

    for index in [ranks - 1, 0, *range(ranks), -1]:
        made, want = chunks[index], expected[index]
        assert (view(made) if want.numel() else padding(made)) == (view(want) if want.numel() else padding(want))
    assert chunks[ranks - 1] is chunks[-1]
    with pytest.raises(IndexError):
        chunks[ranks]
