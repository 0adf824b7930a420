"""Classes of error found in the forty-seventh review (tests/lint/corpus_real/WHOLE_TREES.md), each
with a small program and the exact findings: line, column (0-based), code, severity and message.
Each program is also linted without the prefilter (every definition parsed), which must give the
same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

OWN_LOOP_VARIABLE = dedent(
    """\
    import torch


    def shape_str(x):
        return "x".join([str(x) for x in x.shape])


    def train(model, loader):
        for x in loader:
            loss = model(x.cuda())
            print([float(v) for v in loss], shape_str(loss))
            print(loss.item())
    """
)


def test_a_comprehension_that_names_its_variable_in_its_own_iterable_does_not_stop_the_rule() -> None:
    """`[str(x) for x in x.shape]` binds `x` from an iterable read through the name it binds
    (VideoCrafter's `lvdm/common.py`, tutel's `spmdx.py`): following the loop variable back to its
    iterable must end, or the rule fails on the file and reports nothing in it."""
    assert findings(OWN_LOOP_VARIABLE) == [
        (
            11,
            15,
            "AL100",
            "warning",
            "`float()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            12,
            19,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


NESTED_SHORT_LOOP = dedent(
    """\
    import torch


    def test(model, device, test_loader):
        correct = {1: 0, 2: 0, 8: 0}
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                for k in correct:
                    output = model(data, top_k=k)
                    pred = output.argmax(dim=1, keepdim=True)
                    correct[k] += pred.eq(target.view_as(pred)).sum().item()
        return correct
    """
)


def test_a_few_passes_inside_a_loop_over_a_loader_are_per_batch() -> None:
    """`for k in correct:` (three keys) inside `for data, target in test_loader:` runs three model
    calls and three reads per test batch (tutel's MoE examples): a warning, "3 times each", not
    "3 times" in all."""
    assert findings(NESTED_SHORT_LOOP) == [
        (
            12,
            66,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every iteration (3 times each)",
        )
    ]


ZIPPED_LOADER_PART = dedent(
    """\
    import torch
    from skorch.utils import to_tensor


    def val(model, data_loader, device):
        result = []
        for image, text, ref_ids in data_loader:
            image = image.to(device)
            loss = model(image).sum()
            model.zero_grad()
            loss.backward()
            gradcam = model.cam()
            for r_id, cam in zip(ref_ids, gradcam):
                result.append({"ref_id": r_id.item(), "pred": cam})
            for i, (r_id, cam) in enumerate(zip(ref_ids, gradcam)):
                result.append({"ref_id": r_id.item(), "score": cam.sum().item()})
        return result


    def signature(columns):
        out = {}
        for key, val in columns.items():
            tensor = to_tensor(val, device="cpu")
            out[key] = len(torch.unique(tensor))
        return out
    """
)


def test_an_element_zipped_from_an_unmoved_loader_part_and_a_cpu_device_keyword_stay_on_the_host() -> None:
    """`for r_id, cam in zip(ref_ids, gradcam)`: `r_id` is an element of `ref_ids`, the part of the
    loader's batch the loop leaves on the host (ALBEF's grounding evaluation), also through
    `enumerate(zip(...))`; `cam` is on the device. `to_tensor(val, device="cpu")` asks for a CPU
    tensor (skorch): `torch.unique` of it waits for nothing."""
    assert findings(ZIPPED_LOADER_PART) == [
        (16, 69, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


STRING_PRINT = dedent(
    """\
    import torch


    def recall(model, loader):
        for x, sizes in loader:
            hits = model(x.cuda())
            for i, metric in enumerate(["small", "medium", "large"]):
                part = hits[sizes == i]
                print(metric + " recall: %.2f" % (torch.sum(part) * 100))
    """
)


def test_printing_text_built_by_formatting_is_the_formattings_finding_only() -> None:
    """`print(metric + " recall: %.2f" % (torch.sum(part) * 100))` prints a string: the read is the
    `%` formatting, reported once (yolact's `bbox_recall.py` had two findings for it)."""
    assert findings(STRING_PRINT) == [
        (
            8,
            19,
            "AL100",
            "warning",
            "`hits[sizes == i]` (a boolean mask: the result's shape depends on the data) inside a loop: the "
            "host waits for the GPU on every iteration (3 times each)",
        ),
        (
            9,
            27,
            "AL100",
            "warning",
            "formatting a CUDA tensor (`% (torch.sum(part) * 100)`) inside a loop: the host waits for the "
            "GPU on every iteration (3 times each)",
        ),
    ]


DETACHED_COPIES = dedent(
    """\
    import torch


    def train(model, loader, optimizer):
        for x, targets in loader:
            preds = model(x.cuda())
            ret = {}
            for task_id, pred in enumerate(preds):
                hm_loss = (pred - targets[task_id]).abs().mean()
                box_loss = (pred * targets[task_id]).sum(0)
                ret.update({"hm_loss": hm_loss.detach().cpu(), "elem": box_loss.detach().cpu()})
            optimizer.step()
    """
)


def test_a_second_detached_copy_in_one_statement_adds_no_wait() -> None:
    """`{"hm_loss": hm_loss.detach().cpu(), "elem": box_loss.detach().cpu()}`: the first copy
    waited for the queue; the second copies a value computed before it (`.detach()` queues no
    work): information, as for `a.cpu() / b.cpu()` (CenterPoint's head)."""
    assert findings(DETACHED_COPIES) == [
        (11, 52, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (
            11,
            85,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, but an earlier read of "
            "this statement (line 11) already waited: no new wait",
        ),
    ]


MODEL_METHOD = dedent(
    """\
    import torch


    class VoxelHead(torch.nn.Module):
        def __init__(self, voxel_size, grid_size, batch_size):
            super().__init__()
            self.voxel_size = torch.Tensor(voxel_size).cuda()
            self.grid_size = torch.Tensor(grid_size).cuda()
            self.buffer = torch.Tensor(batch_size).cuda()

        def forward(self, points, calibs, batch_size):
            points = points.cuda()
            out = []
            for b in range(batch_size):
                pts = points[b]
                uv, _ = calibs[b].lidar_to_img(pts.cpu().numpy())
                uv_int = torch.Tensor(uv).to(pts.device).long()
                out.append(pts[:, uv_int[:, 0]])
            return out
    """
)


def test_point_cloud_extents_are_data_and_a_models_own_numpy_pass_is_per_step() -> None:
    """`torch.Tensor(voxel_size)` / `torch.Tensor(grid_size)` copy vectors of values (OpenPCDet):
    not sizes, so no fix to `torch.empty(...)`, which would raise; `torch.Tensor(batch_size)` is
    a size. A per-sample `.cpu().numpy()` in a model's own `forward` is paid on every training
    step: a warning, not "an inference pass's result"."""
    assert findings(MODEL_METHOD) == [
        (
            9,
            47,
            "AL302",
            "information",
            "`torch.Tensor(...)` is created on the CPU and then copied to the device: create it there with "
            "`torch.empty(..., device=...)` (a legacy constructor takes no CUDA `device=`); it runs once "
            "per call of `__init__` (set-up, not a step): a small cost, not paid every step",
        ),
        (16, 47, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]


SCRIPT_ONCE = dedent(
    """\
    import torch

    _SIZES = (
        (1024, 8),
        (2048, 8),
        (4096, 8),
        (8192, 8),
        (16384, 8),
        (32768, 8),
        (65536, 8),
        (131072, 8),
        (262144, 8),
        (524288, 8),
        (1048576, 8),
    )


    def benchmark(n, d):
        x = torch.randn((n, d)).cuda().half()
        return x.sum()


    if __name__ == "__main__":
        y = {"a": torch.randn(8, device="cuda"), "b": torch.randn(8, device="cuda")}
        for k, a in y.items():
            print(k + ": ", a.size(), torch.sum(a))
        for args in _SIZES:
            benchmark(*args)
    """
)


def test_a_scripts_sweep_of_written_configurations_and_a_dict_walk_run_once() -> None:
    """A benchmark function called only from `for args in _SIZES:` at module level, `_SIZES` a
    tuple written out (megablocks' all-to-all benchmark, eleven sizes): once per configuration
    of the run. `for k, a in y.items(): print(torch.sum(a))` in `__main__` (yolact's debug
    block): once per run."""
    assert findings(SCRIPT_ONCE) == [
        (
            19,
            28,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `benchmark`, which this file calls only from a short loop of "
            "module-level code: a small cost, not paid every step",
        ),
        (
            26,
            8,
            "AL100",
            "information",
            "printing a CUDA tensor (`torch.sum(a)`) inside a loop: the host waits for the GPU per item, "
            "once per run (module-level code runs once)",
        ),
    ]


TRAINING_LOOP_PAIRS = dedent(
    """\
    import torch


    def train(model, loader, optimizer, accelerator):
        for step, batch in enumerate(loader):
            loss = model(batch)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


    def infer(model, chunks):
        outs = []
        for chunk in chunks:
            outs.append(model(chunk.cuda()))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return outs


    class Trainer:
        def run_step(self, data):
            loss_dict = self.model(data)
            losses = sum(loss_dict.values())
            losses.backward()
            self.write_metrics(loss_dict)
            self.optimizer.step()

        @staticmethod
        def write_metrics(loss_dict):
            metrics = {k: v.detach().cpu().item() for k, v in loss_dict.items()}
            print(metrics)

        def train(self, loader):
            for data in loader:
                self.run_step(data)
    """
)


def test_a_synchronize_before_empty_cache_in_a_training_loop_and_a_loss_dict_copy_are_per_step() -> None:
    """A `synchronize()` then `empty_cache()` after every training step (PixArt's LCM script) is a
    wait per step: a warning (a loop that trains nothing keeps the chunked-loop reason).
    `{k: v.detach().cpu().item() for k, v in loss_dict.items()}` in a `write_metrics` that
    each step calls (OneFormer) logs losses: a warning, not "collecting results"."""
    assert findings(TRAINING_LOOP_PAIRS) == [
        (
            10,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (
            11,
            8,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (
            18,
            8,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration, "
            "on purpose: `empty_cache()` right after it returns the memory of the finished work (a chunked "
            "loop that bounds its peak memory)",
        ),
        (
            19,
            8,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (33, 33, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]


SAMPLED_AND_SCALED = dedent(
    """\
    import torch
    import torch.nn.functional as F
    from torch import nn


    class ALBEF(nn.Module):
        def __init__(self, embed_dim):
            super().__init__()
            self.vision_proj = nn.Linear(768, embed_dim)

        def forward(self, image, text_feat):
            image_embeds = self.visual_encoder(image.to(text_feat.device))
            image_feat = F.normalize(self.vision_proj(image_embeds[:, 0, :]), dim=-1)
            with torch.no_grad():
                weights = F.softmax(image_feat @ text_feat.t(), dim=1)
            negs = []
            for b in range(image.size(0)):
                neg_idx = torch.multinomial(weights[b], 1).item()
                negs.append(image_embeds[neg_idx])
            noise = [torch.normal(0.0, 1.0, size=(4,)).item() for _ in range(3)]
            return torch.stack(negs), noise


    def train_one_epoch(model, optimizer, model_func, dataloader_iter, total_it_each_epoch, meter):
        scaler = torch.cuda.amp.GradScaler(enabled=False)
        for cur_it in range(total_it_each_epoch):
            batch = next(dataloader_iter)
            optimizer.zero_grad()
            loss, tb_dict, disp_dict = model_func(model, batch)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            meter.update(loss.item())
    """
)


def test_draws_from_a_device_tensor_and_a_scaled_loss_are_on_the_device() -> None:
    """`torch.multinomial(weights[b], 1)` draws where `weights` is (ALBEF's hard-negative mining, a
    read per sample of every step; it was taken for a CPU factory); `torch.normal(0.0, 1.0,
    size=...)` is one. `scaler.scale(loss).backward()` makes `loss` the step's loss however it was
    unpacked (`loss, tb_dict, disp_dict = model_func(model, batch)`, OpenPCDet), and
    `range(total_it_each_epoch)` walks the iterations of an epoch, not epochs."""
    assert findings(SAMPLED_AND_SCALED) == [
        (18, 55, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (33, 26, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]
