"""The C++ shims behind simulated CUDA on CPU-only torch: built on first use, cached, loaded before
torch in the worker only, and a clear fallback to cpu when they cannot be built. Every check that
loads (or refuses to load) the shims runs in a fresh process: a load cannot be undone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from atenlens.trace.gpu import shims
from atenlens.worker.client import TraceWorker, worker_environment
from gpu_helpers import cuda_request

FALLBACK = Path(__file__).resolve().parent / "fixtures" / "gpu" / "fallback.py"
MISSING_COMPILER = "/nonexistent/bin/c++"

# Loads the shims, then imports torch and runs what needs them: backward through fake cuda tensors
# (hooks) and .to("cuda") (device guard). It leaves as the trace worker's children do (flush, then
# os._exit): after a backward on a cuda device, torch's autograd device thread may still hold the
# last reference to the finished graph task, whose captured thread-local state holds the
# FakeTensorMode; a normal interpreter exit can race it, and the thread, unable to take the GIL of
# a finalizing interpreter, is unwound through a noexcept destructor (std::terminate, SIGABRT).
LOAD_AND_USE = textwrap.dedent("""
    import json, os, sys
    from atenlens.trace.gpu import shims
    status = shims.load_shims()
    result = {"available": status.available, "built": status.built, "cache_dir": status.cache_dir,
              "reason": status.reason}
    if status.available:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            w = torch.randn(4, 4, device="cuda", requires_grad=True)
            x = torch.randn(2, 4).to("cuda")
            (x @ w).sum().backward()
            result["grad"] = str(w.grad.device)
    print(json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
""")


def run_python(code: str, env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=worker_environment(env)
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_first_use_builds_into_the_cache_and_later_processes_reuse_it(tmp_path):
    env = {"ATENLENS_CACHE_DIR": str(tmp_path)}
    cold = run_python(LOAD_AND_USE, env)
    assert (cold["available"], cold["built"], cold["grad"]) == (True, True, "cuda:0")
    cache_dir = Path(cold["cache_dir"])
    torch_install = shims.find_torch()
    assert cache_dir.parent == tmp_path / "shims"
    assert cache_dir.name.startswith(
        f"torch-{torch_install.version}-cxx11abi-cp{sys.version_info[0]}{sys.version_info[1]}-"
    )
    assert sorted(p.name for p in cache_dir.iterdir()) == [
        "fake_cuda_guard.so",
        "fake_cuda_guard.so.sha256",
        "fake_cuda_hooks.so",
        "fake_cuda_hooks.so.sha256",
    ]
    # only this user can write the cache: folders 0700, libraries 0700, hash records 0600
    assert (
        oct((tmp_path / "shims").stat().st_mode & 0o777) == "0o700" and oct(cache_dir.stat().st_mode & 0o777) == "0o700"
    )
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in cache_dir.iterdir()} == {
        "fake_cuda_guard.so": "0o700",
        "fake_cuda_guard.so.sha256": "0o600",
        "fake_cuda_hooks.so": "0o700",
        "fake_cuda_hooks.so.sha256": "0o600",
    }
    warm = run_python(LOAD_AND_USE, env)
    assert (warm["available"], warm["built"], warm["cache_dir"], warm["grad"]) == (
        True,
        False,
        cold["cache_dir"],
        "cuda:0",
    )


def test_two_workers_building_at_once_both_succeed(tmp_path):
    env = worker_environment({"ATENLENS_CACHE_DIR": str(tmp_path)})
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", LOAD_AND_USE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [(r["available"], r["grad"]) for r in results] == [(True, "cuda:0")] * 2
    (cache_dir,) = (tmp_path / "shims").iterdir()
    assert sorted(p.name for p in cache_dir.iterdir()) == [
        "fake_cuda_guard.so",
        "fake_cuda_guard.so.sha256",
        "fake_cuda_hooks.so",
        "fake_cuda_hooks.so.sha256",
    ]
    # only this user can write the cache: folders 0700, libraries 0700, hash records 0600
    assert (
        oct((tmp_path / "shims").stat().st_mode & 0o777) == "0o700" and oct(cache_dir.stat().st_mode & 0o777) == "0o700"
    )
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in cache_dir.iterdir()} == {
        "fake_cuda_guard.so": "0o700",
        "fake_cuda_guard.so.sha256": "0o600",
        "fake_cuda_hooks.so": "0o700",
        "fake_cuda_hooks.so.sha256": "0o600",
    }


@pytest.mark.parametrize(
    "compiler, reason",
    [
        (MISSING_COMPILER, f"the C++ compiler '{MISSING_COMPILER}' (ATENLENS_CXX/CXX) was not found"),
        ("false", "compiling fake_cuda_"),
    ],
)
def test_no_usable_compiler_means_unavailable_with_the_reason(tmp_path, compiler, reason):
    result = run_python(LOAD_AND_USE, {"ATENLENS_CACHE_DIR": str(tmp_path), "ATENLENS_CXX": compiler})
    assert result["available"] is False
    assert result["reason"].startswith(reason)
    assert not any(p.suffix == ".so" for p in tmp_path.rglob("*"))  # nothing half-built is left behind


def test_loading_after_torch_was_imported_is_refused(tmp_path):
    result = run_python("import torch\n" + LOAD_AND_USE, {"ATENLENS_CACHE_DIR": str(tmp_path)})
    assert result["available"] is False
    assert result["reason"] == "torch was imported before the CUDA shims could be loaded"


def test_the_shim_loader_does_not_import_torch_and_the_language_server_never_loads_it():
    code = textwrap.dedent("""
        import json, sys
        from atenlens.trace.gpu import shims
        shims.find_torch()
        loader_imports_torch = "torch" in sys.modules
        del sys.modules["atenlens.trace.gpu.shims"]
        import atenlens.lsp.server
        with open("/proc/self/maps") as maps:
            mapped = "fake_cuda" in maps.read()
        print(json.dumps([loader_imports_torch, "atenlens.trace.gpu.shims" in sys.modules, mapped]))
    """)
    assert run_python(code, {}) == [False, False, False]


def test_a_cuda_trace_without_shims_falls_back_to_cpu_with_a_note(tmp_path):
    with TraceWorker(env={"ATENLENS_CACHE_DIR": str(tmp_path), "ATENLENS_CXX": MISSING_COMPILER}) as worker:
        worker.start()
        assert worker.wait_ready()
        note = (
            f"simulated CUDA is unavailable (the C++ compiler '{MISSING_COMPILER}' (ATENLENS_CXX/CXX) "
            "was not found); traced on cpu instead"
        )
        assert worker.ready_info["notes"] == [note]
        report = worker.trace(cuda_request(FALLBACK, "step"))
    assert (report.status, report.device, report.notes) == ("ok", "cpu", (note,))
    assert report.stdout == "device cpu loss 1.0\n"  # CPU branch; .item() of an unknown fake gives 1.0
    assert [(d.code, d.kind, d.severity, d.message) for d in report.diagnostics] == [
        ("AL905", "device-fallback", "information", note),
        ("AL906", "assumption", "information", "value unknown on fake tensors: took `1.0` for `.item()` of f32[]"),
    ]


def test_the_cli_prints_the_fallback_note(tmp_path):
    env = worker_environment({"ATENLENS_CACHE_DIR": str(tmp_path), "ATENLENS_CXX": MISSING_COMPILER})
    done = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{FALLBACK}::step"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "simulated CUDA is unavailable" in done.stdout + done.stderr
