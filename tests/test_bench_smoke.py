"""The benchmarks cannot rot: `bench/all --quick` runs every benchmark in its smoke mode against the
real servers, worker and engine, and each result has the rows and columns the document promises.
Timings are not asserted here (benchmarks report them as side-by-side ratios); structure is."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")
sys.path.insert(0, BENCH)

import gen_corpus  # noqa: E402
import harness  # noqa: E402
import lint_latency  # noqa: E402

STATUSES = {"met", "MISSED", "not measured"}


def peers_installed() -> list[str]:
    """The peer servers present in this environment, found independently of the harness."""
    peers = []
    if shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff"):
        peers.append("ruff")
    if importlib.util.find_spec("pylsp") and importlib.util.find_spec("pyflakes"):
        peers.append("pylsp")
    return peers


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    document = out / "benchmarks.md"
    process = subprocess.run(
        [sys.executable, os.path.join(BENCH, "all"), "--quick", "--output", str(document), "--json-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert process.returncode == 0, process.stdout[-4000:] + process.stderr[-4000:]
    results = {}
    for name in ("lint_latency", "startup", "trace_cost", "editor_roundtrip", "staying_power", "worker_costs"):
        with open(out / f"{name}.json", encoding="utf-8") as f:
            results[name] = json.load(f)
    return document.read_text(encoding="utf-8"), results


def table(result: dict, index: int) -> tuple[list[str], list[list[str]]]:
    t = result["tables"][index]
    return t["columns"], t["rows"]


def assert_targets(result: dict, expected: list[str]) -> None:
    assert [t["what"] for t in result["targets"]] == expected
    for t in result["targets"]:
        assert t["status"] in STATUSES
        assert t["status"] != "not measured", t


def test_document_has_machine_versions_targets_and_every_benchmark(quick_run):
    document, results = quick_run
    assert document.startswith("# Benchmarks\n")
    for row in (
        "| CPU ",
        "| cores ",
        "| RAM ",
        "| python ",
        "| torch ",
        "| atenlens ",
        "| ruff ",
        "| pylsp ",
        "| pygls ",
    ):
        assert row in document
    assert "## Targets" in document
    for result in results.values():
        assert f"## {result['title']}" in document
        assert result["quick"] is True
        for target in result["targets"]:
            assert target["what"] in document
    assert "FAILED" not in document


def test_lint_latency_compares_every_installed_server(quick_run):
    _, results = quick_run
    result = results["lint_latency"]
    columns, rows = table(result, 0)
    assert columns == ["server", "diagnostics", "p50", "p95", "max", "settle after 10 changes: median", "settle spread"]
    servers = ["atenlens"] + peers_installed()
    assert [r[0] for r in rows] == servers
    modes = {r[0]: r[1] for r in rows}
    assert modes["atenlens"] == "push"
    if "pylsp" in modes:
        assert modes["pylsp"] == "push"
    if "ruff" in modes:
        assert modes["ruff"] == "pull"  # ruff answers textDocument/diagnostic to a client that pulls
    assert all(len(v) == 6 for v in result["raw"]["per_edit_ms"].values())  # --quick: 6 edits each
    # the code-lens latency after an edit, of the servers that give lenses (atenlens; pylsp answers [])
    columns, rows = table(result, 1)
    assert columns == ["server", "p50", "p95", "max"]
    assert rows[0][0] == "atenlens" and {r[0] for r in rows} <= {"atenlens", "pylsp"}
    assert len(result["raw"]["code_lens_ms"]["atenlens"]) == 4  # --quick: 4 edits
    expected = [
        t
        for t, peer in (("atenlens p95 <= 2 x ruff p95", "ruff"), ("atenlens p95 below pylsp p95", "pylsp"))
        if peer in servers
    ]
    assert_targets(result, expected)


def test_startup_measures_every_installed_server(quick_run):
    _, results = quick_run
    result = results["startup"]
    columns, rows = table(result, 0)
    assert columns == ["server", "to initialize result: median", "spread", "to first diagnostics: median", "spread"]
    assert [r[0] for r in rows] == ["atenlens"] + peers_installed() + [
        "reference: python -c pass (to exit)",
        "reference: import pygls.lsp.server (to exit)",
    ]
    assert_targets(
        result,
        [
            "atenlens spawn to first diagnostics, median (well under a second)",
            "atenlens first diagnostics within 60 ms of the pygls import floor (same rounds)",
        ],
    )


def test_trace_cost_compares_atenlens_with_the_floor_and_debugmode(quick_run):
    _, results = quick_run
    result = results["trace_cost"]
    columns, rows = table(result, 0)
    assert columns == [
        "model",
        "atenlens median",
        "spread",
        "floor median",
        "spread",
        "ratio",
        "CPU-time ratio",
        "DebugMode median",
        "spread",
        "atenlens / DebugMode",
        "device",
    ]
    assert [r[0] for r in rows] == ["GPT-2 small (124M, fp32), tiny sizes"]
    assert rows[0][-1] == "cuda"  # this machine has a compiler: a fallback to cpu is a failure here
    columns, rows = table(result, 1)
    assert columns == [
        "model",
        "atenlens",
        "floor",
        "DebugMode",
        "ops forward / backward / optimizer",
        "unattributed backward",
        "DebugMode log entries",
    ]
    forward, backward, optimizer = (int(n) for n in rows[0][4].split(" / "))
    assert forward > 0 and backward > 0 and optimizer > 0
    assert rows[0][5] == "0"
    assert int(rows[0][6]) > 0
    for target in result["targets"]:
        assert target["status"] in STATUSES


def test_worker_costs_measures_cold_start_round_trips_and_memory(quick_run):
    _, results = quick_run
    result = results["worker_costs"]
    assert [t["title"] for t in result["tables"]] == [
        "cold start, seconds, 1 rounds",
        "one trace, back to back, milliseconds, 2 rounds",
        "fork and memory",
    ]
    start_rows = result["tables"][0]["rows"]
    assert [r[0] for r in start_rows] == [
        "spawn to ready (Python + torch + shims + fake warm-up)",
        "of which the worker's own warm-up after interpreter start",
    ]
    assert all(float(r[1]) > 0 for r in start_rows)
    trip_rows = result["tables"][1]["rows"]
    assert [r[0] for r in trip_rows] == [
        "tiny.py::uses_silu (forward only, 1 op), cpu",
        "tiny.py::linear_step (Linear + backward), cpu",
        "examples/train_step.py::train_step, cuda",
    ]
    for row in trip_rows:
        assert len(result["raw"][row[0]]["worker_ms"]) == 2 and float(row[1]) > 0 and float(row[-1]) > 0
    memory_rows = result["tables"][2]["rows"]
    assert [r[0] for r in memory_rows][:2] == [
        "fork + exit + wait of a warm worker-sized process, median ms",
        "worker RSS when ready, MB",
    ]
    assert all(float(r[1]) > 0 for r in memory_rows)


def test_editor_round_trip_traces_and_serves_hints_from_cache(quick_run):
    _, results = quick_run
    result = results["editor_roundtrip"]
    _, trace_rows = table(result, 0)
    assert [r[0] for r in trace_rows] == ["cold (new server)", "warm"]
    _, cache_rows = table(result, 1)
    assert [r[0] for r in cache_rows] == [
        "textDocument/inlayHint (whole file)",
        "textDocument/hover (traced line)",
        "reference: textDocument/hover (untraced line)",
    ]
    hints = cache_rows[0][-1]
    assert hints.endswith(" hints") and int(hints.split()[0]) > 0
    assert cache_rows[1][-1] == "markdown"
    assert cache_rows[2][-1] == "null (nothing to show)"
    assert_targets(
        result, ["warm trace -> hints refresh, median", "inlay hints from cache, p95", "hover from cache, p95"]
    )


def test_staying_power_samples_memory_after_every_trace(quick_run):
    _, results = quick_run
    result = results["staying_power"]
    _, memory_rows = table(result, 0)
    assert [r[0] for r in memory_rows] == ["examples/train_step.py::train_step"]
    _, timing_rows = table(result, 1)
    assert timing_rows[0][-1] == "ok x3"
    assert len(result["raw"]["examples/train_step.py::train_step"]["rss_mb"]) == 3
    assert_targets(result, ["examples/train_step.py::train_step: memory growth over 3 traces"])


def test_corpus_is_valid_python_of_exactly_the_requested_length_and_deterministic():
    text = gen_corpus.generate(5000, seed=0)
    assert text.count("\n") == 5000 and text.endswith("\n")
    ast.parse(text)
    assert gen_corpus.generate(5000, seed=0) == text
    assert gen_corpus.generate(5000, seed=1) != text
    for needle in (
        ".item()",
        "non_blocking=True",
        "pin_memory=True",
        "torch.cuda.synchronize()",
        "torch.cuda.empty_cache()",
        "time.perf_counter()",
        ".to(device)",
    ):
        assert needle in text


def test_edit_script_types_one_letter_then_deletes_it():
    lines = gen_corpus.generate(600).split("\n")
    script = lint_latency.edit_script(lines, 200, seed=0)
    assert len(script) == 200
    assert script == lint_latency.edit_script(lines, 200, seed=0)
    for typed, deleted in zip(script[::2], script[1::2]):
        line, start, end, letter = typed
        assert start == end and len(letter) == 1 and letter.isalpha()
        assert deleted == (line, start, start + 1, "")
        assert lines[line].strip() and not lines[line].lstrip().startswith("#")


def test_percentile_interpolates_between_ranks():
    assert harness.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert harness.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert harness.percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    assert harness.percentile([7.0], 95) == 7.0


def test_targets_say_met_or_missed():
    assert harness.Target("x", 3.0, 5.0).status == "met"
    assert harness.Target("x", 5.0, 5.0).status == "met"
    assert harness.Target("x", 5.1, 5.0).status == "MISSED"
    assert harness.Target("x", None, 5.0).status == "not measured"


def test_gpu_truth_runs_its_forecast_side_without_a_gpu() -> None:
    """bench/gpu_truth.py cannot measure here (no CUDA); its forecast half runs anywhere, so a GPU
    machine is not the first place its argument parsing and report reading are tried."""
    script = os.path.join(BENCH, "gpu_truth.py")
    case = ["tests/fixtures/cost/mlp_adamw.py::step", "--call", "step(*setup())"]
    done = subprocess.run(
        [sys.executable, script, "--forecast-only", *case], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "forecast only (no GPU run), priced as h100-sxm",
        "",
        "tests/fixtures/cost/mlp_adamw.py::step  step(*setup())",
        "  syncs            trace            0   GPU            -",
        "  peak memory      trace     10.1 MiB   GPU            -",
        "  kernel time      trace       128 µs   GPU            -",  # 32 kernels at the 4 µs launch floor
        "  line   estimated   measured   measured / estimated",
        "    13       20 µs          -",
        "    14       16 µs          -",
        "    27       24 µs          -",
        "    28        4 µs          -",
        "    29       64 µs          -",
    ]
    # no GPU and no --forecast-only: it says why and exits 2; a GPU not in the table is refused by name
    refused = subprocess.run([sys.executable, script, *case], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        "bench/gpu_truth.py needs a CUDA GPU and a CUDA build of torch; this machine has none "
        "(--forecast-only runs the trace's side alone)\n"
    )
    unknown = subprocess.run(
        [sys.executable, script, "--forecast-only", "--gpu", "v100"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines()[-1] == (
        "gpu_truth.py: error: unknown GPU 'v100'; known: h100-sxm, h100-pcie, "
        "h200, a100-80gb, a100-40gb, l4, l40s, rtx-4090, mi300x"
    )
