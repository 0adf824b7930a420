"""torch.compile in a trace (AL600 graph breaks, AL601 summaries): the exact lines, codes and texts a
user sees, from Dynamo run on fake inputs in the real worker on simulated CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from atenlens.traceable import find_functions, split_example_call
from gpu_helpers import cuda_request
from source_lines import line_of

CORPUS = Path(__file__).resolve().parent / "corpus" / "gpu"
BREAKS = CORPUS / "compile_breaks.py"
CLEAN = CORPUS / "clean_compile.py"


def _trace(worker, path: Path, qualname: str):
    report = worker.trace(cuda_request(path, qualname, timeout=120.0))
    assert (report.status, report.device) == ("ok", "cuda"), report.message
    return report


def _by_code(report, code: str) -> list[tuple[int, str, str]]:
    return [(d.line, d.severity, d.message) for d in report.diagnostics if d.code == code]


def test_a_branch_and_an_item_break_the_graph_at_their_lines_and_the_syncs_say_so(worker):
    report = _trace(worker, BREAKS, "case_item_and_branch_in_a_compiled_function")
    branch, item = line_of(BREAKS, "if y.sum() > 0:"), line_of(BREAKS, "return y * y.mean().item()")
    breaks = _by_code(report, "AL600")
    assert [(line, severity) for line, severity, _ in breaks] == [(branch, "warning"), (item, "warning")]
    assert breaks[0][2].startswith(
        "torch.compile graph break (GB0170): Data-dependent branching. Detected "
        "data-dependent branching (e.g. `if my_tensor.sum() > 0:`)."
    )
    assert breaks[1][2] == (
        "torch.compile graph break (GB0124): Unsupported Tensor.item() call with capture_scalar_outputs=False. "
        "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False. Hint: Set "
        "`torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` "
        "to include these operations in the captured graph"
    )
    syncs = {line: message for line, _, message in _by_code(report, "AL100")}
    assert syncs[branch].endswith("; torch.compile also breaks its graph at this line (AL600, GB0170)")
    assert syncs[item].endswith("; torch.compile also breaks its graph at this line (AL600, GB0124)")
    assert _by_code(report, "AL601") == [
        (
            line_of(BREAKS, "@torch.compile"),
            "information",
            "torch.compile: 3 graphs, 2 graph breaks, 26 guards (Dynamo on the first call's inputs: float32[4, 8], "
            "float32[8, 8]; 2 value reads in resumed code assumed 1 / True)",
        )
    ]


def test_a_break_inside_a_loop_says_the_whole_forward_runs_eagerly_and_prints_once(worker):
    report = _trace(worker, BREAKS, "case_print_in_a_compiled_module")
    [(line, severity, message)] = _by_code(report, "AL600")
    assert (line, severity) == (line_of(BREAKS, 'print("activation", x.shape)'), "warning")
    assert message.startswith(
        "torch.compile graph break (GB0059): Failed to trace builtin operator. Dynamo does "
        "not know how to trace builtin operator `print` with argument types ['str', 'Size']"
    )
    assert message.endswith(
        "; the break is inside a loop, so Dynamo skips the whole function and runs it eagerly "
        "(nothing of it is compiled)"
    )
    assert _by_code(report, "AL601") == [
        (
            line_of(BREAKS, "def forward(self, x):"),
            "information",
            "torch.compile: 0 graphs, 1 graph break, 0 guards (Dynamo on the first call's inputs: float32[4, 8]); "
            "a break inside a loop made Dynamo run a function eagerly",
        )
    ]
    # the analysis re-runs the forward's Python; only the traced run's two prints reach the user
    assert report.stdout == "activation torch.Size([4, 8])\n" * 2


def test_a_data_dependent_shape_breaks_the_graph_once_though_called_three_times(worker):
    report = _trace(worker, BREAKS, "case_data_dependent_shape_in_a_loop")
    [(line, _, message)] = _by_code(report, "AL600")
    assert line == line_of(BREAKS, "kept = x[x > 0]")
    assert message == (
        "torch.compile graph break (GB0036): Dynamic shape operator. Operator `aten.nonzero.default`'s "
        "output shape depends on input Tensor data. Hint: Enable tracing of dynamic shape operators "
        "with `torch._dynamo.config.capture_dynamic_output_shape_ops = True`"
    )
    assert [d.count for d in report.diagnostics if d.code == "AL100"] == [3]  # the eager run: once per call


def test_code_dynamo_captures_whole_gets_a_summary_only(worker):
    step = _trace(worker, CLEAN, "case_compiled_block_in_a_train_step")
    assert [d.code for d in step.diagnostics] == ["AL601"]
    assert _by_code(step, "AL601") == [
        (
            line_of(CLEAN, "def forward(self, x):"),
            "information",
            "torch.compile: 1 graph, 0 graph breaks, 47 guards (Dynamo on the first call's inputs: float32[8, 16])",
        )
    ]
    assert sum(1 for e in step.events if e.kind == "op" and e.name == "aten.addmm.default") == 4  # eager, recorded
    full = _trace(worker, CLEAN, "case_fullgraph_function")
    assert [(d.code, d.line) for d in full.diagnostics] == [("AL601", line_of(CLEAN, "@torch.compile(fullgraph=True)"))]
    assert full.diagnostics[0].message.startswith("torch.compile: 1 graph, 0 graph breaks")


def test_an_analysis_past_the_time_budget_keeps_the_trace_and_says_so(worker):
    slow = Path(__file__).resolve().parent / "fixtures" / "compile" / "slow_compiled.py"
    report = worker.trace(cuda_request(slow, "run", timeout=25.0))
    assert report.status == "ok", report.message
    assert [e.name for e in report.events if e.kind == "op"] == ["aten.sin.default"]
    assert [(d.code, d.line, d.message) for d in report.diagnostics] == [
        (
            "AL601",
            line_of(slow, "def slow(x):") - 1,
            "torch.compile: the graph-break analysis ran past the trace's time budget; the trace is complete, the "
            "breaks of the callables not yet analysed are unknown",
        )
    ]


def test_reduce_overhead_says_which_graphs_cuda_graphs_would_skip_and_why(worker):
    mutated = _trace(worker, BREAKS, "case_reduce_overhead_with_a_mutated_input")
    assert _by_code(mutated, "AL602") == [
        (
            line_of(BREAKS, "cache.add_(h)"),
            "warning",
            'torch.compile(mode="reduce-overhead"): CUDA graphs would skip the graph this line is in (it mutates its '
            "input `cache` in place with add_); that graph runs without CUDA graphs, one launch per kernel",
        )
    ]
    host = _trace(worker, BREAKS, "case_reduce_overhead_with_a_cpu_tensor")
    assert _by_code(host, "AL602") == [
        (
            line_of(BREAKS, "return h * table.to(h.device"),
            "warning",
            'torch.compile(mode="reduce-overhead"): CUDA graphs would skip the graph this line is in (a CPU tensor '
            "float32[16] in it); that graph runs without CUDA graphs, one launch per kernel",
        )
    ]
    # without the mode the same code has no CUDA graphs to lose
    plain = _trace(worker, BREAKS, "case_item_and_branch_in_a_compiled_function")
    assert _by_code(plain, "AL602") == []


def test_compile_on_request_runs_dynamo_on_a_function_nobody_compiled():
    """`atenlens trace --compile`: the graph break at its line, the sync there saying so, the summary at
    the def; without the flag neither; a function already compiled is analysed once, not twice."""
    path = Path(__file__).resolve().parent / "fixtures" / "compile" / "on_request.py"

    def trace(qualname: str, *flags: str) -> list[tuple[int, str, str]]:
        done = subprocess.run(
            [sys.executable, "-m", "atenlens", "trace", f"{path}::{qualname}", "--json", *flags],
            capture_output=True,
            text=True,
            timeout=300,
        )
        report = json.loads(done.stdout)
        assert report["status"] == "ok", done.stderr
        return [(d["line"], d["code"], d["message"]) for d in report["diagnostics"]]

    branch, definition = line_of(path, "if y.sum() > 0:"), line_of(path, "def step(model, x):")
    found = trace("step", "--compile")
    assert [(line, code) for line, code, _ in found] == [(branch, "AL100"), (branch, "AL600"), (definition, "AL601")]
    assert found[0][2].endswith("; torch.compile also breaks its graph at this line (AL600, GB0170)")
    assert found[1][2].startswith("torch.compile graph break (GB0170): Data-dependent branching.")
    assert found[2][2] == (
        "torch.compile: 2 graphs, 1 graph break, 36 guards (Dynamo on the first call's inputs: float32[4, 16]; "
        "1 value read in resumed code assumed 1 / True)"
    )
    assert [(line, code) for line, code, _ in trace("step")] == [(branch, "AL100")]
    assert [code for _, code, _ in trace("already_compiled", "--compile")] == ["AL601"]


def test_the_directive_asks_for_compile_with_a_last_word_before_or_after_dims():
    assert split_example_call("step(*setup())  compile") == ("step(*setup())", None, True)
    assert split_example_call("step(*setup())  compile  dims: B=8") == ("step(*setup())", "B=8", True)
    assert split_example_call("step(*setup())  dims: B=8 T=16  compile") == ("step(*setup())", "B=8 T=16", True)
    assert split_example_call("step(*setup())  dims: B=8") == ("step(*setup())", "B=8", False)
    assert split_example_call("step(*setup())  dims: compile") == ("step(*setup())", "", True)  # a bare dims:
    # valid Python as a whole is a call: its last word stays
    assert split_example_call("f(x) if fast else compile") == ("f(x) if fast else compile", None, False)
    assert split_example_call("compile") == ("compile", None, False)
    source = (Path(__file__).resolve().parent / "fixtures" / "compile" / "on_request.py").read_text()
    flags = {info.qualname: (info.directive, info.compile) for info in find_functions(source)}
    assert flags == {
        "setup": (None, False),
        "step": ("step(*setup())", False),
        "already_compiled": ("already_compiled(*setup())", False),
        "step_by_directive": ("step_by_directive(*setup())", True),
    }


def test_compile_in_the_directive_or_the_call_runs_dynamo_as_the_flag_does(worker):
    path = Path(__file__).resolve().parent / "fixtures" / "compile" / "on_request.py"
    branch, definition = line_of(path, "if y.mean() > 0:"), line_of(path, "def step_by_directive(model, x):")
    report = _trace(worker, path, "step_by_directive")
    assert [(d.line, d.code) for d in report.diagnostics] == [
        (branch, "AL100"),
        (branch, "AL600"),
        (definition, "AL601"),
    ]
    assert report.diagnostics[1].message.startswith("torch.compile graph break (GB0170): Data-dependent branching.")
    assert report.diagnostics[2].message.startswith("torch.compile: 2 graphs, 1 graph break, ")
    # the same word in a --call (which replaces the directive) asks for it on a function whose directive does not
    step_branch = line_of(path, "if y.sum() > 0:")
    called = worker.trace(cuda_request(path, "step", timeout=120.0, call="step(*setup())  compile"))
    assert [(d.line, d.code) for d in called.diagnostics] == [
        (step_branch, "AL100"),
        (step_branch, "AL600"),
        (line_of(path, "def step(model, x):"), "AL601"),
    ]


def test_a_second_trace_of_a_function_compiled_on_request_runs_dynamo_again(worker):
    """The editor traces the same step again after an edit: each forked trace loads the file anew,
    and the function compiled on request must not be taken for what an earlier `torch.compile`
    of the file returned (a freed object's id can come back as the new function's)."""
    path = Path(__file__).resolve().parent / "fixtures" / "compile" / "on_request.py"
    branch, definition = line_of(path, "if y.mean() > 0:"), line_of(path, "def step_by_directive(model, x):")
    expected = [(branch, "AL100"), (branch, "AL600"), (definition, "AL601")]
    for _ in range(3):
        report = _trace(worker, path, "step_by_directive")
        assert [(d.line, d.code) for d in report.diagnostics] == expected
