"""Fifth round of configurations traced on simulated CUDA (bench/fidelity_sweep/round5.py).

Each fixture in tests/fixtures/models/ was traced and also run eagerly on the CPU with real small
tensors (bench/fidelity_sweep/compare.py); these tests pin what the trace must show where it was
wrong or ended without saying why.
"""

from __future__ import annotations

from test_models import line_of, trace


def test_known_mask_stays_known_through_repeated_in_place_updates_read_between(worker):
    report = trace(worker, "nms_loop.py", "nms")
    # `alive &= iou <= 0.3` once per kept box, with `alive[i]` read in between: the read's view took
    # the storage's valid version from its own fresh counter, so the second `&=` lost the value;
    # every later `if not alive[i]` was assumed true (AL906) and all 12 boxes were kept. The eager
    # CPU run of the same seed keeps these five.
    assert report.stdout == "[2, 1, 0, 5, 8]\n"
    read = line_of("nms_loop.py", "if not alive[i]:")
    update = line_of("nms_loop.py", "alive &= box_iou(boxes[i : i + 1], boxes)[0] <= 0.3")
    assert [(d.code, d.line, d.count) for d in report.diagnostics] == [
        ("AL100", read, 12),
        ("AL100", line_of("nms_loop.py", "print(order[kept].tolist())"), 1),
    ]
    assert report.summary.assumptions == 0
    updates = [e for e in report.events if e.kind == "op" and e.name == "aten.bitwise_and_.Tensor"]
    assert [(e.line, e.outputs[0].shape) for e in updates] == [(update, (12,))] * 5
