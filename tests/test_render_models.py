"""Reading the trace of a model from a library: the module tree under the calling line, long rows
folded, bookkeeping ops out of the way (render.py, with the engine's module data)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from atenlens.lsp.document_traces import build_traced_function
from atenlens.lsp.settings import HintSettings
from atenlens.render import render
from engine_helpers import REPO, trace, write
from source_lines import line_of

# A resnet-like model in an installed package: none of its frames are the user's, so every op of
# the forward lands on the one line that calls it, as with torchvision's resnet50.
LIBRARY = """
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2), BasicBlock(16, 16))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def many_calls(x):
    for fn in (torch.sin, torch.cos, torch.tan, torch.exp, torch.log1p, torch.sqrt, torch.abs, torch.neg,
               torch.sigmoid, torch.tanh, torch.relu, torch.floor, torch.ceil, torch.round, torch.sign,
               torch.erf, torch.expm1, torch.rsqrt, torch.square, torch.trunc):
        x = fn(x)
    for _ in range(3):
        x = torch.sin(x)
    return x


def many_shapes(n):
    return [torch.ones(i + 1) * 2 for i in range(n)] + [torch.ones(1) * 2 for _ in range(4)]
"""

USER = """
import sys
sys.path.insert(0, {site!r})

import torch
from tinyvision import TinyResNet, many_calls, many_shapes


def setup():
    return TinyResNet(), torch.randn(2, 3, 16, 16)


# atenlens: step(*setup())
def step(model, images):
    output = model(images)
    loss = output.logsumexp(1).mean()
    loss.backward()
    return loss


def foreach():
    xs = [torch.randn(4, 4) for _ in range(8)]
    ys = torch._foreach_mul(xs, 2.0)
    torch._foreach_add_(xs, ys)
    return xs


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.proj(x).sum()


def build_and_call():
    head = Head()
    value = head(torch.randn(3, 4))
    return value.item()


def library_lines():
    a = many_calls(torch.randn(8))
    b = many_shapes(6)
    return a, b
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    site = folder / "env" / "lib" / "site-packages"
    write(site, "tinyvision/__init__.py", LIBRARY)
    return write(folder, "train.py", USER.format(site=str(site)))


@pytest.fixture(scope="module")
def step_report(program: Path):
    report = trace(program, "step")
    assert report.status == "ok", report.message
    return report


def rows_under(listing: str, number: int) -> list[str]:
    lines = listing.splitlines()
    start = next(i for i, text in enumerate(lines) if re.match(rf"^\s*{number} \| ", text))
    rows = []
    for text in lines[start + 1 :]:
        if not re.match(r"^\s+\|\s{5}", text):
            break
        rows.append(text.split("|", 1)[1][5:].rstrip())
    return rows


def tree_rows(rows: list[str]) -> list[str]:
    """The module tree rows among a line's rows: from `module` to the first op row."""
    start = next(i for i, r in enumerate(rows) if r.startswith("module"))
    end = next((i for i, r in enumerate(rows) if i > start and r.startswith(("forward", "backward", "->"))), len(rows))
    return rows[start:end]


def test_a_library_model_call_shows_its_module_tree(program: Path, step_report) -> None:
    rows = rows_under(render(step_report), line_of(program, "output = model(images)"))
    assert rows[0] == (
        "call      conv2d x12, add_ x12, batch_norm x12, relu x11, add x5, adaptive_avg_pool2d, flatten, linear"
    )
    # torchinfo's view: qualified names, types, output shapes, ops and FLOPs of the module and
    # below, parameters; numbered blocks that did the same work fold into one row (layer1.0-2 x3)
    assert tree_rows(rows) == [
        "module    TinyResNet                         f32[2, 10]               79 ops  5.86 MFLOP  12.3K params",
        "            conv1         Conv2d             f32[2, 8, 16, 16]          1 op   221 kFLOP    216 params",
        "            bn1           BatchNorm2d        f32[2, 8, 16, 16]         3 ops                 16 params",
        "            relu          ReLU               f32[2, 8, 16, 16]         2 ops",
        "            layer1        Sequential         f32[2, 8, 16, 16]        39 ops  3.54 MFLOP  3.55K params",
        "              layer1.0-2  BasicBlock         f32[2, 8, 16, 16]    x3  39 ops  3.54 MFLOP  3.55K params",
        "            layer2        Sequential         f32[2, 16, 8, 8]         30 ops   2.1 MFLOP  8.35K params",
        "              layer2.0    BasicBlock         f32[2, 16, 8, 8]         17 ops   918 kFLOP  3.68K params",
        "              layer2.1    BasicBlock         f32[2, 16, 8, 8]         13 ops  1.18 MFLOP  4.67K params",
        "            avgpool       AdaptiveAvgPool2d  f32[2, 16, 1, 1]           1 op",
        "            fc            Linear             f32[2, 10]                2 ops    640 FLOP    170 params",
    ]
    # the forward ops of the model (all on this line) are 79 of the trace's 82 forward ops
    assert (
        sum(
            1
            for e in step_report.events
            if e.kind == "op" and e.phase == "forward" and e.line == line_of(program, "output = model(images)")
        )
        == 79
    )


