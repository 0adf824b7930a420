"""Values in a trace (server/atenlens/trace/values.py), traced on simulated CUDA in the real worker:
small tensors made from data carry their real values (so slicing, indexing and branches on them are
those of a real run), and every value the trace cannot know is assumed on the path a healthy
training step takes, with an AL906 note at the line that consumed it."""

from __future__ import annotations

import re

import numpy as np
import torch

from engine_helpers import label, names, ops, write
from gpu_helpers import cuda_request
from source_lines import line_of

UNKNOWN = "value unknown on fake tensors: took "


def _assumptions(report) -> list[tuple[int, str, int]]:
    return sorted((d.line, d.message, d.count) for d in report.diagnostics if d.code == "AL906")


def test_get_batch_slices_numpy_data_at_the_real_random_offsets(worker, tmp_path):
    path = write(
        tmp_path,
        "batch.py",
        """
        import numpy as np
        import torch

        data = np.arange(1000, dtype=np.int64)

        def get_batch():
            torch.manual_seed(7)
            ix = torch.randint(len(data) - 8, (4,))
            print(ix.tolist())
            x = torch.stack([torch.from_numpy(data[i:i+8]) for i in ix]).to("cuda")
            print(x[:, 0].tolist())
            return x
    """,
    )
    report = worker.trace(cuda_request(path, "get_batch"))
    assert report.status == "ok", report.message
    line = line_of(path, "torch.stack(")
    assert [
        (e.name, label(e)) for e in ops(report, line=line) if e.name in ("aten.stack.default", "aten._to_copy.default")
    ] == [("aten.stack.default", "int64[4, 8]"), ("aten._to_copy.default", "int64[4, 8]")]
    torch.manual_seed(7)
    expected = torch.randint(1000 - 8, (4,)).tolist()
    # the values are the shadow's: the same draws as a real run of torch's CPU generator
    assert report.stdout.splitlines() == [str(expected), str([int(np.arange(1000)[i]) for i in expected])]
    assert _assumptions(report) == [] and report.summary.assumptions == 0
    # a value read from a cuda tensor is still a sync, known or not
    assert [(d.line, d.code) for d in report.diagnostics] == [(line_of(path, "print(x[:, 0]"), "AL100")]


def test_known_small_values_decide_branches_indices_and_in_place_writes(worker, tmp_path):
    path = write(
        tmp_path,
        "small.py",
        """
        import torch

        def small():
            x = torch.zeros(4)
            x[1] = 5.0                                  # a write through a view keeps the base known
            best = int(x.argmax())
            counts = torch.bincount(torch.tensor([0, 2, 2, 3]))
            if (counts > 1).any():
                best += 10
            picked = torch.arange(10)[torch.arange(10) % 3 == 0]
            y = torch.arange(4.0)
            y.add_(torch.randn(128, 128)[0, :4] * 0)    # an unknown input: y's value is no longer known
            print((best, picked.tolist(), counts.tolist(), y[0].item()))
    """,
    )
    report = worker.trace(cuda_request(path, "small"))
    assert report.status == "ok", report.message
    assert report.stdout.splitlines() == ["(11, [0, 3, 6, 9], [1, 0, 2, 1], 1.0)"]
    assert ops(report, line=line_of(path, "picked ="))[-1].outputs[0].shape == (4,)
    assert _assumptions(report) == [(line_of(path, "print((best"), UNKNOWN + "`1.0` for `.item()` of f32[]", 1)]


