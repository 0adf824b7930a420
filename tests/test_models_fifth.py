"""Fifth round of configurations traced on simulated CUDA (bench/fidelity_sweep/round5.py).

Each fixture in tests/fixtures/models/ was traced and also run eagerly on the CPU with real small
tensors (bench/fidelity_sweep/compare.py); these tests pin what the trace must show where it was
wrong or ended without saying why.
"""

from __future__ import annotations

from gpu_helpers import cuda_request
from test_models import FIXTURES, line_of, trace


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


def test_torch_ao_quantization_ends_the_trace_at_the_line_saying_why(worker):
    # fake tensors have no quantized kernels: torch's dispatcher error ("Could not run
    # 'aten::_empty_affine_quantized' with arguments from the 'QuantizedMeta' backend") named
    # neither the cause nor a way out
    report = worker.trace(cuda_request(FIXTURES / "ao_dynamic_quant.py", "infer", timeout=120))
    assert report.status == "error"
    [error] = report.diagnostics
    assert (error.code, error.line, error.column) == (
        "AL900",
        line_of("ao_dynamic_quant.py", "qmodel = torch.ao.quantization.quantize_dynamic("),
        13,  # the call, `torch.ao...`
    )
    assert error.message == (
        "NotImplementedError: `aten.quantize_per_tensor.default` works on quantized tensors "
        "(torch.ao.quantization), which the trace cannot simulate: fake tensors have no quantized kernels, "
        "and torch.ao's quantized engines (fbgemm, qnnpack) run on the CPU only, with weights packed from "
        "real data; trace the float model, or quantize with torchao (`torchao.quantization.quantize_`), "
        "whose quantized layers the trace follows (docs/fidelity.md)"
    )
    assert report.message == error.message
    assert not [e for e in report.events if e.kind == "op"]


def test_bincount_on_cuda_counts_known_values_and_is_a_sync(worker):
    # `torch.bincount` has a data-dependent length; it had no handler and ended the trace with
    # DynamicOutputShapeException even on known values. `histc` with its default range (min == max)
    # reads the data's min and max on the host, a sync the trace did not report.
    report = trace(worker, "moe_bincount.py", "moe")
    assert report.stdout == "[3, 5, 2, 2] (12, 8) (8,)\n"  # the eager CPU run of the same seed
    count = line_of("moe_bincount.py", "counts = torch.bincount(idx, minlength=len(layers))")
    spread = line_of("moe_bincount.py", "spread = torch.histc(out, bins=8)")
    syncs = [(d.code, d.line, d.message.split(":")[0]) for d in report.diagnostics]
    assert syncs == [
        ("AL100", count, "`bincount` has a data-dependent output shape"),
        ("AL100", count + 1, "`.tolist()` copies cuda i64[4] to the host"),
        (
            "AL100",
            spread,
            "`histc` with `min == max` (the default) copies the input's min and max to the host to find its range",
        ),
        ("AL100", spread + 1, "`.tolist()` copies cuda i64[4] to the host"),
    ]
    # the router, then each expert on its real share of the 12 tokens
    matmuls = [e.outputs[0].shape for e in report.events if e.kind == "op" and e.name == "aten.addmm.default"]
    assert matmuls == [(12, 4), (3, 8), (5, 8), (2, 8), (2, 8)]


def test_bincount_of_unknown_values_assumes_its_length_and_says_so(worker):
    report = trace(worker, "moe_bincount.py", "moe_wide")
    assert report.stdout == "(12,)\n"
    line = line_of("moe_bincount.py", "counts = torch.bincount(idx)")
    assert [(d.code, d.line, d.message) for d in report.diagnostics if d.code == "AL906"] == [
        (
            "AL906",
            line,
            "value unknown on fake tensors: took size 12 for `bincount` of i64[12] (largest value 11 assumed)",
        )
    ]
    assert report.summary.assumptions == 1


def test_tensor_split_at_offsets_in_a_cpu_tensor_and_allclose_on_cuda(worker):
    # torch reads tensor_split's split points from the CPU tensor's data in C++: the trace ended with
    # "data is not allocated yet"; `torch.allclose` on cuda ended it with DataDependentOutputException
    report = trace(worker, "varlen_split.py", "per_sequence")
    assert report.stdout == "[(3, 8), (5, 8), (4, 8)] True\n"
    split = line_of("varlen_split.py", "pieces = torch.tensor_split(packed, offsets[:-1])")
    check = line_of("varlen_split.py", "same = torch.allclose(means, means.clone())")
    assert [(e.name, e.outputs[0].shape) for e in report.events if e.kind == "op" and e.line == split] == [
        ("aten.slice.Tensor", (2,)),
        ("aten.slice.Tensor", (3, 8)),
        ("aten.slice.Tensor", (5, 8)),
        ("aten.slice.Tensor", (4, 8)),
    ]
    assert [(d.code, d.line, d.message) for d in report.diagnostics] == [
        (
            "AL100",
            check,
            "`torch.allclose` returns a Python bool computed on the GPU: the host waits until the GPU has "
            "finished all queued work [aten.allclose]",
        )
    ]


def test_tensor_split_and_allclose_on_unknown_values_are_assumptions_at_the_line(worker):
    report = trace(worker, "varlen_split.py", "scored")
    assert report.stdout == "3 True\n"
    split = line_of("varlen_split.py", "pieces = packed.tensor_split(cuts)")
    check = line_of("varlen_split.py", "close = torch.allclose(scorer(packed), scorer(packed.clone()))")
    assert [(d.line, d.message) for d in report.diagnostics if d.code == "AL906"] == [
        (split, "value unknown on fake tensors: took 3 even sections for `tensor_split` at unknown points (i64[2])"),
        (check, "value unknown on fake tensors: took `True` for `torch.allclose` of f32[600, 4]"),
    ]
    assert [e.outputs[0].shape for e in report.events if e.kind == "op" and e.line == split] == [
        (200, 8),
        (200, 8),
        (200, 8),
    ]


def test_dense_to_sparse_on_cuda_keeps_its_entries_and_an_unsimulated_sparse_kernel_says_so(worker):
    # `to_sparse()` of a cuda tensor and `torch.sparse.mm` ended the trace with torch's "Could not run
    # 'aten::empty_strided' with arguments from the 'CUDA' backend", an op the program never called
    report = worker.trace(cuda_request(FIXTURES / "sparse_adjacency.py", "propagate", timeout=120))
    assert report.stdout == "11 True\n"  # the eager CPU run: 11 edges
    convert = line_of("sparse_adjacency.py", "sparse = adjacency.to_sparse()")
    product = line_of("sparse_adjacency.py", "out = torch.sparse.mm(sparse, features)")
    assert report.status == "error"
    assert [(d.code, d.line, d.message) for d in report.diagnostics] == [
        (
            "AL100",
            convert,
            "`to_sparse()` of f32[6, 6] counts its nonzero entries on the host: the host waits until the GPU "
            "has finished all queued work [aten._to_sparse]",
        ),
        (
            "AL900",
            product,
            "NoFakeKernelError: `aten._sparse_addmm.default` cannot be simulated on cuda for these inputs: torch "
            "has no meta kernel for it, and the trace has no CUDA kernels to run instead (docs/fidelity.md)",
        ),
    ]
    [conversion] = [e for e in report.events if e.kind == "op" and e.name == "aten._to_sparse.default"]
    assert conversion.line == convert