def test_depth_chooses_how_much_of_the_tree_is_shown(program: Path, step_report) -> None:
    line = line_of(program, "output = model(images)")
    assert tree_rows(rows_under(render(step_report, depth=0), line)) == [
        "module    TinyResNet    f32[2, 10]        79 ops  5.86 MFLOP  12.3K params"
    ]
    deep = [r.split()[0] for r in tree_rows(rows_under(render(step_report, depth=3), line))]
    assert deep[:9] == [
        "module",
        "conv1",
        "bn1",
        "relu",
        "layer1",
        "layer1.0-2",
        "layer1.0-2.conv1",
        "layer1.0-2.bn1",
        "layer1.0-2.relu",
    ]
    assert "layer2.0.downsample" in deep and "layer2.0.downsample.0" not in deep


def test_a_tree_counted_from_cut_events_says_so(program: Path, step_report) -> None:
    """A report past its event limit counts more ops in its summary than it kept: the tree's counts
    are of the kept events, and the listing says so under the tree."""
    import dataclasses

    line = line_of(program, "output = model(images)")
    summary = dataclasses.replace(
        step_report.summary, ops={**step_report.summary.ops, "forward": step_report.summary.ops["forward"] + 500}
    )
    rows = rows_under(render(dataclasses.replace(step_report, summary=summary), depth=0), line)
    assert rows[1:3] == [
        "module    TinyResNet    f32[2, 10]        79 ops  5.86 MFLOP  12.3K params",
        "          (ops and FLOPs of the events the report kept; see the notes)",
    ]
    assert "(ops and FLOPs of the events" not in render(step_report)


def test_module_data_in_the_report(program: Path, step_report) -> None:
    modules = step_report.modules
    line = line_of(program, "output = model(images)")
    root = modules[0]
    assert (root.path, root.type, root.parent, root.line) == ("", "TinyResNet", None, line)
    assert [(m.path, m.type) for m in modules if m.parent == 0] == [
        ("conv1", "Conv2d"),
        ("bn1", "BatchNorm2d"),
        ("relu", "ReLU"),
        ("layer1", "Sequential"),
        ("layer2", "Sequential"),
        ("avgpool", "AdaptiveAvgPool2d"),
        ("fc", "Linear"),
    ]
    conv = next(i for i, m in enumerate(modules) if m.path == "layer2.0.downsample.0")
    assert [tuple(o.shape) for o in modules[conv].outputs] == [(2, 16, 8, 8)]
    assert modules[conv].params == 8 * 16
    convolutions = [e for e in step_report.events if e.name == "aten.convolution.default" and e.module == conv]
    assert len(convolutions) == 1
    assert all(e.module is None for e in step_report.events if e.phase == "backward")


def test_bookkeeping_ops_are_hidden_unless_asked(program: Path, step_report) -> None:
    line = line_of(program, "output = model(images)")
    assert "aten.view.default" in step_report.bookkeeping_ops
    assert "aten.detach.default" in step_report.bookkeeping_ops
    assert "aten.convolution.default" not in step_report.bookkeeping_ops
    default = rows_under(render(step_report), line)
    every = rows_under(render(step_report, all_ops=True), line)
    assert not any("aten.view.default" in r or "aten.t.default" in r for r in default)
    assert any(re.fullmatch(r"\s*aten\.view\.default\s+f32\[2, 16\]", r) for r in every)
    assert any(re.fullmatch(r"\s*aten\.t\.default\s+f32\[16, 10\]", r) for r in every)