def test_grad_scaler_step_runs_the_optimizer_and_says_it_assumed_finite_gradients(worker, tmp_path):
    path = write(
        tmp_path,
        "amp.py",
        """
        import torch

        def setup():
            model = torch.nn.Linear(16, 4).cuda()
            opt = torch.optim.AdamW(model.parameters())
            return model, opt, torch.amp.GradScaler("cuda"), torch.randn(8, 16, device="cuda")

        # atenlens: amp_step(*setup())
        def amp_step(model, opt, scaler, x):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    """,
    )
    report = worker.trace(cuda_request(path, "amp_step"))
    assert report.status == "ok", report.message
    step = line_of(path, "scaler.step(opt)")
    optimizer = names(ops(report, phase="optimizer"))
    assert {
        "aten._foreach_lerp_.Scalar",
        "aten._foreach_addcdiv_.ScalarList",
        "aten._foreach_sqrt.default",
        "aten._foreach_mul_.Scalar",
    } <= set(optimizer)
    assert {e.line for e in ops(report, phase="optimizer")} == {step}
    [(line, message, count)] = _assumptions(report)
    assert (line, count) == (step, 1)
    assert re.fullmatch(
        re.escape(
            UNKNOWN + "`0.0` for `.item()` of f32[] (gradients assumed finite: GradScaler "
            "found no inf/nan), inside torch/amp/grad_scaler.py:"
        )
        + r"\d+"
        + re.escape(
            ' `if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):`, called from this line'
        ),
        message,
    ), message
    [note] = [d for d in report.diagnostics if d.code == "AL906"]
    assert note.cause is not None and note.cause.file.endswith("torch/amp/grad_scaler.py")
    assert report.summary.assumptions == 1


def test_trunc_normal_init_ends_its_rejection_loop(worker, tmp_path):
    path = write(
        tmp_path,
        "init.py",
        """
        import torch

        def init_large():
            w = torch.empty(768, 768, device="cuda")
            torch.nn.init.trunc_normal_(w, std=0.02)  # large
            return w

        def init_small():
            w = torch.empty(64, 64)
            torch.nn.init.trunc_normal_(w, std=0.02)
            return w
    """,
    )
    large = worker.trace(cuda_request(path, "init_large", timeout=20))
    assert large.status == "ok", large.message
    line = line_of(path, "# large")
    assert names(ops(large, line=line)) == [
        "aten.lift_fresh.default",
        "aten._local_scalar_dense.default",
        "aten.lift_fresh.default",
        "aten._local_scalar_dense.default",
        "aten.normal_.default",
        "aten.lt.Scalar",
        "aten.gt.Scalar",
        "aten.bitwise_or.Tensor",
        "aten.any.default",
        "aten._local_scalar_dense.default",
    ]
    [(note_line, message, count)] = _assumptions(large)
    assert (note_line, count) == (line, 1)
    assert re.fullmatch(
        re.escape(
            UNKNOWN + "`False` for `bool()` / `if tensor:` of b8[]: a `while` loop that "
            "depends on it is assumed to end, inside torch/nn/init.py:"
        )
        + r"\d+"
        + re.escape(" `if not mask.any():`, called from this line"),
        message,
    ), message
    # 4,096 elements fit a shadow: the rejection loop runs on real samples and ends by itself
    small = worker.trace(cuda_request(path, "init_small", timeout=20))
    assert (small.status, _assumptions(small)) == ("ok", [])


def test_mixtral_style_expert_loop_runs_every_expert_on_its_top_k_share(worker, tmp_path):
    path = write(
        tmp_path,
        "moe.py",
        """
        import torch
        import torch.nn.functional as F

        E, K, T, H = 4, 2, 64, 128

        def setup():
            experts = torch.nn.ModuleList([torch.nn.Linear(H, H) for _ in range(E)]).cuda()
            return experts, torch.nn.Linear(H, E).cuda(), torch.randn(T, H, device="cuda")

        # atenlens: moe(*setup())
        def moe(experts, gate, x):
            weights, selected = torch.topk(F.softmax(gate(x), dim=-1), K, dim=-1)
            mask = F.one_hot(selected, num_classes=E).permute(2, 1, 0)
            out = torch.zeros_like(x)
            for e in range(E):
                idx = torch.where(mask[e])
                if idx[0].numel() == 0:
                    continue
                out.index_add_(0, idx[1], experts[e](x[idx[1]]) * weights[idx[1], idx[0], None])
            return out
    """,
    )
    report = worker.trace(cuda_request(path, "moe"))
    assert report.status == "ok", report.message
    expert_line = line_of(path, "out.index_add_(")
    # a top-2 router over 4 experts sends each expert 2 * 64 / 4 = 32 of the 64 tokens, on average
    assert [label(e) for e in ops(report, line=expert_line) if e.name == "aten.addmm.default"] == [
        "float32[32, 128]"
    ] * 4
    where = line_of(path, "idx = torch.where(")
    assert _assumptions(report) == [
        (
            where,
            UNKNOWN + "size 32 of at most 128 for one-argument `torch.where` "
            "(one-hot over 4 classes: 1/4 of the elements assumed set)",
            4,
        )
    ]
    assert report.summary.assumptions == 4


