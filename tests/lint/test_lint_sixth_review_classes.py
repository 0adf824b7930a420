"""Classes of error found by the sixth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Sixth review") and left from the fifth, each with a small program and the exact findings: line,
column (0-based), code, severity and message. Each program is also linted without the prefilter
(every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

SHORT_CIRCUIT = dedent(
    """\
    import torch


    def generate(model, input_ids, max_new_tokens, eos):
        finish = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for i in range(max_new_tokens):
            logits = model(input_ids)
            idx_next = torch.multinomial(logits.softmax(-1), 1)
            finish.logical_or_(idx_next.eq(eos).any(1))
            if i == 0 and finish.any():
                break
            if finish.all() and i > 0:
                break
            input_ids = torch.cat([input_ids, idx_next], 1)
        return input_ids
    """
)


def test_a_read_after_a_throttle_in_an_and_runs_only_when_the_throttle_holds() -> None:
    """`if i == 0 and finish.any():` reads on the first iteration only (`and` short-circuits); the
    read written first, `finish.all() and i > 0`, runs every iteration."""
    assert findings(SHORT_CIRCUIT) == [
        (
            10,
            22,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`finish.any()`) inside a loop: the host waits for the GPU only on "
            "iterations where `i == 0`",
        ),
        (
            12,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`finish.all()`) inside a loop: the host waits for the GPU on every "
            "iteration",
        ),
    ]


LITERAL_LOOPS = dedent(
    """\
    import torch


    def replay(graph, static_in, static_out, make, reference, failures):
        for i, seed in enumerate((33, 44, 55)):
            static_in.copy_(make(seed))
            graph.replay()
            torch.cuda.synchronize()
        for seed, name in zip([1, 2], names_from_elsewhere()):
            graph.replay()
            torch.cuda.synchronize()
        for seed in sorted(seeds_from_elsewhere()):
            graph.replay()
            torch.cuda.synchronize()
    """
)


def test_a_loop_over_a_literal_through_enumerate_or_zip_runs_as_often_as_the_literal_has_items() -> None:
    assert findings(LITERAL_LOOPS) == [
        (
            8,
            8,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work 3 times (the loop runs 3 times)",
        ),
        (
            11,
            8,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work 2 times (the loop runs 2 times)",
        ),
        (
            14,
            8,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration"
            "; reported as information: nothing shows that the loop runs once per training or inference step (it walks no "
            "batches and takes no training step), and a set-up, warm-up or per-layer loop pays this only a few times",
        ),
    ]


MODEL_ALIAS = dedent(
    """\
    import torch


    class Trainer:
        def evaluate(self):
            eval_model = self.ema_model if self.use_ema else self.model
            total = 0.0
            for batch in self.test_dataloader:
                test_loss, breakdown = eval_model(**batch.to(self.device))
                total += test_loss.item()
            return total

        def evaluate_default(self):
            eval_model = default(self.ema_model, self.model)
            for batch in self.test_dataloader:
                print(eval_model(batch.to(self.device)).item())

        def memory(self, ids):
            memory_reserved = getattr(self.device_module, "memory_reserved", None)
            return {i: int(memory_reserved(i)) for i in ids}
    """
)


def test_a_local_name_bound_to_a_model_is_called_as_one() -> None:
    """`eval_model = self.ema_model if ... else self.model`: its output is the model's (spelled
    alone, `eval_model(m, data)` evaluates one and returns a score); `getattr(module, ...)` of a
    module is not a model."""
    assert findings(MODEL_ALIAS) == [
        (
            10,
            31,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            16,
            52,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


HOST_ROWS_AND_LISTS = dedent(
    """\
    import torch
    from torch import nn

    if __name__ == "__main__":
        for head_groups, ffn_heads in ((1, 1), (2, 4), (4, 2)):
            model = nn.Linear(32, 10).cuda()
            logits = model(torch.randn(2, 32, device="cuda"))
            logits.sum().backward()
            label = "shared" if head_groups == 1 else f"{head_groups} groups"
            print(f"ok ({label}, ffn_heads = {ffn_heads})")


    class Model:
        def execute(self, requests):
            reference_mel_len = []
            for request in requests:
                reference_mel_len.append(request.shape[1])
            lens = torch.LongTensor(reference_mel_len).to(self.device)
            sizes = torch.LongTensor(self.max_len).to(self.device)
            return lens, sizes
    """
)


def test_rows_of_a_literal_are_numbers_and_a_list_spelled_as_a_length_is_data() -> None:
    """The parts of `for a, b in ((1, 1), (2, 4)):` are ints even in a loop that calls
    `.backward()`; `torch.LongTensor(lens)` of a list the function appends to copies data (no
    fix to offer), while `torch.LongTensor(self.max_len)` allocates by size on the CPU."""
    assert findings(HOST_ROWS_AND_LISTS) == [
        (
            19,
            47,
            "AL302",
            "warning",
            "`torch.LongTensor(...)` is created on the CPU and then copied to the device: create it there with "
            "`torch.empty(..., dtype=torch.int64, device=...)` (a legacy constructor takes no CUDA `device=`)",
        ),
    ]


LOGGING_AND_PASSES = dedent(
    """\
    import torch


    def train(agent, envs, optimizer, writer, num_updates, update_epochs, minibatches, device):
        tr_loss = 0.0
        for update in range(1, num_updates + 1):
            for epoch in range(update_epochs):
                for mb in minibatches:
                    loss = agent.loss(mb.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    tr_loss += loss.item()
                    writer.add_scalar("losses/step", loss, update)
            writer.add_scalar("losses/value_loss", loss.item(), update)
            writer.add_scalar("losses/running", tr_loss / update, update)


    def generate(self, style_list, cond_list):
        gen = self.generator
        outputs = []
        for style, cond in zip(style_list, cond_list):
            output = gen(style.to(self.device), cond)
            outputs.append({k: v.cpu() for k, v in output.items()})
        return outputs
    """
)


def test_tensorboard_logging_and_reads_once_per_pass_of_an_inner_training_loop() -> None:
    """`writer.add_scalar(tag, loss, step)` copies a CUDA loss to the host each step; a read in a
    counting loop after the inner loop that takes the training steps runs once per pass of it; a
    loss-named sum of `.item()` reads is a number; a dict of copies appended is a result kept."""
    assert findings(LOGGING_AND_PASSES) == [
        (
            13,
            32,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every iteration",
        ),
        (
            14,
            16,
            "AL100",
            "warning",
            "logging a CUDA tensor (`loss`) with `add_scalar` inside a loop: the host waits for the GPU on every "
            "iteration",
        ),
        (
            15,
            52,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU once per pass of the training loop on line 7 "
            "(each iteration of this loop runs that loop's training steps, then this)",
        ),
        (
            24,
            29,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
    ]


LOSSES_AND_HOST_VALUES = dedent(
    """\
    import numpy as np
    import torch


    class Trainer:
        def step(self, batch):
            loss_values, num_samples = self._forward_backward(batch)
            for loss_func, loss_value, n in zip(self.loss_functions, loss_values, num_samples):
                loss_func.metric.update(loss_value.item(), n.item())

        def evaluate(self, data_iter):
            for batch in data_iter:
                outputs = self.model(batch.load(device=self.device))
                losses = [loss_function(outputs, batch.labels) for loss_function in self.loss_functions]
                for metric, (loss_value, n) in zip(self.metrics, losses):
                    metric.update(loss_value.item(), n)

        def learn(self, batch):
            loss_scales = self._segment_loss_scales(np.array([False, True]), 2)
            for start in range(0, 8, 4):
                loss = self.actor(batch.to(self.device)).mean() * float(loss_scales[start // 4])
                loss.backward()
                self.optimizer.step()


    def fit(w, iters):
        w = w.to("cuda")
        p = torch.nn.Parameter(w.clone())
        opt = torch.optim.AdamW([p], lr=1e-3)

        def _step():
            opt.zero_grad()
            loss = (p - w).abs().mean()
            loss.backward()
            opt.step()
            return np.round(loss.item(), 10)

        for i in range(iters):
            loss_out = _step()
            print(i, loss_out)
        return p
    """
)


def test_losses_through_zip_and_host_values_spelled_as_losses() -> None:
    """The rows of `zip(self.loss_functions, loss_values)` and of a list of losses computed per
    batch are losses; `loss_scales` (plural) from a method is no loss, and what a nested function
    returns as `np.round(loss.item(), 10)` is a number (its own `.item()` is the step's read)."""
    assert findings(LOSSES_AND_HOST_VALUES) == [
        (9, 47, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            9,
            57,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but an earlier read of this "
            "statement (line 9) already waited: no new wait",
        ),
        (16, 41, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            36,
            29,
            "AL100",
            "warning",
            "`.item()` in `_step`, which takes a training step: the host waits for the GPU on every training step",
        ),
    ]


PINNED_IN_PLACE_AND_SLICES = dedent(
    """\
    import torch

    device = torch.device("cuda")
    obs = torch.zeros((128, 8, 4, 84, 84))
    cudart = torch.cuda.cudart()
    cudart.cudaHostRegister(obs.data_ptr(), obs.numel() * obs.element_size(), 0)
    for update in range(100):
        gpu_obs = obs.to(device, non_blocking=True)


    def freqs(dim, device):
        return torch.arange(0, dim, 4)[: (dim // 4)].float().to(device)
    """
)


def test_memory_registered_with_cuda_is_pinned_and_a_slice_of_a_cpu_factory_is_on_the_cpu() -> None:
    assert findings(PINNED_IN_PLACE_AND_SLICES) == [
        (
            12,
            57,
            "AL302",
            "warning",
            "`torch.arange(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
    ]


HOW_OFTEN = dedent(
    """\
    import time

    import torch


    def grid_search(observed, steps=100, patience=5):
        observed = observed.to("cuda")
        best_error = torch.full(observed.shape[:1], float("inf"), device="cuda")
        no_improve = 0
        for i in range(steps):
            err = (observed - observed * (1 - i / steps)).abs().sum(dim=-1)
            improved = err < best_error
            if torch.any(improved):
                best_error = torch.where(improved, err, best_error)
                no_improve = 0
            else:
                no_improve += 1
                if no_improve >= patience:
                    break
        return best_error


    def train(model, loader, optim, logger, save_gap=50000):
        total_step, last_log = 0, -save_gap
        for x in loader:
            loss = model(x.cuda()).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
            total_step += x.shape[0]
            train_err = loss.item()
            with torch.no_grad():
                avg_loss = loss.item()
            nan_mask = torch.isnan(loss)
            if nan_mask.any():
                logger.warning(f"{nan_mask.sum().item()} NaN values")
            if total_step - last_log >= save_gap:
                last_log = total_step
                print(f"loss {loss.item():.3f}")


    def test_forward_time(model):
        x = torch.randn(4, 8, device="cuda")
        t1 = time.time()
        out = model(x)
        print(out.shape, time.time() - t1)
    """
)


def test_convergence_retries_logs_and_timings_that_do_not_run_every_step() -> None:
    """An early stop when the search no longer improves is a convergence check; a second read
    inside `with` adds no wait; the body of a test of a named NaN mask runs only on NaN; a log
    throttled by `total_step - last_log >= gap` runs once per gap; AL301 in a unit test is
    information."""
    assert findings(HOW_OFTEN) == [
        (
            13,
            11,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`torch.any(improved)`) inside a loop: the host waits for the GPU on "
            "every iteration, as the test that ends the loop (a convergence check needs the value on the host)",
        ),
        (31, 25, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            33,
            28,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the value was read on "
            "line 31 just before: no new wait",
        ),
        (
            35,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`nan_mask.any()`) inside a loop: the host waits for the GPU on every "
            "iteration",
        ),
        (
            39,
            31,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where "
            "`total_step - last_log >= save_gap`",
        ),
        (
            46,
            21,
            "AL301",
            "information",
            "`time.time()` read with no synchronize since the clock read on line 44: CUDA work is asynchronous, "
            "so the interval measures its launch, not its run time (in the test `test_forward_time`: a figure it "
            "prints, not a benchmark)",
        ),
    ]


RESULTS_AND_OBJECTS = dedent(
    """\
    import numpy as np
    import torch


    def embed(model, loader, files, dims, device="cuda"):
        pred_arr = np.empty((len(files), dims))
        text, start = [], 0
        for batch in loader:
            pred = model(batch.to(device)).cpu().numpy()
            pred_arr[start:start + pred.shape[0]] = pred
            start += pred.shape[0]
            text.append(model(batch.to(device)).cpu().to(torch.float32))
        return pred_arr, text


    class PPO:
        def __init__(self, model, rnd_cfg=None, device="cuda"):
            self.model = model
            self.rnd = RandomNetworkDistillation(device=device, **rnd_cfg) if rnd_cfg else None

        def update(self, batches):
            for x in batches:
                loss = self.model(x).mean()
                loss.backward()
                if self.rnd:
                    self.rnd.optimizer.step()

        def __str__(self):
            return ", ".join(f"{loss}" for loss in self.model.losses)
    """
)


def test_results_kept_in_a_slice_or_after_a_cast_and_objects_built_with_a_device() -> None:
    """A batch's rows stored into a slice of a result array, a copy cast on the host and appended:
    results kept; a module built with `device=` is an object, not a tensor, as a condition; a
    `__str__` runs once per call."""
    kept = "on every iteration, collecting results on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)"
    assert findings(RESULTS_AND_OBJECTS) == [
        (9, 39, "AL100", "information", f"`.cpu()` inside a loop: the host waits for the GPU {kept}"),
        (12, 44, "AL100", "information", f"`.cpu()` inside a loop: the host waits for the GPU {kept}"),
        (
            29,
            27,
            "AL100",
            "information",
            "formatting a CUDA tensor (`{loss}`) inside a loop: the host waits for the GPU per item in `__str__` "
            "(once per call, not per training step)",
        ),
    ]


LIGHTNING = dedent(
    """\
    import torch


    class Module(LightningModule):
        def training_step(self, batch, batch_idx):
            loss = self.task.loss(self(batch["input"]), batch["target"])
            self.log_dict({"train_loss": loss.item()})
            if self.log_images and self.log_train_images:
                self.log_train_images = False
                self.logger.add_image("mel", loss.detach().cpu().numpy(), self.global_step)
            return loss

        def helper_step(self, batch, batch_idx):
            return self(batch).item()
    """
)


def test_a_lightning_training_step_runs_every_batch_and_a_one_shot_flag_once() -> None:
    """Lightning calls `training_step(self, batch, batch_idx)` for every batch and runs the
    backward of the loss it returns; a block that turns off a flag its test needs runs once."""
    assert findings(LIGHTNING) == [
        (
            7,
            42,
            "AL100",
            "warning",
            "`.item()` in `training_step`, which takes a training step: the host waits for the GPU on every "
            "training step",
        ),
    ]


READS_AND_BUFFERS = dedent(
    """\
    import torch
    from torch import nn


    class Trainer(nn.Module):
        def __init__(self, model, accelerator):
            super().__init__()
            self.model, self.accelerator = model, accelerator
            self.register_buffer("steps", torch.Tensor([0]))

        def train_step(self, data):
            loss = self.cfm_wrapper(data)
            self.accelerator.backward(loss / self.grad_accum_every)
            scaled = loss / self.grad_accum_every
            self.log(total=loss.item(), scaled=scaled.item(), steps=self.steps.item())

        def train(self, loader):
            for data in loader:
                self.train_step(data)


    def get_latent(model, loader, dropdown, device="cuda"):
        latent, imputed = [], []
        for x in loader:
            z = model(x.to(device))
            latent += [z.cpu()]
            imputed.append((x.sum(-1, keepdim=True) * z.cpu()).numpy())
            dropdown.model().item(0)
        return latent, imputed
    """
)


def test_reads_after_a_read_in_one_statement_buffers_and_results_kept() -> None:
    """A later `.item()` of a value computed before the statement adds no wait once an earlier one
    waited; `accelerator.backward(loss / n)` names the loss; a registered buffer of a module never
    moved is no device attribute; `list += [t.cpu()]` and host arithmetic on a copy keep results;
    `.item(0)` is no tensor's."""
    kept = "on every iteration, collecting results on the host (`outputs.append(t.cpu())`: one copy per batch, as intended)"
    assert findings(READS_AND_BUFFERS) == [
        (
            15,
            28,
            "AL100",
            "warning",
            "`.item()` in `train_step`, which `train` calls in a loop: the host waits for the GPU on every iteration",
        ),
        (
            15,
            50,
            "AL100",
            "information",
            "`.item()` in `train_step`, which `train` calls in a loop: the host waits for the GPU on every "
            "iteration, but an earlier read of this statement (line 15) already waited: no new wait",
        ),
        (26, 21, "AL100", "information", f"`.cpu()` inside a loop: the host waits for the GPU {kept}"),
        (27, 52, "AL100", "information", f"`.cpu()` inside a loop: the host waits for the GPU {kept}"),
    ]


FITS_AND_ROLLOUTS = dedent(
    """\
    import torch


    class Mahalanobis:
        def fit_features(self, z, y, device):
            z, y = z.to(device), y.to(device)
            for c in y.unique():
                assert (y == c).sum() != 0
                self.mu[c] = z[y == c].mean(dim=0)
            return self


    def evaluate(vecenv, policy, device):
        while True:
            o, r, d = vecenv.recv()
            action = policy(torch.as_tensor(o).to(device)).argmax(-1).cpu().numpy()
            vecenv.send(action)
    """
)


def test_a_per_class_fit_and_a_rollout_through_send_and_recv_are_not_per_step_waits() -> None:
    """A detector's `fit_*` loop over its classes runs once per fit (the names of `z, y =
    z.to(device), y.to(device)` each take their own part); `vecenv.send(action)` steps the
    environment, which needs the actions on the host."""
    assert findings(FITS_AND_ROLLOUTS) == [
        (
            8,
            19,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`(y == c).sum() != 0`) inside a loop: the host waits for the GPU per "
            "item in `fit_features` (once per fit, not per training step)",
        ),
        (
            9,
            25,
            "AL100",
            "information",
            "`z[y == c]` (a boolean mask: the result's shape depends on the data) inside a loop: the host waits "
            "for the GPU per item in `fit_features` (once per fit, not per training step)",
        ),
        (
            16,
            66,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU once per environment step (the environment runs "
            "on the host and waits for its inputs)",
        ),
    ]


NINTH_REVIEW = dedent(
    """\
    import torch
    import torch.distributed as dist
    from sklearn.metrics import log_loss
    from torch.cuda import empty_cache


    def find_temperature(raw_logits, y_true, to_probs, temperatures, device):
        best_log_loss = float("inf")
        for t in temperatures:
            current_log_loss = log_loss(y_true=y_true, y_pred=to_probs(raw_logits.to(device), t))
            if current_log_loss < best_log_loss:
                best_log_loss = current_log_loss


    def train(model, loader, optimizer, device, should_skip_batch):
        for batch in loader:
            skip_t = torch.tensor([int(should_skip_batch(batch))], device=device)
            dist.all_reduce(skip_t, op=dist.ReduceOp.MAX)
            should_skip = bool(skip_t.item())
            if should_skip:
                continue
            loss = model(batch.to(device)).sum()
            loss.backward()
            optimizer.step()
            empty_cache()
    """
)


def test_host_library_functions_skip_flags_and_a_bare_empty_cache() -> None:
    """A function imported from scikit-learn returns host values, whatever its name; a flag all-
    reduced so that ranks skip a batch together is read on purpose; `empty_cache()` imported from
    `torch.cuda` is the allocator's."""
    assert findings(NINTH_REVIEW) == [
        (
            19,
            34,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, as a flag shared across "
            "ranks (all-reduced or broadcast) to stop together (every rank needs it on the host)",
        ),
        (
            25,
            8,
            "AL300",
            "warning",
            "`empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
    ]
