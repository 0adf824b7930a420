"""Classes of error found in the forty-third review (tests/lint/corpus_real/WHOLE_TREES.md) and in the
misses the reviews before it listed, each with a small program and the exact findings: line, column
(0-based), code, severity and message. Each program is also linted without the prefilter (every
definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

FORMATS = dedent(
    """\
    import math
    import torch


    def train(model, loader, optimizer, epochs):
        mloss = torch.zeros(3, device="cuda")
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                loss, items = model(x.cuda(), y.cuda())
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if math.isnan(grad_norm):
                    continue
                optimizer.step()
                mloss = (mloss * i + items) / (i + 1)
                print("Grad Norm {:.6f}".format(grad_norm))
                print(("%11s" * 2 + "%11.4g" * 3) % (epoch, i, *mloss))
                print("{} {}".format(epoch, len(loader)), "%d" % (i + 1), math.sqrt(i))
    """
)


def test_math_functions_and_str_format_read_a_cuda_tensor_like_float_and_f_strings() -> None:
    """`math.isnan(grad_norm)` converts the tensor with `__float__`, `"{:.6f}".format(t)` formats it
    as an f-string does, and `("%11s" * 2 + "%11.4g" * 3) % (*mloss,)` formats each element of a
    starred tensor (yolov5's progress bar): each reads it on the host. Numbers (`epoch`,
    `math.sqrt(i)`, `(i + 1) % n`) are not reported."""
    assert findings(FORMATS) == [
        (
            12,
            15,
            "AL100",
            "warning",
            "`math.isnan()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            16,
            18,
            "AL100",
            "warning",
            "formatting a CUDA tensor (`.format(grad_norm)`) inside a loop: the host waits for the GPU on every "
            "iteration",
        ),
        (
            17,
            18,
            "AL100",
            "warning",
            "formatting a CUDA tensor (`% mloss`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


SPLIT_NUMPY = dedent(
    """\
    import cv2
    import torch


    @torch.no_grad()
    def visualize(model, loader):
        model.eval()
        for imgs, paths in loader:
            imgs = imgs.cuda()
            outputs = model(imgs)
            imgs, outputs = imgs.cpu(), outputs.cpu()
            for j in range(outputs.size(0)):
                img = imgs[j, ...]
                cv2.imwrite(paths[j], img.numpy())
                cv2.imwrite(paths[j] + ".am", outputs[j, ...].numpy())


    def train(model, loader, optimizer):
        for x, y in loader:
            out = model(x.cuda())
            loss = (out - y.cuda()).pow(2).mean()
            loss.backward()
            optimizer.step()
            out = out.cpu()
            print(out[0].numpy())
    """
)


def test_a_copy_bound_per_batch_of_an_inference_loop_and_read_later_as_numpy_is_its_result() -> None:
    """`imgs, outputs = imgs.cpu(), outputs.cpu()` per batch of a loop that takes no training step,
    then `outputs[j, ...].numpy()` (or a row bound to a name, `img = imgs[j, ...]`, then
    `img.numpy()`): the inference pass's results brought home for NumPy, as `t.cpu().numpy()` in
    one expression is. In a training loop the same copy stays a warning."""
    assert findings(SPLIT_NUMPY) == [
        (
            11,
            29,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop that takes no "
            "training step, bringing the output home as NumPy (`t.cpu().numpy()`: an inference pass's result, "
            "one copy per batch)",
        ),
        (
            11,
            44,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`save(path, t.cpu())`: one copy per result written, as intended)",
        ),
        (
            24,
            18,
            "AL100",
            "warning",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


BARE_TIME = dedent(
    """\
    from time import time

    import torch


    def evaluate(model, videos):
        for video in videos:
            torch.cuda.synchronize()
            time_start = time()
            out = model(video.cuda())
            torch.cuda.synchronize()
            elapsed = time() - time_start
            print(elapsed)
    """
)


def test_a_bare_time_imported_from_the_time_module_is_a_clock_read() -> None:
    """`from time import time`, then `torch.cuda.synchronize()` right before `time_start = time()`
    or `time() - time_start`: the synchronizes bound a timed region, as with `time.time()`."""
    assert findings(BARE_TIME) == []


CHUNKS = dedent(
    """\
    import numpy as np
    import torch


    @torch.no_grad()
    def inpaint(model, frames, masks, video_length, neighbor_stride):
        frames, masks = frames.cuda(), masks.cuda()
        comp_frames = [None] * video_length
        for f in range(0, video_length, neighbor_stride):
            ids = list(range(f, min(video_length, f + neighbor_stride)))
            pred = model(frames[:, ids], masks[:, ids])
            pred = pred.cpu().permute(0, 2, 3, 1).numpy() * 255
            for i, idx in enumerate(ids):
                comp_frames[idx] = np.array(pred[i]).astype(np.uint8)
        return comp_frames
    """
)


def test_a_loop_that_runs_a_model_on_each_chunk_of_an_input_brings_each_result_home() -> None:
    """`for f in range(0, video_length, neighbor_stride): pred = model(frames[:, ids])`, then
    `pred.cpu().permute(0, 2, 3, 1).numpy()`: one inference per chunk, its output copied home as
    NumPy (information). A layout view between `.cpu()` and `.numpy()` keeps the same data."""
    assert findings(CHUNKS) == [
        (
            12,
            20,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop that takes no "
            "training step, bringing the output home as NumPy (`t.cpu().numpy()`: an inference pass's result, "
            "one copy per batch)",
        ),
    ]


MODULE_SEED = dedent(
    """\
    import torch

    torch.manual_seed(3)


    def check_gradient_numerical(channels):
        value = torch.rand(2, channels).cuda()
        return torch.autograd.gradcheck(torch.sin, (value.double().requires_grad_(),))


    if __name__ == "__main__":
        for channels in [30, 32, 64, 71]:
            check_gradient_numerical(channels)
    """
)


def test_a_test_script_seeded_at_module_level_keeps_its_draws_and_its_short_loop_runs_once() -> None:
    """`torch.manual_seed(3)` in the module's own code seeds every draw of the functions below it:
    no quick fix that would draw on the GPU's generator. A function that only a loop over four
    literal values of the `__main__` block calls runs a few times per run: information."""
    assert findings(MODULE_SEED) == [
        (
            7,
            36,
            "AL302",
            "information",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=` (the generators are seeded above: drawn there, the numbers differ from the CPU's); it "
            "runs in `check_gradient_numerical`, which this file calls only from a short loop of module-level "
            "code: a small cost, not paid every step",
        ),
    ]


PAGEABLE_ONCE = dedent(
    """\
    import torch


    class Contrastive(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.mask = self._precompute_mask(n)

        def _precompute_mask(self, n):
            mask = torch.eye(n)
            return mask.cuda(non_blocking=True)


    def main(args):
        pos = torch.zeros(args.n)
        pos = pos.to("cuda", non_blocking=True)
        for batch in range(args.steps):
            x = torch.randn(8)
            x = x.to("cuda", non_blocking=True)
    """
)


def test_a_pageable_non_blocking_copy_that_runs_once_per_run_or_object_is_information() -> None:
    """AL200 in a method that only `__init__` calls, or in `main` outside its loop: the copy is
    synchronous, but it runs once. In the loop it stays a warning."""
    message = (
        "`non_blocking=True` copy from memory not known to be pinned: from pageable memory the host waits for "
        "the copy; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`)"
    )
    assert findings(PAGEABLE_ONCE) == [
        (
            11,
            25,
            "AL200",
            "information",
            f"{message}; it runs in `_precompute_mask`, which this file calls only from `__init__` (once per "
            "object or run): a small cost, not paid every step",
        ),
        (
            16,
            25,
            "AL200",
            "information",
            f"{message}; it runs once per run (`main`): a small cost, not paid every step",
        ),
        (19, 25, "AL200", "warning", message),
    ]


UNPACKED_UPLOAD = dedent(
    """\
    import torch


    def train_one_epoch(model, loader, optimizer, device):
        for step, batch in enumerate(loader):
            videos, masks = batch
            videos = videos.to(device, non_blocking=True)
            masks = masks.to(device, non_blocking=True)
            loss = model(videos, masks)
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
    """
)


def test_a_synchronize_after_uploading_parts_unpacked_from_the_loops_batch_completes_no_copy() -> None:
    """`videos, masks = batch` then `videos.to(device, non_blocking=True)`: an upload of the
    loop's own batch, from memory nothing refills, so the synchronize after the step is not
    there to finish the copy: a warning, as after `batch.to(device, non_blocking=True)`."""
    assert findings(UNPACKED_UPLOAD) == [
        (
            12,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
    ]


TEST_LOOP = dedent(
    """\
    import torch


    @torch.no_grad()
    def perform_test(loader, model, meter, cfg):
        model.eval()
        for inputs, labels in loader:
            inputs = inputs.cuda(non_blocking=True)
            preds = model(inputs)
            preds = preds.detach().cpu() if cfg.NUM_GPUS else preds.detach()
            meter.update_stats(preds, labels)
    """
)


def test_an_evaluation_output_copied_home_in_a_conditional_expression_is_its_result() -> None:
    """`preds = preds.detach().cpu() if cfg.NUM_GPUS else preds.detach()` per batch of
    `perform_test`, which takes no training step: the evaluation's output brought home
    (information), as `preds = preds.cpu()` is."""
    assert findings(TEST_LOOP) == [
        (
            10,
            31,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop in `perform_test` "
            "that takes no training step, bringing the output home (`samples = out.cpu()`: an evaluation's "
            "result, one copy per batch)",
        ),
    ]


FACE_DETECTOR = dedent(
    """\
    import numpy as np
    import torch


    class Preprocesser:
        def __init__(self, device="cuda"):
            self.det_net = init_detection_model("retinaface_resnet50", device=device)
            self.model = Model().to(device)

        def crop(self, images):
            img = np.array(images)
            for _ in range(3):
                bboxes = self.det_net.detect_faces(images, 0.97)[0]
                img = img[int(bboxes[1]) : int(bboxes[3]), int(bboxes[0]) : int(bboxes[2])]
            return img

        def embed(self, batches):
            for x in batches:
                while True:
                    try:
                        out = self.model(x.to("cuda"))
                        score = out.max().item()
                        break
                    except RuntimeError:
                        torch.cuda.empty_cache()
                print(score)
    """
)


def test_a_face_detectors_boxes_are_numpy_and_a_try_that_breaks_runs_once() -> None:
    """`self.det_net.detect_faces(images, 0.97)` (facexlib's RetinaFace, as `get_landmarks` of
    face_alignment) hands back NumPy boxes: `int(bboxes[1])` reads no tensor. `while True: try:
    ...; break` repeats only after a failed attempt: its read runs once per batch of the loop
    around it, a warning (alone, it would run once per attempt)."""
    assert findings(FACE_DETECTOR) == [
        (22, 38, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            25,
            20,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate "
            "again; it runs only when the `try` above it raises: an error path",
        ),
    ]


BUFFERS = dedent(
    """\
    import torch
    import torch.nn as nn


    class MoCo(nn.Module):
        def __init__(self, dim=128, K=4096):
            super().__init__()
            self.register_buffer("queue", torch.randn(dim, K))
            self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        def forward(self, im_q, im_k):
            q, k = self.encoder_q(im_q), self.encoder_k(im_k)
            ptr = self.queue_ptr.item()
            self.queue[:, ptr : ptr + k.shape[0]] = k.T
            return q, k


    class Trainer(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model.cuda()
            self.register_buffer("steps", torch.Tensor([0]))

        def train_step(self, batch):
            steps = int(self.steps.item())
            loss = self.model(batch)
            loss.backward()
            self.steps += 1
            return steps
    """
)


def test_a_buffer_a_model_registers_moves_with_it_but_not_a_trainers_step_counter() -> None:
    """`self.queue_ptr` of `self.register_buffer("queue_ptr", ...)` in a model (a class with a
    `forward`) lives where the model runs: its `.item()` in `forward` waits for the GPU on every
    forward pass. A trainer that is a `Module` only for its `steps` buffer is never moved: that
    buffer stays on the CPU."""
    assert findings(BUFFERS) == [
        (
            13,
            29,
            "AL100",
            "warning",
            "`.item()` in `forward`: the host waits for the GPU on every forward pass",
        ),
    ]


HOST_VALUES = dedent(
    """\
    import torch
    from nanotron.random import set_random_seed


    def main(cfg, model, loader, optimizer, device):
        for epoch in range(cfg.epochs):
            for i, (media_type, (image, idx)) in enumerate(loader):
                image = image.to(device, non_blocking=True)
                idx = idx.to(device, non_blocking=True)
                loss = model(image, idx)
                if cfg.loss_params.gan_loss > 0:
                    loss = loss + model.gan(image)
                loss.backward()
                optimizer.step()
                print(f"{media_type}-{i}")
            test_stats = validation_one_epoch(loader, model, device)
            print(f"loss {test_stats['loss']:.3f}")
            stats = ppo_trainer.step(queries, responses, rewards)
            print(float(stats["ppo/loss/total"]))


    def test_optimizer_groups():
        set_random_seed(42)
        x = torch.randn(10, 10).to(device="cuda")
        return x.sum()
    """
)


def test_settings_a_passs_averages_logged_metrics_and_unmoved_batch_parts_are_host_values() -> None:
    """`cfg.loss_params.gan_loss` is a setting however deep its `loss` (the chain starts at `cfg`);
    `media_type`, unpacked in a nested target beside parts the loop moves, stays on the host;
    `test_stats["loss"]` of `validation_one_epoch(...)` is a meter's average; a key with a slash
    (`"ppo/loss/total"`) names a logged metric. None is read as a CUDA tensor. A project's own seeding
    helper (`set_random_seed(42)`) keeps its draws: no quick fix."""
    assert findings(HOST_VALUES) == [
        (
            24,
            28,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=` (the generators are seeded above: drawn there, the numbers differ from the CPU's); it runs "
            "once per test (`test_optimizer_groups`): a small cost, not paid every step",
        ),
    ]


DECODING = dedent(
    """\
    import torch


    def generate(model, idx, max_new_tokens, use_cache=True):
        idx = idx.cuda()
        past = torch.zeros(1, device="cuda")
        for _ in range(max_new_tokens):
            if use_cache:
                logits = model(idx[:, -1:], past=past if past != None else None)
                torch.cuda.synchronize()
            else:
                logits = model(idx)
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx


    def train(model, loader, optimizer, args):
        for global_step, (x, y) in enumerate(loader):
            loss_tag, loss_dis = model(x.cuda(), y.cuda())
            loss = loss_tag + loss_dis
            loss.backward()
            optimizer.step()
            print(loss.item(), loss_tag.item())
            if global_step % args.logging_steps == 0:
                pipe = Pipeline.from_pretrained(args.path)
                pipe(x)
    """
)


def test_a_decoding_loop_is_per_token_and_none_comparisons_and_a_throttled_load_decide_nothing() -> None:
    """`for _ in range(max_new_tokens): logits = model(...)` runs one decoding step per iteration,
    and `if use_cache:` switches the key-value cache, no option that asks for the synchronize: a
    warning. `past != None` reads nothing (Python compares identities). `loss_tag, loss_dis =
    model(...)` are losses whatever their suffix, and a `from_pretrained` under `if global_step %
    args.logging_steps == 0:` does not make every iteration a model load."""
    assert findings(DECODING) == [
        (
            10,
            12,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (23, 19, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            23,
            36,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but an earlier read of this "
            "statement (line 23) already waited: no new wait",
        ),
    ]


LOSS_DICT = dedent(
    """\
    import torch


    def train(cfg, model_dict, loader, accelerator):
        loss_dict = initialize_loss_functions(cfg, accelerator)
        for step, batch in enumerate(loader):
            pred = model_dict["net"](batch["x"].to(accelerator.device))
            l1_loss = loss_dict["L1_loss"](pred, batch["y"])
            total = l1_loss.item()
            for scale in loss_dict["disc_scales"]:
                print("prediction_map_%s" % scale)
            l1_loss.backward()
    """
)


def test_models_and_losses_kept_in_dicts_are_called_and_the_dict_of_loss_functions_holds_settings() -> None:
    """`loss_dict["L1_loss"](pred, y)` of `model_dict["net"](x)` is a loss on the device; the dict
    that `initialize_loss_functions(cfg, ...)` builds holds loss modules and settings, so
    `"prediction_map_%s" % scale` of its `disc_scales` formats a number."""
    assert findings(LOSS_DICT) == [
        (9, 24, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


OPT_IN_FORWARD = dedent(
    """\
    import torch
    import torch.nn as nn


    class AudioEncoder(nn.Module):
        def __init__(self, n_ctx, n_state):
            super().__init__()
            self.register_buffer("positional_embedding", torch.zeros(n_ctx, n_state))

        def forward(self, x, include_embeddings=False):
            x = x.cuda() + self.positional_embedding
            if include_embeddings:
                embeddings = [x.cpu().numpy()]
                return x, embeddings
            scale = x.abs().max().item()
            return x / scale
    """
)


def test_a_read_in_forward_under_a_parameter_that_defaults_to_false_runs_only_when_asked() -> None:
    """`if include_embeddings:` of `forward(self, x, include_embeddings=False)`: the copy runs only
    for a caller that asks for the embeddings (silent, as a throttled read is); the read after it
    runs on every forward pass."""
    assert findings(OPT_IN_FORWARD) == [
        (15, 30, "AL100", "warning", "`.item()` in `forward`: the host waits for the GPU on every forward pass"),
    ]


EVALUATION = dedent(
    """\
    import torch
    import torch.distributed as dist


    def distributed_init(rank):
        dist.all_reduce(torch.zeros(1).cuda())


    @torch.no_grad()
    def evaluation(model, data_loader, num_images, device):
        scores = torch.full((num_images, 10), -100.0).to(device, non_blocking=True)
        logits = torch.empty(num_images, 10)
        final_result = []
        pos = 0
        for images, target in data_loader:
            images, target = images.to(device), target.to(device)
            out = model(images)
            logits[pos : pos + len(out), :] = out.cpu()
            for i in range(out.size(0)):
                final_result.append("{} {}".format(str(out[i].cpu().numpy().tolist()), str(int(target[i].cpu()))))
            pos += len(out)
        return scores, logits, final_result
    """
)


def test_an_evaluations_set_up_its_result_buffers_and_its_result_rows_are_paid_as_intended() -> None:
    """In `evaluation(model, data_loader, ...)`, the buffer made outside its loops is paid once per
    evaluation (AL302 and AL200: information); `logits[pos : pos + n, :] = out.cpu()` fills a
    batch's rows of a result buffer; the second copy in one `.format(...)` reads a row of a value
    the first already waited for; a dummy all-reduce in `distributed_init` runs once."""
    assert findings(EVALUATION) == [
        (
            6,
            35,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per call of `distributed_init` (set-up, not a step): a small cost, not paid "
            "every step",
        ),
        (
            11,
            50,
            "AL302",
            "information",
            "`torch.full(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per pass over the data (`evaluation` walks `data_loader` itself, in its loop "
            "on line 15): a small cost, not paid every step",
        ),
        (
            11,
            61,
            "AL200",
            "information",
            "`non_blocking=True` copy from memory not known to be pinned: from pageable memory the host waits for "
            "the copy; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`); it runs once per call of "
            "`evaluation`, an evaluation, outside its loops: a small cost, not paid every step",
        ),
        (
            18,
            46,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`results[key] = t.cpu()`: one copy per result, as intended)",
        ),
        (
            20,
            58,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop that takes no training "
            "step, bringing the output home as NumPy (`t.cpu().numpy()`: an inference pass's result, one copy per "
            "batch)",
        ),
        (
            20,
            101,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, but an earlier read of this "
            "statement (line 20) already waited: no new wait",
        ),
    ]


ONCE_AND_GENERATE = dedent(
    """\
    from functools import lru_cache

    import torch


    class Rotary(torch.nn.Module):
        def get_cos_sin(self, seq_len, device):
            if (seq_len, device) not in self.cache:
                t = torch.arange(seq_len).float().to(device)
                self.cache[seq_len, device] = (t.cos(), t.sin())
            return self.cache[seq_len, device]

        def initialize_shape(self, device):
            optim = torch.optim.Adam(self.parameters(), lr=1e-3)
            for _ in range(1000):
                points = torch.rand(10000, 3).to(device)
                loss = self.forward_sdf(points).square().mean()
                loss.backward()
                optim.step()


    @lru_cache
    def first_time_calculation(device):
        x = torch.zeros((1, 1)).to(device)
        return x


    @torch.inference_mode()
    def answer(model, tokenizer, questions, device):
        for input_ids in questions:
            if model.memory_required(input_ids.shape) > 2**30:
                continue
            output_ids = model.generate(input_ids.to(device), max_new_tokens=64)
            n = input_ids.shape[1]
            changed = (input_ids.to(device) != output_ids[:, :n]).sum().item()
            print(changed, tokenizer.batch_decode(output_ids[:, n:]))
    """
)


def test_caches_a_set_ups_own_training_loop_memory_bookkeeping_and_reads_after_generate() -> None:
    """`if (seq_len, device) not in self.cache:` fills the cache once per key, and an `@lru_cache`
    function runs once per distinct call (AL302: information); a copy inside the training loop of
    a set-up function (`initialize_shape` stepping its optimizer 1000 times) is per step (warning);
    `model.memory_required(shape)` is a number; a read of what `model.generate(...)` returned just
    before adds no new wait (information)."""
    assert findings(ONCE_AND_GENERATE) == [
        (
            9,
            46,
            "AL302",
            "information",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per object, on first use (`if (seq_len, device) not in self.cache:`): a small "
            "cost, not paid every step",
        ),
        (
            16,
            42,
            "AL302",
            "warning",
            "`torch.rand(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            24,
            28,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs once per distinct call of `first_time_calculation` (its result is cached): a small "
            "cost, not paid every step",
        ),
        (
            35,
            68,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but `generate` on line 33 just "
            "before already waited for its output: no new wait",
        ),
    ]


MOE_FORWARD = dedent(
    """\
    import torch
    import torch.distributed as dist
    import torch.nn as nn


    class MoEFeedForward(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.gate = nn.Linear(cfg["emb_dim"], cfg["num_experts"], bias=False)
            self.k = cfg["k"]

        def forward(self, x):
            scores = self.gate(x)
            topk_scores, topk_indices = torch.topk(scores, self.k, dim=-1)
            out = torch.zeros_like(x, device=x.device)
            for expert_id_tensor in torch.unique(topk_indices):
                expert_id = int(expert_id_tensor.item())
                mask = topk_indices == expert_id
                if not mask.any():
                    continue
            return self.helper(x)

        def helper(self, x):
            return x


    def train_one_epoch(model, loader, optimizer):
        for x, y in loader:
            loss = model(x.cuda(), y.cuda())
            loss.backward()
            optimizer.step()
            loss_list = [torch.zeros_like(loss) for _ in range(dist.get_world_size())]
            dist.all_gather(loss_list, loss)
            loss_list = torch.tensor(loss_list)
    """
)


def test_a_layers_output_in_forward_and_a_list_of_gathered_losses_are_on_the_device() -> None:
    """`scores = self.gate(x)` in the `forward` of a module that builds `self.gate = nn.Linear(...)`
    is what a layer of the model computes, on the model's device: the experts' `.item()` and
    `mask.any()` wait once per expert per forward. `torch.tensor(loss_list)` of a list bound to
    `[torch.zeros_like(loss) for ...]` (then filled by `all_gather`) reads each element."""
    assert findings(MOE_FORWARD) == [
        (17, 45, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            19,
            19,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`mask.any()`) inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            34,
            20,
            "AL100",
            "warning",
            "`torch.tensor(...)` of CUDA tensors (`torch.zeros_like(loss)`, one read each) inside a loop: the host "
            "waits for the GPU on every iteration",
        ),
    ]


GENERATE_LOOP = dedent(
    """\
    import torch
    import supervision as sv


    def infer(model, tokenizer, samples, image):
        for i in range(len(samples)):
            response = model.generate(samples[i].cuda(), max_new_tokens=128)
            print(tokenizer.decode(response[0]))
            torch.cuda.empty_cache()
        detections = model.predict_with_classes(image=image, classes=["dog"])
        labels = [f"{confidence:0.2f}" for _, _, confidence, class_id, _, _ in detections]
        scores = torch.from_numpy(detections.confidence)
        return labels, scores
    """
)


def test_a_loop_that_generates_per_iteration_is_per_inference_and_numpy_detections_are_host() -> None:
    """`response = model.generate(...)` on each iteration is one inference per iteration, so the
    `empty_cache()` after it is paid per inference (AL300 warning). A detections object whose
    field the function hands to `torch.from_numpy` holds NumPy: its confidences are host numbers."""
    assert findings(GENERATE_LOOP) == [
        (
            9,
            8,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
    ]


RANDOM_THROTTLE = dedent(
    """\
    import random

    import torch


    def train(model, loader, optimizer):
        for x, y in loader:
            loss = model(x.cuda(), y.cuda())
            loss.backward()
            optimizer.step()
            if random.random() < 0.01:
                print(loss.item())
    """
)


def test_a_read_under_a_small_random_chance_is_a_throttle() -> None:
    """`if random.random() < 0.01:` runs one iteration in a hundred on purpose (icefall's scaling
    modules sync their counters so): the read is information, as under `step % 100 == 0`."""
    assert findings(RANDOM_THROTTLE) == [
        (
            12,
            23,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `random.random() < 0.01`",
        ),
    ]


RETURNED_ON_HOST = dedent(
    """\
    import torch
    import torch.nn as nn


    class Stage(nn.Module):
        def __init__(self, device):
            super().__init__()
            self.device = device
            self.seq = nn.Linear(8, 8).to(device)

        def forward(self, x):
            out = self.seq(x.to(self.device))
            peak = out.abs().max().cpu()
            return out.cpu()
    """
)


def test_a_copy_that_forward_returns_is_handed_back_on_the_host_by_design() -> None:
    """`return out.cpu()` in `forward` (an RPC pipeline stage, a vocoder's waveform): the module
    hands its output back on the host, one copy per call (information); another copy in
    `forward` is still a wait on every forward pass."""
    assert findings(RETURNED_ON_HOST) == [
        (13, 31, "AL100", "warning", "`.cpu()` in `forward`: the host waits for the GPU on every forward pass"),
        (
            14,
            19,
            "AL100",
            "information",
            "`.cpu()` in `forward`: the host waits for the GPU on every forward pass, handing the output back on the "
            "host (one copy per call, as designed)",
        ),
    ]


COUNT_BETWEEN = dedent(
    """\
    import torch


    @torch.no_grad()
    def evaluate(model, loader, device):
        num_seen, total = 1, 0.0
        for feats, target in loader:
            loss = model(feats.to(device), target.to(device))
            num = target.size(0)
            if torch.isfinite(loss):
                num_seen += num
                total += loss.item() * num
        return total / num_seen
    """
)


def test_a_read_after_a_condition_on_it_with_only_a_count_between_adds_no_wait() -> None:
    """`if torch.isfinite(loss): num_seen += num; total += loss.item() * num`: the condition read
    the loss, and a counter of host numbers between queues nothing, so the `.item()` adds no wait."""
    assert findings(COUNT_BETWEEN) == [
        (
            10,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(loss)`) inside a loop: the host waits for the GPU on "
            "every iteration",
        ),
        (
            12,
            26,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the condition on line 10 "
            "just before already waited for it: no new wait",
        ),
    ]
