"""What a hazard diagnostic says, exactly: kind, code, severity, op, position, count, message."""

from __future__ import annotations

from pathlib import Path

from engine_helpers import EXAMPLES
from gpu_helpers import CORPUS, cuda_request


def position(path: Path, code: str) -> tuple[int, int]:
    """(1-based line, 0-based column) of the only occurrence of `code` in the file."""
    lines = path.read_text().splitlines()
    hits = [(n, line.index(code)) for n, line in enumerate(lines, 1) if code in line]
    assert len(hits) == 1, hits
    return hits[0]


def only_diagnostic_at(report, path: Path, line: int):
    found = [d for d in report.diagnostics if d.file == str(path) and d.line == line]
    assert len(found) == 1, found
    return found[0]


def test_item_in_a_loop_is_one_warning_counted_per_iteration(worker):
    path = CORPUS / "syncs_scalar.py"
    report = worker.trace(cuda_request(path, "case_item_in_loop"))
    line, column = position(path, "total += loss.item()")
    column += len("total += ")
    d = only_diagnostic_at(report, path, line)
    assert (d.kind, d.code, d.severity, d.op, d.column, d.count) == (
        "sync",
        "AL100",
        "warning",
        "aten._local_scalar_dense.default",
        column,
        5,
    )
    assert d.message == (
        "`.item()` copies a value of cuda f32[] to the host: the host waits until the GPU has "
        "finished all queued work [aten._local_scalar_dense]"
    )
    assert [f.function for f in d.stack] == ["case_item_in_loop"]
    module_level = [x for x in report.diagnostics if x.severity == "information"]
    assert [x.line for x in module_level] == [position(path, "CALIBRATION =")[0]]
    # the module's top level syncs too (once, then twice in its warm-up loop): reported, but
    # summary.syncs counts the traced call's only
    assert sorted(x.count for x in report.diagnostics if x is not d) == [1, 2]
    assert report.summary.syncs == 5


def test_summary_counts_the_syncs_of_the_traced_call_weighted_by_count(worker):
    report = worker.trace(cuda_request(EXAMPLES / "train_step.py", "train"))  # steps=3, one .item() each
    assert report.status == "ok", report.message
    assert [(d.kind, d.count) for d in report.diagnostics] == [("sync", 3)]
    assert report.summary.syncs == 3


def test_syncs_while_the_example_call_arguments_are_built_are_not_counted(worker):
    path = CORPUS / "syncs_scalar.py"
    call = "case_item_once(*([] if torch.ones(2, device=DEVICE).sum().item() else []))"
    report = worker.trace(cuda_request(path, "case_item_once", call=call))
    assert report.status == "ok", report.message
    setup = [d for d in report.diagnostics if d.file is None]  # the example call is no file of the user's
    assert [(d.kind, d.severity, d.count) for d in setup] == [("sync", "information", 1)]
    once = only_diagnostic_at(report, path, position(path, "return loss.item()")[0])
    assert (once.severity, once.count) == ("warning", 1)
    assert report.summary.syncs == 1


def test_pageable_upload_names_the_api_the_tensor_and_the_fix(worker):
    path = CORPUS / "copies_h2d.py"
    report = worker.trace(cuda_request(path, "case_pageable_sources"))
    line, column = position(path, "batch.cuda(non_blocking=True)")
    d = only_diagnostic_at(report, path, line)
    assert (d.kind, d.code, d.severity, d.op, d.column) == (
        "pageable-copy",
        "AL200",
        "warning",
        "aten._to_copy.default",
        column,
    )
    assert d.message == (
        "`.cuda()` with non_blocking=True copies f32[32, 16] from pageable (unpinned) host memory: "
        "the driver stages it through a pinned buffer and the host waits, so the copy does not "
        "overlap with GPU work; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`) "
        "or drop non_blocking [aten._to_copy]"
    )
    assert report.summary.syncs == 0


def test_unsynced_read_points_back_to_the_copy(worker):
    path = CORPUS / "copies_d2h.py"
    report = worker.trace(cuda_request(path, "case_read_too_early"))
    read_line, column = position(path, "return host.item()  # expect: AL201")
    column += len("return ")
    copy_line = read_line - 1
    d = only_diagnostic_at(report, path, read_line)
    assert (d.kind, d.code, d.severity, d.op, d.column) == (
        "unsynced-d2h-read",
        "AL201",
        "warning",
        "aten._local_scalar_dense.default",
        column,
    )
    assert d.message == (
        f"`.item()` reads host tensor f32[] while the non_blocking device-to-host copy into it "
        f"(line {copy_line}) may still be in flight: with no event, stream or device synchronize "
        "in between, the host can read stale data, with no error [aten._local_scalar_dense]"
    )


def test_the_input_pipeline_example_shows_each_stall_and_its_fix(worker):
    path = Path(__file__).resolve().parent.parent / "examples" / "input_pipeline.py"
    stalling = worker.trace(cuda_request(path, "train_stalling"))
    assert (stalling.status, stalling.device) == ("ok", "cuda")
    found = sorted((d.line, d.code, d.severity, d.count) for d in stalling.diagnostics)
    upload_x = position(path, "x = x.to(DEVICE, non_blocking=True)         # pageable")[0]
    assert found == [
        (upload_x, "AL200", "warning", 4),
        (upload_x + 1, "AL200", "warning", 4),  # y = y.to(DEVICE, non_blocking=True)
        (position(path, "total += loss.item()")[0], "AL100", "warning", 4),
        # the loss of fake activations has no value: what the host read is assumed, and said so
        (position(path, "total += loss.item()")[0], "AL906", "information", 4),
        (position(path, 'print(f"last loss')[0], "AL201", "warning", 4),
        (position(path, 'print(f"last loss')[0], "AL906", "information", 4),
    ]
    assumed = sorted(d.message for d in stalling.diagnostics if d.code == "AL906")
    assert assumed == [
        "value unknown on fake tensors: took `1.0` for `.item()` of f32[]",
        "value unknown on fake tensors: took `1.0` for `float()` of f32[]",
    ]
    assert (stalling.summary.syncs, stalling.summary.assumptions) == (4, 8)
    overlapped = worker.trace(cuda_request(path, "train_overlapped"))
    assert (overlapped.status, overlapped.diagnostics, overlapped.summary.syncs) == ("ok", (), 0)
