"""The memory forecast side by side with torch's own MemTracker on the same fake train step (GPT-2 and
Llama architectures at toy sizes, AdamW, simulated CUDA): bench/memory_vs_memtracker.py in its quick
mode. Full sizes: docs/fidelity.md."""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))

import memory_vs_memtracker as bench  # noqa: E402


def test_peak_and_parameter_gradient_bytes_agree_with_memtracker() -> None:
    for kind in ("gpt2", "llama"):
        ours, theirs = bench.compare(kind, tiny=True)
        assert ours["device"] == "cuda"
        assert ours["peak"] == theirs["peak"], kind  # the same step, the same storages, the same rounding
        assert ours["phase"] == "optimizer"  # AdamW's first step creates its state
        categories = theirs["categories"]
        assert ours["categories"]["parameters"] == categories["Parameter"] + categories.get("Buffer", 0), kind
        assert ours["categories"]["gradients"] == categories["Gradient"], kind
        # MemTracker counts every tensor allocated inside step() as optimizer state; atenlens only what
        # stays in optimizer.state, the rest (AdamW's sqrt(exp_avg_sq)) are temporaries
        assert ours["categories"]["optimizer_state"] < categories["Optstate"], kind
        assert ours["categories"]["inputs"] == categories.get("Other", 0), kind