def test_hf_style_expert_loop_does_not_skip_experts_on_an_unknown_index(worker, tmp_path):
    # transformers' eager MoE loop: the experts hit come from nonzero(), and `expert_idx == num_experts`
    # (a padding guard) is false in a real run; assuming it true would skip every expert
    path = write(
        tmp_path,
        "moe_hit.py",
        """
        import torch
        import torch.nn.functional as F

        E, K, T, H = 4, 2, 64, 128

        def setup():
            experts = torch.nn.ModuleList([torch.nn.Linear(H, H) for _ in range(E)]).cuda()
            return experts, torch.nn.Linear(H, E).cuda(), torch.randn(T, H, device="cuda")

        # atenlens: moe(*setup())
        def moe(experts, gate, x):
            weights, selected = torch.topk(F.softmax(gate(x), dim=-1), K, dim=-1)
            mask = F.one_hot(selected, num_classes=E).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
            out = torch.zeros_like(x)
            for expert_idx in hit:
                expert_idx = expert_idx[0]
                if expert_idx == E:
                    continue
                idx, top_x = torch.where(mask[expert_idx])
                out.index_add_(0, top_x, experts[expert_idx](x[top_x]) * weights[top_x, idx, None])
            return out
    """,
    )
    report = worker.trace(cuda_request(path, "moe"))
    assert report.status == "ok", report.message
    guard = line_of(path, "if expert_idx == E:")
    guard_notes = [(count, message) for line, message, count in _assumptions(report) if line == guard]
    assert guard_notes == [
        (
            2,
            UNKNOWN + "`False` for `bool()` / `if tensor:` of b8[]: "
            "an unknown value is assumed not to equal a given one",
        )
    ]
    expert_line = line_of(path, "out.index_add_(")
    assert [e.name for e in ops(report, line=expert_line)].count("aten.addmm.default") == 2


def test_a_mask_of_unknown_values_selects_half_of_its_elements(worker, tmp_path):
    path = write(
        tmp_path,
        "half.py",
        """
        import torch

        def half():
            x = torch.randn(128, 128, device="cuda")
            return x[x > 0], torch.nonzero(x > 1)
    """,
    )
    report = worker.trace(cuda_request(path, "half"))
    assert report.status == "ok", report.message
    line = line_of(path, "return x[x > 0]")
    assert [
        (e.name, label(e)) for e in ops(report, line=line) if e.name in ("aten.index.Tensor", "aten.nonzero.default")
    ] == [("aten.index.Tensor", "float32[8192]"), ("aten.nonzero.default", "int64[8192, 2]")]
    assert _assumptions(report) == [
        (line, UNKNOWN + "size 8192 of at most 16384 for `nonzero` (half of the elements assumed selected)", 1),
        (
            line,
            UNKNOWN + "size 8192 of at most 16384 for boolean-mask indexing `x[mask]` (half of the elements "
            "assumed selected)",
            1,
        ),
    ]


def test_non_finite_checks_take_the_healthy_branch(worker, tmp_path):
    path = write(
        tmp_path,
        "checks.py",
        """
        import torch

        def checks():
            g = torch.randn(1024, 1024, device="cuda")
            if torch.isnan(g).any() or torch.isinf(g).any():
                raise FloatingPointError("nan")
            if not torch.isfinite(g).all():
                raise FloatingPointError("inf")
            return g * 2
    """,
    )
    report = worker.trace(cuda_request(path, "checks"))
    assert report.status == "ok", report.message
    finite = "(values assumed finite (no inf/nan))"
    assert _assumptions(report) == [
        (line_of(path, "isnan(g)"), UNKNOWN + f"`False` for `bool()` / `if tensor:` of b8[] {finite}", 2),
        (line_of(path, "isfinite(g)"), UNKNOWN + f"`True` for `bool()` / `if tensor:` of b8[] {finite}", 1),
    ]