def test_foreach_ops_are_one_short_row(program: Path) -> None:
    report = trace(program, "foreach")
    listing = render(report)
    # (then the estimated time and the bytes allocated, and the line's cost row: docs/cost.md)
    assert rows_under(listing, line_of(program, "ys = torch._foreach_mul(xs, 2.0)")) == [
        "forward   aten._foreach_mul.Scalar  8 f32 tensors                            4 µs  4 KiB",
        "cost      4 µs  10.0%  launch-bound  allocates 4 KiB, holds 3.5 KiB at line end "
        "(referenced by the program 3.5 KiB)",
    ]
    # an in-place foreach op returns nothing: its row counts what it was given
    assert rows_under(listing, line_of(program, "torch._foreach_add_(xs, ys)")) == [
        "forward   aten._foreach_add_.List   in: 16 f32 tensors                       4 µs",
        "cost      4 µs  10.0%  launch-bound",
    ]


def test_long_call_rows_and_many_shapes_fold(program: Path) -> None:
    report = trace(program, "library_lines")
    listing = render(report)
    # 21 distinct functions: the most frequent that fit, then what was left out
    assert rows_under(listing, line_of(program, "a = many_calls(torch.randn(8))"))[0] == (
        "call      randn, sin x4, cos, tan, exp, log1p, sqrt, abs, neg, sigmoid, tanh, relu +9 more (9 calls)"
    )
    # six shapes of one op: the most common first, with counts, and how many others
    assert rows_under(listing, line_of(program, "b = many_shapes(6)"))[1:] == [
        "forward   aten.ones.default       f32[1] x5, f32[2] x1 +4 shapes    x10               40 µs  5 KiB",
        "          aten.mul.Tensor         f32[1] x5, f32[2] x1 +4 shapes    x10               40 µs  5 KiB",
        "cost      80 µs  45.5%  launch-bound  allocates 10 KiB",
    ]


def test_cli_lists_every_op_and_the_chosen_depth_on_request(program: Path) -> None:
    line = line_of(program, "output = model(images)")
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{program}::step", "--device", "cpu", "--all-ops", "--depth", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = rows_under(result.stdout, line)
    assert [r.split()[0] for r in tree_rows(rows)] == [
        "module",
        "conv1",
        "bn1",
        "relu",
        "layer1",
        "layer2",
        "avgpool",
        "fc",
    ]
    assert any(re.fullmatch(r"\s*aten\.view\.default\s+f32\[2, 16\]", r) for r in rows)
    assert "not listed" not in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{program}::step", "--depth", "-1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (2, "atenlens trace: --depth must be 0 or more, got -1\n")


def test_the_trace_help_gives_the_renderers_default_depth() -> None:
    """The command line does not import the renderer (a `lint` run would pay for it): its help
    states the default depth as written, which must be the renderer's."""
    from atenlens.cli import build_parser
    from atenlens.render import DEFAULT_DEPTH

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    trace_parser = sub.choices["trace"]
    (depth,) = [a for a in trace_parser._actions if a.dest == "depth"]
    assert depth.help is not None and depth.help.endswith(f"(default: {DEFAULT_DEPTH})")
    assert not hasattr(trace_parser.parse_args(["f.py::g"]), "depth")  # the trace then uses DEFAULT_DEPTH


DEFAULT_HINTS = HintSettings()


def hints_of(report, program: Path, settings: HintSettings = DEFAULT_HINTS) -> dict[int, str]:
    """1-based line -> the editor's inlay hint label, from the report as the server builds them."""
    lines = program.read_text().split("\n")
    traced = build_traced_function(report, str(program), lines, report.target.qualname, 0, len(lines) - 1, 0)
    return {line + 1: label for line, trace in traced.lines.items() if (label := trace.hint(settings))}


def test_the_hint_of_a_library_model_call_names_the_model_and_what_it_returned(program: Path, step_report) -> None:
    hints = hints_of(step_report, program)
    assert hints[line_of(program, "output = model(images)")] == "TinyResNet 79 ops -> f32[2, 10] · ∇ 62 ops"


def test_init_lines_and_syncs_in_hints(program: Path) -> None:
    report = trace(program, "build_and_call")
    assert report.status == "ok", report.message
    hints = hints_of(report, program)
    init_line = line_of(program, "self.proj = torch.nn.Linear(4, 2)")
    # a model's initialisation (empty, uniform_ ...) is not what the step does: no hint unless asked
    assert init_line not in hints
    assert hints_of(report, program, HintSettings(show_bookkeeping=True))[init_line] == "empty×2, uniform_×2 f32[2]"
    # nor the line that builds it (a roll-up of the __init__ below it), unless asked
    build_line = line_of(program, "head = Head()")
    assert build_line not in hints
    assert hints_of(report, program, HintSettings(show_bookkeeping=True))[build_line] == "4 ops"
    # the roll-up of the model call is what Head.forward returned (the sum), not its last op
    assert hints[line_of(program, "value = head(torch.randn(3, 4))")] == "4 ops -> f32[]"
    # traced on cpu: `.item()` reads host memory, no sync to mark (the simulated-CUDA case: test_lsp_trace)
    assert hints[line_of(program, "return value.item()")] == "_local_scalar_dense"


