"""Stream ordering (AL500) through the CLI, on simulated CUDA: the exact line, column and message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus" / "gpu" / "streams_order.py"


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(CORPUS.read_text().splitlines(), 1) if text in line)


def _trace(qualname: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{CORPUS}::{qualname}", "--device", "cuda", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(result.stdout)
    assert data["status"] == "ok", data["message"]
    return data


def _unordered(data: dict) -> list[tuple[int, int, str, str, str]]:
    return [
        (d["line"], d["column"], d["severity"], d["op"], d["message"])
        for d in data["diagnostics"]
        if d["code"] == "AL500"
    ]


def test_the_side_stream_reads_a_default_stream_tensor_it_did_not_wait_for():
    data = _trace("case_side_stream_does_not_wait_for_its_input")
    created = _line_of("side = torch.cuda.Stream()")
    assert _unordered(data) == [
        (
            _line_of("y = torch.relu(x @ x)  # expect: AL500"),
            23,
            "warning",
            "aten.mm.default",
            "f32[64, 64] written on the default stream before any side stream was used (the trace assumes it "
            f"was still queued there) is read on side stream 1 (created at line {created}) with no `wait_stream` "
            "or `wait_event` ordering the two: the read can run before the write finishes and see stale data, "
            "with no error [aten.mm]",
        )
    ]


def test_the_default_stream_reads_a_side_stream_result_without_waiting():
    data = _trace("case_default_stream_does_not_wait_for_the_side_stream")
    lines = CORPUS.read_text().splitlines()
    start = _line_of("def case_default_stream_does_not_wait_for_the_side_stream")
    created = next(i for i in range(start, len(lines) + 1) if "side = torch.cuda.Stream()" in lines[i - 1])
    written = next(i for i in range(start, len(lines) + 1) if "y = torch.relu(x @ x)" in lines[i - 1])
    assert _unordered(data) == [
        (
            _line_of("return y + 1  # expect: AL500"),
            11,
            "warning",
            "aten.add.Tensor",
            f"f32[64, 64] written on side stream 1 (created at line {created}) at line {written} is read on the "
            "default stream with no `wait_stream` or `wait_event` ordering the two: the read can run before "
            "the write finishes and see stale data, with no error [aten.add.Tensor]",
        )
    ]


TIMING = REPO / "tests" / "corpus" / "gpu" / "timing_events.py"


def test_elapsed_time_before_the_end_event_completed_is_an_error():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "atenlens",
            "trace",
            f"{TIMING}::case_elapsed_time_without_a_sync",
            "--device",
            "cuda",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(result.stdout)
    assert data["status"] == "ok", data["message"]
    lines = TIMING.read_text().splitlines()
    recorded = lines.index("    end.record()") + 1
    read = next(i for i, line in enumerate(lines, 1) if "start.elapsed_time(end)  # expect: AL501" in line)
    assert [
        (d["line"], d["column"], d["severity"], d["op"], d["message"])
        for d in data["diagnostics"]
        if d["code"] == "AL501"
    ] == [
        (
            read,
            14,
            "error",
            None,
            f"`elapsed_time()` reads the end event recorded at line {recorded} before the host waited for it "
            "(no `end.synchronize()`, stream or device synchronize since its `record()`): on a GPU it raises "
            "`CUDA error: device not ready` while the timed work still runs (the trace returns 0.0)",
        )
    ]


def test_a_use_on_another_stream_is_reported_when_its_tensor_is_freed_unordered():
    data = _trace("case_side_stream_does_not_wait_for_its_input")
    created = _line_of("side = torch.cuda.Stream()")
    found = [
        (d["line"], d["column"], d["severity"], d["op"], d["message"])
        for d in data["diagnostics"]
        if d["code"] == "AL502"
    ]
    side = f"side stream 1 (created at line {created})"
    # x is freed after the default stream waited for the side stream: safe without record_stream();
    # y is allocated on the side stream, read on the default one and freed with no wait on that side
    assert found == [
        (
            _line_of("return y + 1  # expect: AL502"),
            11,
            "warning",
            "aten.add.Tensor",
            f"f32[64, 64] allocated on {side} is used on the default stream with no `record_stream()` naming that "
            f"stream: once it is freed, the caching allocator can give its memory to a new tensor on {side} "
            "while the default stream may still be using it [aten.add.Tensor]",
        ),
    ]


def test_fsdp2_streams_of_torch_itself_are_ordered_and_not_held_to_record_stream():
    """FSDP2 all-gathers on streams of its own, ordered with events and kept alive by references:
    neither AL500 nor AL502 (the check that the stream bookkeeping runs: its ops are on side streams)."""
    example = REPO / "examples" / "fsdp_tp_step.py"
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{example}::train_step", "--device", "cuda", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(result.stdout)
    assert data["status"] == "ok", data["message"]
    assert any(e["name"].startswith("fsdp.all_gather_copy_in") for e in data["events"])
    assert [d["code"] for d in data["diagnostics"] if d["code"].startswith("AL5")] == []


def test_gradients_written_by_backward_on_a_side_stream_and_stepped_on_the_default_stream():
    """torch's "BC note": backward() under torch.cuda.stream(s) writes the gradients on s; the optimizer
    on the default stream must wait_stream(s) first."""
    data = _trace("case_backward_on_a_side_stream_then_step_on_the_default")
    start = _line_of("def case_backward_on_a_side_stream_then_step_on_the_default")
    created = start + next(
        i for i, line in enumerate(CORPUS.read_text().splitlines()[start:], 1) if "side = torch.cuda.Stream()" in line
    )
    forward = _line_of("loss = model(x).square().mean()")
    found = _unordered(data)
    assert [(line, column, severity, op) for line, column, severity, op, _ in found] == [
        (_line_of("opt.step()  # expect: AL500"), 4, "warning", "aten._foreach_add_.List")
    ] * 2
    assert {message.split(" is read on")[0] for *_, message in found} == {
        f"{shape} written by the backward of line {forward} on side stream 1 (created at line {created}) (backward "
        "ops run on the stream current at `backward()`)"
        for shape in ("f32[16, 16]", "f32[16]")
    }


def test_a_tensor_overwritten_while_another_stream_may_still_read_it():
    data = _trace("case_overwritten_while_the_side_stream_reads_it")
    start = _line_of("def case_overwritten_while_the_side_stream_reads_it")
    lines = CORPUS.read_text().splitlines()
    created = next(i for i in range(start, len(lines) + 1) if "side = torch.cuda.Stream()" in lines[i - 1])
    read = next(i for i in range(start, len(lines) + 1) if "y = x @ x" in lines[i - 1])
    assert [
        (d["line"], d["column"], d["severity"], d["op"], d["message"])
        for d in data["diagnostics"]
        if d["code"] == "AL503"
    ] == [
        (
            _line_of("x.zero_()  # expect: AL503"),
            4,
            "warning",
            "aten.zero_.default",
            f"f32[64, 64] read on side stream 1 (created at line {created}) at line {read} is overwritten on the "
            "default stream with no `wait_stream` or `wait_event` ordering the write after that read: the write "
            "can land before the read has run, and the read then sees the new data, with no error [aten.zero_]",
        )
    ]
