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


GATHERED = dedent(
    """\
    import torch


    def train(model, loader, optimizer, accelerator, diffusion):
        for step, batch in enumerate(loader):
            with accelerator.accumulate(model):
                optimizer.zero_grad()
                loss_term = diffusion.training_losses(model, batch.to(accelerator.device))
                loss = loss_term["loss"].mean()
                accelerator.backward(loss)
                grad_norm = accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            logs = {"loss": accelerator.gather(loss).mean().item()}
            logs.update(grad_norm=accelerator.gather(grad_norm).mean().item())
            index = torch.arange(4).view(2, 2)
            picked = index.gather(1, torch.zeros(2, 1, dtype=torch.long))
            print(logs, picked.sum().item())
    """
)


def test_what_a_distributed_framework_gathers_is_where_the_tensor_was() -> None:
    """`accelerator.gather(loss).mean().item()` after every step (PixArt's seven training scripts:
    14 reads a step, none reported) reads the loss of every rank where the loss is, on the device;
    a tensor's own `index.gather(1, ...)` of a CPU tensor stays where it is."""
    assert findings(GATHERED) == [
        (13, 56, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (14, 67, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


STATIC_AND_RANK_ZERO = dedent(
    """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from torch.utils.tensorboard import SummaryWriter


    class DiT(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.freqs_cis = DiT.precompute_freqs_cis(dim, 4096)

        @staticmethod
        def precompute_freqs_cis(dim, end, theta=10000.0):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float().cuda() / dim))
            return torch.outer(torch.arange(end, device=freqs.device), freqs)

        @staticmethod
        def noise_like(x):
            return torch.randn(x.shape).to(x.device)

        def forward(self, x):
            return x + DiT.noise_like(x)


    def train(model, loader, optimizer, rank, device, target_names):
        if rank == 0:
            tb_logger = SummaryWriter("runs")
        else:
            tb_logger = None
        for step, batch in enumerate(loader):
            loss_dict = model(batch)
            loss = sum(loss_dict.values())
            loss.backward()
            optimizer.step()
            if tb_logger is not None:
                for key, value in loss_dict.items():
                    tb_logger.add_scalar(key, value.mean(), step)


    def evaluate(model, loader: DataLoader, target_names, writer=None):
        for step, batch in enumerate(loader):
            for target_name in target_names:
                batch[target_name] = batch[target_name].squeeze().to("cuda")
            out = model(batch)
            if writer is not None:
                writer.add_scalar("out", out.mean(), step)
    """
)


def test_static_methods_called_by_class_name_a_rank_zero_logger_and_keyed_stores() -> None:
    """`DiT.precompute_freqs_cis(...)` called only from `__init__` runs once per model (Lumina's
    `FlagDiT`); `DiT.noise_like(x)` from `forward` runs every step. `tb_logger = SummaryWriter(...)`
    made by the training function on rank 0 logs on every step there: no throttle (a `writer`
    handed in as `None` by default stays opt-in). `batch[target_name] = ...to("cuda")` replaces a
    dict entry (Marigold's validation): nothing is written into a CPU tensor."""
    assert findings(STATIC_AND_RANK_ZERO) == [
        (
            14,
            79,
            "AL302",
            "information",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `precompute_freqs_cis`, which this file calls only from `__init__` (once "
            "per object or run): a small cost, not paid every step",
        ),
        (
            19,
            36,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            37,
            16,
            "AL100",
            "warning",
            "logging a CUDA tensor (`value.mean()`) with `add_scalar` inside a loop: the host waits for the "
            "GPU on every iteration",
        ),
        (
            46,
            12,
            "AL100",
            "information",
            "logging a CUDA tensor (`out.mean()`) with `add_scalar` inside a loop: the host waits for the "
            "GPU only on iterations where `writer is not None`",
        ),
    ]


SERVED_REQUESTS = dedent(
    """\
    import gradio as gr
    import torch

    device = "cuda"


    def generate(model, input_ids, parallel_size=4, image_tokens=576):
        tokens = torch.zeros((parallel_size * 2, len(input_ids)), dtype=torch.int).to(device)
        noise = torch.randn((parallel_size, 4, 48, 48)).to(device)
        for i in range(image_tokens):
            logits = model(tokens, noise)
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
        return tokens


    def generate_image(model, prompt, seed):
        torch.manual_seed(seed)
        return generate(model, prompt)


    def serve(model, request_queue, response_queue, vocoder):
        while True:
            prompt, seed = request_queue.get()
            samples = model(prompt.cuda())
            wav = vocoder(samples.squeeze(0).cpu().numpy())
            response_queue.put(wav)


    with gr.Blocks() as demo:
        button = gr.Button("Generate")
    """
)


def test_an_apps_functions_and_a_request_loop_run_once_per_request() -> None:
    """A module-level function of a file that builds a Gradio (FastAPI, Flask, Streamlit) app runs
    once per user request outside its loops (Janus' demos); a random draw in it keeps no fix when
    the caller seeds the generators first (`torch.manual_seed(seed)`, then `generate(...)`). A
    `while True:` loop that takes a request from a queue per iteration copies once per request
    (Lumina's audio demo)."""
    assert findings(SERVED_REQUESTS) == [
        (
            8,
            79,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per request (this file serves a Gradio app; `generate` runs per "
            "request, outside its loops): a small cost, not paid every step",
        ),
        (
            9,
            52,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=` (the generators are seeded above: drawn there, the numbers differ from the CPU's); "
            "it runs once per request (this file serves a Gradio app; `generate` runs per request, outside "
            "its loops): a small cost, not paid every step",
        ),
        (
            25,
            41,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU once per request (each iteration takes one "
            "from `request_queue`)",
        ),
    ]


OVERRIDES_AND_OPTIONS = dedent(
    """\
    import torch
    from torch import nn


    class RotaryEmbedding(nn.Module):
        def __init__(self, dim, max_position_embeddings=2048, base=10000, device=None):
            super().__init__()
            self.dim, self.base = dim, base
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=device).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            self._set_cos_sin_cache(max_position_embeddings, self.inv_freq.device, torch.float32)

        def _set_cos_sin_cache(self, seq_len, device, dtype):
            self.max_seq_len_cached = seq_len
            t = torch.arange(seq_len, device=device, dtype=torch.float32)
            self.register_buffer("cos_cached", torch.outer(t, self.inv_freq).cos().to(dtype), persistent=False)

        def forward(self, x, seq_len=None):
            if seq_len > self.max_seq_len_cached:
                self._set_cos_sin_cache(seq_len=seq_len, device=x.device, dtype=x.dtype)
            return self.cos_cached[:seq_len].to(dtype=x.dtype)


    class DynamicNTKScalingRotaryEmbedding(RotaryEmbedding):
        def _set_cos_sin_cache(self, seq_len, device, dtype):
            self.max_seq_len_cached = seq_len
            base = self.base * (seq_len / 2048) ** (self.dim / (self.dim - 2))
            inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2).float().to(device) / self.dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)


    def train(model, loader, optimizer, logger):
        for step, batch in enumerate(loader):
            model.feed_data(batch)
            model.optimize_parameters(step)
            if step % 100 == 0:
                logs = model.current_log()
                message = "lr:{:.3e} ".format(model.current_learning_rate())
                for k, v in logs.items():
                    message += "{:s}: {:.3e} ".format(k, v)
                logger.info(message)


    class Trainer:
        def track_tokens(self, inputs):
            if self.args.include_num_input_tokens_seen == "no":
                return
            tokens = torch.as_tensor(inputs["input_ids"].numel(), device=self.args.device)
            self.num_input_tokens_seen += tokens.sum().item()

        def train(self, loader):
            for inputs in loader:
                loss = self.model(**inputs).loss
                loss.backward()
                self.track_tokens(inputs)
    """
)


def test_an_override_its_base_calls_a_models_logged_numbers_and_an_option_left_off() -> None:
    """An override of `_set_cos_sin_cache` (a dynamic NTK rotary embedding) is called by its base
    class of the same file, from `__init__` and when the cache grows: a set-up cost. A model's
    `current_learning_rate()` and `current_log()` (KAIR's trainers) hand back Python numbers. An
    early `return` when `self.args.include_num_input_tokens_seen == "no"` (transformers' Trainer,
    off by default) leaves the read after it to those who turn the option on."""
    assert findings(OVERRIDES_AND_OPTIONS) == [
        (
            28,
            72,
            "AL302",
            "information",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `_set_cos_sin_cache`, which this file calls only from `__init__` (once "
            "per object or run) and 1 more such place: a small cost, not paid every step",
        )
    ]


AFTER_THE_STEPS = dedent(
    """\
    import torch


    def fit(fabric, model, optimizer, loader, max_steps, extra_counters):
        token_counts = {
            "raw": torch.tensor(0, device=fabric.device, dtype=torch.long),
            "template": torch.tensor(0, device=fabric.device, dtype=torch.long),
            "padding": torch.tensor(0, device=fabric.device, dtype=torch.long),
        }
        token_counts.update({name: torch.tensor(0, device=fabric.device) for name in extra_counters})
        step = 0
        while step < max_steps:
            batch = next(loader)
            loss = model(batch["input_ids"])
            fabric.backward(loss)
            optimizer.step()
            token_counts["raw"] += batch["counts"].sum().item()
            token_counts["padding"] += batch["input_ids"].numel()
            step += 1
        totals = {}
        for key in token_counts:
            total = fabric.all_reduce(token_counts[key], reduce_op="sum")
            totals[key] = total.item()
        return totals
    """
)


def test_reads_after_a_functions_own_training_loop_run_once_per_fit() -> None:
    """`fabric.all_reduce(token_counts[key])` returns the counts where they are, on the device; a loop
    after the function's own training loop, walking no batches, reads them once per fit (litgpt's
    `fit`): information. The read in the training loop is a warning."""
    assert findings(AFTER_THE_STEPS) == [
        (17, 53, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            23,
            28,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU per item, once per call of `fit` (after "
            "its training loop on line 12)",
        ),
    ]


RESUMED = dedent(
    """\
    import torch


    def train(model, loader, config):
        if config["load_checkpoint"] is not None:
            total_iter = model.load_checkpoint(config["load_checkpoint"])
        else:
            total_iter = 0
        while total_iter < config["iterations"]:
            for data in loader:
                loss = model.do_pass(data.cuda(), total_iter)
                total_iter += 1
                print(total_iter, loss.item())
                if total_iter >= config["iterations"]:
                    break
    """
)


def test_the_iteration_a_checkpoint_resumes_from_is_a_host_number() -> None:
    """`total_iter = model.load_checkpoint(path)` is the iteration to resume from, a Python number
    (XMem's trainer): comparing it with the iteration count reads nothing (it was five warnings
    of a condition on a CUDA tensor); the loss read beside it is still one wait per step."""
    assert findings(RESUMED) == [
        (13, 35, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]
