"""The annotated listing: what a user reads in the terminal."""

from __future__ import annotations

import dataclasses
import re

import pytest

from atenlens.render import format_flops, render, tensor_label
from atenlens.report import TensorMeta
from engine_helpers import EXAMPLES, REPO, trace
from source_lines import line_of

TRAIN_STEP = EXAMPLES / "train_step.py"


@pytest.fixture(scope="module")
def step_listing() -> str:
    return render(trace(TRAIN_STEP, "train_step"), base=str(REPO))


@pytest.fixture(scope="module")
def loop_report():
    return trace(TRAIN_STEP, "train")


def rows_under(listing: str, number: int) -> list[str]:
    """The annotation rows printed under source line `number`."""
    lines = listing.splitlines()
    start = next(i for i, text in enumerate(lines) if re.match(rf"^\s*{number} \| ", text))
    rows = []
    for text in lines[start + 1 :]:
        if not re.match(r"^\s+\|\s{5}", text):
            break
        rows.append(text.split("|", 1)[1].strip())
    return rows


def test_labels_use_logging_tensor_vocabulary() -> None:
    assert tensor_label(TensorMeta("float32", (8, 32), "cpu")) == "f32[8, 32]"
    assert tensor_label(TensorMeta("bfloat16", (2, 1024, 768), "cuda:0")) == "bf16[2, 1024, 768]"
    assert tensor_label(TensorMeta("int64", (8,), "cpu")) == "i64[8]"
    assert tensor_label(TensorMeta("bool", (), "cpu")) == "b8[]"
    assert format_flops(8192) == "8.19 kFLOP"
    assert format_flops(3 * 10**12) == "3 TFLOP"


def test_header_names_target_device_status_and_call(step_listing: str) -> None:
    first, second = step_listing.splitlines()[:2]
    assert first == "examples/train_step.py::train_step  device cpu  ok"
    assert second == "call train_step(*setup())"


def test_every_source_line_of_the_traced_function_is_listed_in_order(step_listing: str) -> None:
    source = TRAIN_STEP.read_text().splitlines()
    start, end = line_of(TRAIN_STEP, "def train_step("), line_of(TRAIN_STEP, "    return loss")
    listed = [text for text in step_listing.splitlines() if re.match(r"^\s*\d+ \| ", text)]
    numbers = [int(text.split("|")[0]) for text in listed]
    assert numbers[: end - start + 1] == list(range(start, end + 1))
    assert listed[0] == f"{start} | {source[start - 1]}"


def test_linear_line_shows_call_op_label_flops_and_backward_node(step_listing: str) -> None:
    rows = rows_under(step_listing, line_of(TRAIN_STEP, "h = F.relu(self.fc1(x))"))
    assert rows[0] == "call      linear, relu"
    # `aten.t.default` (a view: no memory, no compute) is not listed by default
    # then the estimated time on the selected GPU and the device bytes allocated (docs/cost.md)
    assert re.fullmatch(r"forward\s+aten\.addmm\.default\s+f32\[8, 32\]\s+8\.19 kFLOP\s+4 µs\s+1 KiB", rows[1])
    assert not any("aten.t.default" in r for r in rows)
    mm = next(r for r in rows if "aten.mm.default" in r)
    assert re.fullmatch(r"aten\.mm\.default\s+f32\[32, 16\]\s+8\.19 kFLOP\s+4 µs\s+2 KiB\s+AddmmBackward0", mm)
    assert any(r.startswith("backward  ") for r in rows)


def test_model_call_line_summarises_what_the_module_did(step_listing: str) -> None:
    rows = rows_under(step_listing, line_of(TRAIN_STEP, "logits = model(x)"))
    assert rows == [
        "module    MLP            f32[8, 4]         6 ops  10.2 kFLOP  676 params",
        "fc1  Linear  f32[8, 32]        2 ops  8.19 kFLOP  544 params",
        "fc2  Linear  f32[8, 4]         2 ops  2.05 kFLOP  132 params",
        "-> MLP.forward: 6 forward, 16 backward ops, 22.5 kFLOP",
    ]


def test_optimizer_ops_fold_into_one_row_on_the_step_line(step_listing: str) -> None:
    rows = rows_under(step_listing, line_of(TRAIN_STEP, "opt.step()"))
    assert rows[0] == "call      add_ x4"
    # four parameters of four shapes: one row that names the first shapes and counts the rest
    assert re.fullmatch(r"optimizer aten\.add_\.Tensor\s+f32\[32, 16\], f32\[32\] \+2 shapes\s+x4\s+16 µs", rows[1])


def test_repeated_identical_ops_of_a_loop_are_folded_with_a_count(loop_report) -> None:
    listing = render(loop_report, base=str(REPO))
    rows = rows_under(listing, line_of(TRAIN_STEP, "h = F.relu(self.fc1(x))"))
    assert re.fullmatch(r"forward\s+aten\.addmm\.default\s+f32\[8, 32\]\s+x3\s+24\.6 kFLOP\s+12 µs\s+3 KiB", rows[1])
    every_op = rows_under(
        render(loop_report, base=str(REPO), all_ops=True), line_of(TRAIN_STEP, "h = F.relu(self.fc1(x))")
    )
    assert re.fullmatch(r"forward\s+aten\.t\.default\s+f32\[16, 32\]\s+x3", every_op[1])
    item_rows = rows_under(listing, line_of(TRAIN_STEP, "total += loss.item()"))
    assert item_rows[0] == "call      item x3"
    assert listing.count("aten.addmm.default") == 2  # one folded row per Linear line


def test_totals_line(step_listing: str) -> None:
    lines = step_listing.splitlines()
    index = next(i for i, text in enumerate(lines) if text.startswith("totals"))
    assert re.fullmatch(
        r"totals  ops: 9 forward, 24 backward, 4 optimizer  \|  calls: 9  \|  "
        r"FLOPs: 22\.5 kFLOP  \|  syncs: 0  \|  \d+\.\d\d s",
        lines[index],
    )
    # what the listing leaves out is said once: 3 t + 12 t/view/detach in backward + 4 detach of AccumulateGrad
    assert lines[index + 1] == (
        "19 bookkeeping ops (views, detach: no memory, no compute) not listed; --all-ops lists them"
    )


def test_colour_only_when_asked(loop_report) -> None:
    assert "\x1b[" not in render(loop_report)
    coloured = render(loop_report, color=True)
    assert "\x1b[1m" in coloured and "\x1b[0m" in coloured
    assert re.sub(r"\x1b\[\d+m", "", coloured) == render(loop_report)


def test_user_output_is_fenced_after_the_listing(loop_report) -> None:
    report = dataclasses.replace(loop_report, stdout="epoch 1\nepoch 2\n", stderr="careful\n")
    tail = render(report).splitlines()[-8:]
    assert tail == [
        "----- stdout of the traced code -----",
        "epoch 1",
        "epoch 2",
        "----- end of stdout -----",
        "",
        "----- stderr of the traced code -----",
        "careful",
        "----- end of stderr -----",
    ]
