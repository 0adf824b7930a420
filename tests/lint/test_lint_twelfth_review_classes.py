"""Classes of error found by the twelfth to fourteenth whole-tree reviews
(tests/lint/corpus_real/WHOLE_TREES.md), each with a small program and the exact findings:
line, column (0-based), code, severity and message. Each program is also linted without the
prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

from atenlens.lint.engine import lint_source_strict

CPU_ELEMENTS = dedent(
    """\
    import numpy as np
    import torch


    def negative_sampling(edge_index, perm, device):
        idx = {k: v[0] * 10 + v[1] for k, v in edge_index.items()}
        mask = {k: torch.from_numpy(np.isin(perm[k], idx[k])) for k in edge_index}
        cuda_mask = {k: torch.from_numpy(np.isin(perm[k], idx[k])).to(device) for k in edge_index}
        for k in edge_index:
            rest = torch.nonzero(mask[k]).view(-1)
            hits = torch.nonzero(cuda_mask[k]).view(-1)
            print(rest, hits)
    """
)


def test_a_subscript_of_a_comprehension_of_cpu_tensors_is_on_the_cpu() -> None:
    """`mask = {k: torch.from_numpy(...) for k in keys}`: every element is made on the CPU, so
    `torch.nonzero(mask[k])` waits for nothing; the same comprehension moved `.to(device)` is read on
    the GPU."""
    assert findings(CPU_ELEMENTS) == [
        (
            11,
            15,
            "AL100",
            "warning",
            "`torch.nonzero(...)` (its output's shape depends on the data) inside a loop: the host "
            "waits for the GPU on every iteration",
        )
    ]


SUBMODULE_WALK = dedent(
    """\
    import torch


    def footprint(model, x, budget):
        model.cuda()
        for step in range(100):
            loss = model(x.cuda()).sum()
            loss.backward()
            for module in model.modules():
                size = module.weight_footprint()
                budget -= int(size)
                print(module.kl_loss().item())
        return budget
    """
)


def test_a_method_without_input_of_a_walked_submodule_is_no_model_output() -> None:
    """`for module in model.modules(): module.weight_footprint()`: a layer's own bookkeeping (a byte
    count), given nothing to compute from, is no model output; a loss-named method (`kl_loss()`) still is."""
    assert findings(SUBMODULE_WALK) == [
        (12, 35, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


RETRY_UNTIL_DONE = dedent(
    """\
    import torch


    def invert(hessian, device_idx):
        done = False
        while not done:
            try:
                hessian = hessian.to(torch.device(device_idx))
                inverse = torch.cholesky_inverse(torch.linalg.cholesky(hessian))
                if torch.isnan(inverse).any():
                    raise RuntimeError("NaN in the inverse")
                done = True
            except torch.cuda.OutOfMemoryError:
                device_idx += 1
        return inverse


    def poll(flag, device):
        done = False
        while not done:
            flag = flag.to(device)
            if flag.any():
                done = True
        return flag
    """
)


def test_a_while_not_done_loop_that_sets_done_in_a_try_is_a_retry_loop() -> None:
    """`while not done: try: ...; done = True except OutOfMemoryError: ...`: the loop repeats only while
    attempts fail, so its check runs once per attempt (information); a flag set outside any `try`
    (`poll`) is an ordinary loop."""
    assert findings(RETRY_UNTIL_DONE) == [
        (
            10,
            15,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`torch.isnan(inverse).any()`) inside a loop: the host waits "
            "for the GPU once per attempt of a retry loop (it stops at the first success)",
        ),
        (
            22,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`flag.any()`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


LITERAL_DICT = dedent(
    """\
    import torch


    def probe(model, weight, log):
        weight = weight.cuda()
        errors = {0.0: 0.0, 1.0: 0.0}
        for gain in (-0.5, 0.5):
            out = model(weight * gain)
            for offset in errors:
                errors[offset] = max(errors[offset], (out - offset).abs().max().item())
        seen = {"a": 0.0}
        log(seen)
        for key in seen:
            print(model(weight).sum().item())
        return errors
    """
)


def test_a_loop_over_a_dict_literal_runs_as_often_as_it_has_keys() -> None:
    """`errors = {0.0: 0.0, 1.0: 0.0}`, only walked, indexed at the keys it is walked by and returned:
    its loop runs twice; a dict handed to a call (`log(seen)`) may grow there, so its loop is an
    ordinary loop."""
    assert findings(LITERAL_DICT) == [
        (
            10,
            76,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU 2 times (the loop runs 2 times)",
        ),
        (14, 34, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


EPOCH_ITERATOR = dedent(
    """\
    import torch
    from tqdm import tqdm


    def fit(model, opt, data, epochs, steps_per_epoch, device="cuda"):
        model = model.to(device)
        epoch_iterator = tqdm(range(epochs))
        for i in epoch_iterator:
            for j in range(steps_per_epoch):
                loss = model(data[j].to(device)).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            epoch_iterator.set_description(f"{loss.detach().cpu().item():.3f}")


    def train_epoch(model, opt, train_dataloader, device="cuda"):
        epoch_iterator = train_dataloader
        for step, inputs in enumerate(epoch_iterator):
            loss = model(inputs.to(device)).mean()
            loss.backward()
            opt.step()
            print(loss.item())
    """
)


def test_a_name_bound_to_a_progress_bar_over_epochs_iterates_epochs() -> None:
    """`epoch_iterator = tqdm(range(epochs))`, then `for i in epoch_iterator:`: what the name was bound to
    speaks of epochs; a name spelled so but bound to the batches (`epoch_iterator =
    train_dataloader`, as transformers' Trainer does) iterates batches."""
    assert findings(EPOCH_ITERATOR) == [
        (14, 56, "AL100", "information", "`.cpu()` inside a loop: the host waits for the GPU once per epoch"),
        (23, 19, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


INDEX_SELECT = dedent(
    """\
    import torch


    def evaluate(model, dataloader, device):
        feats = []
        with torch.no_grad():
            for batch in dataloader:
                out = model(batch["x"].to(device))
                idx = torch.tensor(batch["idx"]).long()
                feats.append(out.cpu().index_select(0, idx))
        return torch.cat(feats)
    """
)


def test_rows_picked_on_the_host_from_a_copy_are_a_result_kept() -> None:
    """`feats.append(out.cpu().index_select(0, idx))`: rows of the host copy, kept as `feats.append(out.cpu())` is."""
    assert findings(INDEX_SELECT) == [
        (
            10,
            29,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results "
            "on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)",
        )
    ]


OPTIONAL_TENSOR = dedent(
    """\
    import torch


    def count(model, selected, device):
        model.to(device)
        selected = selected.cpu()
        offset = 0
        for module in model.modules():
            n = sum(p.numel() for p in module.parameters(recurse=False))
            in_module = None if selected is None else (selected >= offset) & (selected < offset + n)
            if in_module is not None and not in_module.any():
                offset += n
                continue
            offset += n
        return offset


    def train(model, loader, distributed, device):
        stop = torch.zeros(1, device=device) if distributed else None
        for x in loader:
            model(x.to(device)).sum().backward()
            if stop is not None and stop.item() > 0:
                print("stopping")
    """
)


def test_a_tensor_or_none_keeps_the_tensors_device() -> None:
    """`None if selected is None else (selected >= offset) & ...` of a tensor moved `.cpu()` is on the
    CPU (a CPU tensor compared with a number); `torch.zeros(1, device=device) if distributed else
    None` is on the GPU."""
    assert findings(OPTIONAL_TENSOR) == [
        (22, 37, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


TRACED_CONSTANT = dedent(
    """\
    import torch


    def load(model, device="cuda"):
        device_holder = torch.jit.trace(lambda: torch.ones([]).to(torch.device(device)), example_inputs=[])
        device_node = [n for n in device_holder.graph.findAllNodes("prim::Constant") if "Device" in repr(n)][-1]
        mask = torch.ones(8).to(device)
        return model, device_node, mask
    """
)


def test_a_move_traced_for_a_device_constant_is_no_copy() -> None:
    """CLIP's device patch: `torch.jit.trace(lambda: torch.ones([]).to(torch.device(device)), ...)` is
    traced once to read a device constant off the graph; an ordinary `torch.ones(8).to(device)` is
    still reported (as information: `load` runs once, to set up)."""
    assert findings(TRACED_CONSTANT) == [
        (
            7,
            25,
            "AL302",
            "information",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per call of `load` (set-up, not a step): a small cost, not paid every step",
        )
    ]


SEEDED_DRAW = dedent(
    """\
    import torch


    def test_kernel(linear):
        device = torch.device("cuda:0")
        torch.manual_seed(42)
        inp = torch.rand(1, 4096, dtype=torch.float16).to(device)
        bias = torch.zeros(3).to(device)
        return linear.to(device)(inp) + bias
    """
)


def test_a_seeded_random_draw_gets_no_rewrite_to_the_device() -> None:
    """After `torch.manual_seed(42)`, `torch.rand(...).to(device)` is information, with no quick fix:
    the GPU's generator gives other numbers for the same seed (a test comparing with stored values
    would break), so the test's copy keeps its numbers on purpose; `torch.zeros(3).to(device)` keeps
    its fix, and so does an unseeded draw. Both are a test's set-up, paid once per test: information."""
    once = "; it runs once per test (`test_kernel`): a small cost, not paid every step"
    assert findings(SEEDED_DRAW) == [
        (
            7,
            51,
            "AL302",
            "information",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there "
            "with `device=` (the generators are seeded above: drawn there, the numbers differ from "
            "the CPU's)" + once,
        ),
        (
            8,
            26,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`"
            + once,
        ),
    ]
    fixes = [f.fix.edits[0].new_text if f.fix is not None else None for f in lint_source_strict(SEEDED_DRAW)]
    assert fixes == [None, "torch.zeros(3, device=device)"]
    unseeded = SEEDED_DRAW.replace("    torch.manual_seed(42)\n", "")
    fixes = [f.fix.edits[0].new_text if f.fix is not None else None for f in lint_source_strict(unseeded)]
    assert fixes == ["torch.rand(1, 4096, dtype=torch.float16, device=device)", "torch.zeros(3, device=device)"]
    # seeded outside a test (a training script), the copy is a warning, still without a rewrite
    script = SEEDED_DRAW.replace("def test_kernel(", "def make_batch(")
    assert [(f.severity, f.fix is not None) for f in lint_source_strict(script)] == [
        ("warning", False),
        ("warning", True),
    ]
    # a seed set in another function (a `__main__` block running the tests) says nothing of this draw
    elsewhere = (
        script.replace("    torch.manual_seed(42)\n", "") + "\n\nif __name__ == '__main__':\n    torch.manual_seed(1)\n"
    )
    assert [(f.severity, f.fix is not None) for f in lint_source_strict(elsewhere)] == [
        ("warning", True),
        ("warning", True),
    ]
    # a generator of its own seeds only the draws it is handed: the default draw is not seeded
    own = script.replace("torch.manual_seed(42)", "g = torch.Generator().manual_seed(42)")
    assert [(f.severity, f.fix is not None) for f in lint_source_strict(own)] == [("warning", True), ("warning", True)]


EVENT_TIMING = dedent(
    """\
    import torch


    def bench(linear, sizes, device):
        results = {}
        for n in sizes:
            inp = torch.rand(1, n, 4096, device=device)
            latencies = []
            torch.cuda.synchronize()
            for _ in range(60):
                start_event = torch.cuda.Event(enable_timing=True)
                end_event = torch.cuda.Event(enable_timing=True)
                start_event.record()
                linear(inp)
                end_event.record()
                end_event.synchronize()
                latencies.append(start_event.elapsed_time(end_event))
            results[n] = latencies
        for _ in range(10):
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            linear(inp)
        for _ in range(10):
            linear(inp)
            torch.cuda.synchronize()
        return results
    """
)


def test_a_synchronize_next_to_an_event_record_bounds_a_timed_region() -> None:
    """A synchronize right before a loop that records a start event at its top, or two lines before
    `start.record()`, bounds a timed region (silent); one in an untimed loop of 10 is information."""
    assert findings(EVENT_TIMING) == [
        (
            26,
            8,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work 10 times (the "
            "loop runs 10 times)",
        )
    ]


MOVED_LAYER = dedent(
    """\
    import torch

    CPU = torch.device("cpu")


    def quantize_layers(layers, make_gptq, move_to_device, inputs, dev):
        for i in range(len(layers)):
            layer = move_to_device(layers[i], dev)
            gptq = {name: make_gptq(m) for name, m in layer.named_children()}
            for name in gptq:
                gptq[name].fasterquant()
            inputs = [layer(x) for x in inputs]
            layers[i] = move_to_device(layer, CPU)
            torch.cuda.empty_cache()
        return inputs
    """
)


def test_a_loop_that_moves_each_layer_through_a_helper_is_a_layer_pass() -> None:
    """`layers[i] = move_to_device(layer, CPU)` in the loop's own body: each iteration is a whole layer's
    work, so its `empty_cache()` is once per layer."""
    assert findings(MOVED_LAYER) == [
        (
            14,
            8,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; it runs once per layer of a layer-by-layer pass "
            "(`move_to_device(...)` loads, quantizes or offloads each)",
        )
    ]


NON_BLOCKING_FLAG = dedent(
    """\
    import torch


    def to_host(results, loader):
        out = []
        for result in results:
            boxes = result["boxes"].cuda()
            is_cuda = boxes.is_cuda
            boxes_cpu = boxes.float().to("cpu", non_blocking=is_cuda)
            if is_cuda:
                torch.cuda.current_stream(boxes.device).synchronize()
            out.append(boxes_cpu.numpy())
        for batch in loader:
            boxes = batch["boxes"].cuda()
            boxes_cpu = boxes.float().to("cpu", non_blocking=False)
            torch.cuda.synchronize()
            out.append(boxes_cpu.numpy())
        return out
    """
)


def test_a_synchronize_after_a_copy_with_a_non_blocking_flag_completes_it() -> None:
    """`non_blocking=is_cuda`, then `synchronize()`: the wait that makes the copy safe to read
    (information); after `non_blocking=False` it completes nothing."""
    assert findings(NON_BLOCKING_FLAG) == [
        (
            11,
            12,
            "AL101",
            "information",
            "`torch.cuda.current_stream(boxes.device).synchronize()` inside a loop: the host waits for "
            "all GPU work on every iteration, on purpose: it completes the `non_blocking` copy of line "
            "9 before the host uses its buffers",
        ),
        (
            16,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
    ]


BROADCAST_FLAG = dedent(
    """\
    import torch
    import torch.distributed as dist


    def follow(closure, device):
        signal = torch.zeros(1, device=device)
        while True:
            dist.broadcast(signal, src=0)
            if signal.item() == 0:
                break
            closure()
    """
)


def test_a_flag_broadcast_from_rank_zero_is_read_on_purpose() -> None:
    """`dist.broadcast(signal, src=0)`, then `if signal.item() == 0: break`: the ranks follow rank 0's
    decision, which the host needs (information), as an all-reduced stop flag."""
    assert findings(BROADCAST_FLAG) == [
        (
            9,
            18,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, as a flag shared "
            "across ranks (all-reduced or broadcast) to stop together (every rank needs it on the host)",
        )
    ]


BENCHMARK_CONFIGURATIONS = dedent(
    """\
    import torch

    device = torch.device("cuda:0")
    linear = torch.nn.Linear(4096, 4096).half().to(device)
    seqlens = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]

    for query_length in seqlens:
        inp = torch.rand(1, query_length, 4096, dtype=torch.float16, device=device)
        torch.cuda.empty_cache()
        res = linear(inp)
        latencies = []
        for _ in range(60):
            start_event = torch.cuda.Event(enable_timing=True)
            end_event = torch.cuda.Event(enable_timing=True)
            start_event.record()
            res = linear(inp)
            end_event.record()
            end_event.synchronize()
            latencies.append(start_event.elapsed_time(end_event))

    for step in range(1000):
        res = linear(inp)
        torch.cuda.empty_cache()
    """
)


def test_the_set_up_of_each_timed_configuration_runs_once_per_configuration() -> None:
    """A benchmark's loop over input sizes whose body times an inner loop (`start_event.record()` ...):
    its `empty_cache()` runs once per configuration (information); in an untimed loop of 1,000
    forwards it is a warning."""
    assert findings(BENCHMARK_CONFIGURATIONS) == [
        (
            9,
            4,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; it runs once per configuration of a benchmark (each iteration times "
            "the loop on line 12)",
        ),
        (
            23,
            4,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
    ]


TEST_CASE_HELPER = dedent(
    """\
    from unittest import TestCase

    import torch
    from torch.optim import Adam


    class TestPeftConversion(TestCase):
        def check_model_trainable(self, model, batch, steps):
            batch = {k: v.to(model.device) for k, v in batch.items()}
            optimizer = Adam(model.parameters(), lr=1e-4)
            losses = []
            for _ in range(steps):
                optimizer.zero_grad()
                loss = model(**batch).loss
                losses.append(loss.item())
                loss.backward()
                optimizer.step()
            self.assertTrue(losses[0] > losses[-1])

        def test_lora_conversion(self):
            self.check_model_trainable(torch.nn.Linear(2, 2), {}, 30)


    class Trainer:
        def train(self, model, batch, steps):
            optimizer = Adam(model.parameters(), lr=1e-4)
            for _ in range(steps):
                loss = model(**batch).loss
                print(loss.item())
                loss.backward()
                optimizer.step()
    """
)


def test_a_helper_method_of_a_test_case_is_a_test() -> None:
    """`check_model_trainable`, a helper that a `unittest.TestCase`'s test calls, runs a short training
    loop to check the loss falls: a test (information); the same loop in a trainer is a warning."""
    assert findings(TEST_CASE_HELPER) == [
        (
            15,
            31,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in the "
            "test `check_model_trainable` (a test, not a training step)",
        ),
        (29, 23, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


DEVICE_SCALARS = dedent(
    """\
    import torch


    def boxes_to_masks(boxes, image_size, device="cuda"):
        masks = torch.zeros((len(boxes), *image_size), device=device)
        for im_idx, im_boxes in enumerate(boxes):
            im_boxes = im_boxes.to(device)
            for box in im_boxes:
                x_1, y_1, x_2, y_2 = box.int()
                masks[im_idx, y_1 : y_2 + 1, x_1 : x_2 + 1] = 1
            masks[im_idx, : image_size[0] // 2] *= 0.5
        return masks


    def corners(model, images, device):
        out = []
        for image in images:
            x = model(image.to(device)).argmax(-1)
            out.append(torch.tensor([torch.min(x), torch.max(x)]))
            out.append(torch.tensor([1, 2, 3]))
            out.append(torch.bincount(x.flatten(), minlength=10))
        return out


    def actions(batches, device):
        return [torch.tensor([b["action"] for b in batch], device=device) for batch in batches]


    def empty_masks(boxes):
        return torch.zeros((len(boxes), 4)).to(boxes[0].device)
    """
)


def test_device_scalars_read_as_ints_and_lists_of_device_tensors() -> None:
    """A CUDA tensor as a slice bound (`y_1` unpacked from a box on the GPU) is read through `__index__`;
    `torch.tensor([torch.min(x), torch.max(x)])` reads each element; `torch.bincount` reads the
    largest value to size its output; a list built on the device (`device=device`) of a batch's
    fields is taken as host data; `.to(boxes[0].device)` moves to a device."""
    assert findings(DEVICE_SCALARS) == [
        (
            10,
            26,
            "AL100",
            "warning",
            "a CUDA tensor as a slice bound (`y_1`, read as an int) inside a loop: the host waits for "
            "the GPU on every iteration",
        ),
        (
            19,
            19,
            "AL100",
            "warning",
            "`torch.tensor(...)` of CUDA tensors (`torch.min(x)`, one read each) inside a loop: the "
            "host waits for the GPU on every iteration",
        ),
        (
            21,
            19,
            "AL100",
            "warning",
            "`torch.bincount(...)` (its output's shape depends on the data) inside a loop: the host "
            "waits for the GPU on every iteration",
        ),
        (
            30,
            40,
            "AL302",
            "warning",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


DEVICE_QUERIES = dedent(
    """\
    import torch


    class Agent:
        def __init__(self, model, sizes, spec_model=None):
            self.model = model.cuda()
            self.spec_model = spec_model
            self.sizes = sizes

        def warmup(self):
            for n in sorted(self.sizes, reverse=True):
                self.model(torch.zeros(n, 1, dtype=torch.long, device="cuda"))
                torch.cuda.synchronize()

        def finalize(self):
            for target in filter(None, [self.model, self.spec_model]):
                target.finalize()
                torch.cuda.synchronize()

        def search(self, inputs, device):
            peak = 0
            for x in inputs:
                self.model(x.to(device))
                used = torch.cuda.max_memory_allocated(device=device)
                if used > peak:
                    peak = used
            return peak
    """
)


def test_warm_ups_short_filters_and_device_queries_are_no_hot_reads() -> None:
    """A synchronize per batch size in `warmup()` runs once, at start; `filter(None, [model, draft])`
    iterates at most two models; `torch.cuda.max_memory_allocated(device=device)` is a number, not a
    tensor made on the device."""
    assert findings(DEVICE_QUERIES) == [
        (
            13,
            12,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work per item in "
            "`warmup` (once per call, not per training step)",
        ),
        (
            18,
            12,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work 2 times (the loop runs 2 times)",
        ),
    ]


FAILURE_PATHS = dedent(
    """\
    import torch


    def check_controls(images, device):
        out = []
        for img in images:
            t = img.to(device)
            if t.min() < 0:
                msg = f"control image out of range: {t.min()}"
                raise RuntimeError(msg)
            out.append(t)
        return out


    def train(model, loader, optimizer, device):
        for x in loader:
            model(x.to(device)).sum().backward()
            try:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
            except RuntimeError as exc:
                bad = [n for n, p in model.named_parameters() if not torch.isfinite(p.grad).all()]
                raise RuntimeError(f"non-finite gradients: {bad}") from exc
            optimizer.step()
    """
)


def test_reads_on_the_way_to_a_raise_run_once() -> None:
    """`msg = f"... {t.min()}"` in a block that ends in `raise` runs only when the check fails (the
    check itself is still a read per iteration); a comprehension in an `except` clause runs on the
    error path."""
    assert findings(FAILURE_PATHS) == [
        (
            8,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`t.min() < 0`) inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            21,
            65,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`torch.isfinite(p.grad).all()`) inside a loop: the host "
            "waits for the GPU only when the `try` above it raises: an error path",
        ),
    ]


HOST_BRANCHES = dedent(
    """\
    import time

    import torch
    import torch.nn.functional as F


    def rd_conv(x, weights):
        if weights.is_cuda:
            buffer = torch.cuda.FloatTensor(weights.shape[0], 25).fill_(0)
        else:
            buffer = torch.zeros(weights.shape[0], 25).to(weights.device)
        return F.conv2d(x, buffer.view(-1, 1, 5, 5))


    def train_epoch(model, loader, device):
        elapsed = 0.0
        for imgs in loader:
            imgs = imgs.to(device)
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(imgs)
                end.record()
            else:
                started = time.monotonic()
                model(imgs)
                elapsed += time.monotonic() - started
        return elapsed
    """
)


def test_the_branch_taken_off_cuda_copies_and_times_nothing_on_a_gpu() -> None:
    """The `else` of `if weights.is_cuda:` (AL302) and of `if device.type == "cuda":` (AL301, whose
    `if` branch times with events) run where there is no GPU."""
    assert findings(HOST_BRANCHES) == []


COUNTS_AND_IMPORTS = dedent(
    """\
    from importlib import import_module

    import torch

    MB = 2**20


    class ModelCache:
        def __init__(self, device):
            self.device = device
            self.records = {}

        def log_entries(self):
            for record in self.records.values():
                total = record.cached_model.total_bytes()
                print(f"{record.key}: {total / MB:.1f} MB")
                print(f"{record.key}: {record.cached_model.kl_loss()}")


    def input_shape(path, cpu_input: torch.Tensor, device="cuda"):
        shapes = []
        for name in ("a", "b"):
            runtime = import_module(name)
            shapes.append(tuple(int(d) for d in runtime.Interpreter(path).shape))
        return shapes
    """
)


def test_a_models_count_and_an_imported_module_are_no_outputs() -> None:
    """`record.cached_model.total_bytes()` is a count, not the model's output (`kl_loss()` still is);
    `import_module(name)` is importlib's, not a model spelled `*_module`."""
    assert findings(COUNTS_AND_IMPORTS) == [
        (
            17,
            34,
            "AL100",
            "warning",
            "formatting a CUDA tensor (`{record.cached_model.kl_loss()}`) inside a loop: the host "
            "waits for the GPU on every iteration",
        )
    ]


HOST_CASTS = dedent(
    """\
    import torch


    @torch.no_grad()
    def extract(model, loader, device, storage_dtype=torch.float16):
        parts, visible = [], []
        for batch in loader:
            images = batch["images"].to(device)
            present = images.flatten(2).amax(dim=2) > 0
            parts.append(model(images).cpu().to(storage_dtype))
            visible.append((batch["visibility"] * present.cpu()).cpu())
        return torch.cat(parts), torch.cat(visible)
    """
)


def test_copies_cast_to_a_dtype_name_or_copied_again_are_results_kept() -> None:
    """`model(x).cpu().to(storage_dtype)` and `(host * mask.cpu()).cpu()` appended are results kept on
    the host, as `.cpu()` appended is."""
    assert findings(HOST_CASTS) == [
        (
            10,
            35,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results "
            "on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (
            11,
            54,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results "
            "on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
    ]


NESTED_FEW = dedent(
    """\
    import torch


    def relational_loss(student, reliability, same):
        reliability = reliability.to(student.device)
        losses = []
        for part in range(student.shape[1]):
            valid = reliability[:, part] > 0
            for mask in (valid & same, valid & ~same):
                weights = mask.float()
                if weights.sum() > 0:
                    losses.append(weights.mean())
        return losses


    def sweep(run, settings, device):
        for setting in settings:
            for causal in (False, True):
                torch.cuda.empty_cache()
                run(setting, causal, device)
    """
)


def test_a_few_iterations_on_each_row_of_a_tensor_are_per_row() -> None:
    """Two masks per part in `for part in range(student.shape[1])`: 2 reads on every part (warning);
    two settings inside a sweep of settings stay a short loop (information)."""
    assert findings(NESTED_FEW) == [
        (
            11,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`weights.sum() > 0`) inside a loop: the host waits for the "
            "GPU on every iteration (2 times each)",
        ),
        (
            19,
            12,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; it runs 2 times (the loop runs 2 times)",
        ),
    ]


CPU_LOADED_MODEL = dedent(
    """\
    import matgl
    import torch


    def predict(model_name, structures):
        model = matgl.load_model(model_name)
        for structure in structures:
            value = model.predict_structure(structure)
            print(f"prediction: {value} eV/atom")


    def predict_on_gpu(model_name, structures):
        model = matgl.load_model(model_name).to("cuda")
        for structure in structures:
            value = model.predict_structure(structure)
            print(f"prediction: {value} eV/atom")
    """
)


def test_a_model_loaded_in_a_function_that_names_no_device_runs_on_the_cpu() -> None:
    """`model = matgl.load_model(name)` in a command-line helper that names no device: its
    predictions are on the CPU; the same model moved `.to("cuda")` is read per structure."""
    assert findings(CPU_LOADED_MODEL) == [
        (
            16,
            28,
            "AL100",
            "warning",
            "formatting a CUDA tensor (`{value}`) inside a loop: the host waits for the GPU on every iteration",
        )
    ]


EAGER_QUANTIZED = dedent(
    """\
    import torch
    from torch.nn.quantized import functional as qF


    class QuantizedLinear(torch.nn.Module):
        def scale_and_zero_point(self, x):
            zero_point = torch.zeros(1).to(x.device)
            return x.abs().max() / 127, zero_point

        def forward(self, x):
            scale, zero_point = self.scale_and_zero_point(x)
            q = torch.quantize_per_tensor(x, float(scale), int(zero_point), torch.quint8)
            return qF.linear(q, self.qweight, None, scale=0.1, zero_point=128)

        def to_gpu(self):
            return torch.zeros(4).to("cuda")
    """
)


def test_a_move_beside_cpu_only_quantized_kernels_copies_nothing() -> None:
    """In a file that runs `torch.nn.quantized` kernels (CPU only), `torch.zeros(1).to(x.device)` copies
    nothing; a move to `"cuda"` is still reported."""
    assert findings(EAGER_QUANTIZED) == [
        (
            16,
            30,
            "AL302",
            "warning",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        )
    ]


GRADIENT_HOOK = dedent(
    """\
    import torch


    class NanException(Exception):
        pass


    def raise_if_nan(t):
        if torch.isnan(t):
            raise NanException


    def train(model, loader, optimizer, device):
        for x in loader:
            loss = model(x.to(device)).mean()
            loss.register_hook(raise_if_nan)
            loss.backward()
            optimizer.step()
    """
)


def test_a_function_registered_as_a_gradient_hook_in_a_training_loop_runs_every_step() -> None:
    """`loss.register_hook(raise_if_nan)` in the training loop: backward runs the hook on every step,
    so its NaN check waits for the GPU per step, as a call in the loop would."""
    assert findings(GRADIENT_HOOK) == [
        (
            9,
            7,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(t)`) in `raise_if_nan`, which `train` "
            "registers in a loop as a gradient hook (run by every backward): the host waits for the "
            "GPU on every iteration",
        )
    ]


NO_LONGER_IMPROVING = dedent(
    """\
    import torch


    def parameter_search(x, candidate, iters=1000):
        best_loss = torch.tensor(float("inf"), device=x.device)
        for i in range(iters):
            loss = torch.abs(torch.round(x / candidate) * candidate - x).mean()
            if loss >= best_loss:
                break
            best_loss = torch.min(loss, best_loss)
            candidate = candidate * 1.01
        return candidate


    def sinkhorn(cost, iters, tol):
        u = torch.ones(cost.shape[0], device=cost.device)
        for i in range(iters):
            u_new = 1.0 / (cost @ (1.0 / (cost.T @ u)))
            if (u_new - u).abs().max() < tol:
                break
            u = u_new
        return u
    """
)


def test_a_search_that_stops_when_it_no_longer_beats_its_best_needs_the_value() -> None:
    """`if loss >= best_loss: break` ends a numerical search once it stops improving: information, as the
    `else: break` form; a tolerance test in a `for` loop (`< tol`, a Sinkhorn step) stays a warning."""
    assert findings(NO_LONGER_IMPROVING) == [
        (
            8,
            11,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`loss >= best_loss`) inside a loop: the host waits for the "
            "GPU on every iteration, as the test that ends the loop (a convergence check needs the "
            "value on the host)",
        ),
        (
            19,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`(u_new - u).abs().max() < tol`) inside a loop: the host "
            "waits for the GPU on every iteration",
        ),
    ]


FILE_MODULE_CLASS = dedent(
    """\
    import torch


    class LowRank(torch.nn.Module):
        def __init__(self, n, r):
            super().__init__()
            self.l1 = torch.nn.Linear(n, r, bias=False)


    def corrections(layers, rank):
        out = []
        for layer in layers:
            cm = LowRank(layer.weight.shape[1], rank).to(device=layer.weight.device)
            cm = cm.cpu()
            out.append(cm)
        return out
    """
)


def test_a_module_of_a_class_of_the_file_moved_to_the_cpu_reads_nothing() -> None:
    """`cm = LowRank(n, r).to(device)`, then `cm = cm.cpu()`: `LowRank` subclasses `torch.nn.Module` in this
    file, so `.cpu()` moves parameters and reads nothing."""
    assert findings(FILE_MODULE_CLASS) == []


EARLY_RETURN_THROTTLE = dedent(
    """\
    import torch


    class OrthogonalityMonitor:
        def __init__(self, log_interval=50):
            self.log_interval = log_interval

        def on_step_end(self, state):
            step = state["step"]
            if step % self.log_interval != 0:
                return
            worst = 0.0
            for name, param in state["model"].named_parameters():
                eye = torch.eye(param.shape[0], device=param.device)
                worst = max(worst, (param @ param.T - eye).abs().max().item())
            state["ortho"] = worst
    """
)


def test_an_early_return_unless_throttled_makes_the_loop_after_it_rare() -> None:
    """`if step % self.log_interval != 0: return` before the loop: the reads after it run on one call in
    fifty (information)."""
    assert findings(EARLY_RETURN_THROTTLE) == [
        (
            15,
            67,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on calls that pass `if step % "
            "self.log_interval != 0:` above it",
        )
    ]


NUMBER_SUMS = dedent(
    """\
    import torch

    from .train import train_model, validate_model


    def tune(layer, inputs, targets, iters, device, n):
        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        best_loss = float("inf")
        for i in range(iters):
            total_loss = 0
            for x, y in zip(inputs, targets):
                loss = torch.nn.functional.mse_loss(layer(x.to(device)), y.to(device))
                total_loss += loss.item() / n
                loss.backward()
            optimizer.step()
            if total_loss < best_loss:
                best_loss = total_loss
        return best_loss


    def main(model, train_set, valid_set, criterion, optimizer, device, epochs):
        for epoch in range(epochs):
            train_loss = train_model(epoch, train_set, model, criterion, optimizer, device=device)
            valid_loss = validate_model(epoch, valid_set, model, criterion, device=device)
            print(f"epoch {epoch}: train={train_loss:.4f} valid={valid_loss:.4f}")
    """
)


def test_sums_of_reads_and_epoch_functions_return_numbers() -> None:
    """`total_loss += loss.item() / n` holds a number, so `total_loss < best_loss` reads nothing; the loss
    of a whole epoch from `train_model(...)` / `validate_model(...)` comes back as a float."""
    assert findings(NUMBER_SUMS) == [
        (13, 31, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


HANDED_OUT = dedent(
    """\
    import torch


    def preprocess(batch, device):
        for k in ["img", "cls", "bboxes"]:
            batch[k] = batch[k].to(device)
        return batch


    def stream_predictions(loader, model, device, streamer):
        ppls = []
        for batch in loader:
            batch = preprocess(batch, device)
            tokens = model(batch["img"]).argmax(-1)
            streamer.put(tokens.cpu())
            ppls += tokens.float().mean(-1).tolist()
        return ppls


    def ordered(g_idx, group_size):
        for i in range(0, g_idx.numel(), group_size):
            if len(torch.unique(g_idx[i : i + group_size])) != 1:
                return False
        return True
    """
)


def test_copies_handed_out_or_extended_are_results_and_dict_entries_no_tensors() -> None:
    """`batch[k] = batch[k].to(device)` for `k` in a list of names writes a dict's entry, not a CPU
    tensor; `streamer.put(t.cpu())` and `ppls += t.tolist()` keep results; a walk over `x.numel()` in
    chunks reads once per chunk."""
    assert findings(HANDED_OUT) == [
        (
            15,
            28,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results "
            "on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (
            16,
            40,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting "
            "results on the host (`outputs.append(t.tolist())`: one copy per batch, as intended)",
        ),
        (
            22,
            15,
            "AL100",
            "information",
            "`torch.unique(...)` (its output's shape depends on the data) inside a loop: the host "
            "waits for the GPU once per chunk of `group_size` rows of `g_idx`",
        ),
    ]


NONE_DEVICE = dedent(
    """\
    import torch
    from torch import nn


    class RotaryEmbedding(nn.Module):
        def __init__(self, dim, base=10000, device=None):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float().to(device) / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)


    class Attention(nn.Module):
        def __init__(self, head_dim):
            super().__init__()
            self.rotary_emb = RotaryEmbedding(head_dim, base=500000)


    def compress(layers, compressors, device):
        for layer, layer_compressor in zip(layers, compressors):
            layer_compressor.compress(layer.to(device))
            torch.cuda.empty_cache()


    def noise(n, device=None):
        return torch.randn(n).to(device)


    def caller(n, device):
        return noise(n, device=device)
    """
)


def test_a_device_parameter_no_call_gives_moves_nothing() -> None:
    """`def __init__(self, dim, base=10000, device=None)` built as `RotaryEmbedding(head_dim, ...)` with
    no device: `.to(device)` is `.to(None)`, no copy; `noise(n, device=None)` called with a device
    copies; `layer_compressor.compress(...)` per layer makes a layer-by-layer pass."""
    assert findings(NONE_DEVICE) == [
        (
            21,
            8,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration "
            "must allocate again; it runs once per layer of a layer-by-layer pass "
            "(`layer_compressor.compress(...)` loads, quantizes or offloads each)",
        ),
        (
            25,
            26,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]

    # a public function no call in the file builds (callers elsewhere hand it a device): reported
    alone = "import torch\n\n\ndef perplexity(texts, device=None):\n    return torch.ones(4).to(device)\n"
    assert [(f.line, f.code) for f in lint_source_strict(alone)] == [(5, "AL302")]


DEVICE_MASKS = dedent(
    """\
    import torch


    def search(x, candidate, steps):
        internal = candidate.clone()
        for step in range(steps):
            candidate = candidate * 1.01
            internal[torch.isnan(candidate)] = 0
            kept = internal[torch.isnan(candidate.cuda())]
            print(kept.shape)


    def triplets(embeddings, pids, device):
        pids = pids.to(device)
        batch_indices = torch.arange(len(pids), device=device)
        for anchor in range(len(pids)):
            positives = batch_indices[(pids == pids[anchor]) & (batch_indices != anchor)]
            print(positives)
    """
)


def test_a_mask_on_the_gpu_or_combined_with_and_makes_a_masked_read() -> None:
    """`internal[torch.isnan(candidate.cuda())]`: a mask on the GPU can index only a tensor there, so the
    read waits whatever the lint knows of `internal`; `x[(pids == p) & (idx != a)]` is a mask made
    of two; `internal[mask] = 0` (a number) stays a masked fill."""
    assert findings(DEVICE_MASKS) == [
        (
            9,
            15,
            "AL100",
            "warning",
            "`internal[torch.isnan(candidate.cuda())]` (a boolean mask: the result's shape depends on "
            "the data) inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            17,
            20,
            "AL100",
            "warning",
            "`batch_indices[(pids == pids[anchor]) ...` (a boolean mask: the result's shape depends on "
            "the data) inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            18,
            8,
            "AL100",
            "warning",
            "printing a CUDA tensor (`positives`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]

    # a masked read that produces a copy the loop keeps is reported once, as that copy (information)
    kept = dedent(
        """\
        import torch


        def calibrate(model, loader, device):
            pairs = []
            for img, depth in loader:
                pred, gt = model(img.to(device)), depth.to(device)
                for pi, gi in zip(pred, gt):
                    valid = (gi > 1e-3) & (pi > 1e-3)
                    pairs.append(torch.log(pi[valid]).cpu().numpy())
            return pairs
        """
    )
    assert [(f.line, f.severity, f.message.split(" inside")[0]) for f in lint_source_strict(kept)] == [
        (10, "information", "`.cpu()`")
    ]
