"""Classes of error found by the twenty-fifth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twenty-fifth review"), each with a small program and the exact findings: line, column (0-based),
code, severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

GAUDI_ONLY_MODULE = dedent(
    """\
    import torch
    import habana_frameworks.torch.core as htcore


    def quantize(layers, inps):
        for layer in layers:
            out = layer(inps.to("hpu"))
            htcore.mark_step()
            if out.isnan().any():
                torch.cuda.empty_cache()
    """
)


def test_a_module_that_imports_habana_unconditionally_is_gaudi_code() -> None:
    """`import habana_frameworks...` at column 0: the module cannot run without Gaudi, whatever
    else it says (a leftover `torch.cuda.empty_cache()` from a CUDA port: neural-compressor's
    HPU GPTQ). Imported under `try:`, the module may run on CUDA: its code is linted."""
    assert findings(GAUDI_ONLY_MODULE) == []
    optional = GAUDI_ONLY_MODULE.replace(
        "import habana_frameworks.torch.core as htcore",
        "try:\n    import habana_frameworks.torch.core as htcore\nexcept ImportError:\n    htcore = None",
    )
    assert findings(optional) == [
        (
            12,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`out.isnan().any()`) inside a loop: the host waits for the GPU on every "
            "iteration",
        )
    ]


MOVE_TO_ANOTHER_ACCELERATOR = dedent(
    """\
    import torch

    DEV = "hpu"
    CUDA_DEV = "cuda"


    def rotate(size):
        q = torch.randn(size, size).to(device=DEV)
        r = torch.randn(size, size).to(device=CUDA_DEV)
        return q @ r.cpu()
    """
)


def test_a_create_then_move_to_another_accelerator_is_no_cuda_copy() -> None:
    """`DEV = "hpu"` at module level, `.to(device=DEV)`: a copy to Gaudi, not to a CUDA device
    (neural-compressor's QuaRot)."""
    assert findings(MOVE_TO_ANOTHER_ACCELERATOR) == [
        (
            9,
            32,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        )
    ]


CLASS_FOR_ANOTHER_ACCELERATOR = dedent(
    """\
    import torch


    class HPUWeightOnlyLinear(torch.nn.Module):
        def __init__(self, n, device="hpu"):
            super().__init__()
            self.device = device
            self.register_buffer("scales", torch.zeros(n).to(self.device))

        def forward(self, x):
            return torch.ops.hpu.convert_from_uint4(x, self.scales)


    class CUDAWeightOnlyLinear(torch.nn.Module):
        def __init__(self, n, device="cuda"):
            super().__init__()
            self.register_buffer("scales", torch.zeros(n).to(device))
    """
)


def test_a_class_named_for_another_accelerator_that_drives_it_is_that_accelerators_code() -> None:
    """`class HPUWeightOnlyLinear` whose `forward` calls `torch.ops.hpu.*` and which never says
    `cuda`: its `.to(self.device)` moves to Gaudi (neural-compressor's weight-only modules). The
    CUDA class beside it is linted (also when the prefilter leaves `forward` out of the parse)."""
    assert findings(CLASS_FOR_ANOTHER_ACCELERATOR) == [
        (
            17,
            54,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per call of `__init__` (set-up, not a step): a small cost, not paid every step",
        )
    ]


TEXT_PARAMETER = dedent(
    """\
    from typing import Optional

    import torch


    def find(entries, device, loss: Optional[str] = None):
        found = []
        for e in entries:
            e.model.to(device)
            if e.loss == loss:
                found.append(e)
        return found
    """
)


def test_a_comparison_with_a_parameter_annotated_as_text_reads_no_tensor() -> None:
    """`e.loss == loss` with `loss: Optional[str]`: a registry's names compared (pytorch-ood's
    model registry), though spelled as a loss."""
    assert findings(TEXT_PARAMETER) == []
    assert [row[:4] for row in findings(TEXT_PARAMETER.replace("loss: Optional[str] = None", "loss=None"))] == [
        (10, 11, "AL100", "warning")
    ]


FIRST_USE_CACHE = dedent(
    """\
    import torch


    class WeightOnlyLinear(torch.nn.Module):
        def recover(self):
            device = self.scales.device
            weight = torch.zeros(self.out_features, self.in_features).to(device)
            for col in range(self.in_features):
                weight[:, col] = self.unpack(col)
            return weight

        def forward(self, x):
            if not hasattr(self, "weight"):
                weight = self.recover()
            if True:
                if not hasattr(self, "weight"):
                    self.weight = weight
            return x @ self.weight.t()
    """
)


def test_a_helper_called_under_a_first_use_cache_runs_once_per_object() -> None:
    """`forward` calls `recover()` only while `not hasattr(self, "weight")` and keeps the result in
    `self.weight` (neural-compressor's weight-only linear): the unpacking runs once per module.
    Without `self.weight = ...` the test holds on every call, and the copy is paid per step."""
    assert findings(FIRST_USE_CACHE) == [
        (
            7,
            66,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs in `recover`, which this file calls only from `forward` on first use (`if not hasattr(self, "
            '"weight"):`): a small cost, not paid every step',
        )
    ]
    never_kept = FIRST_USE_CACHE.replace("self.weight = weight", "print(weight)")
    assert "self.weight = weight" not in never_kept
    assert [row[:4] for row in findings(never_kept)] == [(7, 66, "AL302", "warning")]


AFTER_THE_DATA_PASS = dedent(
    """\
    import torch


    class Predictor:
        def calibrate(self, loader, device):
            logits, labels = [], []
            for x, y in loader:
                logits.append(self.model(x.to(device)))
                labels.append(y.to(device))
            self.calculate_threshold(torch.cat(logits), torch.cat(labels), device)

        def calculate_threshold(self, logits, labels, device):
            thresholds = torch.zeros(self.num_classes).to(device)
            for c in range(self.num_classes):
                thresholds[c] = logits[labels == c].max()
            self.thresholds = thresholds
    """
)


def test_a_create_then_move_in_a_helper_called_after_the_data_pass_runs_once_per_pass() -> None:
    """`calculate_threshold` is called once, after `calibrate`'s loop over the loader (torchcp's
    calibration): its buffer is made once per calibration, not per batch."""
    assert findings(AFTER_THE_DATA_PASS) == [
        (
            13,
            51,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs in `calculate_threshold`, which this file calls only from `calibrate` outside its loop on line 7, "
            "once per pass of that loop: a small cost, not paid every step",
        )
    ]


SAME_STATEMENT_CONVERSIONS = dedent(
    """\
    import torch


    def loglikelihood(model, requests, device):
        res = []
        for context, cont in requests:
            logits = model(context.to(device)).log_softmax(-1)
            max_equal = (logits.argmax(-1) == cont.to(device)).all()
            res.append((float(logits.sum()), bool(max_equal)))
            box = logits[0]
            res.append((int(box[1]), int(box[3] + 1)))
        return res
    """
)


def test_a_conversion_after_a_read_in_the_same_statement_adds_no_wait() -> None:
    """`(float(logits.sum()), bool(max_equal))`: the `float()` waits for everything queued,
    `max_equal` among it (lm-eval's log-likelihood in neural-compressor). `int(box[3] + 1)` after
    `int(box[1])` waits for the sum, new work: a warning."""
    every = "inside a loop: the host waits for the GPU on every iteration"
    assert findings(SAME_STATEMENT_CONVERSIONS) == [
        (9, 20, "AL100", "warning", f"`float()` of a CUDA tensor {every}"),
        (
            9,
            41,
            "AL100",
            "information",
            f"`bool()` of a CUDA tensor {every}, but the read on line 9 just before already waited for it: no new wait",
        ),
        (11, 20, "AL100", "warning", f"`int()` of a CUDA tensor {every}"),
        (11, 33, "AL100", "warning", f"`int()` of a CUDA tensor {every}"),
    ]
