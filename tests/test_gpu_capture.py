"""CUDA graph capture on simulated CUDA (AL510-AL513): the exact lines, codes and texts, from the real
worker tracing tests/corpus/gpu/capture_graphs.py and clean_capture.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_helpers import cuda_request

CORPUS = Path(__file__).resolve().parent / "corpus" / "gpu"
CAPTURE = CORPUS / "capture_graphs.py"
CLEAN = CORPUS / "clean_capture.py"
SYNCED = "torch.cuda.graph synchronized the device before capturing (by design: capture once, replay often)"
NO_WARM_UP = (
    "CUDA graph capture with no warm-up: no work ran on a side stream before it. torch requires running "
    "the captured code a few times on a side stream first (lazy initialisation inside a capture, such as "
    "cuBLAS workspaces, optimizer state or autograd's streams, fails or is captured as work that never "
    "replays)"
)


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _last_before(path: Path, text: str, line: int) -> int:
    """The last line before `line` that contains `text`."""
    return max(i for i, source in enumerate(path.read_text().splitlines()[: line - 1], 1) if text in source)


def _found(worker, path: Path, qualname: str) -> list[tuple[int, str, str, str]]:
    report = worker.trace(cuda_request(path, qualname, timeout=120.0))
    assert (report.status, report.device) == ("ok", "cuda"), report.message
    return [(d.line, d.code, d.severity, d.message) for d in report.diagnostics]


def test_the_documented_capture_pattern_is_capturable_and_its_replays_are_ordered(worker):
    """Warm-up on a side stream, capture, copy into the static input, replay, read the static output:
    no sync reported, no stream hazard (the replay rewrites the static output on the replaying stream)."""
    assert _found(worker, CLEAN, "case_capture_then_replay_per_batch") == [
        (
            _line(CLEAN, "with torch.cuda.graph(g):"),
            "AL513",
            "information",
            f"CUDA graph: 3 ops captured (line {_line(CLEAN, 'static_y = model(static_x)')}), replayed 3 times; {SYNCED}; "
            "capturable: no sync, CPU tensor or missing warm-up seen inside it",
        )
    ]


def test_an_item_inside_the_capture_is_an_error_not_a_sync(worker):
    item = _line(CAPTURE, "scale = static_y.abs().max().item()")
    found = _found(worker, CAPTURE, "case_item_inside_the_capture")
    begin = _last_before(CAPTURE, "with torch.cuda.graph(g):", item)
    assert [(line, code, severity) for line, code, severity, _ in found] == [
        (item, "AL510", "error"),
        (begin, "AL513", "information"),
    ]
    assert found[0][3] == (
        "`.item()` copies a value of cuda f32[] to the host: the host waits until the GPU has finished all queued "
        "work, inside a CUDA graph capture: on a GPU this invalidates the capture (cudaErrorStreamCaptureUnsupported) "
        "and raises; a captured graph cannot wait for its own results: keep the value on the device, or move this "
        "out of the captured region [aten._local_scalar_dense]"
    )
    assert found[1][3] == (
        f"CUDA graph: 6 ops captured (lines {item - 1}-{item}), replayed 1 time; {SYNCED}; not "
        f"capturable as written: a sync at line {item} (AL510)"
    )


def test_no_warm_up_and_a_host_buffer_in_the_capture(worker):
    begin, copy = (
        _line(CAPTURE, "with torch.cuda.graph(g):  # expect: AL512:warning"),
        _line(CAPTURE, "static_x.copy_(host)"),
    )
    assert _found(worker, CAPTURE, "case_capture_without_warm_up") == [
        (begin, "AL512", "warning", NO_WARM_UP),
        (
            copy,
            "AL511",
            "warning",
            "a CPU tensor f32[8, 32] is used inside a CUDA graph capture: the captured copy reads this host buffer's "
            "address on every replay: the program must write each step's data into that same buffer (pinned; a "
            "pageable source cannot be captured) [aten.copy_]",
        ),
        (
            begin,
            "AL513",
            "information",
            f"CUDA graph: 4 ops captured (lines {copy}-{copy + 1}), replayed 3 times; {SYNCED}; not capturable as "
            f"written: no warm-up (AL512), a CPU tensor at line {copy} (AL511)",
        ),
    ]


def test_a_capture_begun_on_the_default_stream(worker):
    begin = _line(CAPTURE, "g.capture_begin()")
    found = _found(worker, CAPTURE, "case_capture_on_the_default_stream")
    assert [(line, code, severity) for line, code, severity, _ in found] == [
        (begin, "AL510", "error"),
        (begin, "AL513", "information"),
    ]
    assert found[0][3].startswith("CUDA graph capture begins on the default stream: on a GPU capture_begin() raises")
    assert found[1][3] == (
        f"CUDA graph: 3 ops captured (line {begin + 1}), replayed 1 time; not capturable as "
        "written: captured on the default stream (AL510)"
    )


def test_captures_in_a_loop_are_one_summary_and_the_first_lacks_its_warm_up(worker):
    begin = _last_before(CAPTURE, "with torch.cuda.graph(g):", _line(CAPTURE, "outs.append(static_y.clone())"))
    assert _found(worker, CAPTURE, "case_warm_up_and_captures_in_a_loop") == [
        (begin, "AL512", "warning", NO_WARM_UP),
        (
            begin,
            "AL513",
            "information",
            f"CUDA graph: 2 captures here, up to 3 ops captured (line {begin + 1}), replayed 2 times; {SYNCED}; not "
            "capturable as written: no warm-up (AL512)",
        ),
    ]


UNREGISTERED = (
    "a random op draws from a CUDA generator that this graph does not know about: on a GPU the capture raises "
    "`RuntimeError: Attempt to increase offset for a CUDA generator not in capture mode.` (torch.cuda.graph "
    "registers only the default generator); call `g.register_generator_state(generator)` before the capture, "
    "so each replay draws new numbers [aten.randn.generator]"
)


def test_a_generator_the_graph_was_not_told_about_is_an_error_at_the_random_op(worker):
    noise = _line(CAPTURE, 'noise = torch.randn(8, 32, device="cuda", generator=gen)')
    begin = noise - 1
    assert _found(worker, CAPTURE, "case_a_generator_the_graph_does_not_know") == [
        (noise, "AL514", "error", UNREGISTERED),
        (
            begin,
            "AL513",
            "information",
            f"CUDA graph: 5 ops captured (lines {noise}-{noise + 1}), replayed 1 time; {SYNCED}; not capturable as "
            f"written: an unregistered generator at line {noise} (AL514)",
        ),
    ]


def test_one_finding_per_line_for_a_generator_used_in_a_captured_loop(worker):
    found = _found(worker, CAPTURE, "case_per_layer_noise_from_an_unregistered_generator")
    rand = _line(CAPTURE, "h = h + torch.rand(h.shape")
    assert [(line, code) for line, code, _, _ in found] == [(rand, "AL514"), (rand - 4, "AL513")]
    assert found[0][3] == UNREGISTERED.replace("aten.randn.generator", "aten.rand.generator")


def test_a_captured_output_read_before_the_first_replay(worker):
    read = _line(CAPTURE, "first = static_y.sum()")
    begin = read - 2
    assert _found(worker, CAPTURE, "case_output_read_before_the_first_replay") == [
        (
            read,
            "AL515",
            "warning",
            f"f32[8, 32] is an output of the CUDA graph captured at line {begin}, read before the graph's "
            "first `replay()`: a capture records the kernels without running them, so on a GPU this reads "
            "uninitialised memory, with no error; replay the graph before reading its outputs [aten.sum]",
        ),
        (
            begin,
            "AL513",
            "information",
            f"CUDA graph: 3 ops captured (line {begin + 1}), replayed 1 time; {SYNCED}; capturable: no sync, CPU "
            "tensor or missing warm-up seen inside it",
        ),
    ]


def test_registered_generators_and_graphed_callables_are_clean(worker):
    """register_generator_state() before the capture, and make_graphed_callables (torch's own code reads
    the captured outputs while it captures the backward graph): only the summaries."""
    assert [code for _, code, _, _ in _found(worker, CLEAN, "case_registered_generator_for_dropout_noise")] == ["AL513"]
    graphed = _found(worker, CLEAN, "case_graphed_callable")
    assert {code for _, code, _, _ in graphed} == {"AL513"}


def test_a_side_stream_in_a_capture_must_branch_from_it_and_rejoin_it(worker):
    """torch.cuda.graph captures on a stream of its own (side stream 1): user streams inside the capture
    must wait on it first, and it must wait on them before the capture ends (the seed's "side streams in
    capture must branch from and rejoin the capturing stream")."""
    work = _line(CAPTURE, "static_z = static_x * 2  # expect: AL510:error")
    side = _last_before(CAPTURE, "side = torch.cuda.Stream()", work)
    begin = work - 3
    assert _found(worker, CAPTURE, "case_a_side_stream_that_does_not_branch_from_the_capture") == [
        (
            work,
            "AL510",
            "error",
            f"work on side stream 2 (created at line {side}) inside a CUDA graph capture, and that stream did not "
            "branch from the capturing stream: on a GPU this raises (cudaErrorStreamCaptureIsolation); make it wait "
            "first: `side.wait_stream(torch.cuda.current_stream())` inside the capture [aten.mul.Tensor]",
        ),
        (
            begin,
            "AL513",
            "information",
            f"CUDA graph: 4 ops captured (lines {begin + 1}-{work}), replayed 1 time; {SYNCED}; not capturable as "
            f"written: a stream not branched from the capture at line {work} (AL510)",
        ),
    ]
    begin = _line(CAPTURE, "with torch.cuda.graph(g):  # expect: AL510:error")
    side = _last_before(CAPTURE, "side = torch.cuda.Stream()", begin)
    found = _found(worker, CAPTURE, "case_a_side_stream_not_rejoined_before_the_capture_ends")
    assert [(line, code, severity) for line, code, severity, _ in found] == [
        (begin, "AL510", "error"),
        (begin, "AL513", "information"),
    ]
    assert found[0][3] == (
        f"the CUDA graph capture ends while work captured on side stream 2 (created at line {side}) was not "
        "waited for by the capturing stream: on a GPU capture_end() raises (cudaErrorStreamCaptureUnjoined); "
        "rejoin before the capture ends: `torch.cuda.current_stream().wait_stream(side)`"
    )
    assert found[1][3].endswith("not capturable as written: a side stream not rejoined (AL510)")


def test_a_branch_rejoined_by_an_event_is_clean(worker):
    assert [code for _, code, _, _ in _found(worker, CLEAN, "case_branch_and_rejoin_inside_the_capture")] == ["AL513"]


def test_a_whole_step_capture_needs_a_capturable_optimizer(worker):
    """torch's optimizers refuse a captured step() unless built with capturable=True; the check runs only
    on a CUDA build of torch, so the simulated GPU makes it. SGD does not check (nothing to keep on the
    device); AdamW(capturable=True) captures cleanly."""
    step = _line(CAPTURE, "optimizer.step()  # expect: AL510:error")
    begin = step - 3
    assert _found(worker, CAPTURE, "case_a_whole_step_capture_with_an_optimizer_that_is_not_capturable") == [
        (
            step,
            "AL510",
            "error",
            "`AdamW.step()` inside a CUDA graph capture, built with capturable=False: on a GPU step() raises "
            "`RuntimeError: Attempting CUDA graph capture of step() for an instance of AdamW but param_groups' "
            "capturable is False.`; build it with `AdamW(..., capturable=True)` (its step counters then stay on "
            "the GPU)",
        ),
        (
            begin,
            "AL513",
            "information",
            f"CUDA graph: 28 ops captured (lines {begin + 1}-{step}), replayed 1 time; {SYNCED}; not capturable as "
            f"written: AdamW with capturable=False at line {step} (AL510)",
        ),
    ]
    for case in ("case_a_whole_step_capture_with_a_capturable_optimizer", "case_a_whole_step_capture_with_sgd"):
        assert [code for _, code, _, _ in _found(worker, CLEAN, case)] == ["AL513"], case


REBOUND = (
    "`{name}` is bound to a new tensor f32[8, 32] since the CUDA graph captured at line {line} read the one it "
    "held, and nothing was written into that one before this replay: the graph reads the address it captured, "
    "so the new data is never seen, with no error; copy into the captured tensor instead: "
    "`{name}.copy_(new_data)`"
)
KEPT = (
    "`{holder}`{kind} keeps a reference to a static output of the CUDA graph captured at line {line}, and this "
    "replay overwrites that output in place before anything read it: every reference kept shows the last "
    "replay's values, with no error; keep a copy instead: `static_y.clone()`"
)


def _summary(begin: int, replays: int) -> tuple[int, str, str, str]:
    return (
        begin,
        "AL513",
        "information",
        f"CUDA graph: 3 ops captured (line {begin + 1}), replayed {replays} time{'s' if replays > 1 else ''}; "
        f"{SYNCED}; capturable: no sync, CPU tensor or missing warm-up seen inside it",
    )


def test_a_static_input_name_bound_to_a_new_tensor_is_reported_at_the_replay(worker):
    start = _line(CAPTURE, "def case_the_static_input_name_bound_to_a_new_tensor")
    begin = start + 5
    assert _found(worker, CAPTURE, "case_the_static_input_name_bound_to_a_new_tensor") == [
        (begin + 3, "AL516", "warning", REBOUND.format(name="static_x", line=begin)),
        _summary(begin, 1),
    ]
    # in a replay loop: once, at the replay
    start = _line(CAPTURE, "def case_each_batch_bound_to_the_static_input_name")
    begin, replay = start + 6, start + 11
    assert _found(worker, CAPTURE, "case_each_batch_bound_to_the_static_input_name") == [
        (replay, "AL516", "warning", REBOUND.format(name="static_x", line=begin)),
        _summary(begin, 3),
    ]
    # an attribute of the object that captured, rebound in another method
    begin = _line(CAPTURE, "with torch.cuda.graph(self.graph):")
    assert _found(worker, CAPTURE, "case_a_wrapper_that_rebinds_its_static_input") == [
        (_line(CAPTURE, "self.graph.replay()"), "AL516", "warning", REBOUND.format(name="self.static_x", line=begin)),
        _summary(begin, 2),
    ]


def test_a_static_output_kept_across_a_replay_is_reported_at_the_replay_that_overwrites_it(worker):
    begin = _line(CAPTURE, "def captured(model, static_x):") + 4
    start = _line(CAPTURE, "def case_a_static_output_kept_across_a_replay")
    assert _found(worker, CAPTURE, "case_a_static_output_kept_across_a_replay") == [
        (start + 8, "AL517", "warning", KEPT.format(holder="previous", kind="", line=begin)),
        _summary(begin, 2),
    ]
    start = _line(CAPTURE, "def case_static_outputs_appended_in_a_replay_loop")
    assert _found(worker, CAPTURE, "case_static_outputs_appended_in_a_replay_loop") == [
        (start + 8, "AL517", "warning", KEPT.format(holder="outs", kind=" (a list)", line=begin)),
        _summary(begin, 3),
    ]


def test_static_tensors_refilled_read_or_copied_between_replays_are_clean(worker):
    """copy_ into the static input (also as an attribute), the output read through another name before
    each replay, a dict made before the first replay, two graphs sharing a pool: only the summaries."""
    pool_first = _line(CLEAN, "with torch.cuda.graph(first):")
    for qualname, begins in (
        ("case_each_output_read_before_the_next_replay", [_line(CLEAN, "def case_each_output_read_before") + 4]),
        ("case_a_wrapper_that_copies_into_its_static_input", [_line(CLEAN, "with torch.cuda.graph(self.graph):")]),
        ("case_two_graphs_sharing_a_memory_pool", [pool_first, pool_first + 2]),
    ):
        assert _found(worker, CLEAN, qualname) == [_summary(begin, 3) for begin in begins], qualname


def test_the_cli_lists_a_rebound_static_input_at_its_replay_line_and_column():
    """`atenlens trace` as a user runs it: the problem list names the replay's line and column, code and message."""
    qualname = "case_the_static_input_name_bound_to_a_new_tensor"
    shown = "tests/corpus/gpu/capture_graphs.py"  # as the CLI shows a path under its working directory
    done = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{shown}::{qualname}"],
        cwd=CORPUS.parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    begin = _line(CAPTURE, f"def {qualname}") + 5
    problems = [line.strip() for line in done.stdout.splitlines() if line.startswith(f"  {shown}:")]
    assert problems == [
        f"{shown}:{begin + 3}:5  warning AL516 capture: " + REBOUND.format(name="static_x", line=begin),
        f"{shown}:{begin}  information AL513 capture: CUDA graph: 3 ops captured (line {begin + 1}), replayed 1 "
        f"time; {SYNCED}; capturable: no sync, CPU tensor or missing warm-up seen inside it",
    ]