def test_mask_assignment_of_a_cpu_scalar_is_masked_fill_without_a_sync(worker, tmp_path):
    path = write(
        tmp_path,
        "mask.py",
        """
        import torch

        def scalar_value():
            x = torch.randn(8, device="cuda")
            x[x < 0] = 0.0
            return x

        def tensor_value():
            x = torch.randn(8, device="cuda")
            x[x < 0] = torch.zeros(8, device="cuda")[:1]
            return x
    """,
    )
    scalar = worker.trace(cuda_request(path, "scalar_value"))
    assert (scalar.status, scalar.diagnostics, scalar.summary.syncs) == ("ok", (), 0)
    assert names(ops(scalar, line=line_of(path, "x[x < 0] = 0.0"))) == [
        "aten.lt.Scalar",
        "aten.lift_fresh.default",
        "aten.index_put_.default",
    ]
    tensor = worker.trace(cuda_request(path, "tensor_value"))
    line = line_of(path, "x[x < 0] = torch.zeros")
    assert [(d.line, d.code, d.op) for d in tensor.diagnostics] == [(line, "AL100", "aten.index_put_.default")]


def test_a_known_operand_decides_or_and_and_of_unknown_masks(worker, tmp_path):
    # generate()'s stopping criteria: `done = length_done | eos_done` with eos_done read from unknown
    # tokens; `unfinished & ~done` is known all-False once the length criterion holds
    path = write(
        tmp_path,
        "stop.py",
        """
        import torch

        def loop():
            tokens = torch.nn.Linear(8, 5000, device="cuda")(torch.randn(2, 8, device="cuda")).argmax(-1)
            unfinished = torch.ones(2, dtype=torch.long, device="cuda")
            steps = 0
            for cur_len in range(1, 10):
                done = torch.full((2,), cur_len >= 3, dtype=torch.bool, device="cuda")
                done = done | (tokens == 7)
                unfinished = unfinished & ~done
                steps += 1
                if unfinished.max() == 0:
                    break
            keep = torch.logical_or(tokens > 0, torch.ones(2, dtype=torch.bool, device="cuda"))
            drop = (tokens > 0) & torch.zeros(2, dtype=torch.bool, device="cuda")
            print(steps, keep.tolist(), drop.tolist(), ((tokens > 0) | False).tolist())
    """,
    )
    report = worker.trace(cuda_request(path, "loop"))
    assert report.status == "ok", report.message
    # `| False` decides nothing: that mask stays unknown and its values are assumed
    assert report.stdout == "3 [True, True] [False, False] [True, True]\n"
    check = line_of(path, "if unfinished.max() == 0:")
    assert _assumptions(report) == [
        (
            check,
            UNKNOWN
            + "`False` for `bool()` / `if tensor:` of b8[]: an unknown value is assumed not to equal a given one",
            2,
        ),
        (line_of(path, "print(steps"), UNKNOWN + "`[True, True]` for `.tolist()` of b8[2]", 1),
    ]


def test_the_longest_of_unknown_lengths_is_taken_as_the_most_it_can_be(worker, tmp_path):
    path = write(
        tmp_path,
        "longest.py",
        """
        import torch

        def crop():
            scores = torch.randn(4, 12, 200, device="cuda")  # too large for the trace to know its values
            mask = scores.mean(-1) > 0
            longest = mask.sum(1).max()
            x = scores[:, :longest]
            count = mask.sum()
            print(tuple(x.shape), tuple(scores[: 2 + longest].shape), int(count))
    """,
    )
    report = worker.trace(cuda_request(path, "crop"))
    assert report.status == "ok", report.message
    # the longest of 4 lengths of at most 12 steps: 12 (it was 1), and 2 + it at most 14; a plain count
    # keeps the generic assumption (1)
    assert report.stdout == "(4, 12, 200) (4, 12, 200) 1\n"
    longest = "for i64[]: the longest of unknown lengths is assumed to be the most it can be (nothing shorter)"
    assert _assumptions(report) == [
        (line_of(path, "x = scores[:, :longest]"), UNKNOWN + "`12` " + longest, 1),
        (line_of(path, "print(tuple(x.shape)"), UNKNOWN + "`14` " + longest, 1),
        (line_of(path, "print(tuple(x.shape)"), UNKNOWN + "`1` for `int()` of i64[]", 1),
    ]