def test_hint_kinds_switch_off_one_by_one() -> None:
    """A line with forward and backward ops and a sync: each hint setting removes its own part."""
    from atenlens.lsp.document_traces import LineTrace
    from atenlens.report import Diagnostic, Event, Phase, TensorMeta

    def op(name: str, phase: Phase, *shape: int) -> Event:
        return Event(
            kind="op",
            name=name,
            phase=phase,
            file="f.py",
            line=3,  # type: ignore[arg-type]
            outputs=(TensorMeta("float32", shape, "cuda:0"),) if shape else (),
        )

    trace = LineTrace(
        text="    y = x.t().mm(w).sum().item()",
        forward=[
            op("aten.t.default", "forward", 4, 8),
            op("aten.mm.default", "forward", 4, 4),
            op("aten.sum.default", "forward"),
            op("aten._local_scalar_dense.default", "forward"),
        ],
        backward=[op("aten.mm.default", "backward", 8, 4), op("aten.detach.default", "backward", 8, 4)],
        diagnostics=[
            Diagnostic(
                file="f.py",
                line=3,
                column=4,
                severity="warning",
                code="AL100",
                kind="sync",
                message="`.item()` ...",
                count=2,
            )
        ],
        bookkeeping=frozenset({"aten.t.default", "aten.detach.default"}),
    )
    assert trace.hint(HintSettings()) == "mm, sum, _local_scalar_dense f32[4, 4] · ∇ mm · sync×2"
    assert trace.hint(HintSettings(syncs=False)) == "mm, sum, _local_scalar_dense f32[4, 4] · ∇ mm"
    assert trace.hint(HintSettings(backward=False, shapes=False)) == "mm, sum, _local_scalar_dense · sync×2"
    assert trace.hint(HintSettings(ops=False)) == "3 ops f32[4, 4] · ∇ 1 op · sync×2"
    assert (
        trace.hint(HintSettings(show_bookkeeping=True, max_length=80))
        == "t, mm, sum, _local_scalar_dense f32[4, 4] · ∇ mm, detach · sync×2"
    )
    # ... and within the default length, view-like ops are the first to be cut
    assert (
        trace.hint(HintSettings(show_bookkeeping=True))
        == "mm, sum, _local_scalar_dense +1 f32[4, 4] · ∇ mm +1 · sync×2"
    )


def test_a_hugging_face_model_call_shows_its_module_tree(worker) -> None:
    """transformers' LlamaForCausalLM (the models extra): qualified names under the model the user
    called, the decoder layers folded, the ModelOutput's tensors (loss, logits) as the root's output."""
    import importlib.util

    from gpu_helpers import cuda_request

    if importlib.util.find_spec("transformers") is None:
        pytest.skip(
            "transformers is not installed; install the models extra: pip install torch==2.13.0 -e '.[test,models]'"
        )
    program = Path(__file__).resolve().parent / "fixtures" / "models" / "hf_llama.py"
    report = worker.trace(cuda_request(program, "train_step", timeout=120))
    assert report.status == "ok", report.message
    line = line_of(program, "out = model(input_ids=ids, attention_mask=mask, labels=ids)")
    assert tree_rows(rows_under(render(report), line)) == [
        "module    LlamaForCausalLM                              f32[], f32[2, 16, 128]                194 ops  5.24 MFLOP  86.3K params",
        "            model                 LlamaModel            f32[2, 16, 64]                        181 ops  4.72 MFLOP  78.1K params",
        "              model.embed_tokens  Embedding             f32[2, 16, 64]                           1 op              8.19K params",
        "              model.rotary_emb    LlamaRotaryEmbedding  f32[1, 16, 16], f32[1, 16, 16]          8 ops",
        "              model.layers.0-1    LlamaDecoderLayer     f32[2, 16, 64]                    x2  158 ops  4.72 MFLOP  69.9K params",
        "              model.norm          LlamaRMSNorm          f32[2, 16, 64]                          7 ops                 64 params",
        "            lm_head               Linear                f32[2, 16, 128]                         4 ops   524 kFLOP  8.19K params",
    ]
    hints = hints_of(report, program)
    # -> the ModelOutput's first tensor (the loss); the host waits once (transformers' padding_mask.all())
    assert hints[line] == "LlamaForCausalLM 194 ops -> f32[] · ∇ 310 ops · sync"
