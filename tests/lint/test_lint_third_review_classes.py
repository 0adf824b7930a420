"""Classes of error found by the third review of real code (held-out round 9, two earlier
held-out false findings, and the whole trees of tests/lint/corpus_real/WHOLE_TREES.md "Third
review"), each with a small program
and the exact findings: line, column (0-based), code, severity and message. Each program is also
linted without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

from atenlens.lint.engine import lint_source_strict

KEPT = (
    "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host"
    " (`results[key] = t.cpu()`: one copy per result, as intended)"
)

STORED_THROUGH_A_HOST_FUNCTION = dedent(
    """\
    import torch
    from scipy.sparse import csc_matrix


    class Explainer:
        def explain(self, loader):
            results = []
            for data in loader:
                data = data.to(self.device).float()
                M_explain, masks = self.network.forward_masks(data)
                for key, value in masks.items():
                    masks[key] = csc_matrix.dot(value.cpu().detach().numpy(), self.reducing_matrix)
                results.append(masks)
            return results

        def train(self, loader):
            for data in loader:
                loss, masks = self.network(data.to(self.device))
                for key, value in masks.items():
                    masks[key] = csc_matrix.dot(value.cpu().numpy(), self.reducing_matrix)
                loss.backward()
                self.optimizer.step()
    """
)


def test_a_host_copy_stored_under_a_key_through_a_host_function_is_a_kept_result() -> None:
    """`masks[key] = csc_matrix.dot(value.cpu().numpy(), m)` keeps an explanation per batch on the
    host, as `masks[key] = value.cpu().numpy()` does (pytorch-tabnet's `explain`): information.
    In a loop that takes a training step it is a wait per step: a warning."""
    assert findings(STORED_THROUGH_A_HOST_FUNCTION) == [
        (12, 50, "AL100", "information", KEPT),
        (
            20,
            50,
            "AL100",
            "warning",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


EVALUATION_IN_AN_ENVIRONMENT = dedent(
    """\
    import time

    import torch


    def train(actor, test_env, collector, device="cuda"):
        for i, data in enumerate(collector):
            actor.eval()
            eval_start = time.time()
            test_reward = eval_model(actor, test_env, num_episodes=3)
            eval_time = time.time() - eval_start
            start = time.time()
            score = evaluate(actor, data.to(device))
            score_time = time.time() - start
            log(eval_time, score_time)
    """
)


def test_a_timed_call_handed_an_environment_is_host_work() -> None:
    """`eval_model(actor, test_env, ...)` steps the environment on the host, which waits for each
    action (torchrl's IMPALA script): no AL301. `evaluate(actor, data)`, spelled as no model and
    given no environment, is not taken for GPU work either: AL301 needs a model, a training step
    or a torch op in the interval."""
    assert findings(EVALUATION_IN_AN_ENVIRONMENT) == []
    assert findings(EVALUATION_IN_AN_ENVIRONMENT.replace("eval_model(actor, test_env", "actor(test_obs")) == [
        (
            11,
            20,
            "AL301",
            "warning",
            "`time.time()` read with no synchronize since the clock read on line 9: CUDA work is asynchronous, "
            "so the interval measures its launch, not its run time",
        )
    ]


COUNTER_RESET = dedent(
    """\
    import torch


    def attack(model, x, steps, k, device):
        x = x.to(device)
        counter = 0
        best = torch.zeros(x.shape[0], device=device)
        for i in range(steps):
            loss = model(x).sum(1)
            best = torch.maximum(best, loss)
            counter += 1
            if counter == k:
                check = best.cpu().numpy()
                counter = 0
        return best


    def train(model, loader, optimizer, accumulation, device):
        micro = 0
        for x in loader:
            loss = model(x.to(device))
            loss.backward()
            micro += 1
            if micro == accumulation:
                optimizer.step()
                print(loss.item())
                micro = 0
    """
)


def test_a_counter_that_its_if_resets_is_a_throttle() -> None:
    """`counter += 1` ... `if counter == k: ...; counter = 0` runs its body once every k iterations
    (torchattacks' APGD checkpoints): information. The same counter around the optimizer step is
    gradient accumulation: a read there runs on every optimizer step, a warning."""
    assert findings(COUNTER_RESET) == [
        (
            13,
            25,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU only on iterations where `counter == k`",
        ),
        (
            26,
            23,
            "AL100",
            "warning",
            "`.item()` inside a loop: the host waits for the GPU on every optimizer step (`micro == accumulation` gates the step of gradient accumulation)",
        ),
    ]


ONCE_PER_RUN = (
    "`.nonzero()` (its output's shape depends on the data) inside a loop: the host waits for the GPU once per call"
    " of `attack_single_run`, which runs a loop of model steps itself"
)

RESTARTS = dedent(
    """\
    import torch


    class Attack:
        def perturb(self, x, y):
            x, y = x.to(self.device), y.to(self.device)
            acc = self.model(x).max(1)[1] == y
            for restart in range(self.n_restarts):
                ind_to_fool = acc.nonzero().squeeze()
                acc_curr = self.attack_single_run(x[ind_to_fool], y[ind_to_fool])
                acc[ind_to_fool[(acc_curr == 0).nonzero().squeeze()]] = 0
            return acc

        def attack_single_run(self, x, y):
            for i in range(self.steps):
                logits = self.model(x)
                x = x + 0.01 * logits.sum()
            return logits.max(1)[1] == y

        def sweep(self, x, y):
            x, y = x.to(self.device), y.to(self.device)
            for trial in range(self.n_trials):
                out = self.model(x)
                hits = (out.argmax(1) == y).nonzero()
    """
)


def test_a_loop_whose_iterations_each_run_a_loop_of_model_steps_reads_once_per_run() -> None:
    """`for restart in range(n): ... self.attack_single_run(x, y)`, whose body loops over
    `range(self.steps)` calling the model: a read in the restart loop runs once per whole run
    (APGD, FAB, Square restarts): information. A loop that calls the model itself stays a warning."""
    assert findings(RESTARTS) == [
        (
            9,
            26,
            "AL100",
            "information",
            ONCE_PER_RUN,
        ),
        (
            11,
            28,
            "AL100",
            "information",
            ONCE_PER_RUN,
        ),
        (
            24,
            19,
            "AL100",
            "warning",
            "`.nonzero()` (its output's shape depends on the data) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


BRANCHES = dedent(
    """\
    import torch


    def generate(model, x, steps, device, early_stop):
        finished = torch.zeros((x.shape[0],), device=device, dtype=torch.bool)
        for step in range(steps):
            logits = model(x)
            if early_stop:
                finished = scheduler_check(logits, finished)
            if finished.all():
                break


    def update_losses(outputs, losses):
        if outputs[-1].keys() == ["loss"]:
            loss = outputs[-1].loss
        else:
            loss = dict()
        for name, value in loss.items():
            losses[name].append(value.item())


    def validate(model, loader, losses):
        for batch in loader:
            outputs = model.val_step(batch)
            update_losses(outputs, losses)


    def cpu_or_gpu(model, loader, use_gpu):
        for batch in loader:
            out = model(batch)
            if use_gpu:
                out = out.cuda()
            else:
                out = out.cpu()
            print(out.sum().item())
    """
)


def test_a_read_after_an_if_else_sees_the_device_tensor_either_branch_binds() -> None:
    """After `if a: x = <CUDA> ` with the binding before the `if` (or an `else`) on the device or
    of unknown device, a read may see the CUDA tensor (diffusers' LLaDA2 `finished`, mmengine's
    `_update_losses`, whose `loss` is a model output in one branch and `dict()` in the other)."""
    assert findings(BRANCHES) == [
        (
            10,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`finished.all()`) inside a loop: the host waits for the GPU on every iteration",
        ),
        (20, 34, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


CONDITION = "a CUDA tensor as a condition (`{}`) inside a loop: the host waits for the GPU on every iteration"

NAMES = dedent(
    """\
    import json

    import torch


    def train(args, loader, device="cuda"):
        for idx in range(args.ensemble_size):
            model = build_model(args).to(device)
            if model.predictor.n_targets > 1:
                pass
            score = evaluate_model(model, loader)
            if score > args.best:
                args.best = score
            library = required_library_for_model(args.model_id)
            print(f"needs {library}")


    def select(path, device="cuda"):
        for model in json.load(open(path))["models"]:
            status = model.get("status", 0)
            if status == 1:
                continue


    def transcribe_all(files, device="cuda"):
        model = load_asr().to(device)
        for f in files:
            result = model.transcribe(f)
            for segment in result["segments"]:
                if segment["start"] < segment["end"]:
                    pass
    """
)


def test_builders_evaluators_and_records_spelled_like_models_are_not_model_outputs() -> None:
    """`build_model(args)` builds a model, `evaluate_model(m, data)` returns a score,
    `required_library_for_model(id)` a string, `model.get("status")` reads a JSON record and
    `model.transcribe(f)` returns text and timings: none is a model's output tensor."""
    assert findings(NAMES) == []
    # the same reads of what a model call returns are reported (the first once per model built)
    called = NAMES.replace("evaluate_model(model, loader)", "model(loader)").replace(
        'model.get("status", 0)', "model(path)"
    )
    assert findings(called) == [
        (
            12,
            11,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`score > args.best`) inside a loop: the host waits for the GPU once per"
            " `build_model(...)`, as each iteration loads a model or a file",
        ),
        (21, 11, "AL100", "warning", CONDITION.format("status == 1")),
    ]


MOVED = dedent(
    """\
    import torch


    def train(model, loader, optimizer, tokenizer, device):
        for step, (images, ids) in enumerate(loader):
            labels = ids.clone()
            for i in range(labels.shape[0]):
                ends = torch.where(labels[i] == tokenizer.eos_token_id)[0]
                if labels[i][0] != tokenizer.bos_token_id:
                    labels[i][0] = -100
            labels = labels.to(device)
            loss = model(images.to(device), labels)
            loss.backward()
            optimizer.step()


    def train_classes(model, dataset, optimizer, device, weighted):
        for sentences, labels in dataset:
            outputs = model(sentences)
            if weighted:
                targets = torch.stack([torch.tensor([1, 0]) if label == 0 else torch.tensor([0, 1]) for label in labels])
            else:
                targets = labels.to(device)
            loss = outputs.sum() - targets.sum()
            loss.backward()
            optimizer.step()
            if labels[0] == 0:
                print(loss.item())
    """
)


def test_a_value_the_function_moves_to_the_device_is_on_the_host_where_it_is_read() -> None:
    """`labels = labels.to(device)` after the label loop, or `targets = labels.to(device)` in one
    branch: the code moves that value to the device, so it is on the host where it is read
    (open_flamingo's label masking, stanza's lemma classifier). The model's loss still is not."""
    assert findings(MOVED) == [
        (28, 23, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


LOOPS = dedent(
    """\
    import torch
    from tqdm import tqdm


    def train(model, loader, optimizer, epoch, steps_per_epoch, device):
        for step, batch in tqdm(enumerate(loader), initial=epoch * steps_per_epoch):
            loss = model(batch.to(device))
            loss.backward()
            optimizer.step()
            if torch.isnan(loss):
                print("nan")


    def count(model, loader, stats, device):
        for batch in loader:
            lengths = batch["lengths"].to(device)
            out = model(batch["src"].to(device), lengths)
            stats.src += lengths.sum().item()
            stats.total += lengths.sum().item()
            stats.loss += out.loss.item()
    """
)


def test_progress_bar_settings_and_repeated_reads() -> None:
    """`tqdm(enumerate(loader), initial=epoch * steps)` iterates batches, not epochs: a read there is
    per step. `lengths.sum().item()` read again on the next line waits for nothing new
    (OpenNMT's word counts): information; so does `out.loss.item()` after it, a value computed
    before those reads (the sum inside the read above is waited for by that read)."""
    assert findings(LOOPS) == [
        (
            10,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(loss)`) inside a loop: the host waits for the GPU on every iteration",
        ),
        (18, 35, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            19,
            37,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the value was read on line 18 just before: no new wait",
        ),
        (
            20,
            31,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the read on line 19 just "
            "before already waited for it: no new wait",
        ),
    ]


WHOLE_FITS = dedent(
    """\
    import torch
    from torch import nn


    class TemperatureScaling(nn.Module):
        def train_calibration(self, logits, labels):
            logits = torch.as_tensor(logits, device=self.device)
            labels = torch.as_tensor(labels, device=self.device)
            criterion = nn.CrossEntropyLoss()
            before = criterion(logits, labels).item()
            optimizer = torch.optim.LBFGS([self.temperature], lr=0.01, max_iter=50)

            def closure():
                optimizer.zero_grad()
                loss = criterion(logits / self.temperature, labels)
                loss.backward()
                return loss

            optimizer.step(closure)
            return before, criterion(logits / self.temperature, labels).item()


    class SAC:
        def update_q_func(self, batch):
            predict_q1 = torch.flatten(self.q_func1((batch["state"].to(self.device), batch["action"])))
            loss1 = 0.5 * ((batch["target"] - predict_q1) ** 2).mean()
            self.q1_record.extend(predict_q1.detach().cpu().numpy())
            self.q_func1_optimizer.zero_grad()
            loss1.backward()
            self.q_func1_optimizer.step()
    """
)


def test_a_closure_step_is_a_whole_fit_and_q_functions_are_models() -> None:
    """`optimizer.step(closure)` with the closure defined in the function (L-BFGS) runs a whole fit
    per call, not one training step of a loop: reads around it are silent (ludwig's temperature
    calibration). `self.q_func1(...)` is a model (pfrl's SAC): its prediction copied to the host
    in a function that takes a training step is a wait per step."""
    assert findings(WHOLE_FITS) == [
        (
            27,
            50,
            "AL100",
            "warning",
            "`.cpu()` in `update_q_func`, which takes a training step: the host waits for the GPU on every training step",
        )
    ]


AGENT = dedent(
    """\
    import torch
    import torch.distributed as dist


    class Agent:
        def env_step(self, actions):
            obs, rewards, dones, infos = self.vec_env.step(actions.cpu().numpy())
            return obs, torch.from_numpy(rewards).to(self.device), torch.from_numpy(dones).to(self.device), infos

        def play_steps(self):
            for n in range(self.horizon_length):
                actions = self.model(self.obs)
                self.obs, rewards, self.dones, infos = self.env_step(actions)
                done_indices = self.dones.nonzero(as_tuple=False)

        def train(self):
            while True:
                epoch_num = self.update_epoch()
                self.train_epoch()
                mean_rewards = self.game_rewards.get_mean()
                if mean_rewards[0] > self.best:
                    self.best = mean_rewards[0]
                should_exit = torch.tensor(epoch_num >= self.max_epochs, device=self.device)
                dist.broadcast(should_exit, 0)
                if should_exit.item():
                    return epoch_num

        def prune_node(self, threshold):
            for layer in self.layers:
                scores = layer.weight.abs().sum(1).to(self.device)
                keep = torch.where(scores > threshold)[0]
                layer.keep(keep)
    """
)


def test_environment_wrappers_epoch_counters_getters_and_pruning() -> None:
    """An agent's own `self.env_step(actions)` steps the environment (information per environment
    step); `while True: epoch_num = self.update_epoch()` is an epoch loop; `meter.get_mean()` of
    a module moved to the device is its own method (no tensor method is spelled `get_*`), so
    its result is of unknown device; a loop in `prune_node` runs once per pruning
    (rl_games, pykan)."""
    assert findings(AGENT) == [
        (
            14,
            27,
            "AL100",
            "information",
            "`.nonzero()` (its output's shape depends on the data) inside a loop: the host waits for the GPU once per"
            " environment step (the environment runs on the host and waits for its inputs)",
        ),
        (25, 27, "AL100", "information", "`.item()` inside a loop: the host waits for the GPU once per epoch"),
        (
            31,
            19,
            "AL100",
            "information",
            "`torch.where(...)` (its output's shape depends on the data) inside a loop: the host waits for the GPU per"
            " item in `prune_node` (once per call, not per training step)",
        ),
    ]


STEPS = dedent(
    """\
    import torch


    def run(model, loader, device, world_size):
        for x in loader:
            av = model(x.to(device)).mean()
            av /= world_size
            print(av.item())


    def interactions(model, width, device, threshold):
        found = {}
        for i in range(width):
            score = model.attribute(i)
            features = tuple(torch.where(score > threshold)[0].detach().numpy())
            found[features] = found.get(features, 0) + 1
        return found


    def fit(model, data, steps, device):
        optimizer = torch.optim.Adam(model.parameters())
        history = []
        for _ in range(steps):
            loss = ((model(data["x"].to(device)) - data["y"].to(device)) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append(loss.sqrt().cpu().detach().numpy())
        return history


    def attack(model, x, y, steps, device):
        x = x.to(device)
        losses = torch.zeros(steps)
        for i in range(steps):
            x.requires_grad_(True)
            loss = model(x).sum()
            grad = torch.autograd.grad(loss, [x])[0]
            losses[i] = loss.detach().cpu()
            x = (x + 0.01 * grad.sign()).detach()


    def train_gan(netD, netG, loader, criterion, device):
        for real in loader:
            output = netD(real.to(device))
            print(output.mean().item())
    """
)


def test_in_place_updates_numpy_results_loss_histories_and_gradient_steps() -> None:
    """`av /= world_size` keeps the model's output it updates (rl_games' KL average); the result
    of `torch.where(m)[0].detach().numpy()` is on the host, or `.numpy()` would raise (pykan);
    a loss history appended in a loop that takes a training step is a wait per step, and so is
    a copy in a loop that steps with `torch.autograd.grad` (torchattacks' APGD); `netD(x)` is a
    model (DCGAN)."""
    assert findings(STEPS) == [
        (8, 17, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (28, 35, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (39, 34, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (46, 28, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


EMPTY_CACHE_PER_MODEL = (
    "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again"
    "; it runs once per `from_pretrained(...)`, as each iteration loads a model or a file"
)

MISC = dedent(
    """\
    import gc

    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM


    def generate(og, model, params, tokens, max_tokens):
        generator = og.Generator(model, params)
        generated = []
        while len(generated) < max_tokens:
            generator.generate_next_token()
            seq = generator.get_sequence(0)
            generated.append(int(seq[len(tokens) + len(generated)]))
        return generated


    def resample_seg(data, new_shape, device: torch.device = torch.device("cpu")):
        data = data.to(device)
        result = torch.zeros((data.shape[0], *new_shape), dtype=torch.int8)
        for u in torch.unique(data):
            mask = F.interpolate((data[None] == u).float(), new_shape)[0] > 0.5
            result[mask] = u.item()
        return result


    def verify_models(model_ids, device="cuda"):
        for model_id in model_ids:
            model = AutoModelForCausalLM.from_pretrained(model_id).to(device)
            run_benchmarks(model)
            del model
            gc.collect()
            torch.cuda.empty_cache()


    def resample_all(volumes, device="cuda"):
        for volume in volumes:
            result = resample_seg(volume, (64, 64), device=device)
            print(result.sum().item())
    """
)


def test_constructors_cpu_default_devices_and_loops_that_load_models() -> None:
    """`og.Generator(model, params)` builds an object (a class name), it runs no model
    (onnxruntime-genai in lm_eval); `.to(device)` with a parameter whose default is the CPU is a
    CPU tensor unless a call in a loop of the file passes another device (nnunetv2's resampling,
    whose `u.item()` is reported only while `resample_all` passes `device="cuda"`);
    `empty_cache()` in a loop that loads a model each iteration runs once per model loaded."""
    assert findings(MISC) == [
        (24, 25, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            34,
            8,
            "AL300",
            "information",
            EMPTY_CACHE_PER_MODEL,
        ),
    ]
    alone = MISC[: MISC.index("def resample_all")].rstrip() + "\n"
    assert findings(alone) == [
        (
            34,
            8,
            "AL300",
            "information",
            EMPTY_CACHE_PER_MODEL,
        )
    ]


GRADIENT_RUNS = dedent(
    """\
    import logging

    import torch

    logger = logging.getLogger(__name__)


    class APGD:
        def perturb(self, x, y):
            x, y = x.to(self.device), y.to(self.device)
            acc = self.get_logits(x).max(1)[1] == y
            for counter in range(self.n_restarts):
                ind_to_fool = acc.nonzero().squeeze()
                best = self.attack_single_run(x[ind_to_fool], y[ind_to_fool])
            return acc

        def attack_single_run(self, x, y):
            for i in range(self.steps):
                x.requires_grad_()
                loss = self.loss(self.get_logits(x), y)
                grad = torch.autograd.grad(loss, [x])[0]
                x = (x + 0.01 * grad.sign()).detach()
            return x


    def report(metrics, scores, device="cuda"):
        for metric in metrics:
            logger.info(f"test/{metric.alias}: {scores[metric.alias]}")
    """
)


def test_a_run_of_gradient_steps_and_attributes_named_as_text() -> None:
    """The inner loop of `attack_single_run` steps with `torch.autograd.grad` on logits from
    `self.get_logits(x)` (torchattacks' APGD): each restart is a whole run. `metric.alias` is a
    name, text (chemprop)."""
    assert findings(GRADIENT_RUNS) == [
        (
            13,
            26,
            "AL100",
            "information",
            ONCE_PER_RUN,
        )
    ]


WHILE_RUNS = dedent(
    """\
    import torch


    class FAB:
        def perturb(self, x, y):
            x, y = x.to(self.device), y.to(self.device)
            acc = self.get_logits(x).max(1)[1] == y
            for counter in range(self.n_restarts):
                ind_to_fool = acc.nonzero().squeeze()
                adv = self.attack_single_run(x[ind_to_fool], y[ind_to_fool])
                acc_curr = self.get_logits(adv).max(1)[1] == y[ind_to_fool]
                acc[ind_to_fool[(acc_curr == 0).nonzero().squeeze()]] = 0
            return acc

        def attack_single_run(self, x, y):
            counter_iter = 0
            while counter_iter < self.steps:
                df, dg = self.get_diff_logits_grads_batch(x, y)
                x = x + 0.01 * dg.sign()
                counter_iter += 1
            return x
    """
)


def test_a_while_loop_over_steps_that_queries_logits_is_a_whole_run() -> None:
    """FAB's `attack_single_run` loops `while counter_iter < self.steps:` over
    `self.get_diff_logits_grads_batch(x, y)`: each restart is a whole run (torchattacks)."""
    assert findings(WHILE_RUNS) == [
        (*row, ONCE_PER_RUN) for row in [(9, 26, "AL100", "information"), (12, 28, "AL100", "information")]
    ]


COLLECTED = (
    "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host"
    " (`outputs.append(t.cpu())`: one copy per batch, as intended)"
)
LEAVES = (
    "{} inside a loop: the host waits for the GPU once, on the iteration that leaves the loop (its block ends in"
    " `break` or `return`)"
)
RETRY = (
    "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again;"
    " it runs once per attempt of a retry loop (it stops at the first success)"
)

INPUT_GRADIENTS = dedent(
    """\
    import numpy as np
    import torch


    class Classifier:
        def loss_gradient(self, x, y):
            x_t = torch.as_tensor(x, device=self._device).requires_grad_(True)
            loss = self._loss(self._model(x_t), torch.as_tensor(y, device=self._device))
            self._model.zero_grad()
            loss.backward()
            return x_t.grad.cpu().numpy()

        def fit_step(self, x, y):
            loss = self._loss(self._model(x.to(self._device)), y.to(self._device))
            loss.backward()
            self._optimizer.step()
            return loss.cpu().numpy()


    def train(model, loader, loss_weight: float, device):
        for x in loader:
            loss = model(x.to(device))
            if loss_weight > 0:
                loss = loss * loss_weight
            if loss > 100:
                print("diverging")
    """
)


def test_input_gradients_and_settings_named_after_a_loss() -> None:
    """`x.requires_grad_(True)` ... `loss.backward()` with no optimizer step computes the gradient
    of an input (ART's `loss_gradient`, a saliency map): no training step, silent. With an
    optimizer step it is one (`fit_step`). `loss_weight` is a setting of a loss, not a loss."""
    assert findings(INPUT_GRADIENTS) == [
        (
            17,
            20,
            "AL100",
            "warning",
            "`.cpu()` in `fit_step`, which takes a training step: the host waits for the GPU on every training step",
        ),
        (
            25,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`loss > 100`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


KEPT_RESULTS = dedent(
    """\
    import numpy as np
    import pandas as pd
    import soundfile as sf
    import torch
    import typing as tp


    class Artifact:
        def __init__(self, data):
            self.data = data


    class ArithmeticDecoder:
        def pull(self, cdf: torch.Tensor) -> tp.Optional[int]:
            return int(cdf.argmax())


    def predict(model, inputs, batch_size, device, out_dir):
        sizes = np.zeros(inputs.shape[0], dtype=int)
        artifacts = []
        for m in range(len(inputs) // batch_size):
            begin, end = m * batch_size, (m + 1) * batch_size
            with torch.no_grad():
                audio, lengths = model(inputs[begin:end].to(device))
            sizes[begin:end] = lengths.cpu().numpy()
            for idx in range(audio.size(0)):
                audio_np = audio[idx].float().cpu().numpy()[: sizes[begin + idx]]
                sf.write(f"{out_dir}/{begin + idx}.wav", audio_np, 22050)
                first = audio[idx, 0].cpu()
                artifacts.append(Artifact(data=first))
                last = audio[idx, -1].cpu()
                artifact = Artifact(data=last)
                artifacts.append(artifact)
        return sizes, artifacts


    def decode(pdfs, symbols, decoder):
        for pdf, symbol in zip(pdfs, symbols):
            if decoder.pull(pdf) == symbol:
                continue


    def align(rows, spans, device):
        model = torch.nn.Linear(2, 2).to(device)
        frame = pd.DataFrame(rows)
        for start, end in spans:
            current = frame.loc[(frame.index >= start) & (frame.index <= end)]
            for word in current["word"].unique():
                print(word)
    """
)


def test_results_stored_written_or_kept_after_one_host_step() -> None:
    """Copies stored by slice into a result array (`sizes[begin:end] = t.cpu().numpy()`), sliced and
    written to a file (`sf.write(path, audio_np, rate)`), or wrapped in an object bound to a name
    that the loop then keeps, are kept results: information (ART, NeMo). A method annotated
    `-> tp.Optional[int]` returns a Python number; `frame.loc[...]` is a pandas frame (whisperx)."""
    assert findings(KEPT_RESULTS) == [
        (
            25,
            35,
            "AL100",
            "information",
            KEPT,
        ),
        (
            27,
            42,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`save(path, t.cpu())`: one copy per result written, as intended)",
        ),
        (
            29,
            34,
            "AL100",
            "information",
            COLLECTED,
        ),
        (
            31,
            34,
            "AL100",
            "information",
            COLLECTED,
        ),
    ]


LEAVING = dedent(
    """\
    import gc

    import torch


    def optimize(poison, target, feat, max_iter, threshold, device):
        poison = poison.to(device)
        for i in range(max_iter):
            poison.requires_grad_()
            loss = torch.norm(feat(poison) - target) ** 2
            loss.backward()
            poison = (poison - 0.01 * poison.grad).detach()
            if loss.item() < threshold:
                print(f"converged at {loss.item()}")
                final = poison.detach().cpu().numpy()
                break
        return final


    def best_patch(grads, size, device):
        grads = grads.to(device)
        best = None
        for i in range(0, grads.shape[0], size):
            patch = grads[i : i + size].sum()
            if best is None or patch.item() < best:
                best = patch.item()
        return best


    class Attack:
        def generate(self, loader, max_iter):
            for _ in range(max_iter):
                for x in loader:
                    loss = self.model(x.to(self.device)).sum()
                    loss.backward()
                    if self.summary_writer is not None:
                        self.summary_writer.add(x.detach().cpu().numpy())

        def fit_with_largest_batch_size(self, batch_size):
            while True:
                gc.collect()
                torch.cuda.empty_cache()
                try:
                    self.fit(batch_size)
                except RuntimeError:
                    batch_size //= 2
                else:
                    break
    """
)


def test_blocks_that_leave_the_loop_repeated_reads_opt_in_writers_and_retries() -> None:
    """Reads in a block that ends in `break` run once, when the loop is left; the test above them
    runs every iteration (a walk over `grads.shape[0]` in chunks of `size`: once per chunk). A read
    of what the `if` test just read waits for nothing new. Copies
    under `if self.summary_writer is not None:` run only when the user turns logging on. A
    `while True:` whose `try` breaks in its `else` retries until the first success (coqui's
    `fit_with_largest_batch_size`)."""
    assert findings(LEAVING) == [
        (13, 16, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            14,
            39,
            "AL100",
            "information",
            LEAVES.format("`.item()`"),
        ),
        (
            15,
            36,
            "AL100",
            "information",
            LEAVES.format("`.cpu()`"),
        ),
        (
            25,
            33,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU once per chunk of `size` rows of `grads`",
        ),
        (
            26,
            25,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the value was read on line 25 just before: no new wait",
        ),
        (
            37,
            55,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU only on iterations where `self.summary_writer is not None`",
        ),
        (
            42,
            12,
            "AL300",
            "information",
            RETRY,
        ),
    ]


SCALED_STEPS = dedent(
    """\
    import torch


    class Trainer:
        def train(self, loader):
            for _ in range(self.gradient_accumulate_every):
                fake = self.GAN.G(next(loader).cuda(self.rank))
                disc_loss = self.discriminator(fake).mean()
                self.D_scaler.scale(disc_loss).backward()
            self.last_disc_loss = disc_loss.item()
            self.D_scaler.step(self.GAN.D_opt)
            self.D_scaler.update()


    def train_loop(model, loader, optimizer, device):
        for x in loader:
            gen_loss, disc_loss = model(x.to(device))
            (gen_loss + disc_loss).backward()
            optimizer.step()
            if any(torch.isnan(l) for l in (gen_loss, disc_loss)):
                print("NaN detected")
    """
)


def test_gradscaler_steps_and_any_over_tensors() -> None:
    """`self.D_scaler.step(self.GAN.D_opt)` is the function's optimizer step, so a read in it runs
    once per training step; `any(torch.isnan(l) for l in ...)` takes each tensor's truth on the
    host (lightweight-gan, stylegan2)."""
    assert findings(SCALED_STEPS) == [
        (
            10,
            40,
            "AL100",
            "warning",
            "`.item()` in `train`, which takes a training step: the host waits for the GPU on every training step",
        ),
        (
            20,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(l)`) inside a loop: the host waits for the GPU on every iteration (2 times each)",
        ),
    ]


PINNED_WHERE_POSSIBLE = dedent(
    """\
    import numpy as np
    import torch
    from lib import PIN_MEMORY, _resize_cache, np_to_pinned_tensor


    def upload(n, device, cpu, gpu, ids: np.ndarray, buf):
        host = torch.zeros(n, dtype=torch.int32, pin_memory=PIN_MEMORY)
        a = host.to(device, non_blocking=True)
        b = gpu.copy_(cpu.pin_memory() if PIN_MEMORY else cpu, non_blocking=True)
        buf[: len(ids)].copy_(np_to_pinned_tensor(ids), non_blocking=True)
        return a, b


    def finalize(output, workspace, c3, counts, m, k, path, device):
        output.copy_(_resize_cache(workspace, (m, k)), non_blocking=True)
        output.copy_(c3.view(m, k, -1).sum(dim=1), non_blocking=True)
        output.copy_(torch.cumsum(counts, dim=0), non_blocking=True)
        made = torch.tensor([m, k]).to(device, non_blocking=True)
        loaded = torch.load(path).to(device, non_blocking=True)
        return made, loaded
    """
)


def test_al200_pinning_flags_helpers_and_results_of_functions_of_elsewhere() -> None:
    """Pinned where pinning is possible: `pin_memory=PIN_MEMORY`, `x.pin_memory() if PIN_MEMORY
    else x`, `np_to_pinned_tensor(ids)` (vLLM). The result of a function of elsewhere, and torch
    ops or tensor methods on a tensor of unknown origin, are not taken for pageable memory made
    here; `torch.tensor(...)` and `torch.load(...)` are (reported)."""
    pageable = (
        "`non_blocking=True` copy from memory not known to be pinned: from pageable memory the host waits for the"
        " copy; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`)"
    )
    assert findings(PINNED_WHERE_POSSIBLE) == [
        (*row, pageable) for row in [(18, 43, "AL200", "warning"), (19, 41, "AL200", "warning")]
    ]


JAX_ONLY = dedent(
    """\
    import jax
    import jax.numpy as jnp


    class PPO:
        def update(self, batches, device):
            cumulative_policy_loss = 0
            for batch in batches:
                grad, policy_loss = self._update_policy(self.policy.act, batch)
                self.policy_optimizer = self.policy_optimizer.step(grad=grad, model=self.policy)
                cumulative_policy_loss += policy_loss.item()
            return cumulative_policy_loss
    """
)


def test_a_jax_file_without_torch_gets_no_findings() -> None:
    """skrl's JAX agents call `.item()` on JAX arrays; a file that imports JAX (or TensorFlow,
    Keras, MLX) and neither imports nor uses torch is not PyTorch code: no findings. With
    `import torch` the same code is linted."""
    assert findings(JAX_ONLY) == []
    assert [(f.line, f.code) for f in lint_source_strict(JAX_ONLY + "import torch\n")] == [(11, "AL100")]


VLLM_NAMES = dedent(
    """\
    from dataclasses import dataclass

    import torch
    from vllm.forward_context import get_forward_context


    @dataclass
    class LogprobsTensors:
        token_ids: torch.Tensor
        logprobs: torch.Tensor


    def to_cpu_nonblocking(token_ids, logprobs):
        return LogprobsTensors(token_ids.to("cpu", non_blocking=True), logprobs=logprobs.to("cpu", non_blocking=True))


    def indexer(q: torch.Tensor):
        ctx = get_forward_context()
        for chunk in ctx.attn_metadata.chunks:
            if chunk.num_tokens == 0:
                q.zero_()


    def step_positions(pooled: list, pooling_metadata, step_tag_id: int):
        out = []
        for data, token_id_cpu in zip(pooled, pooling_metadata.get_prompt_token_ids_cpu()):
            idx_cpu = (token_id_cpu == step_tag_id).nonzero(as_tuple=True)[0]
            out.append(data[idx_cpu.to(data.device)])
        return out


    def train(model, loader, opt, epochs, device):
        total = 0.0
        for epoch in range(epochs):
            for step_in_epoch, data in enumerate(loader):
                loss = model(data.to(device))
                loss.backward()
                opt.step()
                total += loss.item()
        return total
    """
)


def test_constructors_keep_copies_and_names_that_say_where_values_live() -> None:
    """A non-blocking copy handed to a dataclass keeps it, no read (AL201); `get_forward_context()`
    is no forward; `*_cpu` names are host copies and a parameter annotated `int` a number (vLLM);
    `step_in_epoch` counts steps, not epochs (verl)."""
    assert findings(VLLM_NAMES) == [
        (39, 26, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]


MADE_HERE = dedent(
    """\
    import torch
    import torch.nn.functional as F


    class Vision:
        def get_pos_ids(self, grid):
            return [torch.arange(int(h) * int(w)) for _, h, w in grid.tolist()]

        def rot_pos_emb(self, grid_cpu):
            pos_ids = torch.cat(self.get_pos_ids(grid_cpu), dim=0)
            return pos_ids.to(self.device, non_blocking=True)

        def prepare_meta(self, grid_cpu):
            lengths = torch.repeat_interleave(grid_cpu[:, 1] * grid_cpu[:, 2], grid_cpu[:, 0])
            cu_seqlens_cpu = F.pad(lengths.cumsum(dim=0, dtype=torch.int32), (1, 0), value=0)
            return cu_seqlens_cpu.to(self.device, non_blocking=True)

        def set_lora(self, index, lora_a):
            lora_a = self.slice_lora_a(lora_a)
            self.lora_a_stacked[index, : lora_a.shape[0]].copy_(lora_a, non_blocking=True)
    """
)


def test_al200_host_tensors_made_by_a_method_of_the_file_or_torch_functional() -> None:
    """`torch.cat(self.get_pos_ids(grid))` of a method of the file that builds with `torch.arange`
    and no `device=`, and `F.pad(...)` of host tensors (`F` is torch's module, not a tensor), are
    pageable memory made here (vLLM's dots3 vision); a method not in the file
    (`self.slice_lora_a(w)`) may return the caller's pinned weight: trusted."""
    pageable = (
        "`non_blocking=True` copy from memory not known to be pinned: from pageable memory the host waits for the"
        " copy; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`)"
    )
    assert findings(MADE_HERE) == [
        (*row, pageable) for row in [(11, 39, "AL200", "warning"), (16, 46, "AL200", "warning")]
    ]


EVALUATION_HOOKS = dedent(
    """\
    import torch


    class Diarizer:
        def test_batch(self, loader, device):
            for batch in loader:
                preds = self.model(batch.to(device))
                print(preds.argmax(-1).tolist())
                torch.cuda.empty_cache()

        def test_step(self, batch, batch_idx):
            logits = self.model(batch["x"])
            for head in range(self.num_heads):
                print(logits[head].sum().item())


    def test_forward(model, device):
        for _ in range(100):
            out = model(torch.randn(2, 8, device=device))
            assert out.sum().item() > -1e9
    """
)


def test_evaluation_hooks_spelled_with_test_are_not_unit_tests() -> None:
    """`test_step` (Lightning) and `test_batch` (NeMo) run on every batch of a test set: their
    loops are evaluation loops (warnings); a module-level `test_forward` is a unit test."""
    assert findings(EVALUATION_HOOKS) == [
        (8, 35, "AL100", "warning", "`.tolist()` inside a loop: the host waits for the GPU on every iteration"),
        (
            9,
            12,
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (14, 37, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            20,
            25,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU 100 times (the loop runs 100 times)",
        ),
    ]
