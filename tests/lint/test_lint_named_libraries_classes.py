"""Classes of error found by reading every finding on the libraries a new user tries first
(transformers, diffusers, timm, torchao, lightning, torchvision, pytorch/examples, nanoGPT, MAE;
tests/lint/corpus_real/WHOLE_TREES.md "Twenty-seventh review"), each with a small program and the
exact findings: line, column (0-based), code, severity and message. Each program is also linted
without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

ENCODER_LAYER = dedent(
    """\
    import torch
    from torch import nn


    class EncoderLayer(nn.Module):
        def forward(self, hidden_states):
            hidden_states = hidden_states.to("cuda")
            if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
                clamp_value = torch.finfo(hidden_states.dtype).max - 1000
                hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
            return hidden_states


    class Experts(nn.Module):
        def forward(self, logits):
            gates = logits.cuda().softmax(-1)
            expert_size = (gates > 0.5).long().sum(0).tolist()
            return torch.split(gates, expert_size)


    class Helper:
        def forward(self, x):
            return x.cuda().sum().item()
    """
)


def test_a_read_in_a_modules_forward_is_paid_on_every_forward_pass() -> None:
    """A module's `forward` runs once per step, a layer's once per layer per step: a NaN check
    there (BART's fp16 clamp) or a `.tolist()` (JetMoE's expert sizes) waits every forward pass.
    Not a `forward` of a plain class, which no module call runs."""
    assert findings(ENCODER_LAYER) == [
        (
            8,
            56,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(hidden_states).all()`) in `forward`: the host waits for the GPU "
            "on every forward pass",
        ),
        (
            17,
            50,
            "AL100",
            "warning",
            "`.tolist()` in `forward`: the host waits for the GPU on every forward pass",
        ),
    ]


NANOGPT_BENCH = dedent(
    """\
    import time

    import torch


    def bench(model, get_batch, optimizer, num_steps):
        model = model.cuda()
        for stage in range(2):
            t0 = time.time()
            for k in range(num_steps):
                X, Y = get_batch()
                logits, loss = model(X, Y)
                loss.backward()
                optimizer.step()
            torch.cuda.synchronize()
            dt = time.time() - t0
            mfu = model.estimate_mfu(num_steps, dt)
            print(f"MFU: {mfu*100:.2f}%")
    """
)


def test_a_models_estimate_of_the_run_is_a_python_number() -> None:
    """`model.estimate_mfu(tokens, dt)` (nanoGPT) computes a figure about the run from numbers,
    not an output from an input: formatting it reads no tensor."""
    assert findings(NANOGPT_BENCH) == []


PIPELINE = dedent(
    """\
    import torch


    class Pipeline(DiffusionPipeline):
        def encode_prompt(
            self,
            prompt,
            device,
        ):
            prompt_embeds = self.text_encoder(prompt.to(device))
            text_ids = torch.zeros(prompt_embeds.shape[1], 3).to(device)
            kept = [prompt_embeds[i][prompt_embeds[i] > 0] for i in range(len(prompt))]
            return prompt_embeds, text_ids, kept

        def __call__(self, prompt, timesteps, device="cuda"):
            prompt_embeds, text_ids, kept = self.encode_prompt(prompt, device)
            latents = torch.randn(1, 4, 64, 64, device=device)
            for i, t in enumerate(timesteps):
                noise_pred = self.transformer(latents, t, prompt_embeds)
                latents = self.scheduler.step(noise_pred, t, latents)
                ids = torch.arange(4).to(device)
            return latents
    """
)


def test_a_pipelines_set_up_outside_its_sampling_loop_runs_once_per_generation() -> None:
    """A diffusion pipeline's `__call__` encodes the prompt before its denoising loop (over the
    timesteps, stepping the scheduler): what `encode_prompt` pays, it pays once per generation
    (diffusers' `text_ids = torch.zeros(...).to(device)` in some twenty pipelines), and a loop over
    the prompts there reads a few rows per generation. Inside the loop a copy is paid every step.
    The header written over several lines (`def encode_prompt(\n self, ...\n ):`) is part of
    the method: the class's text reaches `__call__`."""
    once = "`encode_prompt`, which this file calls only from `__call__` outside its sampling loop on line 18, once per generation"
    assert findings(PIPELINE) == [
        (
            11,
            58,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            f"it runs in {once}: a small cost, not paid every step",
        ),
        (
            12,
            16,
            "AL100",
            "information",
            "`prompt_embeds[i][prompt_embeds[i] > 0]` (a boolean mask: the result's shape depends on the data) inside "
            f"a loop: the host waits for the GPU on every iteration of a loop in {once}, so not on every training step",
        ),
        (
            21,
            34,
            "AL302",
            "warning",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


NOT_CUDA_OR_NOT_TENSORS = dedent(
    """\
    import time

    import torch


    def benchmark(model, inputs, device_type, num_runs):
        model = model.cuda()
        if device_type == "cuda":
            torch.cuda.synchronize()
            start = time.time()
            for _ in range(num_runs):
                model(inputs)
            torch.cuda.synchronize()
            return time.time() - start
        elif device_type == "cpu":
            start = time.time()
            for _ in range(num_runs):
                model(inputs)
            return time.time() - start


    def check(targets, model):
        for target_idx, target in enumerate(targets):
            boxes = target["boxes"].cuda()
            degenerate = boxes[:, 2:] <= boxes[:, :2]
            if degenerate.any():
                bb_idx = torch.where(degenerate.any(dim=1))[0][0]
                degen_bb = boxes[bb_idx].tolist()
                torch._assert(False, f"invalid box {degen_bb} for target {target_idx}")


    def erase_copies(graph):
        for node in graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.copy_.default:
                graph.erase_node(node)


    class FP8Linear(torch.nn.Module):
        def __init__(self, n, m):
            super().__init__()
            self.qtype = torch.float8_e4m3fn
            self.weight = torch.randn((n, m)).to(self.qtype)


    def warmup(accelerator_module, index, byte_count):
        for _ in range(3):
            unused = accelerator_module.memory_reserved(index) - accelerator_module.memory_allocated(index)
            if byte_count - unused > unused:
                byte_count = byte_count - unused
        return byte_count
    """
)


def test_cpu_branches_failed_checks_operators_dtypes_and_memory_figures_read_no_device_value() -> None:
    """The body of `elif device_type == "cpu":` runs on the CPU (torchao's benchmark: no AL301);
    the block before `torch._assert(False, msg)` runs once, when the check fails (torchvision's
    degenerate boxes: only the test itself is per target); `node.target == torch.ops.aten.copy_.default`
    compares an FX node's operator; `.to(self.qtype)` of `self.qtype = torch.float8_e4m3fn` is a
    cast; `memory_reserved(i) - memory_allocated(i)` of an accelerator module are Python ints."""
    assert findings(NOT_CUDA_OR_NOT_TENSORS) == [
        (
            26,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`degenerate.any()`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


EPOCH_LOOPS = dedent(
    """\
    import torch


    def train_one_epoch(model, criterion, data_loader, optimizer, device, metric_logger):
        for data_iter_step, (samples, targets) in enumerate(data_loader):
            samples = samples.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            outputs = model(samples)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            metric_logger.update(loss=loss.item())


    def evaluate(model, criterion, data_loader, device, metric_logger, accuracy):
        for images, target in data_loader:
            images = images.to(device, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            metric_logger.update(loss=loss.item())
            metric_logger.meters['acc1'].update(acc1.item(), n=images.shape[0])
            metric_logger.meters['acc5'].update(acc5.item(), n=images.shape[0])


    class Wrapper(torch.nn.Module):
        def no_weight_decay(self):
            return {f"encoder.{k}" for k in self.encoder.no_weight_decay()}
    """
)


def test_a_synchronize_after_uploading_the_loops_own_batch_is_a_warning() -> None:
    """MAE's `torch.cuda.synchronize()` after `samples.to(device, non_blocking=True)` of the loop's
    own batch: a fresh tensor each iteration, which no later iteration refills, so the upload
    needs no host wait and the synchronize only stalls every step (the read after it adds no wait of
    its own). A read after reads in the statements just above, through `meters['acc1'].update(...)`,
    adds no wait."""
    drained = "but the read on line {} just before already waited for it: no new wait"
    assert findings(EPOCH_LOOPS) == [
        (
            12,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (
            13,
            39,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the `synchronize()` on line "
            "12 just before already waited for it: no new wait",
        ),
        (22, 39, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            23,
            49,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, " + drained.format(22),
        ),
        (
            24,
            49,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, " + drained.format(23),
        ),
    ]


PARAMETER_NAMES = dedent(
    """\
    import torch


    class Wrapper(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder.cuda()

        def no_weight_decay(self):
            return {f"encoder.{k}" for k in self.encoder.no_weight_decay()}
    """
)


def test_timms_no_weight_decay_names_parameters() -> None:
    """`self.encoder.no_weight_decay()` (timm) returns the names of parameters, not tensors."""
    assert findings(PARAMETER_NAMES) == []


NANOGPT_ESTIMATE_LOSS = dedent(
    """\
    import torch

    model = torch.nn.Linear(4, 4).cuda()
    eval_iters = 200


    @torch.no_grad()
    def estimate_loss():
        out = {}
        for split in ['train', 'val']:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                logits, loss = model(split)
                losses[k] = loss.item()
            out[split] = losses.mean()
        return out


    best_val_loss = 1e9
    iter_num = 0
    while True:
        if iter_num % 100 == 0:
            losses = estimate_loss()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            if losses['val'] < best_val_loss:
                best_val_loss = losses['val']
        iter_num += 1
    """
)


def test_a_dict_of_means_of_a_cpu_buffer_holds_cpu_tensors() -> None:
    """nanoGPT's `estimate_loss()`: `losses = torch.zeros(eval_iters)` (no device), filled with
    `.item()` reads, `out[split] = losses.mean()`, `return out`: printing and comparing its values
    reads tensors on the CPU. The `.item()` per evaluation batch is the wait."""
    assert findings(NANOGPT_ESTIMATE_LOSS) == [
        (14, 29, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


GENERATION_HELPERS = dedent(
    """\
    import torch
    import torch.distributed as dist


    class Generator:
        def __init__(self, input_ids):
            self.slots = [
                (torch.zeros((), dtype=torch.bool, pin_memory=True), torch.zeros(4, dtype=torch.long, pin_memory=True))
                for _ in range(2)
            ]

        def stopped(self, unfinished, tokens):
            should_stop, tokens_cpu = self.slots[0]
            should_stop.copy_(unfinished.max() == 0, non_blocking=True)
            tokens_cpu.copy_(tokens, non_blocking=True)
            return should_stop


    def has_unfinished(this_peer_finished, device):
        flag = torch.tensor(0.0 if this_peer_finished else 1.0, device=device)
        dist.all_reduce(flag)
        if flag.item() == 0.0:
            return False
        return True


    def sample(model, input_ids, device):
        input_ids = input_ids.to(device)
        finished = False
        while has_unfinished(finished, device):
            logits = model(input_ids)
            input_ids = torch.cat([input_ids, logits.argmax(-1)], dim=-1)
        return input_ids


    class PreTrainedTokenizer:
        def apply_template(self, text, spans):
            out = self(text, return_offsets_mapping=True)
            masks = []
            for token_id, (start, end) in enumerate(out.offsets):
                if end > spans[0]:
                    masks.append(token_id)
            return masks


    def align_types(ov_model, pairs):
        for input_name, output_name in pairs.items():
            original_type = ov_model.input(input_name).get_element_type()
            output_type = ov_model.output(output_name).get_element_type()
            if original_type != output_type:
                ov_model.convert(input_name, output_type)
    """
)


def test_pinned_slots_stop_flags_tokenizers_and_exported_ports() -> None:
    """transformers' generation and export code: a copy into a slot of this file's pinned buffers
    (`should_stop, tokens_cpu = self.slots[0]`) is a download into pinned memory; a flag
    all-reduced in a helper the decoding loop calls, then read to return, is how ranks stop
    together (information); `self(...)` in a tokenizer gives token ids and offsets; an exported
    model's `port.get_element_type()` is metadata."""
    assert findings(GENERATION_HELPERS) == [
        (
            22,
            12,
            "AL100",
            "information",
            "`.item()` in `has_unfinished`, which `sample` calls in a loop: the host waits for the GPU on every "
            "iteration, as a flag shared across ranks (all-reduced or broadcast) to stop together (every rank "
            "needs it on the host)",
        ),
    ]


DECODE_AFTER_SAMPLING = dedent(
    """\
    import torch


    class Pipeline(DiffusionPipeline):
        def __call__(self, prompt_ids, timesteps, eos_token_id, device="cuda"):
            tokens = prompt_ids.to(device)
            for i, t in enumerate(timesteps):
                logits = self.transformer(tokens, t)
                tokens = self.scheduler.step(logits, t, tokens)
            texts = [
                seq[: int((seq == eos_token_id).nonzero()[0])] if (seq == eos_token_id).any() else seq
                for seq in tokens
            ]
            return texts
    """
)


def test_a_loop_over_the_result_after_the_sampling_loop_runs_once_per_generation() -> None:
    """diffusers' LLaDA2 and DiffusionGemma cut each sequence at its first EOS after the sampling
    loop: a read per row, once per generation, not per step."""
    assert findings(DECODE_AFTER_SAMPLING) == [
        (
            11,
            22,
            "AL100",
            "information",
            "`.nonzero()` (its output's shape depends on the data) inside a loop: the host waits for the GPU per "
            "item, once per generation (outside `__call__`'s sampling loop on line 7)",
        ),
    ]


WORK_INSIDE_A_READ = dedent(
    """\
    import torch


    def train(model, loader, optimizer, device):
        total_correct = total_loss = 0
        for batch in loader:
            out = model(batch["x"].to(device))
            labels = batch["y"].to(device)
            loss = torch.nn.functional.cross_entropy(out, labels)
            loss.backward()
            optimizer.step()
            total_correct += int(out.argmax(dim=-1).eq(labels).sum())
            total_loss += float(loss.detach())
        return total_correct, total_loss


    def to_hetero(node_type, names):
        if node_type is None:
            node_type = torch.zeros(10, dtype=torch.long)
        node_ids, index_map = {}, torch.empty_like(node_type)
        for i in range(len(names)):
            node_ids[i] = (node_type == i).nonzero().view(-1)
            index_map[node_ids[i]] = torch.arange(len(node_ids[i]), device=index_map.device)
        return index_map
    """
)


def test_work_queued_inside_a_read_is_waited_for_and_a_value_made_on_its_targets_device_stays_there() -> None:
    """torch_geometric's GLEM: `int(out.argmax(-1).eq(labels).sum())` queues its reduction and waits
    for it, so `float(loss.detach())` next adds no wait. `index_map[ids] = torch.arange(n,
    device=index_map.device)` makes the value on the device of the tensor it is stored in: no copy."""
    assert findings(WORK_INSIDE_A_READ) == [
        (
            12,
            25,
            "AL100",
            "warning",
            "`int()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            13,
            22,
            "AL100",
            "information",
            "`float()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration, but the read on "
            "line 12 just before already waited for it: no new wait",
        ),
    ]


EPOCH_AVERAGE = dedent(
    """\
    import torch


    def train(model, loader, optimizer, loss_fn, device):
        losses = 0
        for src, tgt in loader:
            logits = model(src.to(device))
            loss = loss_fn(logits, tgt.to(device))
            loss.backward()
            optimizer.step()
            losses += loss.item()
        return losses / len(list(loader))


    def main(model, loader, optimizer, loss_fn, epochs, logger):
        for epoch in range(epochs):
            train_loss = train(model, loader, optimizer, loss_fn, "cuda")
            logger.info(f"Epoch: {epoch} train loss: {train_loss:.3f}")
    """
)


def test_a_sum_of_reads_divided_by_a_count_is_a_python_number() -> None:
    """pytorch/examples' translation: `train(...)` returns `losses / len(list(loader))` where
    `losses` starts at 0 and adds `loss.item()`: formatting it once per epoch reads no tensor."""
    assert findings(EPOCH_AVERAGE) == [
        (11, 23, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


DEVICE_FREE_SCRIPT = dedent(
    """\
    import torch

    fc = torch.nn.Linear(4, 1)
    for step in range(1000):
        x = torch.randn(32, 4)
        output = torch.nn.functional.smooth_l1_loss(fc(x), x.sum(1, keepdim=True))
        loss = output.item()
        output.backward()
        if loss < 1e-3:
            break
    """
)


def test_a_scripts_top_level_loop_in_a_file_that_names_no_device_runs_on_the_cpu() -> None:
    """pytorch/examples' regression script: a module-level training loop, in a file that never names
    a device or CUDA, builds its own inputs and its model on the CPU."""
    assert findings(DEVICE_FREE_SCRIPT) == []


BARRIER_THEN_READS = dedent(
    """\
    import time

    import torch


    def train_one_epoch(model, criterion, loader, optimizer, loss_meter, aux_meter):
        end = time.time()
        for images, targets in loader:
            images, targets = images.cuda(non_blocking=True), targets.cuda(non_blocking=True)
            outputs, l_aux = model(images)
            loss = criterion(outputs, targets) + l_aux
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            loss_meter.update(loss.item(), targets.size(0))
            aux_meter.update(l_aux.item(), targets.size(0))
            end = time.time()
    """
)


def test_reads_right_after_a_synchronize_add_no_wait() -> None:
    """Swin-Transformer's loop: `torch.cuda.synchronize()`, then `loss_meter.update(loss.item(),
    targets.size(0))`: the barrier already waited for the step (and `size(0)` queues nothing)."""
    assert findings(BARRIER_THEN_READS) == [
        (
            16,
            31,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the `synchronize()` on "
            "line 15 just before already waited for it: no new wait",
        ),
        (
            17,
            31,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the read on line 16 just "
            "before already waited for it: no new wait",
        ),
    ]


RESEARCH_SCRIPTS = dedent(
    """\
    import time

    import numpy as np
    import torch
    from einops import rearrange
    from PIL import Image


    def train(model, loader, optimizer, device, steps):
        for step in range(steps):
            t0 = time.time()
            loss = model(next(loader).to(device)).mean()
            loss.backward()
            optimizer.step()
            if device == "mps":
                torch.mps.synchronize()
            elif device == "cuda":
                torch.cuda.synchronize()
            # time the step and print it
            # (the first step is an outlier)
            t1 = time.time()
            print(f"step {step}: {(t1 - t0) * 1000:.1f} ms")


    class AutoencoderKL(torch.nn.Module):
        def to_rgb(self, x):
            if not hasattr(self, "colorize"):
                self.register_buffer("colorize", torch.randn(3, x.shape[1], 1, 1).to(x))
            return torch.nn.functional.conv2d(x, weight=self.colorize)


    def evaluate(model, examples, device):
        num_total = 0
        for tokens, endings in examples:
            logits = model(tokens.to(device))
            num_total += 1
            if num_total < 10:
                for i, end in enumerate(endings):
                    print(f"{i} (loss: {logits[i].item():.4f}) {end}")


    def make_batch(image, mask, device):
        batch = {"image": torch.from_numpy(image), "mask": torch.from_numpy(mask)}
        for k in batch:
            batch[k] = batch[k].to(device=device)
        return batch


    def sample(model, sampler, prompts, path):
        for prompt in prompts:
            samples = model(prompt.cuda())
            for x_sample in samples:
                x_sample = 255.0 * rearrange(x_sample.cpu().numpy(), "c h w -> h w c")
                Image.fromarray(x_sample.astype(np.uint8)).save(path)
    """
)


def test_research_code_timing_branches_first_use_buffers_first_iterations_dict_keys_and_saved_images() -> None:
    """llm.c: each branch of `if device == "mps": torch.mps.synchronize() elif ...: torch.cuda.
    synchronize()` ends the step the clock read after them times. stable-diffusion: a buffer
    registered on first use (`if not hasattr(self, "colorize")`) is made once per object;
    `for k in batch: batch[k] = batch[k].to(device)` replaces a dict's entries; a sample copied to
    the host and saved through `Image.fromarray(...).save(path)` is a result written. llm.c's
    HellaSwag eval: `if num_total < 10:` prints the first few examples only."""
    assert findings(RESEARCH_SCRIPTS) == [
        (
            28,
            78,
            "AL302",
            "information",
            "`torch.randn(...)` is created on the CPU and then copied to the device of `x`: create it there with "
            '`device=`; it runs once per object, on first use (`if not hasattr(self, "colorize"):`): a small '
            "cost, not paid every step",
        ),
        (
            39,
            46,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `num_total < 10`",
        ),
        (
            53,
            50,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`save(path, t.cpu())`: one copy per result written, as intended)",
        ),
    ]


RESEARCH_LOOPS = dedent(
    """\
    import torch


    def evaluate(model, loader, device):
        mistakes_printed_already = 0
        for x, y in loader:
            pred = model(x.to(device))
            correct = (pred == y.to(device)).cpu()
            for i in range(x.size(0)):
                if not correct[i] and mistakes_printed_already < 5:
                    mistakes_printed_already += 1
                    print("wrong: %d" % (pred[i],))


    def generate(model, t5, clip, ae, prompts, offload, device):
        t5, clip = t5.to(device), clip.to(device)
        for prompt in prompts:
            cond = t5(prompt.to(device)), clip(prompt.to(device))
            if offload:
                t5, clip = t5.cpu(), clip.cpu()
                torch.cuda.empty_cache()
                model = model.to(device)
            x = model(*cond)
            ae(x)


    def train_one_epoch(student, loader, optimizer):
        for it, (images, _) in enumerate(loader):
            images = [im.cuda(non_blocking=True) for im in images]
            loss = student(images).mean()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()


    @torch.no_grad()
    def knn_classifier(train_features, test_features, test_labels, k):
        top1 = 0.0
        test_features = test_features.cuda()
        num_test_images, num_chunks = test_labels.shape[0], 100
        imgs_per_chunk = num_test_images // num_chunks
        for idx in range(0, num_test_images, imgs_per_chunk):
            features = test_features[idx : min(idx + imgs_per_chunk, num_test_images)]
            top1 = top1 + features.sum().item()
        return top1
    """
)


def test_capped_prints_offloaded_models_uploaded_crops_and_chunks_counted_in_a_tuple() -> None:
    """minGPT's adder: `if not correct[i] and mistakes_printed_already < 5:` with the count raised in
    the body prints at most five times. flux's CLI: `t5, clip = t5.cpu(), clip.cpu()` before
    `torch.cuda.empty_cache()` moves models off the GPU, no value is read. DINO: `images =
    [im.cuda(non_blocking=True) for im in images]` uploads the loop's own crops, so the per-step
    `synchronize()` completes nothing and is a warning. DINO's k-NN: `num_test_images, num_chunks =
    test_labels.shape[0], 100` counts the rows a chunked loop walks."""
    assert findings(RESEARCH_LOOPS) == [
        (8, 41, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (
            12,
            22,
            "AL100",
            "information",
            "formatting a CUDA tensor (`% pred[i]`) inside a loop: the host waits for the GPU only on iterations "
            "where `not correct[i] and mistakes_printed_already < 5`",
        ),
        (
            21,
            12,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate "
            "again; it runs only when `offload` is set, an option that asks for it",
        ),
        (
            33,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
        (
            44,
            37,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU once per chunk of `imgs_per_chunk` rows of "
            "`test_labels`",
        ),
    ]


GAN_SCRIPTS = dedent(
    """\
    import datetime
    import sys
    import time

    import torch

    log_interval = 1


    def train(model, loader, optimizer, device, n_epochs):
        prev_time = time.time()
        for epoch in range(n_epochs):
            for i, (x, y) in enumerate(loader):
                loss = model(x.to(device), y.to(device))
                loss.backward()
                optimizer.step()
                time_left = datetime.timedelta(seconds=(len(loader) - i) * (time.time() - prev_time))
                prev_time = time.time()
                sys.stdout.write("[loss: %f] ETA: %s" % (loss.item(), time_left))


    def finetune(model, loader, optimizer, device):
        for iter_num, (x, y) in enumerate(loader):
            loss = model(x.to(device), y.to(device))
            loss.backward()
            optimizer.step()
            if iter_num % log_interval == 0:
                print(f"iter {iter_num}: loss {loss.item():.4f}")


    def test(model, loader, device):
        stats = []
        for img, targets in loader:
            out = model(img.to(device))
            targets = targets.to(device)
            for si, pred in enumerate(out):
                labels = targets[targets[:, 0] == si, 1:]
                tcls = labels[:, 0].tolist() if len(labels) else []
                stats.append((pred[:, 4].cpu(), pred[:, 5].cpu(), tcls))
        return stats
    """
)


def test_eta_intervals_intervals_of_one_and_rows_of_host_copies() -> None:
    """PyTorch-GAN: `time.time() - prev_time` for an ETA, then `prev_time = time.time()` and the
    log line's `loss.item()`: from the second iteration on the interval ends a step the read waited
    for (no AL301). lit-llama: `if iter_num % log_interval == 0:` with `log_interval = 1` at the top
    of the module is every iteration. yolov7's test: a tuple of host copies appended to `stats`,
    and `tcls = labels[:, 0].tolist() if len(labels) else []` kept in it, are results collected."""
    collected = "collecting results on the host (`outputs.append(t.{}())`: one copy per batch, as intended)"
    assert findings(GAN_SCRIPTS) == [
        (19, 58, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (28, 48, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            37,
            21,
            "AL100",
            "warning",
            "`targets[targets[:, 0] == si, 1:]` (a boolean mask: the result's shape depends on the data) inside "
            "a loop: the host waits for the GPU on every iteration",
        ),
        (
            38,
            32,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, " + collected.format("tolist"),
        ),
        (
            39,
            37,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, " + collected.format("cpu"),
        ),
        (
            39,
            55,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, " + collected.format("cpu"),
        ),
    ]


RESULTS_KEPT_AND_LOGGED = dedent(
    """\
    import cv2
    import numpy as np
    import torch


    def compute_distances(model, loader, rank, device):
        dist_batches = []
        for x in loader:
            x = model(x.to(device))
            dist_batches.append(x.cpu() if rank == 0 else None)
        return dist_batches


    def predict(model, images, out_paths, device):
        for img, path in zip(images, out_paths):
            output = model(img.to(device))
            output = output.data.squeeze().float().cpu().clamp_(0, 1).numpy()
            output = (output * 255.0).round().astype(np.uint8)
            cv2.imwrite(path, output)


    class LatentDiffusion(torch.nn.Module):
        def log_images(self, batch, N=8):
            log = {}
            z = self.encode(batch["jpg"].to(self.device))
            mask = torch.ones(N, z.shape[2], z.shape[3]).to(self.device)
            log["mask"] = mask
            return log
    """
)


def test_a_copy_appended_on_one_rank_an_image_written_with_cv2_and_log_images() -> None:
    """stylegan3's metrics: `dist_batches.append(x.cpu() if rank == 0 else None)` collects results on
    the host. SwinIR: `output.cpu().clamp_(0, 1).numpy()`, then `cv2.imwrite(path, output)`, is a
    result written. ControlNet's `log_images`, which an image logger calls every N steps, pays its
    create-then-move once per call."""
    assert findings(RESULTS_KEPT_AND_LOGGED) == [
        (
            10,
            30,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (
            17,
            47,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`save(path, t.cpu())`: one copy per result written, as intended)",
        ),
        (
            26,
            53,
            "AL302",
            "information",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`; "
            "it runs once per call of `log_images` (set-up, not a step): a small cost, not paid every step",
        ),
    ]


RL_STEPS = dedent(
    """\
    import torch


    def learn(policy, env, total_timesteps, eval_episodes, device):
        obs = env.reset()
        for t in range(total_timesteps):
            action = policy(torch.as_tensor(obs).to(device))
            obs, reward, done, info = env.step(action.cpu().numpy())
        returns = []
        for episode in eval_episodes:
            returns.append(policy.evaluate(env).item())
        return returns
    """
)


def test_a_range_of_timesteps_is_a_run_of_steps_not_a_sampling_loop() -> None:
    """`for t in range(total_timesteps):` steps an environment, not a sampler: the evaluation loop
    beside it is not said to run "once per generation"."""
    assert findings(RL_STEPS) == [
        (
            8,
            50,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU once per environment step (the environment runs on "
            "the host and waits for its inputs)",
        ),
        (11, 44, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]
