"""Classes of error found by the fifth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Fifth review") and by held-out round 11 (tests/lint/corpus_heldout/README.md), each with a small
program and the exact findings: line, column (0-based), code, severity and message. Each program
is also linted without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

RESULTS_KEPT = dedent(
    """\
    import torch
    from scipy.sparse import csc_matrix


    class Engine:
        def embed(self, batches):
            rows = []
            for i, inputs in enumerate(batches):
                out = self.model(**inputs).to("cuda")
                rows.append(Row(index=i, embedding=out.tolist()))
            return rows

        def log_rewards(self, rewards_per_func):
            rewards = rewards_per_func.to(self.device)
            for i, name in enumerate(self.reward_names):
                self.logs[name].extend(rewards[:, i].tolist())
            return rewards.sum(1)

        def explain(self, loader, reducing_matrix):
            found = []
            for data in loader:
                masks = self.model.forward_masks(data.to(self.device))
                found.append(csc_matrix.dot(masks.cpu().detach().numpy(), reducing_matrix))
            return found

        def punctuate(self, sentences):
            marks = []
            for ids in sentences:
                y = self.model(torch.from_numpy(ids)[None].to(self.device))
                marks_np = y.argmax(-1).cpu().numpy()
                marks += [int(x) for x in marks_np]
            return marks

        def train(self, loader, opt):
            history = []
            for batch in loader:
                loss = self.model(batch.to(self.device))
                loss.backward()
                opt.step()
                history.extend(loss.detach().tolist())
            return history
    """
)


def test_results_kept_through_tolist_a_constructor_a_host_function_or_list_addition_are_information() -> None:
    """Results copied to the host and kept, in loops that take no training step, are information:
    `.tolist()` handed to a constructor whose object is appended, `.extend(t.tolist())`, a copy
    handed to a host function straight inside `append`, `marks += [...]` of a host copy. A loss
    history kept per training step is a wait per step (a warning)."""
    assert findings(RESULTS_KEPT) == [
        (
            10,
            51,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.tolist())`: one copy per batch, as intended)",
        ),
        (
            16,
            49,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.tolist())`: one copy per batch, as intended)",
        ),
        (
            23,
            46,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (
            30,
            36,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (40, 41, "AL100", "warning", "`.tolist()` inside a loop: the host waits for the GPU on every iteration"),
    ]


HOST_VALUES = dedent(
    """\
    import time

    import numpy as np
    import torch


    def encode(input_ids, grid, image_token_id, device="cuda"):
        starts = []
        for i in range(len(grid)):
            pos = torch.where(torch.tensor(input_ids) == image_token_id)
            starts.append(pos[0][i])
        return starts


    def rows_of(dataset, device):
        table = dataset.inter_matrix(form="csr").astype(np.float32)
        counts = []
        for i in range(table.shape[0]):
            _, cols = table[i].nonzero()
            counts.append(len(cols))
        return counts


    def run(model, batches, device="cuda"):
        stats = {}
        for batch in batches:
            t1 = time.perf_counter()
            meta = model.inference(**batch)[1]
            t2 = time.perf_counter()
            seconds = meta.get("batch_data_time", -1)
            stats["rtf"] = f"{(t2 - t1) / seconds:0.3f}"
        return stats
    """
)


def test_values_made_on_the_host_are_not_read_as_cuda_tensors() -> None:
    """`torch.tensor(ids) == k` compares a CPU tensor (a CUDA operand would raise), `.astype(...)`
    is numpy's (a scipy matrix's rows have `nonzero` too), and `meta.get(key, -1)` is a dict of
    numbers by its default: no finding."""
    assert findings(HOST_VALUES) == []


EPOCHS_AND_RETRIES = dedent(
    """\
    import torch


    def main(trainer, model, loader):
        for epoch in range(trainer.start_epoch, trainer.max_epoch):
            for split in range(loader.num_splits):
                trainer.train_epoch(model=model, loader=loader.build(epoch, split))
                torch.cuda.empty_cache()


    def sample_until_valid(model, batch, device, max_attempts=5):
        attempts = 0
        while attempts < max_attempts:
            scores = model(batch.to(device))
            valid = scores[scores > 0]
            if len(valid) > 0:
                break
            attempts += 1
        return valid
    """
)


def test_a_loop_running_an_epoch_and_a_while_loop_of_attempts_are_not_per_step() -> None:
    """A loop whose body runs `trainer.train_epoch(...)` is an epoch loop (its `empty_cache()` is
    information), and `while attempts < max_attempts: ... break` a retry loop."""
    assert findings(EPOCHS_AND_RETRIES) == [
        (
            8,
            12,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate "
            "again; it runs once per epoch",
        ),
        (
            15,
            16,
            "AL100",
            "information",
            "`scores[scores > 0]` (a boolean mask: the result's shape depends on the data) inside a loop: the host "
            "waits for the GPU once per attempt of a retry loop (it stops at the first success)",
        ),
    ]


LOSSES_BY_BACKWARD = dedent(
    """\
    import torch
    import torch.nn.functional as F


    def fast_adapt(model, batch, device):
        data, labels = batch
        logits = model(data.to(device))
        return F.cross_entropy(logits, labels.to(device)), (logits.argmax(1) == labels).float().mean()


    def meta_train(maml, tasks, opt, device):
        total = 0.0
        for task in tasks:
            evaluation_error, evaluation_accuracy = fast_adapt(maml.clone(), task, device)
            evaluation_error.backward()
            total += evaluation_error.item()
        opt.step()
        return total


    def fabric_loop(fabric, model, loader, opt):
        for batch in loader:
            total = model.compute(batch)
            fabric.backward(total)
            opt.step()
            if fabric.global_rank == 0:
                print(total.item())


    if __name__ == "__main__":
        device = torch.device("cuda")
        model = torch.nn.Linear(3, 3).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        n_loss = 0.0
        for epoch in range(10):
            for batch in loader:
                loss, acc = fast_adapt(model, batch, device=device)
                n_loss += loss.item()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """
)


def test_what_backward_is_called_on_or_handed_is_the_steps_loss_at_any_level() -> None:
    """A name `.backward()` is called on is the step's loss whatever it is called
    (`evaluation_error`), so is the name handed to `fabric.backward(total)` (but not `fabric`:
    `fabric.global_rank == 0` is no tensor), and a script's training loop at the top level under
    `if __name__ == "__main__":` is read as one in a function."""
    assert findings(LOSSES_BY_BACKWARD) == [
        (16, 34, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (27, 24, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (38, 27, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


METRICS_AND_TYPED = dedent(
    """\
    import torch


    class Engine:
        def forward_backward(self, imgs, pids):
            imgs, pids = imgs.cuda(), pids.cuda()
            outputs = self.model(imgs)
            loss = self.criterion(outputs, pids)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return {"loss": loss.item(), "acc": metrics.accuracy(outputs, pids)[0].item()}


    class Beam:
        def __init__(self, beam_size, bos, device):
            self.beam_size = beam_size
            self.scores = [torch.Tensor([0.0] * beam_size).to(device)]
            self.outputs = [torch.Tensor(self.beam_size).long().fill_(bos).to(device)]
    """
)


def test_a_metric_of_a_model_output_and_a_sized_legacy_constructor() -> None:
    """A module's loss or metric function of a model's output is a tensor on its device
    (`metrics.accuracy(outputs, pids)[0].item()` waits as `loss.item()` does), and the legacy
    `torch.Tensor(self.beam_size)` is given a size (AL302), `torch.Tensor([0.0] * n)` data (not)."""
    assert findings(METRICS_AND_TYPED) == [
        (
            12,
            29,
            "AL100",
            "warning",
            "`.item()` in `forward_backward`, which takes a training step: the host waits for the GPU on every "
            "training step",
        ),
        (
            12,
            79,
            "AL100",
            "warning",
            "`.item()` in `forward_backward`, which takes a training step: the host waits for the GPU on every "
            "training step",
        ),
        (
            19,
            71,
            "AL302",
            "warning",
            "`torch.Tensor(...)` is created on the CPU and then copied to the device: create it there with "
            "`torch.empty(..., device=...)` (a legacy constructor takes no CUDA `device=`)",
        ),
    ]


DEVICES_MODULES_AND_COPIES = dedent(
    """\
    import torch


    def reference_check(plan):
        work_device = torch.device("cpu")
        slots = plan.slots.to(device=work_device, dtype=torch.int64)
        kept = []
        for k in range(slots.shape[0]):
            kept.append(int(slots[k].item()))
        return kept, torch.zeros(3).to(work_device)


    def roundtrip(device, steps):
        transformer = torch.nn.ModuleDict({"proj": torch.nn.Linear(8, 8)}).to(device)
        for _ in range(steps):
            transformer.cpu()
            transformer.to(device)


    def upscale_tiled(self, img, tile):
        output = torch.empty((1, 3, img.shape[2] * 4, img.shape[3] * 4), device="cpu")
        img = img.to(self.device)
        for y in range(0, img.shape[2], tile):
            out_tile = self.net(img[..., y : y + tile]).float()
            output[..., y * 4 : (y + tile) * 4].copy_(out_tile.cpu())
        return output


    def pipe_frames(queue, buffer, write):
        copy_stream = torch.cuda.Stream()
        while (item := queue.get()) is not None:
            chunk, ready = item
            copy_stream.wait_event(ready)
            with torch.cuda.stream(copy_stream):
                buffer[: chunk.shape[0]].copy_(chunk, non_blocking=True)
            copy_stream.synchronize()
            write(buffer.numpy().tobytes())


    def strip(self, locs):
        if not locs:
            self.out_cache_loc = torch.zeros(0, dtype=torch.int64).to(self.device, non_blocking=True)
        else:
            self.out_cache_loc = torch.cat(locs)
    """
)


def test_cpu_device_names_module_moves_host_buffers_and_completed_copies() -> None:
    """A name bound to the CPU (`work_device = torch.device("cpu")`) moves nothing to the GPU (AL100,
    AL302); a module's `.cpu()` reads no value; a tile copied into a host buffer with `copy_` is a
    result kept (information); a stream's synchronize after a `non_blocking` copy in the same
    loop is what makes the copy safe to use (information); an empty tensor copies nothing (AL200)."""
    assert findings(DEVICES_MODULES_AND_COPIES) == [
        (
            25,
            59,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (
            36,
            8,
            "AL101",
            "information",
            "`copy_stream.synchronize()` inside a loop: the host waits for the GPU on every iteration, on purpose: it "
            "completes the `non_blocking` copy of line 35 before the host uses its buffers",
        ),
    ]


SETUP_UNPACKED_AND_CHUNKS = dedent(
    """\
    import torch


    class SimModel(torch.nn.Module):
        def setup_from_system_idx(self, system_idx):
            self.system_idx = system_idx.to(device=self._device, dtype=torch.long)
            self.counts = []
            for idx in range(self.n_systems):
                self.counts.append(int((self.system_idx == idx).sum().item()))


    def build_layout(streams, device):
        text, cond, audio = [
            indices.to(device=device, dtype=torch.long).tolist() for indices in streams.as_index_tuple()
        ]
        return text, cond, audio


    def mlp_in_chunks(self, x):
        out = torch.empty_like(x)
        for start in range(0, x.shape[0], 4096):
            out[start : start + 4096].copy_(self.fc2(self.fc1(x[start : start + 4096])))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return out
    """
)


def test_setup_methods_unpacked_comprehensions_and_a_synchronize_before_empty_cache() -> None:
    """A `setup_*` method runs once per call (information); a comprehension unpacked into three names
    runs three times; a synchronize followed at once by `empty_cache()` bounds a chunked loop's
    peak memory on purpose (AL101 information); the `empty_cache()` per chunk of rows is AL300's
    information too, as the loop walks no batches and takes no training step."""
    assert findings(SETUP_UNPACKED_AND_CHUNKS) == [
        (
            9,
            66,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU per item in `setup_from_system_idx` (once per call, "
            "not per training step)",
        ),
        (
            14,
            52,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU 3 times (the loop runs 3 times)",
        ),
        (
            23,
            8,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration, on purpose: "
            "`empty_cache()` right after it returns the memory of the finished work (a chunked loop that bounds its "
            "peak memory)",
        ),
        (
            24,
            8,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again"
            "; reported as information: nothing shows that the loop runs once per training or inference step (it walks no "
            "batches and takes no training step), and a set-up, warm-up or per-layer loop pays this only a few times",
        ),
    ]


HOST_PATHS = dedent(
    """\
    import torch


    def fast_topk(logits, starts, topk):
        starts = starts.to(device=logits.device)
        if logits.is_cuda:
            return torch.topk(logits, topk).indices
        out = torch.full((logits.shape[0], topk), -1, device=logits.device)
        for row in range(logits.shape[0]):
            out[row, :1] = int(starts[row])
        return out


    def pages(index_groups, capacity):
        out = []
        for indices in index_groups:
            indices = indices.to("cuda")
            valid = (indices >= 0).all() & (indices < capacity).all()
            if indices.is_cuda:
                torch._assert_async(valid, "bad")
            elif not valid.item():
                raise ValueError("bad")
            out.append(indices)
        return out


    def only_on_gpu(model, loader):
        if not torch.cuda.is_available():
            return None
        for x in loader:
            loss = model(x.cuda()).sum()
            print(loss.item())
    """
)


def test_code_that_runs_only_off_cuda_reads_no_device_tensor() -> None:
    """Code that runs only off CUDA is no device read: after `if logits.is_cuda: return ...` (a
    fast path for CUDA, a reference for the rest) and in the `elif` of `if indices.is_cuda:`; after
    `if not torch.cuda.is_available(): return` the loop runs on the GPU and is reported."""
    assert findings(HOST_PATHS) == [
        (32, 19, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]
