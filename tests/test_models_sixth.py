"""Sixth round of configurations traced on simulated CUDA (bench/fidelity_sweep/round6.py).

Each fixture in tests/fixtures/models/ was traced and also run eagerly on the CPU with real small
tensors (bench/fidelity_sweep/compare.py); these tests pin what the trace must show where it was
wrong or ended without saying why.
"""

from __future__ import annotations

import random

import torch

from atenlens.trace.gpu.strides import iterator_strides, view_strides
from test_models import line_of, needs, trace


def ops_at(report, line: int) -> list[tuple[str, tuple[int, ...]]]:
    return [(e.name, e.outputs[0].shape) for e in report.events if e.kind == "op" and e.line == line]


def test_batch_of_one_keeps_the_layout_aten_gives_size_1_dimensions(worker):
    # FakeTensorMode's Python view and elementwise rules gave the batch dimension (size 1) stride
    # 1024 where ATen's computeStride and TensorIterator give 16; with 1024 the folded attention
    # output read as channels_last, so the upsampling was channels_last and group norm copied it
    report = trace(worker, "batch1_layouts.py", "block")
    assert report.stdout == "(16, 1, 128, 16) (16, 1, 128, 16) True True\n"
    assert ops_at(report, line_of("batch1_layouts.py", 'up = F.interpolate(y, scale_factor=2.0, mode="nearest")')) == [
        ("aten.upsample_nearest2d.default", (1, 16, 16, 16))
    ]
    assert ops_at(report, line_of("batch1_layouts.py", "out = F.group_norm(up, 4)")) == [
        ("aten.native_group_norm.default", (1, 16, 16, 16))
    ]


def test_diffusers_vae_tiled_decode_at_batch_1_copies_what_a_gpu_copies(worker):
    needs("diffusers")
    report = trace(worker, "vae_tiled_decode.py", "decode")
    assert report.stdout == "(1, 3, 32, 32) True\n"
    line = line_of("vae_tiled_decode.py", "image = vae.decode(latents).sample")
    ops = [e for e in report.events if e.kind == "op" and e.line == line]
    # nine tiles of 14 group norms each; 27 copies, as in the eager CPU run: while the attention
    # block's output read as channels_last, the six group norms after it in each tile copied their
    # input too (54 clones), and the upsampling and convolutions after it were channels_last
    assert sum(e.name == "aten.clone.default" for e in ops) == 27
    assert sum(e.name == "aten.native_group_norm.default" for e in ops) == 9 * 14
    assert sum(e.name == "aten.convolution.default" for e in ops) == 9 * 17
    assert not [d for d in report.diagnostics if d.code != "AL513"]


def _permuted(shape: list[int], rng: random.Random) -> torch.Tensor:
    order = list(range(len(shape)))
    rng.shuffle(order)
    return torch.empty([shape[d] for d in order]).permute(*[order.index(d) for d in range(len(shape))])


def test_size_1_stride_rules_are_atens_on_real_cpu_tensors():
    # the rules trace/gpu/strides.py gives fake tensors, against the C++ they copy (CPU and CUDA
    # share computeStride and TensorIterator), on layouts with size-1 and broadcast dimensions
    rng = random.Random(0)
    checked = 0
    for _ in range(600):
        shape = [rng.choice([1, 1, 2, 3]) for _ in range(rng.randint(2, 5))]
        a = _permuted(shape, rng)
        b = _permuted([s if rng.random() < 0.5 else 1 for s in shape], rng)
        for out, operands in ((a + b, [a, b]), (a * 2.0, [a, torch.empty(())]), (torch.sin(a), [a])):
            layouts = [(tuple(t.shape), tuple(t.stride())) for t in operands]
            assert tuple(iterator_strides(layouts, tuple(out.shape))) == out.stride(), layouts
        new_shape = [1, *shape] if rng.random() < 0.5 else [s for s in shape if s != 1] or [1]
        try:
            view = a.view(new_shape)
        except RuntimeError:
            continue
        assert tuple(view_strides(a.shape, a.stride(), new_shape) or ()) == view.stride(), (a.stride(), new_shape)
        checked += 1
    assert checked > 300
