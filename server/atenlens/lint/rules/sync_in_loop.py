"""AL100 sync-in-loop: reading a CUDA tensor on the host inside a loop.

What it does:
    Flags, inside a `for`/`while` loop or a comprehension (its body, a `while` condition, a
    comprehension's element and conditions; not a `for` loop's iterable or `else`, not a nested
    `def`/`lambda`), each way the host reads a tensor that is on the GPU:
    `.item()`, `.tolist()`, a blocking `.cpu()`; `float(t)`, `int(t)`, `bool(t)`, `str(t)`, and
    the math module's one-argument functions (`math.isnan(grad_norm)`, `math.sqrt(t)`: they convert
    with `__float__`);
    a tensor built from a list of CUDA tensors (`torch.tensor([torch.min(x), torch.max(x)])`: one
    read per element); a CUDA tensor as a slice bound (`masks[i, y1:y2]` with `y1, y2` unpacked
    from a box on the GPU: `__index__` reads it);
    a tensor as a condition (`if torch.isnan(loss) or torch.isinf(loss):`, `if mask.any():`,
    `while t:`, `x if t else y`, `[i for i, k in enumerate(mask) if k]`, `assert t`); printing or formatting it (`print(loss)`, `f"{loss}"`,
    `"loss=%.4f" % loss`, `("%11s" * 2 + "%11.4g" * 3) % (epoch, i, *mloss)`,
    `"{:.4f}".format(loss)`; not the text a chat model yields, `for response, history in
    model.stream_chat(...)`), logging it with TensorBoard's `writer.add_scalar(tag, loss, step)`
    (the writer copies it to the host as a number); and
    operations whose output shape depends on the data (`.nonzero()`, `torch.nonzero`,
    `.unique()`, `torch.where(mask)` with one argument, `torch.masked_select`, `.argwhere()`,
    `torch.bincount` (its length is the largest value plus one), `torch.repeat_interleave` /
    `.repeat_interleave()` with repeats in a CUDA tensor and no `output_size=` (the output's length is
    their sum, read on the host: `seqlens.repeat_interleave(...)`, not `x.repeat_interleave(2, dim=0)`),
    reading `x[mask]` with a boolean mask, in any index position (`x[:, labels == 1]`), or with a
    row of one (`x[keep[i]]`), or masks combined with `&`, `|`, `^`, or a reduction along a
    dimension (`perm[..., (perm != ident).any(dim=0)]`); reported when `x` is likely on
    the GPU or the mask is (a mask on the GPU indexes only a tensor there), and not when the read
    makes a host copy the loop keeps, `pairs.append(torch.log(pi[valid]).cpu().numpy())`, reported
    once, as that copy); a boolean-mask assignment whose value is a tensor on
    the device (`lprobs[lprobs != lprobs] = torch.tensor(-math.inf).to(lprobs)`, a value moved with
    `.to(t)` / `.type_as(t)` next to the target or another tensor not known to be on the host, or
    one likely on the device, into a target the masked read would report: `index_put_` takes the
    `masked_fill_` path only for a Python number or a one-element CPU tensor, and otherwise turns
    the mask into indices with `nonzero`; not `x[mask] = 0`, `x[mask] = float("-inf")`, a name
    bound to a number or `x[mask] = torch.tensor(0.)` left on the CPU, and `x[mask] = y[mask]` is
    reported once, as the read); writing a CUDA tensor into a CPU tensor
    (`losses[k] = loss` with `losses = torch.zeros(n)`: a copy to the host). `scaler.step(optimizer)` of a `GradScaler` (fp16
    loss scaling reads its inf/NaN flag on the host once per step) is reported at information
    level: it is the price of fp16 loss scaling, not a mistake (not a scaler made with
    `enabled=False`, which checks nothing).
    Also `.item()`, `.tolist()` and a blocking `.cpu()` outside any loop of a function
    that a loop of the file calls on every iteration (a method as `self._train_batch(x, y)` in
    its class, a module-level function by name or registered as a gradient hook,
    `loss.register_hook(raise_if_nan)`, which every backward runs; not under a throttle or in a
    short loop, which stay silent): the function runs once per iteration of that loop, and the
    message names both (`in `_train_batch`, which `_train_epoch` calls in a loop`). The same
    reads outside any loop of a function that takes one training step per call outside its
    loops (`loss.backward()`, `self.critic_optim.step()`: `update_critic(batch)`, `train_step`;
    a LightningModule's `training_step(self, batch, batch_idx)`, whose backward Lightning runs;
    not a `test_*` function, not one that computes an input's gradient and steps no optimizer,
    setting `requires_grad` or named for it, `loss_gradient`; not under `if step % N == 0:` or a
    flag the block turns off) are reported for every training
    step, as a training loop, often in another module, calls such a function once per step
    (`in `update_critic`, which takes a training step`). The same reads outside any loop of a
    module's `forward` (a method of a class with a base) are reported for every forward pass:
    a step runs it once, a transformer's layer once per layer (BART's `if not
    torch.isfinite(hidden_states).all():` in fp16, JetMoE's `expert_size.tolist()`); not in a
    `forward` that walks the timesteps itself (a pipeline stage's, once per request); a `.cpu()`
    copy that `forward` returns is information (`return out.cpu()`: the module hands its output
    back on the host by design, as an RPC stage or a vocoder's waveform does); and not
    under `if <flag>:` of a parameter that defaults to `False` (`forward(self, x,
    include_embeddings=False)`: only a caller that asks runs it). In these kinds of function a
    check for
    NaN or infinity as a condition (`if not torch.isfinite(loss):`, `if torch.isnan(x).any():`)
    is reported too; other conditions and `float(t)` outside loops are not looked at.
    A method is not taken as per-iteration by its name (`on_batch_end`, `after_batch`,
    `on_train_batch_end`): of the seven held-out misses in methods that a framework calls per
    batch (tests/lint/corpus_heldout), one has such a name, and the value it reads
    (`runner.batch_metrics`, handed in by the framework) has no device the file shows; the
    others are spelled `accumulate`, `update` and `__call__`, which are no evidence of a loop.
    Code that runs only off CUDA reads no device tensor: the `elif`/`else` of `if x.is_cuda:`
    (or of `x.device.type == "cuda"`, `torch.cuda.is_available()`, or a name bound to one of
    them: `is_cuda = tree_device.type == "cuda"`), the body of `if not x.is_cuda:` (or `if not
    is_cuda:`), and what follows `if x.is_cuda: ... return` in its function (a fast path for
    CUDA, a reference for the rest).
    Only tensors with evidence of being on the GPU are reported (provenance.py): made or moved
    there (`.cuda()`, `.to(device)`, `device=`; an attribute `self.x` that every assignment in
    the file makes so, in any method; a buffer that a model, a class with a `forward`, registers:
    `self.register_buffer("queue_ptr", ...)` moves with it), computed from such a tensor (also its rows, both
    results of `torch.topk(x)`, `torch.cat(parts)` of a list it was appended to, a torch op
    with any operand there (`torch.add(mask.type_as(offsets) * n, offsets)`), an optimizer's
    per-parameter state read in its `step` (`state = self.state[p]`, `state["exp_avg"]`, a key the
    file sets to a tensor), what the class's
    own encoder or decoder computes from one (`output, hidden = self.decode(indices, hidden)`; also any
    `encode`/`decode` given one, `vae.encode(images.cuda())`, not `str.encode`), and a parameter
    of a module-level function that every call in a loop of the file passes one: `accuracy(logits,
    y)` called in an evaluation loop makes `accuracy`'s reads of `output` reads of `logits`), or a model's
    output or a loss (`model(x)`, `self._forward_and_gradient(x)`, `criterion(...)`, `outputs.loss`,
    a method of a model (`self.policy.evaluate_actions(obs, actions)`; not `parameters()`,
    `state_dict()`, `predict()` or `generate()`, nor a face detector's `detect_faces(...)` or
    `get_landmarks(...)`, which hand back NumPy), what a layer that a module builds computes in
    its `forward` (`scores = self.gate(x)` with `self.gate = nn.Linear(d, n)`), `step["loss"]` of
    what a call returned, `torch.tensor(parts)` of a name bound to a list of such tensors,
    a name or attribute spelled with `loss` (not `self.loss`: a module's loss function, or a float
    it keeps; not an attribute the class only sets to numbers: `self.best_loss = float("inf")`,
    `self.best_loss = mean_loss` with `mean_loss = np.mean(losses)`), a sum of losses (`sum(F.mse_loss(q, t) for q in q_values)`),
    a loss function of a model's output, a name whose `.backward()` the function (or the
    top-level statement of a script) calls, whatever it is called (`evaluation_error.backward()`),
    or that it hands to `fabric.backward(...)` / `accelerator.backward(...)`, `outputs.get("loss")` of what a call returned, the gradient norm that
    `clip_grad_norm_(...)` returns, a parameter's `.grad`, the batch of a loop that calls
    `backward()`) in a file that speaks of a device (`cuda`, `device`), in a loop or function
    that takes a training step (`loss.backward()`, `optim.step(loss)`: a library's training loop
    gets its device from the caller and need not name one) or in a class one of whose methods
    takes one (`self._optimizers_step(output)` in the loop, the `.backward()` in that method: the
    class's training and evaluation loops run the same model; not a `unittest.TestCase`, whose
    tests make their own tensors, on the CPU in a file that names no device; not a function of such a
    file that builds its own inputs, a `DataLoader` or tensors of host data (`torch.Tensor(path[
    "observations"])`, `torch.from_numpy(x)`), which reach the model on the CPU, unless
    `accelerator.prepare` or Fabric moves them). Nothing is on the device in a file that chooses the
    CPU (`device = "cpu"` as a statement of the module or of a top-level function) and never says
    `cuda` or `gpu`. A loop's batch whose elements the loop moves (`dats[0].to(device)`: a copy) is
    on the host itself, and a count kept among losses (`self.loss_information["generator_iters"]`)
    is a number. An in-place update (`lprobs +=
    probs`, `av_kls /= world_size`) keeps the tensor the name held. A name rebound in one branch of an
    if/else is read in a later branch as it was before the `if`; `if not isinstance(norm,
    torch.Tensor): norm = torch.tensor(norm)` converts only what was no tensor, so a tensor keeps
    its device. torch imported under
    another name (`import torch as th`) is read as torch. The data-dependent
    operations, which only a tensor has, are reported for any tensor not known to be on the
    host in such a file, and so are NaN and infinity checks as conditions (`if
    torch.isnan(tensor).any():`, not NumPy's `np.isfinite(a).all()`, not in a unit test). A value
    handed to a NumPy function (`np.vstack((e.nonzero()[0], e.nonzero()[1]))`) is on the host: a
    CUDA tensor would raise there.
    A module moved to the host (`model.cpu()`, `linear_layer.cpu()` as a statement) reads no value.
    Tensors made on the CPU (`torch.linspace(0, 1, 5)`, `.cpu()` results, a `DataLoader`'s
    batches, also of a parameter annotated `DataLoader`, and their fields; a batch taken with
    `next(it)` whose items the function moves itself, `clips = batch[0].to(device)`: the items it
    does not move; `.to(cpu)` with `cpu = torch.device("cpu")` at the top of the module; what a
    model's method computes from CPU tensors only, `model.stft(waves.to(cpu))`; the other parts of
    a loader's batch unpacked with a part the loop moves, `batch, flags = batch` then
    `batch.cuda()`; `.to(device=mask.device)` of a mask made on the CPU), numpy arrays and
    data frames (`np.unique(a)`, `frame[col].dropna().unique()`; ONNX Runtime's outputs,
    `session.run(None, feed)[0]`), identity tests (`(a is None) != (b is None)`), rates (`sample_rate`,
    `fps`, a real-time factor `out["rtf"]`), text under a result's key (`out[0]["generated_text"]`, `["content"]`), values read from
    configuration files (`yaml.load(f)`), the fields
    of what a model's `evaluate` returns (`result.main_score`: scores), a list a collate function of the file
    hands the batch under a key (`batch["flags"]` of `"flags": flags` with `flags = [...]`), Python values and tensor
    metadata (`x.dtype`, `x.shape`, `x.ndimension()`) are never reported, nor a value on the path
    where the code tested it is no tensor (the `else` of `if torch.is_tensor(state["lr"]):`);
    neither is a tensor of
    unknown origin (a parameter nothing else says more about), a comparison with a string
    (`layer.kind == "attn"`) or with an enum's member (`reduction == ReduceType.max`), a name spelled as text (`loss_name`, `metric_key`, `log_prefix`: `for
    loss_name in self.losses:` iterates names), a name annotated as a number (`best_loss: float =
    opt.best_loss`) or a parameter annotated as numbers (`losses: dict[int, float]`), the names of
    `model.named_parameters()`, the result of a function of the file annotated to return a Python
    number (`def _block_m(...) -> int:`), anything in a GPU kernel (`@triton.jit`, numba's
    `@cuda.jit`: device code, for every rule) or in a function registered for meta or fake tensors
    (`@register_meta(...)`, `@torch.library.register_fake(...)`: no data, for every rule), a tensor in a collate function (`collate_fn`, a
    method of a class spelled `*Collator`: the DataLoader runs it on host tensors) unless it is
    proven on the GPU, a field of settings (`self.cfg.losses`,
    `args.loss_weight`), a training loop's counters (`for (batch_num, num_samples), batch in
    batches:`), a loss that a
    method of the class or a function of the file returns as a Python number (`epoch_loss =
    self.train_step(epoch)` where `train_step` starts `epoch_loss = 0`, adds `loss.item()` or a
    name bound to one and returns it; `train_loss = train(...)` where `train` returns
    `np.mean(losses)`), code on the path
    taken when a value is not finite (the body of `if torch.isnan(x):` or `if not
    torch.isfinite(x):`, the `else` of `if torch.isfinite(x):` or of `if not np.isnan(x):`: it
    runs when the check fails, after the check waited), the keys of
    `d.items()` or of a loop that indexes what it iterates (`for k in output: output[k]`), nor code in the branch taken without a GPU (the `else` of
    `if x.device.type == "cuda":`, `if x.is_cuda:`, `if torch.cuda.is_available():`).
    Deliberate or cheap reads are information, with a message that says how often: under
    `if step % N == 0:`, `if i == 0:`, `if random.random() < 0.01:` or a test spelled as one (`should_log`, `every_n_steps(state,
    freq)`, a settings object's `log_*` or `save_metrics` option: `if args.log_logit_mean:`; a size compared with a
    cache's, `if seq_len > self.max_seq_len_cached:`, which rebuilds it when it grows) (also through a flag the function binds once to such a
    test: `apply_penalty = steps % 32 == 0`, `if apply_penalty:`; also combined: `if is_master and (step % N == 0 or
    count == num_batches_per_epoch):`, `if step % args.log_interval == 0 or step == iters:` (not a
    modulus by an option the script declares with `default=1`: `add_argument("--log_interval",
    default=1)` logs every step), `if i_batch >= len(train_loader) - 1:` (the last batch), and in a
    loop over the loss terms inside such a test, or in nested loops of reports or debugging output
    under a modulus or a debugging flag whose own bodies run no model (`if step % val_every == 0: for
    name, loader in val_loaders.items(): ... print(metrics.compute())`; a validation pass's batches
    still read once each), also
    when the test is in a callback with no loop around it; also after an early exit that only such
    iterations pass: `if not should_log: return`; not when the `if` takes the optimizer
    step, `if step % accum_steps == 0: ... optimizer.step()`: gradient accumulation, whose reads run
    on every optimizer step and stay warnings, unless its loop or function also steps an optimizer
    outside the `if`, itself or through a helper handed the optimizer (TD3's delayed actor update,
    WGAN's generator every `n_critic` critic steps: the `if` delays one update, a throttle); a flag
    of a pipeline stage or rank (`if pp_is_last_stage:`) is fixed per process, no throttle; nor in a loop inside such a test that runs a model,
    `if epoch % validate_every == 0: for x, y in loader: self._eval_step(x, y)`, a validation pass
    that reads per batch), in an `except` clause (an error path), under `if verbose:`, a verbosity
    level (`if verbose > 1:`) or a debug
    flag (`if args.debug:`, `if self.debug_sync:`), when a
    parameter's optimizer state is created (`if "exp_avg" not in state:`, `len(state) == 0`, `if
    not state:`), in a trainer's logging hook (a `log` or `on_log` method of a class with a base,
    the `log(self, logs)` override of a Hugging Face `Trainer`: once per logging interval), in
    an epoch loop (`for epoch in ...`, or a loop whose body runs `trainer.train_epoch(...)`), in
    a loop directly inside an epoch loop that walks no batches, takes no training step and runs no
    model (`{n: torch.stack(v).mean().item() for n, v in summaries}` once per epoch), in a hook
    that runs once per epoch or per run (`on_validation_epoch_end`, `validation_epoch_end`,
    `on_train_start`), in the `compute` of a metric (of a class that also has an `update`,
    torchmetrics' and ignite's: once per evaluation), in a comprehension outside any loop of `main()` or of a script's top level
    (once per run), right before a clock read when the read is its statement's whole value
    (`loss_item = loss.item()`, then `t1 = time.perf_counter()`, also with a `synchronize()`
    between them: the wait that ends a timed step;
    not `logger.update(loss=loss.item())`, a value logged every step), in
    a layer-by-layer pass (the loop's own body loads, quantizes or offloads a model's layer:
    `module.load()`, `module.quantize(x)`, `layer.cpu()`; once per layer, as for AL101 and
    AL300), in a loop over a reinforcement-learning collector (`for data in collector:`, or a loop whose
    body calls `collect_rollouts(...)`: collecting the batch already waited for the environment steps), in a loop that steps an
    environment (`env.step(actions)`: the host environment needs the actions every step), in a retry loop
    (`for _ in range(max_trials):` or `while attempts < max_attempts:` that returns or breaks at
    the first success, or `while not done:` whose `try` sets `done = True`), in a loop over a few
    literal values (`range(3)`, also a comprehension's: `tuple(f(x) for axis in range(3))`; `range(steps)`
    after `steps = 10`, the one binding of the name in its scope; also a name the function binds once, outside any branch, to such
    a list: `masks = ["train", "val", "test"]`, and `range(len(...))` of one; a dict literal the
    function only walks, indexes at its keys and returns: `errors = {0.0: 0.0, 1.0: 0.0}`), in any loop of a
    `test_*` function, a pytest fixture or a function nested in one (not the evaluation pass `def test(model,
    device, test_loader)`, nor a `test_*` method of a class that is no test class, such as a
    trainer's `test_on_all_clients`) or of a
    method of a `unittest.TestCase` (its helpers too), in a
    function whose result is cached (`@cached_property`), once per chunk in `for start in
    range(0, len(x), batch_size):` (or `x.size(0)`, `x.shape[0]`, or a name the function set to
    one of them: `n = x.size(0)`) when the loop's body runs no model, moves no chunk to the device and takes no training step (a search or a metric over an
    existing tensor in chunks), per tensor in a function that saves, loads or converts a checkpoint (or plots, or records
    summaries: `plot_prediction`, `_record_summaries`; or builds or initializes: `__init__`,
    `initialize_model_parallel`; or iterates a state dict: `{k: v.cpu() for k, v in
    model.state_dict().items()}`), a
    `.cpu()` or `.tolist()` appended to a list (`outputs.append(logits.cpu())`, also inside a
    dict literal the loop appends: `results.append({"energy": {"pred": p.cpu().tolist()}})`; or written out:
    `save_mels(path, mel=m.cpu().numpy())`, `np.save(path, t.cpu().numpy())`,
    `logs.extend(r.tolist())`: collecting results on the host; also through a constructor or a host
    function, `rows.append(Row(embedding=p.tolist()))`, `out.append(m.dot(t.cpu().numpy()))`, also
    nested in a list a constructor gets: `res.append(Response(data=[Item(embedding=p.tolist())]))`; also
    `[x.cpu().numpy() for x in outs]`, and a copy bound to a name, maybe through one host
    function, that a loop taking no training step appends: `y = m.dot(t.cpu().numpy())`,
    `results.append(y)` or `results += [...]`, or hands to a call that keeps it: `manager.add_samples(y)`,
    `pool.submit(evaluate, y)`; a copy stored under a key in such a loop:
    `results[prop] = out[prop].cpu().numpy() * units`; a copy that a function called per batch
    returns to a loop that collects it: `scores = self._predict_batch(x)`,
    `results.append(scores)`, or stores in a container it returns to a loop taking no training
    step: `out_dict["result"] = self.output.cpu()`, `return out_dict` in `get_current_visuals`), a
    copy brought home as NumPy per batch of a loop over batches, or over input files that runs a
    model on each, that takes no training step, or an output bound whole in an evaluation's loop
    (`samples = out.cpu()` in `_log_validation`) (`self.results.update(energy=out.detach().cpu().numpy()[0])` in `for
    batch in loader:`: an inference pass's output; not one compared or reduced at once, `(preds
    == labels).sum()`, a metric the device could keep), a flag all-reduced across ranks in the loop and tested to leave it
    or skip a batch (`dist.all_reduce(done)` or `dist.broadcast(done, src=0)`, then `if done.item() > 0: break`, or `skip =
    bool(flag.item())`, then `if skip: continue`: ranks with uneven data agree to stop or skip
    together, and the host needs the flag), a
    second blocking read in one statement of a value computed before the first (`ratio =
    desired.cpu() / norm.cpu()`: no new wait), a blocking copy in such a loop right after another
    with only host code between (`outputs = outputs.cpu().numpy()`, then `batch_y =
    batch_y.cpu().numpy()`), a read right after `writer.add_scalar("loss", loss)` of the same value (the
    writer read it; a counter of host numbers between, `num_seen += n`, queues nothing), a read of
    what `output_ids = model.generate(...)` returned in the three
    statements before it (`(input_ids != output_ids[:, :n]).sum().item()`: generation checked its
    stopping condition on the host after every token), a
    second `.item()` of the same name in the statement right after the first (no new wait; not of
    a comprehension's own variable, read anew), an `.item()`, `int()` or `float()` of a value
    computed before a read in the statements just above, with only host code after that read (`losses.append(loss.item())`,
    then `aligns.append(align.item())`: the first read drained the queue; also after a
    `synchronize()` with only clock bookkeeping since, `t1 = time.time()`, `dt = t1 - t0`, `step
    += 1`; or inside an `if` whose condition tested a CUDA tensor naming that value, `if err > tol:
    print(err.item())`; not after a backward, a step or arithmetic that queues new work; a
    `.detach()` between the value and the read queues nothing), in a loop that walks no batches, counts no steps,
    runs no model and takes no training step, of a function that every call in the file runs
    rarely (`self.pdf = self.get_pdf()` in `__init__`; a helper only tests call; `if step % 100
    == 0: print(grad_norms(model))`; also one level up: a function only `__init__` calls, that
    calls it; not a function the file also hands on, `hooks.append(f)`, nor one it never calls:
    a caller in another module decides), and
    as the test that ends a `while` loop (`err = ....item()` then `if err < tol: break`: a
    convergence check; a tensor counter compared with a bound, `while pos < n - 1:`, stays a
    warning); a loop that runs once is not a loop (nor one whose body ends in `break`, `return`,
    `raise` or `exit()` with no `continue` before: one pass), and an `assert`'s message or a `raise` runs
    only when a check fails, as do the statements past an early return of a function that ends in
    `raise` (`if torch.isfinite(t).all(): return`). Code under an environment variable that turns
    on debugging (`if os.getenv("X_DEBUG_LOG", "0") == "1":`) runs only when asked, and the first
    value of `loss.item() if self.ema is None else ...` only on the first iteration; `if now -
    last_logging > args.log_freq_time:` once per interval of wall time. `.cpu(non_blocking=True)` does not wait (see AL201).

Why it matters:
    CUDA kernels run asynchronously: the host queues work and moves on. Reading a value on the
    host makes it wait until every queued kernel has finished, so the GPU idles while the host
    catches up, on every iteration. Same code as the engine's `sync` diagnostic.

Example:
    for x, y in loader:
        loss = model(x.cuda()).sub(y.cuda()).pow(2).mean()
        total += loss.item()
        if torch.isnan(loss):
            break

Fix:
    Keep the value on the device and read it once after the loop:
    `total = total + loss.detach()` inside the loop, `total.item()` after it; or log every N steps
    (`if step % 100 == 0:`); check for NaN on the device (`torch.nan_to_num`, or one
    `torch.isfinite(total).all()` read every N steps); fill a mask with a Python number
    (`lprobs.masked_fill_(lprobs != lprobs, -math.inf)`, or `torch.where(mask, y, x)` for a tensor
    value).
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.callers import call_sites, metric_compute, rare_callers
from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.frequency import (
    TRAINING_STEP,
    Frequency,
    chunked_walk,
    frequency,
    function_name,
    in_training_loop,
    infers_in_chunks,
    infers_per_input,
    is_counter_bound,
    is_test_name,
    is_throttle,
    runs_a_model,
    runs_rarely,
    sampling_loop,
    steps_or_runs_a_model,
    walks_batches,
    whole_run_per_iteration,
)
from atenlens.lint.provenance import (
    DEVICE_EVIDENCE,
    HOST_MODULES,
    PYTHON_RESULT_FUNCTIONS,
    TRAINING_STEP_EVIDENCE,
    VIEW_METHODS,
    Device,
    class_text,
    converted_with_numpy,
    device_of,
    in_model_method,
    is_cpu_device,
    is_dtype,
    is_model_output,
    is_module,
    likely_device,
    maybe_device,
    on_host_branch,
    parameter_default,
    torch_name,
    training_step_function,
)
from atenlens.lint.registry import Rule
from atenlens.lint.source import ancestors
from atenlens.lint.syntax import (
    arguments,
    callee,
    definition_holder,
    dotted_name,
    is_false,
    is_true,
    method_name,
    neighbour_statement,
    receiver,
    repeating_loop,
    statement_of,
    strip_parens,
    text,
)
from atenlens.lint.triggers import CODE_LOOP, LOOP, Caseless
from atenlens.lint.waits import is_clock_read, is_device_synchronize

SYNC_METHODS = ("item", "tolist", "cpu")
CONVERSIONS = ("float", "int", "bool", "str")
# `math.isnan(grad_norm)`: the math module converts its argument with `__float__`, which reads a
# tensor on the host as `float(t)` does (one-argument functions only)
MATH_CONVERSIONS = frozenset(
    f"math.{name}" for name in ("isnan", "isinf", "isfinite", "floor", "ceil", "trunc", "sqrt", "exp", "log", "fabs")
)
# (`bincount`: its length is the input's largest value plus one, read on the host first)
DATA_DEPENDENT_METHODS = ("nonzero", "unique", "argwhere", "unique_consecutive", "masked_select", "bincount")
DATA_DEPENDENT_FUNCTIONS = frozenset(
    {"torch.nonzero", "torch.unique", "torch.argwhere", "torch.masked_select", "torch.unique_consecutive"}
    | {"torch.bincount"}
)
SCALER_NAME = re.compile(r"(?:^|_)scaler$", re.I)
# Build a tensor from host data: given a list of CUDA tensors, they read each element on the host
TENSOR_BUILDERS = frozenset(
    {"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor"}
)
CALLS = frozenset(
    SYNC_METHODS
    + CONVERSIONS
    + tuple(name.split(".")[-1] for name in MATH_CONVERSIONS)
    + DATA_DEPENDENT_METHODS
    + ("where", "print", "format", "step", "add_scalar", "repeat_interleave")
    + tuple(name.split(".")[-1] for name in TENSOR_BUILDERS)
)
_KEYWORDS = re.compile(rb"\b(if|elif|while|assert)\b")
_FSTRING = re.compile(rb"\b[fFrR]{0,2}[fF][rR]?(?=[\"'])")
_SUBSCRIPT = re.compile(rb"[\w)\]]\s*(\[)")
MASK_METHODS = frozenset(
    {
        "bool",
        "isnan",
        "isinf",
        "isfinite",
        "logical_not",
        "logical_and",
        "logical_or",
        "eq",
        "ne",
        "lt",
        "gt",
        "le",
        "ge",
    }
)


def check(ctx: LintContext) -> Iterator[Finding]:
    yield from _method_reads(ctx)
    yield from _conversions(ctx)
    yield from _prints(ctx)
    yield from _tensors_from_elements(ctx)
    yield from _logged_scalars(ctx)
    yield from _data_dependent(ctx)
    yield from _conditions(ctx)
    yield from _nonfinite_checks(ctx)
    yield from _fstrings(ctx)
    yield from _percent_formats(ctx)
    yield from _string_formats(ctx)
    yield from _masked_reads(ctx)
    yield from _scaler_steps(ctx)


def _matches_in_loops(ctx: LintContext, pattern: "re.Pattern[bytes]") -> Iterator["re.Match[bytes]"]:
    """Matches of `pattern` inside the file's loops only: every finding is inside a loop, and
    looking at the rest first would cost a provenance analysis per `if` of the file. (The
    keywords, subscripts, `%` formats and f-string prefixes give the same matches from a literal
    search: `_keywords_in_loops`, `_matches_before_in_loops`, `_fstring_prefixes_in_loops`.)"""
    for start, end in ctx.loop_ranges():
        yield from pattern.finditer(ctx.source.data, start, end)


_SPACES = frozenset(b" \t\n\r\x0b\x0c")  # what `\s` matches in a bytes pattern


def _matches_before_in_loops(
    ctx: LintContext, pattern: "re.Pattern[bytes]", byte: bytes
) -> Iterator["re.Match[bytes]"]:
    """`_matches_in_loops(ctx, pattern)` for a pattern of one byte of a class, spaces (`\\s*`),
    then `byte` (`_SUBSCRIPT`: `x [`, `_PERCENT`: `" %`), found from each `byte` (a literal
    search): such a pattern starts with a class that most bytes are in, so `re` would try a match
    at nearly every byte (about six times slower on real code). Each `byte` is matched from the
    last byte before it that is not a space, when that byte is in the loop; matches cannot
    overlap (each ends at its `byte`, which is not in the class), so these are the matches a scan
    would find."""
    data = ctx.source.data
    for start, end in ctx.loop_ranges():
        at = data.find(byte, start, end)
        while at != -1:
            before = at - 1
            while before >= start and data[before] in _SPACES:
                before -= 1
            match = pattern.match(data, before, end) if before >= start else None
            if match is not None:
                yield match
            at = data.find(byte, at + 1, end)


# Each keyword of `_KEYWORDS` alone, starting with its literal (a fast search), the boundary
# before it checked behind: a match of one is where `_KEYWORDS` matches that keyword.
_KEYWORD_WORDS = tuple(re.compile(rb"%s(?<!\w%s)\b" % (word, word)) for word in (b"if", b"elif", b"while", b"assert"))


def _keywords_in_loops(ctx: LintContext) -> Iterator["re.Match[bytes]"]:
    """`_matches_in_loops(ctx, _KEYWORDS)`, found by a literal search per keyword: the pattern
    starts with a word boundary, so `re` would try a match at every byte (three times slower on
    real code). Its matches are whole words, so they cannot overlap: each place where one
    keyword is written as a word is a match, in source order."""
    data = ctx.source.data
    for start, end in ctx.loop_ranges():
        for at in sorted(m.start() for word in _KEYWORD_WORDS for m in word.finditer(data, start, end)):
            match = _KEYWORDS.match(data, at, end)
            if match is not None:  # always: the same word, the same boundaries
                yield match


_QUOTE = re.compile(rb"[\"']")
_STRING_PREFIX_BYTES = frozenset(b"fFrR")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _fstring_prefixes_in_loops(ctx: LintContext) -> Iterator["re.Match[bytes]"]:
    """`_matches_in_loops(ctx, _FSTRING)`, found from each quote: `_FSTRING` starts with a word
    boundary, so `re` would try a match at every byte. A match ends right before a quote and
    starts where the word before it starts (the boundary), so each quote whose word (in the
    loop, at most four bytes, all of `fFrR`) starts there is matched from that word's start;
    matches cannot overlap (each lies in its own word)."""
    data = ctx.source.data
    for start, end in ctx.loop_ranges():
        for quote in _QUOTE.finditer(data, start, end):
            at = quote.start()
            word = at
            while word > start and at - word < 4 and data[word - 1] in _STRING_PREFIX_BYTES:
                word -= 1
            if word == at or (word > 0 and data[word - 1] in _WORD_BYTES):
                continue  # no prefix, or a longer word (or one that starts before the loop)
            match = _FSTRING.match(data, word, end)
            if match is not None:
                yield match


def _whole_run(ctx: LintContext, loop: Node) -> Optional[str]:
    """`whole_run_per_iteration` of `loop`, once per loop (several reads in one loop ask it)."""
    runs = ctx.memo.setdefault("whole-runs", {})
    assert isinstance(runs, dict)
    if loop.id not in runs:
        runs[loop.id] = whole_run_per_iteration(loop, ctx.source.whole_data)
    return runs[loop.id]


def _report(
    ctx: LintContext,
    what: str,
    node: Node,
    end: Optional[Node] = None,
    how: Optional[Frequency] = None,
    where: str = "inside a loop",
) -> Optional[Finding]:
    how = how or frequency(node)
    if how.loop is None or on_host_branch(node):
        return None
    if how.every_iteration and _stopping_test(node, how.loop):
        kind = (
            "the `while` loop's stopping test" if how.loop.type == "while_statement" else "the test that ends the loop"
        )
        how = Frequency(
            how.loop, False, f"on every iteration, as {kind} (a convergence check needs the value on the host)"
        )
    # (a function that runs once per step, a training step's or a `forward`: its reads are not a
    # loop's stopping flag or the end of a timed iteration)
    in_loop = how.loop is not None and how.loop.type != "function_definition"
    if how.every_iteration and how.loop is not None and in_loop and _stop_flag(node, how.loop):
        how = Frequency(
            how.loop,
            False,
            "on every iteration, as a flag shared across ranks (all-reduced or broadcast) to stop together (every rank needs it on the host)",
        )
    clock = _clock_read_next(ctx, end or node) if how.every_iteration and in_loop else None
    if clock is not None:
        how = Frequency(
            how.loop,
            False,
            f"on every iteration, right before the clock read on line {clock}: the wait that ends a timed step",
        )
    chunks = chunked_walk(how.loop) if how.every_iteration else None
    if chunks is not None:
        how = Frequency(how.loop, False, f"once per chunk of `{chunks[1]}` rows of `{chunks[0]}`")
    run = _whole_run(ctx, how.loop) if how.every_iteration and how.loop else None
    if run is not None:
        how = Frequency(how.loop, False, f"once per call of `{run}`, which runs a loop of model steps itself")
    compute = metric_compute(ctx, how.loop) if how.every_iteration and how.loop is not None else None
    if compute is not None:
        how = Frequency(
            how.loop,
            False,
            f"per item in `{compute}` of a metric, once per evaluation (its `update` is what runs every step)",
        )
    rare = (
        rare_callers(ctx, how.loop)
        if how.every_iteration
        and how.loop is not None
        and where == "inside a loop"
        and not steps_or_runs_a_model(how.loop)
        else None
    )
    if rare is not None:
        how = Frequency(
            how.loop,
            False,
            f"on every iteration of a loop in {rare}, so not on every training step",
        )
    return ctx.finding(
        Code.SYNC,
        f"{what} {where}: the host waits for the GPU {how.how_often}",
        node,
        end=end,
        severity="warning" if how.every_iteration else "information",
    )


# A loop that decodes: its stopping test runs once per token
_DECODES = re.compile(rb"token|logits|decod|generat|sampl|beam|eos|predict", re.I)


def _breaks(block: Node) -> bool:
    """Does `block` (an `else` clause) leave its loop: a `break` in it, not in a loop inside it?"""
    stack = [block]
    while stack:
        current = stack.pop()
        if current.type == "break_statement":
            return True
        if current.type not in ("for_statement", "while_statement", "function_definition", "class_definition"):
            stack.extend(current.named_children)
    return False


# The best value so far, that a search stops at once it no longer beats: `best_loss`, `prev_err`
_BEST_SO_FAR = re.compile(r"\b(?:\w+_)?(?:best|prev|previous|last|lowest)(?:_\w+)?\b")


def _stopping_test(node: Node, loop: Node) -> bool:
    """Is `node` the test that ends a `while` loop: in its condition, in the condition of an
    `if ...: break` in it, or assigned to a name such a test reads (`err = ....item()` then
    `if err < tol: break`)? Iterating until a value converges needs that value on the host. In a
    `for` loop, only a test whose `else` leaves the loop, maybe after a patience count (`if err <
    best: best = err else: break`, or `if err >= best_err: break`: a numerical loop that stops
    when it no longer improves), and
    not in a loop that runs a model or decodes tokens. (A plain `if err < tol: break` in a `for`
    loop stays a warning: a Sinkhorn step in every forward, a search per query.)"""
    body = loop.child_by_field_name("body")
    if body is None or loop.type not in ("for_statement", "while_statement"):
        return False
    tests: list[Optional[Node]] = []
    if loop.type == "for_statement":
        title = next((a.child_by_field_name("name") for a in ancestors(loop) if a.type == "function_definition"), None)
        if runs_a_model(loop) or any(_DECODES.search(n.text or b"") for n in (body, title) if n is not None):
            return False
    else:
        tests.append(loop.child_by_field_name("condition"))
    stack = list(body.named_children)
    while stack:
        current = stack.pop()
        if current.type in ("for_statement", "while_statement", "function_definition", "class_definition"):
            continue
        if current.type in ("if_statement", "elif_clause"):
            consequence = current.child_by_field_name("consequence")
            condition = current.child_by_field_name("condition")
            alternative = current.child_by_field_name("alternative")
            if (
                condition is not None
                and consequence is not None
                and loop.type == "while_statement"
                and any(c.type == "break_statement" for c in consequence.named_children)
            ):
                tests.append(condition)
            elif condition is not None and alternative is not None and _breaks(alternative):
                tests.append(condition)  # `if improved.any(): ... else: patience -= 1; if ...: break`
            elif (
                condition is not None
                and consequence is not None
                and any(c.type == "break_statement" for c in consequence.named_children)
                and _BEST_SO_FAR.search(text(condition))
            ):
                tests.append(condition)  # `if loss >= best_loss: break`: no longer improving
        stack.extend(current.named_children)
    # `while pos < max_tokens - 1:` / `while t.sum().item() > 0:` count towards a bound: a counter
    # kept as a tensor, not a convergence test (a `for` loop counts by itself)
    found = [t for t in tests if t is not None and (loop.type == "for_statement" or not _counts_to_bound(t))]
    if any(t.start_byte <= node.start_byte and node.end_byte <= t.end_byte for t in found):
        return True
    for parent in ancestors(node):
        if parent == loop:
            return False
        if parent.type == "assignment":
            left = parent.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                name = re.compile(rf"\b{re.escape(text(left))}\b")
                return any(name.search(text(t)) for t in found)
    return False


def _stop_flag(node: Node, loop: Node) -> bool:
    """Is `node` a read of a value the loop all-reduced (or broadcast) before it (`dist.all_reduce(done)`, then
    `if done.item() > 0: break`, or `skip = bool(flag.item())`, then `if skip: continue`), in a
    loop that leaves or skips on it? Ranks with uneven data agree this way to stop (or skip a
    batch) together; the host needs the flag to do it. For a read outside the loop, in a function
    the loop calls (`while self._has_unfinished_sequences(...)`, whose `if flag.item() == 0.0:
    return False` follows `dist.all_reduce(flag)`), the function's body is where to look."""
    body = loop.child_by_field_name("body")
    if body is not None and not body.start_byte <= node.start_byte < body.end_byte:
        function = next((a for a in ancestors(node) if a.type == "function_definition"), None)
        body = function.child_by_field_name("body") if function is not None else None
    if body is None:
        return False
    after = (body.text or b"")[max(node.end_byte - body.start_byte, 0) :]
    if not re.search(rb"\b(?:break|continue|return)\b", after):
        return False
    statement = statement_of(node)
    if not _leaves_on(statement, after):
        return False  # (`losses_m.update(global_loss.item())`: an all-reduced value logged, no flag)
    if statement.type in ("if_statement", "while_statement"):
        statement = statement.child_by_field_name("condition") or statement
    before = (body.text or b"")[: max(statement.start_byte - body.start_byte, 0)]
    names = set(re.findall(rb"[A-Za-z_]\w*", statement.text or b""))
    # (`dist.broadcast(signal, src=0)`, then `if signal.item() == 0: break`: the ranks follow rank 0)
    return any(re.search(rb"\b(?:all_reduce|broadcast)\(\s*" + re.escape(name) + rb"\s*[,)]", before) for name in names)


_LEAVES = re.compile(rb"\b(?:break|continue|return)\b")


def _leaves_on(statement: Node, after: bytes) -> bool:
    """Does the loop leave or skip on what `statement` reads: it is an `if`/`while` whose block
    does (`if done.item() > 0: break`), or it binds a name that a later `if` tests before leaving
    (`skip = bool(flag.item())`, then `if skip: continue`)?"""
    if statement.type in ("if_statement", "while_statement", "elif_clause"):
        return True
    inner = (
        statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
    )
    target = inner.child_by_field_name("left") if inner is not None and inner.type == "assignment" else None
    if target is None or target.type != "identifier":
        return False
    name = re.escape(target.text or b"")
    test = re.search(rb"\b(?:if|elif|while)\b[^\n]*\b" + name + rb"\b[^\n]*:", after)
    return test is not None and _LEAVES.search(after, test.end()) is not None


def _counts_to_bound(test: Node) -> bool:
    test = strip_parens(test)
    if test.type != "comparison_operator":
        return False
    return any(is_counter_bound(strip_parens(side)) for side in test.named_children)


def _method_reads(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls(*SYNC_METHODS):
        method = method_name(call)
        if method not in SYNC_METHODS:
            continue
        caller = None if ctx.in_loop(call) else _repeated_call(ctx, call)
        if not ctx.in_loop(call) and caller is None:
            continue
        if method == "cpu" and is_true(arguments(call)[1].get("non_blocking")):
            continue
        if method == "item" and any(arguments(call)):
            continue  # `dropdown.model().item(i)`: Qt's, a list's; `Tensor.item()` takes no argument
        if method == "cpu" and (is_module(ctx, receiver(call)) or _layer_moved(call) or _offloaded(call)):
            continue  # `transformer.cpu()`, `linear_layer.cpu()`: a module's parameters move; no value is read
        if not likely_device(ctx, receiver(call)):
            continue
        fn = callee(call)
        attr = fn.child_by_field_name("attribute") if fn is not None else None
        how, where, site = caller if caller is not None else (frequency(call), "inside a loop", None)
        again = _read_just_before(ctx, call) if method == "item" and how.every_iteration else None
        if again is not None:
            how = Frequency(how.loop, False, f"{how.how_often}, but {again}: no new wait")
        if caller is not None and method == "cpu" and where == "in `forward`" and _returned(call):
            # `return torch.clamp(waveform, -1, 1).squeeze().cpu()`, an RPC stage's `return out.cpu()`:
            # the module hands its output back on the host by design
            how = Frequency(
                how.loop,
                False,
                "on every forward pass, handing the output back on the host (one copy per call, as designed)",
            )
        elif (
            caller is not None
            and method == "cpu"
            and site is not None
            and (
                (_returned(call) and _collected(site, how.loop))
                or (_returned_in_container(call) and _inference_loop(ctx, call, how) is not None)
            )
        ):
            # (also `out_dict["result"] = self.output.detach().cpu()` ... `return out_dict` in a
            # `get_current_visuals` that a validation loop calls: the results it brings home)
            # `scores = self._predict_batch(X)`, `list_y_score.append(scores)`: the function hands
            # its host copy to a loop that collects the results on the host
            how = Frequency(
                how.loop, False, "on every iteration, collecting results on the host (one copy per batch, as intended)"
            )
        elif (
            caller is None
            and method in ("cpu", "tolist")
            and how.every_iteration
            and chunked_walk(how.loop) is None  # (a walk in chunks says so: `_report`)
            and not _walks_losses(how.loop)
            and _collected(call, how.loop)
        ):
            kept = _through_host_function(_host_copy(call))
            if _written_out(kept) or _saved_by_name(kept, how.loop):
                example = f"`save(path, t.{method}())`: one copy per result written"
            elif _stored_in_item(kept):
                example = f"`results[key] = t.{method}()`: one copy per result"
            else:
                example = f"`outputs.append(t.{method}())`: one copy per batch"
            how = Frequency(
                how.loop, False, f"on every iteration, collecting results on the host ({example}, as intended)"
            )
        elif (
            caller is None
            and method == "cpu"
            and (
                _as_numpy(call)
                or (_bound_whole(call) and _EVALUATION_FUNCTION.search(function_name(call)))
                or _copy_bound_to(call) is not None
            )
            and (loop := _inference_loop(ctx, call, how)) is not None
            and not _feeds_a_metric(call, loop)
            and (walks_batches(loop) or infers_per_input(loop) or infers_in_chunks(loop))
            # (not a per-sample loop of a model's own method: `construct_multimodal_features`, which
            # `forward` calls, projects each sample's points with NumPy on every training step)
            and (not in_model_method(ctx, call) or _walks_a_loader(loop))
            and (
                _as_numpy(call)
                or (_bound_whole(call) and _EVALUATION_FUNCTION.search(function_name(call)))
                or _read_as_numpy_later(ctx, call, loop)
            )
            # (`labels = labels.cpu()` right after `preds = preds.cpu()`: no new wait, said so below)
            and (_as_numpy(call) or _drained_why(ctx, receiver(call), statement_of(call), copies=True) is None)
        ):
            # `probs = model(x).cpu().numpy()` per batch of a loop over batches that takes no training
            # step: an inference pass bringing its output home for NumPy (a training loop's is a
            # warning, and so is a copy per row of one batch: `for n in lengths: rows[:n].cpu()`)
            how = Frequency(
                how.loop,
                False,
                "on every iteration of a loop that takes no training step, bringing the output home as NumPy "
                "(`t.cpu().numpy()`: an inference pass's result, one copy per batch)"
                if _as_numpy(call) or not _bound_whole(call) or not _EVALUATION_FUNCTION.search(function_name(call))
                else f"on every iteration of a loop in `{function_name(call)}` that takes no training step, "
                "bringing the output home (`samples = out.cpu()`: an evaluation's result, one copy per batch)",
            )
        elif (
            caller is None
            and method == "tolist"
            and _handed_out(call)
            and (loop := _inference_loop(ctx, call, how)) is not None
            and walks_batches(loop)
            and is_model_output(ctx, receiver(call))
        ):
            # `for sentence, score in zip(batch, scores.tolist()): sentence.set_label(...)` per batch of a
            # prediction loop: the batch's predictions brought home to be handed to its items
            how = Frequency(
                how.loop,
                False,
                "on every iteration of a loop that takes no training step, bringing a batch's predictions home "
                "to hand them to its items (one copy per batch, as intended)",
            )
        again = _read_earlier_in_statement_why(call) if method in ("cpu", "tolist") and how.every_iteration else None
        if again is None and method == "cpu" and _inference_loop(ctx, call, how) is not None:
            # (`outputs = outputs.detach().cpu().numpy()`, then `batch_y = batch_y.detach().cpu().numpy()`
            # in an inference loop; a training step's copies are each reported, as the labels have them)
            again = _drained_why(ctx, receiver(call), statement_of(call), copies=True)
        if again is not None:
            # (`ratio = desired.cpu() / norm.cpu()`: the second copy's value was waited for by the first)
            how = Frequency(how.loop, False, f"{how.how_often}, but {again}: no new wait")
        finding = _report(ctx, f"`.{method}()`", attr or call, end=call, how=how, where=where)
        if finding is not None:
            yield finding


def _clock_read_next(ctx: LintContext, node: Node) -> Optional[int]:
    """The line of a clock read in the statement right after the read's own (at most two lines
    on, or after a `synchronize()` there): `loss_item = loss.item()  # synchronization`, then
    `t1 = time.perf_counter()`. The read is the wait that makes the timed step's interval measure
    the GPU's work, as AL101's synchronize before a clock read is."""
    statement = statement_of(node)
    value = (
        statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
    )
    if value is not None and value.type == "assignment":
        value = value.child_by_field_name("right")
    if value is None or node.end_byte != value.end_byte:
        return None  # (`logger.update(loss=loss.item())`: a value logged every step, not a bare wait)
    following = neighbour_statement(statement)
    if following is None or following.start_point[0] - statement.end_point[0] > 2:
        return None
    calls = list(ctx.calls_within(following.start_byte, following.end_byte))
    if len(calls) == 1 and is_device_synchronize(ctx, calls[0]):
        # (`train_loss_f = train_loss.item()`, `synchronize()`, then `t1 = time.time()`: the
        # barrier waits for the same work, right before the clock)
        after = neighbour_statement(following)
        if after is None or after.start_point[0] - following.end_point[0] > 2:
            return None
        calls = list(ctx.calls_within(after.start_byte, after.end_byte))
    for call in calls:
        if is_clock_read(ctx, call):
            return ctx.source.position(call.start_point)[0]
    return None


def _repeated_call(ctx: LintContext, node: Node) -> Optional[tuple[Frequency, str, Optional[Node]]]:
    """For a read outside any loop of its function: how often the function runs, when a loop of
    the file calls it on every iteration (`_called_in_loops`), it takes a training step itself
    (`training_step_function`: once per step of a training loop, maybe in another module) or it
    is a module's `forward` (`_forward_method`: once per step); None when none of these, or when
    the read runs rarely in its function (`runs_rarely`: under a throttle, `if self.step % 100 ==
    0:`, on the way out, in an `except` clause)."""
    function = next(
        (a for a in ancestors(node) if a.type in ("function_definition", "lambda", "class_definition")), None
    )
    if function is not None and runs_rarely(node, function):
        return None  # (a read every N steps, or on the way out: cheap, and left silent)
    if function is not None and function.type == "function_definition" and _under_opt_in_parameter(node, function):
        return None  # (`if include_embeddings:` of `forward(self, x, include_embeddings=False)`: asked for)
    found = _called_in_loops(ctx, node)
    if found is not None:
        return found
    function = training_step_function(ctx, node)
    if function is None:
        forward = _forward_method(node)
        if forward is not None and rare_callers(ctx, node, once=True) is None:
            return Frequency(forward, True, "on every forward pass"), "in `forward`", None
    if function is None or rare_callers(ctx, node, once=True) is not None:
        return None  # (a step only `main` or a test takes: a self-check, not a training loop's)
    title = function.child_by_field_name("name")
    name = text(title) if title is not None else ""
    return Frequency(function, True, "on every training step"), f"in `{name}`, which takes a training step", None


def _under_opt_in_parameter(node: Node, function: Node) -> bool:
    """Is `node` in the body of an `if <flag>:` (or `if <flag> and ...:`) of `function`, where
    `<flag>` is a parameter of `function` that defaults to `False` (`include_embeddings=False`,
    `return_attention=False`)? Such a read runs only when a caller asks for it."""
    child = node
    for parent in ancestors(node):
        if parent == function:
            return False
        if parent.type == "if_statement" and parent.child_by_field_name("consequence") == child:
            condition = strip_parens(parent.child_by_field_name("condition") or parent)
            first = condition
            while first.type == "boolean_operator" and text(first.child_by_field_name("operator")) == "and":
                first = strip_parens(first.child_by_field_name("left") or first)
            if first.type == "identifier":
                default = parameter_default(function, text(first))
                if default is not None and text(default) == "False":
                    return True
        child = parent
    return False


def _forward_method(node: Node) -> Optional[Node]:
    """The `forward` of a module (a class with a base) that `node` is in, outside its loops: a
    training or inference step runs it once per step, a transformer's layer once per layer per
    step (`if not torch.isfinite(hidden_states).all():`, `expert_size.tolist()`)."""
    if repeating_loop(node) is not None:
        return None
    function = next(
        (a for a in ancestors(node) if a.type in ("function_definition", "lambda", "class_definition")), None
    )
    if function is None or function.type != "function_definition":
        return None
    name = function.child_by_field_name("name")
    if name is None or text(name) != "forward":
        return None
    holder = definition_holder(function)  # (past `@torch.no_grad()` and other decorators)
    if holder is None or holder.type != "class_definition" or holder.child_by_field_name("superclasses") is None:
        return None
    if sampling_loop(function) is not None:
        return None  # a pipeline stage's `forward` that runs its own denoising loop: once per request
    return function


def _called_in_loops(ctx: LintContext, node: Node) -> Optional[tuple[Frequency, str, Optional[Node]]]:
    """For a read outside any loop of its function: how often the function runs when a call of
    it in the file is on every iteration of a loop, the words that say where (`.item()`
    in `_train_batch`, which `_train_epoch` calls in a loop), and that call. Methods are called as
    `self.name(...)` in their class; module-level functions as `name(...)` anywhere in the file;
    one level of callers. Only calls in loops count: a definition without a loop may be left out
    of the parse (triggers.py), and the findings must not depend on that."""
    function = next(
        (a for a in ancestors(node) if a.type in ("function_definition", "lambda", "class_definition")), None
    )
    if function is None or function.type != "function_definition" or repeating_loop(node) is not None:
        return None
    sites = call_sites(ctx, function)
    if sites is None:
        return None
    name, calls, hooks, _ = sites
    found = [(how, call) for how, call in ((frequency(call), call) for call in calls) if how.every_iteration]
    if not found:
        return None  # (called only under a throttle or in a short loop: cheap, and left silent)
    how, at = found[0]
    outer = next((a for a in ancestors(at) if a.type == "function_definition"), None)
    outer_title = outer.child_by_field_name("name") if outer is not None else None
    caller = f"`{text(outer_title)}`" if outer_title is not None else "module-level code"
    if at.id in hooks:
        where = f"in `{name}`, which {caller} registers in a loop as a gradient hook (run by every backward)"
    else:
        where = f"in `{name}`, which {caller} calls in a loop"
    return how, where, at


def _returned(call: Node) -> bool:
    """Does the function return this host copy: `return t.cpu().numpy()`, or `scores =
    scores.cpu().numpy()` ... `return scores`?"""
    node = _host_copy(call)
    parent = node.parent
    if parent is not None and parent.type == "return_statement":
        return True
    bound = _bound_to(node)
    return bound is not None and _returned_after(bound[0], bound[1])


def _returned_in_container(call: Node) -> bool:
    """Does the function store this host copy under a key of a container that it returns
    (`out_dict["lq"] = self.lq.detach().cpu()` ... `return out_dict`)?"""
    bound = _bound_to(_host_copy(call))
    if bound is None or bound[0].type != "subscript":
        return False
    container = bound[0].child_by_field_name("value")
    return container is not None and _returned_after(container, bound[1])


def _returned_after(name: Node, statement: Node) -> bool:
    """Does the function around `statement` return `name` (an identifier) after it?"""
    function = next((a for a in ancestors(statement) if a.type == "function_definition"), None)
    if name.type != "identifier" or function is None:
        return False
    returned = re.compile(rb"\breturn[ \t]+" + re.escape(text(name).encode()) + rb"[ \t]*(?:\n|#|$)")
    return bool(returned.search(function.text or b"", statement.end_byte - function.start_byte))


def _read_earlier_in_statement(
    call: Node, statement: Node, owner: Optional[Node] = None, copies: bool = False
) -> Optional[int]:
    """`self.log(total=loss.item(), recon=parts.recon.item())`, `(float(logits.sum()),
    bool(max_equal))`: the line of a read (`.item()`, `int()`, `float()`; with `copies`, also a
    blocking `.cpu()` or `.tolist()`) of the same statement evaluated before this one, when this
    one reads a value already computed (`owner`, by default the call's receiver: a name, an
    attribute, an item; nothing queued on the GPU in between, so no new wait)."""
    owner = receiver(call) if owner is None else owner
    while owner is not None and owner.type == "call" and method_name(owner) == "detach" and not arguments(owner)[0]:
        owner = receiver(owner)  # (`phi_loss.detach().item()`: a view, no work queued)
    if owner is None or any(n.type == "call" for n in _walk(owner)):
        return None
    if _base_name(owner) is None:
        return None  # (`int(box[3] + 1)`: the sum is new work on the GPU; `rows[start + n]` is not)
    earlier = [
        n
        for n in _walk(statement)
        if n.type == "call" and n.end_byte <= call.start_byte and (_a_read(n) or (copies and _blocking_copy(n)))
    ]
    return min(earlier, key=lambda n: n.start_byte).start_point[0] + 1 if earlier else None


def _read_earlier_in_statement_why(call: Node) -> Optional[str]:
    """For a `.cpu()` or `.tolist()`: the reason it adds no wait when a blocking read earlier in
    its statement already waited for the value it copies (`ratio = desired.cpu() / norm.cpu()`)."""
    owner = receiver(call)
    while owner is not None and owner.type == "call" and method_name(owner) == "detach" and not arguments(owner)[0]:
        owner = receiver(owner)  # (`{"hm": hm.detach().cpu(), "box": box.detach().cpu()}`: a view)
    if owner is None or owner.type not in ("identifier", "subscript", "attribute"):
        return None  # (`a.cpu() / b.sum().cpu()`: the sum is new work; `target[i].cpu()` is a view)
    line = _read_earlier_in_statement(call, statement_of(call), copies=True)
    return f"an earlier read of this statement (line {line}) already waited" if line is not None else None


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.named_children)


def _read_just_before(ctx: LintContext, call: Node) -> Optional[str]:
    """Why this `.item()` adds no wait, if it adds none: an `.item()` earlier in the same statement
    already waited and this one reads a value computed before it (`self.log(total=loss.item(),
    recon=parts.recon.item())`), or the statement right before read the same name or expression
    (`state.output = loss.item()` then `losses.append(loss.item())`, or `a += n.sum().item()` then
    `b += n.sum().item()`). Not when the name is bound in this statement (`(i.item() for i in
    row)`: each comprehension reads every element again). (A read of another value in the
    statement after a read is still reported: the labels of real code disagree on it.)"""
    owner = receiver(call)
    if owner is None or owner.type not in ("identifier", "call", "attribute", "subscript"):
        return None
    statement = statement_of(call)
    earlier = _read_earlier_in_statement(call, statement)
    if earlier is not None:
        return f"an earlier read of this statement (line {earlier}) already waited"
    if owner.type == "identifier":
        binding = ctx.bindings(owner).at(text(owner), owner.start_byte)
        if binding is not None and statement.start_byte <= binding.at <= statement.end_byte:
            return None
    spelled = re.compile(rb"(?<![\w.])" + re.escape(text(owner).encode()) + rb"\s*\.\s*item\s*\(")
    previous = neighbour_statement(statement, forward=False)
    first = previous
    while first is not None and _counts_on_the_host(ctx, first):
        first = neighbour_statement(first, forward=False)
    if first is None:
        # (`if torch.isfinite(loss): num_seen += n; total += loss.item() * n`: only counts between
        # the block's test and this read; not past them to a block a rank may skip)
        previous = None
    holder = statement.parent.parent if statement.parent is not None else None
    if previous is None and holder is not None and holder.type == "with_statement":
        # `train_err += loss.item()`, then `with torch.no_grad(): avg_loss += loss.item()`
        previous = neighbour_statement(holder, forward=False)
    elif previous is None and holder is not None and holder.type in ("if_statement", "elif_clause", "while_statement"):
        # `if best is None or g.item() < best: best = g.item()`: the test right above read it
        previous = holder.child_by_field_name("condition")
    data = previous.text or b"" if previous is not None else b""
    if (
        previous is not None
        and holder is not None
        and previous == holder.child_by_field_name("condition")
        and _condition_waited_for(ctx, owner, previous)
    ):
        return f"the condition on line {previous.start_point[0] + 1} just before already waited for it"
    reads = [m.start() for m in spelled.finditer(data)]
    steps = [m.start() for m in TRAINING_STEP.finditer(data)]
    if previous is not None and reads and (not steps or reads[-1] > steps[-1]):
        # (not when the block above ran `loss.backward()` / `optimizer.step()` after its last
        # read: this read waits for that work)
        return f"the value was read on line {previous.start_point[0] + 1} just before"
    generated = _generated_just_before(ctx, owner, statement)
    if generated is not None:
        return f"`generate` on line {generated} just before already waited for its output"
    return _drained_why(ctx, receiver(call), statement)


def _generated_just_before(ctx: LintContext, owner: Node, statement: Node) -> Optional[int]:
    """The line of `output_ids = model.generate(...)` in one of the three statements before this
    one, when the read computes from `output_ids` (`(input_ids != output_ids[:, :n]).sum().item()`):
    generation checks its stopping condition on the host after every token, so its output is
    complete when it returns, and the read waits only for the little it computes itself."""
    earlier: list[Node] = []
    current: Optional[Node] = statement
    for _ in range(3):
        current = neighbour_statement(current, forward=False)
        if current is None:
            break
        earlier.append(current)
    if not earlier:
        return None
    for name in (n for n in _walk(owner) if n.type == "identifier"):
        binding = ctx.bindings(name).at(text(name), name.start_byte)
        value = strip_parens(binding.value) if binding is not None and binding.value is not None else None
        if value is None or value.type != "call" or method_name(value) != "generate":
            continue
        if any(s.start_byte <= value.start_byte < s.end_byte for s in earlier):
            return value.start_point[0] + 1
    return None


def _counts_on_the_host(ctx: LintContext, statement: Node) -> bool:
    """Is `statement` an update of a counter from names that hold numbers (`num_seen_utts +=
    num_utts`, `step = step + 1`): no call, and no name in it likely on the device? Such a
    statement queues nothing on the GPU."""
    expression = (
        statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
    )
    if expression is None or expression.type not in ("augmented_assignment", "assignment"):
        return False
    parts = list(_walk(expression))
    if any(n.type in ("call", "subscript", "attribute", "lambda") for n in parts):
        return False
    return not any(n.type == "identifier" and likely_device(ctx, n) for n in parts)


def _condition_waited_for(ctx: LintContext, owner: Node, condition: Node) -> bool:
    """`if new_error > error * 1.2: logger.debug(f"... {new_error.item()}")`: the condition
    right above is a CUDA tensor tested on the host, which waited for all the work queued before
    it; `owner` (a name bound before the condition, or an item or attribute of one) is among that
    work when the condition names it."""
    base = _base_name(owner)
    if base is None or text(base) == "self" or owner.type == "call":
        return False
    if not any(n.type == "identifier" and text(n) == text(base) for n in _walk(condition)):
        return False
    binding = ctx.bindings(base).at(text(base), base.start_byte)
    if binding is None or binding.at >= condition.start_byte:
        return False
    return _tensor_truth_test(ctx, condition) is not None


# Calls of host code only, which queue no GPU work between two reads
# (`pbar.set_postfix(loss=loss_value)`: a progress bar's text)
_HOST_ONLY_CALL = re.compile(
    r"(?:^|\.)(?:append|extend|item|float|int|len|print|round|format|str|update|add_scalar|log|size|numel|dim|isinstance"
    r"|set_postfix|set_postfix_str|set_description|numpy)$"
)
# Reductions of a value already computed: a tiny kernel, nothing to wait for after a read
# (and views, which queue no kernel: `image.squeeze().cpu()`)
_SMALL_REDUCTION = (
    "sum",
    "mean",
    "std",
    "max",
    "min",
    "detach",
    "float",
    "cpu",
    "clone",
    "squeeze",
    "unsqueeze",
    "view",
    "permute",
)


def _drained_just_before(
    ctx: LintContext, owner: Optional[Node], statement: Node, copies: bool = False
) -> Optional[tuple[int, str]]:
    """The line of an `.item()`, `int()` or `float()` read in the statements right before the
    read of `owner` (up to three, with only host code after it: appends, prints, more reads),
    when `owner` was computed before that read: the read there waited for all the work queued so
    far, this value among it, so the host has nothing new to wait for (`losses.append(loss.item())`,
    then `aligns.append(align.item())`; `loss.mean().item()`, then `loss.std().item()`; `lo =
    int(r[k][0])`, then `hi = int(r[k][1])`). Not after a backward or an optimizer step, which
    queue new work; not for a value bound in between. `copies`: a blocking `.cpu()` or `.tolist()`
    above counts as a read too (`outputs = outputs.detach().cpu().numpy()`, then `batch_y =
    batch_y.detach().cpu().numpy()`), for a copy of this statement."""
    reduced = False  # (`x.sum().item()`: the read waits for a kernel of its own)
    while owner is not None and owner.type == "call" and method_name(owner) in _SMALL_REDUCTION:
        reduced = reduced or method_name(owner) in ("sum", "mean", "std", "max", "min")
        owner = receiver(owner)
    base = _base_name(owner) if owner is not None else None
    if base is None or text(base) == "self":
        return None
    binding = ctx.bindings(base).at(text(base), base.start_byte)
    previous: Optional[Node] = statement
    looked = 0
    while looked < 3:
        previous = neighbour_statement(previous, forward=False)
        if previous is None or previous.type != "expression_statement":
            return None
        if TRAINING_STEP.search(previous.text or b""):
            return None
        calls = [n for n in _walk(previous) if n.type == "call"]
        if len(calls) == 1 and is_device_synchronize(ctx, calls[0]):
            # `torch.cuda.synchronize()`, then `loss_meter.update(loss.item())`: the barrier waited
            if binding is None or binding.at >= previous.start_byte:
                return None
            return previous.start_point[0] + 1, "`synchronize()`"
        if _clock_bookkeeping(ctx, previous):
            continue  # (`t1 = time.time()`, `dt = t1 - t0`, `step += 1` after the barrier: no GPU work)
        looked += 1
        # (not a read of a value known to be on the host: `.item()` of a CPU tensor waits for nothing)
        reads = [
            n
            for n in calls
            if (_a_read(n) or (copies and _blocking_copy(n)))
            and device_of(ctx, receiver(n) or _single_argument(n)) not in (Device.CPU, Device.HOST)
        ] + [n for n in calls if _logs_a_tensor(ctx, n)]
        # (work queued inside the read, `int(out.argmax(-1).eq(labels).sum())`, is waited for by it;
        # but after such a read a read that reduces anew, `b.sum().item()` after `a.sum().item()`,
        # is counted as a wait of its own, as the labelled corpora have it)
        if any(
            not _HOST_ONLY_CALL.search(dotted_name(callee(n)) or method_name(n) or "")
            and (reduced or not any(r.start_byte <= n.start_byte and n.end_byte <= r.end_byte for r in reads))
            for n in calls
        ):
            return None
        if not reads and (not calls or any(n.type == "binary_operator" for n in _walk(previous))):
            return None  # (`t = a * b` between the reads may queue work; `print(...)` does not)
        if reads:
            if binding is None or binding.at >= previous.start_byte:
                return None  # (bound after the read above, or not known: it may hold new work)
            return reads[0].start_point[0] + 1, "read"
    return None


def _clock_bookkeeping(ctx: LintContext, statement: Node) -> bool:
    """`t1 = time.time()`, `dt = t1 - t0`, `step += 1`: an assignment of clock reads, numbers and
    arithmetic of names bound to host values, which queues no GPU work."""
    inner = statement.named_children[0] if statement.named_children else None
    if inner is None or inner.type not in ("assignment", "augmented_assignment"):
        return False
    target, value = inner.child_by_field_name("left"), inner.child_by_field_name("right")
    if target is None or target.type != "identifier" or value is None:
        return False
    stack = [value]
    while stack:
        node = stack.pop()
        if node.type in ("integer", "float"):
            continue
        if node.type == "call":
            if not is_clock_read(ctx, node):
                return False
        elif node.type == "identifier":
            if device_of(ctx, node) is not Device.HOST:
                return False
        elif node.type in ("binary_operator", "parenthesized_expression", "unary_operator"):
            stack.extend(node.named_children)
        else:
            return False
    return True


def _base_name(node: Node) -> Optional[Node]:
    """The name at the base of `node` through attributes and items (`loss` of `parts[k].recon`);
    None when the base is no name (a sum, a call)."""
    base = strip_parens(node)
    while base.type in ("attribute", "subscript"):
        inner = base.child_by_field_name("object") or base.child_by_field_name("value")
        if inner is None:
            return None
        base = strip_parens(inner)
    return base if base.type == "identifier" else None


def _drained_why(ctx: LintContext, owner: Optional[Node], statement: Node, copies: bool = False) -> Optional[str]:
    """`_drained_just_before`, said as the reason for "no new wait"."""
    drained = _drained_just_before(ctx, owner, statement, copies)
    return f"the {drained[1]} on line {drained[0]} just before already waited for it" if drained else None


def _inference_loop(ctx: LintContext, call: Node, how: Frequency) -> Optional[Node]:
    """The loop `call` runs on every iteration of, when that loop takes no training step and no
    function around `call` takes one (a validation, a prediction, an inference pass)."""
    if how.loop is None or not how.every_iteration or in_training_loop(how.loop):
        return None
    return how.loop if training_step_function(ctx, call) is None else None


def _logs_a_tensor(ctx: LintContext, call: Node) -> bool:
    """`writer.add_scalar("loss", loss, step)` of a value likely on the device: TensorBoard's writer
    reads it with `.item()`, a wait as any read."""
    positional, _ = arguments(call)
    return (
        method_name(call) == "add_scalar"
        and len(positional) >= 2
        and positional[1].type in ("identifier", "attribute", "subscript")
        and likely_device(ctx, positional[1])
    )


def _blocking_copy(call: Node) -> bool:
    """`x.cpu()`, `x.tolist()`: a copy to the host that waits for the value (not `non_blocking=True`).
    (Counted as a read before a `.cpu()` only: a `.tolist()` per element, `ids[:, 0].tolist()[i]`,
    copies once per element, each a wait however empty the queue.)"""
    return method_name(call) in ("cpu", "tolist") and not any(arguments(call))


def _a_read(call: Node) -> bool:
    """`x.item()`, `int(x)`, `float(x)`: a call that brings one value to the host."""
    if method_name(call) == "item":
        return not arguments(call)[0]
    return dotted_name(callee(call)) in ("int", "float") and _single_argument(call) is not None


# A name spelled as a layer of a model (`linear_layer`, `block`, `self.layers[i]`)
_LAYER_NAME = re.compile(r"(?:^|_)(?:layer|block|linear|conv)s?\d*$", re.I)


def _layer_moved(call: Node) -> bool:
    """`linear_layer.cpu()` as a statement of its own: a module moved in place (a tensor's copy
    would be lost; fairscale's `v_on_cuda.cpu()` is such a copy, a wait for nothing)."""
    owner = receiver(call)
    while owner is not None and owner.type == "subscript":
        owner = owner.child_by_field_name("value")
    name = (dotted_name(owner) or "").split(".")[-1] if owner is not None else ""
    return call.parent is not None and call.parent.type == "expression_statement" and bool(_LAYER_NAME.search(name))


def _offloaded(call: Node) -> bool:
    """`t5, clip = t5.cpu(), clip.cpu()` followed by `torch.cuda.empty_cache()` in the same block
    (flux's CLI): models moved off the GPU to make room, each name rebound to its own `.cpu()`."""
    owner = receiver(call)
    bound = _bound_to(call)
    if owner is None or owner.type != "identifier" or bound is None or text(bound[0]) != text(owner):
        return False
    block = bound[1].parent
    while block is not None and block.type != "block":
        block = block.parent
    return block is not None and b"empty_cache()" in (block.text or b"")


def _in_literal(node: Node) -> Node:
    """The outermost dict, list or tuple literal that holds `node` as a value, maybe nested
    (`{"energy": {"prediction": t.cpu().tolist()}}`); `node` itself when it is in none."""
    while node.parent is not None:
        holder = node.parent
        if holder.type == "pair" and holder.child_by_field_name("value") == node and holder.parent is not None:
            holder = holder.parent  # the dict around the pair
        if holder.type not in ("dictionary", "list", "tuple"):
            return node
        node = holder
    return node


def _written_out(node: Node) -> bool:
    """Is `node` an argument of a call that writes it to a file or a figure (`save_mels(path,
    pred_mel=mel.cpu().numpy())`, `np.save(path, t.cpu().numpy())`)?"""
    argument = node.parent.parent if node.parent is not None and node.parent.type == "keyword_argument" else node.parent
    writer = argument.parent if argument is not None and argument.type == "argument_list" else None
    if writer is None and node.type == "call":
        writer = node  # (`_through_host_function` stops at a host writer: `np.save(path, t.cpu().numpy())`)
    return writer is not None and bool(_WRITER.search((dotted_name(callee(writer)) or "").split(".")[-1]))


def _collected(call: Node, loop: Optional[Node]) -> bool:
    """Is this `.cpu()` result (maybe through `.numpy()` / `.detach()`) gathered on the host:
    appended to a list (`outputs.append(t.cpu())`), an element of a list built of such copies
    (`[x.cpu().numpy() for x in outputs]`), or bound to a name, maybe through one host function
    (`y = csc_matrix.dot(t.cpu().numpy(), m)`), that the loop then appends (`results.append(y)`)
    or hands to a call that keeps it (`manager.add_samples(y)`, `pool.submit(evaluate, y)`)
    when the loop takes no training step, or stored under a key, maybe through one host function
    (`results[prop] = t.cpu().numpy()`, `masks[k] = csc_matrix.dot(v.cpu().numpy(), m)`), in a
    loop that takes none? The usual way to keep evaluation results."""
    node = _through_host_function(_host_copy(call))
    for _ in range(3):
        # `res.append(Response(data=[Item(embedding=p.tolist())]))`: a literal of host objects
        # handed to another constructor, kept as the one around it is
        literal = _in_literal(node)
        lifted = _through_host_function(literal) if literal is not node else literal
        if lifted is literal:
            break
        node = lifted
    if node.parent is not None and node.parent.type == "pair":
        literal = _in_literal(node)
        if literal.type == "dictionary":
            node = literal  # `tmp = {"id": i, "energy": {"prediction": p.cpu().tolist()}}`, kept below
    elif (
        node.parent is not None
        and node.parent.type == "conditional_expression"
        and node.parent.named_children[:1] == [node]
    ):
        node = node.parent  # `dist_batches.append(x.cpu() if rank == 0 else None)` (stylegan3's metrics)
    elif node.parent is not None and node.parent.type in ("tuple", "list"):
        row = _in_literal(node)
        if row.parent is not None and row.parent.type == "argument_list":
            node = row  # `stats.append((correct.cpu(), pred[:, 4].cpu(), tcls))` (yolov7's test): a row of copies
    parent = node.parent
    outer = parent.parent if parent is not None and parent.type == "argument_list" else None
    if _written_out(node):
        return loop is None or not in_training_loop(loop)
    if outer is not None and method_name(outer) in _KEEPING_METHODS:
        # `outputs.append(t.cpu())`, `rows.append(Row(embedding=p.tolist()))`,
        # `out.append(csc_matrix.dot(t.cpu().numpy(), m))`, `out[..., y:y + t].copy_(tile.cpu())`
        # (a loss history kept in a loop that takes a training step is a wait per step)
        return loop is None or not in_training_loop(loop)
    if _stored_in_item(node) and loop is not None:
        return not in_training_loop(loop)
    if parent is not None and parent.type == "list_comprehension" and parent.named_children[0] == node:
        return True
    if (
        parent is not None
        and parent.type == "augmented_assignment"
        and parent.child_by_field_name("right") == node
        and text(parent.child_by_field_name("operator")) == "+="
        and method_name(call) == "tolist"
    ):
        # `ppls += ppl.tolist()`: a list extended with the host values, as `ppls.extend(...)`
        return loop is None or not in_training_loop(loop)
    if parent is not None and parent.type == "list" and parent.parent is not None:
        # `latent += [z.cpu()]`: appended, as `latent.append(z.cpu())`
        extended = parent.parent
        if extended.type == "augmented_assignment" and text(extended.child_by_field_name("operator")) == "+=":
            return loop is None or not in_training_loop(loop)
    if parent is not None and parent.type == "pair" and parent.child_by_field_name("value") == node:
        # a dict of copies, kept: appended (`outputs.append({k: v.cpu() for k, v in out.items()})`),
        # bound or returned (`embeddings = {s: e[i].tolist() for i, s in ...}`); not handed to a
        # logger (`trainer.log({k: v.cpu().item() for ...})`) or built in a training loop
        built = parent.parent
        holder = built.parent if built is not None and built.type == "dictionary_comprehension" else None
        keeper = holder.parent if holder is not None and holder.type == "argument_list" else None
        kept = holder is not None and (
            holder.type in ("assignment", "return_statement")
            or (keeper is not None and method_name(keeper) in _KEEPING_METHODS)
        )
        return kept and (loop is None or not in_training_loop(loop))
    bound = _bound_to(node)
    if bound is None:
        return False
    target, parent = bound
    body = loop.child_by_field_name("body") if loop is not None else None
    if target.type != "identifier" or body is None or in_training_loop(body):
        return False  # (in a loop that takes a training step, a metric kept per step is a wait per step)
    # appended, handed to a call that keeps or writes it (`manager.add_samples(estimate, ...)`,
    # `pendings.append(pool.submit(evaluate, y_pred, y))`, `out.append(search(probs[i]))`,
    # `sf.write(path, audio_np, rate)`), maybe after one more host step that binds a name
    # (`artifact = Artifact(data=audio_np)`, `_, text = decoder(log_probs)`, then kept)
    data = body.text or b""
    start = parent.end_byte - body.start_byte
    names = [text(target).encode()]
    for step in _HOST_STEP.finditer(data, start):
        # (handed to the call, `y = f(ratio)`; not beside it, `scaled = updown.norm() * ratio`: GPU work)
        if re.search(rb"\b" + re.escape(names[0]) + rb"\b", _call_arguments(step.group(2))):
            names += [n.strip() for n in step.group(1).split(b",") if re.fullmatch(rb"\s*\w+\s*", n)]
    if method_name(call) == "tolist" and re.search(rb"\w[ \t]*\+=[ \t]*" + re.escape(names[0]) + rb"\b", data[start:]):
        return True  # `all_probs += probs` of `probs = p.tolist()`: a list extended with the host values
    return any(_kept(data, start, name) for name in names if name != b"_")


def _call_arguments(rest: bytes) -> bytes:
    """The arguments of the call whose `(` opened just before `rest` (up to its matching `)`, or
    the end of the line)."""
    depth = 1
    for at, byte in enumerate(rest):
        depth += {40: 1, 41: -1}.get(byte, 0)  # ( and )
        if depth == 0:
            return rest[:at]
    return rest


# What a function that writes its argument to a file or a figure is spelled with (`_KEEPS`, `_WRITER`)
_WRITER_WORDS = "save|write|dump|plot"
# `name = call(...)` / `a, b = call(...)` on one line: a host step whose result the loop may keep
_HOST_STEP = re.compile(rb"^[ \t]*(\w+(?:[ \t]*,[ \t]*\w+)*)[ \t]*=[ \t]*[\w.]+\(([^\n]*)$", re.M)
# (also stored into a slice of a result array: `pred_arr[start:start + n] = pred`)
_KEEPS = (
    rb"(?:\.(?:append|extend|add_\w+|submit|write\w*|save\w*|imwrite|dump)\(|\w[ \t]*\+=[ \t]*\["
    rb"|(?<![\w.])_*(?:" + _WRITER_WORDS.encode() + rb")\w*\("
    rb"|\w\[[^=\]]*:[^=]*?\][ \t]*=(?!=))(?:\s*|[^\n]*?\b)"
)


def _saved_by_name(node: Node, loop: Optional[Node]) -> bool:
    """Is `node` bound to a name that the loop then writes out (`x = rearrange(t.cpu().numpy(),
    ...)`, then `Image.fromarray(x.astype(np.uint8)).save(path)`)?"""
    bound = _bound_to(node)
    body = loop.child_by_field_name("body") if loop is not None else None
    if bound is None or body is None or bound[0].type != "identifier":
        return False
    start = bound[1].end_byte - body.start_byte
    return _written_name(text(bound[0]).encode()).search(body.text or b"", start) is not None


def _written_name(name: bytes) -> "re.Pattern[bytes]":
    """`name` written out on one line: by a method of what it becomes (`Image.fromarray(x.astype(
    np.uint8)).save(path)`) or handed to a writer (`cv2.imwrite(path, x)`, `np.save(path, x)`)."""
    spelled = re.escape(name)
    return re.compile(
        rb"(?<![\w.])" + spelled + rb"\b[^\n]*\)\.(?:save|write|imwrite)\w*\("
        rb"|(?<!\w)(?:\w+\.)?_*(?:" + _WRITER_WORDS.encode() + rb"|imwrite|imsave)\w*\([^\n]*?\b" + spelled + rb"\b"
    )


def _kept(data: bytes, start: int, name: bytes) -> bool:
    if re.compile(_KEEPS + re.escape(name) + rb"\b").search(data, start) is not None:
        return True
    # (written by a method of what it becomes: `Image.fromarray(x.astype(np.uint8)).save(path)`)
    return _written_name(name).search(data, start) is not None


def _through_host_function(node: Node) -> Node:
    """`csc_matrix.dot(t.cpu().numpy(), m)`: the call of a host function (a method of something
    other than torch or `self`) that the host copy is handed to, else the copy itself."""
    parent = node.parent
    if parent is not None and parent.type == "keyword_argument":
        parent = parent.parent  # `Response(index=i, embedding=pred.tolist())`
    outer = parent.parent if parent is not None and parent.type == "argument_list" else None
    if outer is None:
        return node
    name = dotted_name(callee(outer)) or ""
    # (einops' `rearrange` of a NumPy array gives a NumPy array)
    if method_name(outer) is None and not name[:1].isupper() and name not in ("list", "tuple", "rearrange"):
        return (
            node  # (a method of a host object, a class or a container: `csc_matrix.dot(...)`, `Row(...)`, `list(...)`)
        )
    if name.startswith(("torch.", "self.")) or method_name(outer) in _KEEPING_METHODS:
        return node
    return outer


# Methods that keep what they are handed: a list's, or a host buffer's `copy_`
# (`streamer.put(next_tokens.cpu())`, `queue.put(...)`: handed out to a consumer)
_KEEPING_METHODS = ("append", "extend", "copy_", "put", "add")
# A call that writes what it is given to a file or a figure: `save_mels`, `np.save`, `imwrite`,
# `write_labels`, `plot_sample`
_WRITER = re.compile(rf"^_*(?:{_WRITER_WORDS}|imwrite|imsave)(?:_|$)|^_*(?:{_WRITER_WORDS})[a-z]")


_SAME_DATA = (
    "detach",
    "float",
    "double",
    "half",
    "long",
    "int",
    "squeeze",
    "contiguous",
    "clone",
    "flatten",
    # (the same data laid out for an image: `pred.cpu().permute(0, 2, 3, 1).numpy()`)
    "permute",
    "transpose",
    "unsqueeze",
    "view",
    "reshape",
)


def _handed_out(call: Node) -> bool:
    """Is the host copy what an inner `for` walks, alone or zipped with the items of the batch
    (`for sentence, score in zip(batch, scores.tolist()):`)?"""
    node = call
    parent = node.parent
    if parent is not None and parent.type == "argument_list":
        zipped = parent.parent
        if zipped is None or zipped.type != "call" or dotted_name(callee(zipped)) not in ("zip", "enumerate"):
            return False
        node, parent = zipped, zipped.parent
    return parent is not None and parent.type == "for_statement" and parent.child_by_field_name("right") == node


def _as_numpy(call: Node) -> bool:
    """`t.cpu().numpy()`, `t.cpu().detach().numpy()`, `t.cpu().tolist()`, `np.asarray(t.cpu())`:
    the host copy becomes NumPy data or Python numbers."""
    node = call
    while True:
        attribute = node.parent
        if attribute is None or attribute.type != "attribute" or attribute.child_by_field_name("object") != node:
            break
        outer = attribute.parent
        if text(attribute.child_by_field_name("attribute")) == "data":
            node = attribute  # (`t.cpu().data.numpy()`: the same data, without its autograd history)
            continue
        if outer is None or outer.type != "call":
            return False
        method = method_name(outer)
        if method in ("numpy", "tolist"):
            return True
        if method not in _SAME_DATA:
            return False
        node = outer
    arguments_of = node.parent
    outer = arguments_of.parent if arguments_of is not None and arguments_of.type == "argument_list" else None
    return outer is not None and (dotted_name(callee(outer)) or "").split(".")[-1] in ("array", "asarray")


def _feeds_a_metric(call: Node, loop: Node) -> bool:
    """Is this host copy compared or reduced right away (`(p == labels).sum()` after `p =
    model(x).argmax(-1).cpu().numpy()`, `float(correct.sum().cpu().numpy())`) or handed to torch
    (`torch.split(x, lens.cpu().numpy().tolist())`)? A metric or a size computed on the host, which
    the device could have kept, not a result brought home."""
    node = _host_copy(call)
    for parent in ancestors(node):
        if parent.type in ("comparison_operator", "augmented_assignment"):
            return True
        if parent.type == "call":
            name = dotted_name(callee(parent)) or ""
            if name in ("float", "int", "sum") or name.startswith("torch."):
                return True
        if parent.type == "assignment":
            target = parent.child_by_field_name("left")
            if target is None or target.type != "identifier":
                return False
            bound = re.escape(target.text or b"")
            body = loop.child_by_field_name("body")
            compared = rb"\b" + bound + rb"\s*[=!]=|[=!]=\s*" + bound + rb"\b"
            return body is not None and re.search(compared, body.text or b"") is not None
        if parent.type in ("expression_statement", "block"):
            return False
    return False


def _bound_to(node: Node) -> Optional[tuple[Node, Node]]:
    """The target `node` is assigned to, and the assignment: `y = node`, or its own name in a
    tuple assignment (`head, tail = head.tolist(), tail.tolist()`); None when it is not assigned."""
    parent = node.parent
    if (
        parent is not None
        and parent.type == "binary_operator"
        and any(c.type in ("float", "integer") for c in parent.named_children)
    ):
        node, parent = parent, parent.parent  # `x = 255. * rearrange(x.cpu().numpy(), ...)`: scaled on the host
    if parent is not None and parent.type == "conditional_expression" and parent.named_children[:1] == [node]:
        node, parent = parent, parent.parent  # `tcls = labels[:, 0].tolist() if nl else []` (yolov7)
    if (
        parent is not None
        and parent.type == "tuple"
        and parent.parent is not None
        and parent.parent.type == "assignment"
    ):
        node, parent = parent, parent.parent  # `answer = (float(logits.sum()), bool(max_equal))`: a row of results
    if parent is not None and parent.type == "expression_list" and parent.parent is not None:
        assignment = parent.parent
        pattern = assignment.child_by_field_name("left") if assignment.type == "assignment" else None
        values = [c for c in parent.named_children if c.type != "comment"]
        if pattern is None or pattern.type not in ("pattern_list", "tuple_pattern") or node not in values:
            return None
        targets = [c for c in pattern.named_children if c.type != "comment"]
        return (targets[values.index(node)], assignment) if len(targets) == len(values) else None
    if parent is None or parent.type != "assignment" or parent.child_by_field_name("right") != node:
        return None
    target = parent.child_by_field_name("left")
    return (target, parent) if target is not None else None


# A function that evaluates, validates or samples: its loop's model outputs are results
_EVALUATION_FUNCTION = re.compile(r"valid|evaluat|_eval|^eval|predict|inference|sample|generat|(?:^|_)test", re.I)


def _bound_whole(call: Node) -> bool:
    """Is the host copy of a named value bound whole to a name (`samples = output_batch.output.cpu()`;
    not `correct = (pred == y).cpu()`, a metric the device could keep)?"""
    target = _copy_bound_to(call)
    return target is not None and target.parent is not None and target.parent.type == "assignment"


def _copy_bound_to(call: Node) -> Optional[Node]:
    """The name that the host copy of a named value is bound to, whole: `samples = out.cpu()`, or
    its place in `imgs, outputs = imgs.cpu(), outputs.cpu()` (not `correct = (pred == y).cpu()`,
    a metric the device could keep)."""
    owner = receiver(call)
    while owner is not None and owner.type == "call" and method_name(owner) in ("detach", "float"):
        owner = receiver(owner)
    if owner is None or owner.type not in ("identifier", "attribute", "subscript"):
        return None
    if any(n.type == "call" for n in _walk(owner)) or "loss" in text(owner).lower():
        return None  # (`self._get_losses(out, y)[1].cpu()`: a loss computed for the copy, a metric)
    # (`preds = preds.detach().cpu() if cfg.NUM_GPUS else preds.detach()`: the copy when on a GPU)
    bound = _bound_to(_host_copy(call))
    target = bound[0] if bound is not None else None
    return target if target is not None and target.type == "identifier" else None


def _read_as_numpy_later(ctx: LintContext, call: Node, loop: Node) -> bool:
    """Is the name a host copy is bound to read later in the loop as NumPy, whole or a row of it
    (`imgs, outputs = imgs.cpu(), outputs.cpu()`, then `am = outputs[j, ...].numpy()` per image)?
    The copy is a result brought home for NumPy, as `t.cpu().numpy()` is."""
    target = _copy_bound_to(call)
    if target is None:
        return False
    names, rows = [text(target)], []
    for _ in range(2):  # (the copy, then a row of it bound to a name: `img = imgs[j, ...]`)
        for name in ctx.identifiers(tuple(names), statement_of(call).end_byte, loop.end_byte):
            node = name
            while (
                node.parent is not None
                and node.parent.type == "subscript"
                and node.parent.child_by_field_name("value") == node
            ):
                node = node.parent
            parent = node.parent
            if parent is None:
                continue
            if (
                parent.type == "attribute"
                and parent.child_by_field_name("object") == node
                and text(parent.child_by_field_name("attribute")) == "numpy"
            ):
                return True
            left = parent.child_by_field_name("left") if parent.type == "assignment" else None
            if (
                node != name
                and left is not None
                and left.type == "identifier"
                and parent.child_by_field_name("right") == node
            ):
                rows.append(text(left))
        if not rows:
            break
        names, rows = rows, []
    return False


def _host_copy(call: Node) -> Node:
    """The expression that holds a `.cpu()` result on the host: the call, or the chain after it
    that keeps the same data (`t.cpu().detach().numpy()`, `t.cpu().data.numpy().item()`, a slice
    `t.cpu().numpy()[:n]`)."""
    node = call
    while True:
        attribute = node.parent
        if attribute is not None and attribute.type == "subscript" and attribute.child_by_field_name("value") == node:
            node = attribute  # `t.cpu().numpy()[:n]`: a part of the copy
            continue
        if attribute is not None and attribute.type in ("binary_operator", "parenthesized_expression"):
            # `out.cpu().numpy() / 100`, `(library * mu.cpu()).numpy()`: host arithmetic on the copy
            # (a CUDA operand would raise: the other side is on the host too)
            node = attribute
            continue
        if attribute is None or attribute.type != "attribute":
            return node
        outer = attribute.parent
        if text(attribute.child_by_field_name("attribute")) == "data":
            node = attribute  # `t.cpu().data.numpy()`
        elif outer is not None and outer.type == "call" and (method_name(outer) or "") in _HOST_CHAIN:
            node = outer
        elif outer is not None and outer.type == "call" and _cast_only(outer):
            node = outer  # `t.cpu().to(torch.float32)`: a cast of the host copy
        else:
            return node


# Calls on a host copy that keep it a host value of the same data: views, casts, conversions.
_HOST_CHAIN = VIEW_METHODS | {
    "numpy",
    "float",
    "half",
    "double",
    "long",
    "int",
    "item",
    "tolist",
    "astype",
    "copy",
    "clone",
    "index_select",  # rows of the copy picked on the host (`out.cpu().index_select(0, idx)`)
    "cpu",  # (`(visibility * present.cpu()).cpu()`: already there)
    "clamp",  # (`out.cpu().clamp_(0, 1).numpy()`, SwinIR: host work on the copy)
    "clamp_",
}


def _cast_only(call: Node) -> bool:
    """`.to(torch.float32)` / `.to(dtype=torch.float16)`: a dtype cast, no move."""
    if method_name(call) != "to":
        return False
    positional, keywords = arguments(call)
    given = [*positional, *(v for k, v in keywords.items() if k == "dtype")]
    # (`torch.float16`, or a name spelled as a dtype: `.to(storage_dtype)`, `.to(self.dtype)`)
    return (
        bool(given)
        and set(keywords) <= {"dtype"}
        and all(
            ((dotted_name(g) or "").startswith("torch.") or (dotted_name(g) or "").endswith("dtype"))
            and "device" not in text(g)
            for g in given
        )
    )


def _stored_in_item(node: Node) -> bool:
    """`results[prop] = out[prop].cpu().numpy() * units`: a host copy (maybe scaled) stored under
    a key of a dictionary, as a calculator or a labelling pass keeps its results."""
    parent = node.parent
    while parent is not None and (
        parent.type == "parenthesized_expression"
        or (parent.type == "binary_operator" and text(parent.child_by_field_name("operator")) in ("*", "/", "+", "-"))
    ):
        node, parent = parent, parent.parent
    bound = _bound_to(node)
    if bound is None:
        return False
    target, parent = bound
    keys = target.children_by_field_name("subscript") if target.type == "subscript" else []
    if len(keys) > 1 and keys[0].type == "slice" and all(k.type in ("slice", "ellipsis") for k in keys):
        return True  # (`logits[pos : pos + bs, :] = out.cpu()`: a batch's rows of a result buffer)
    # (a key, not an index: `self.masks[i, c] = m.cpu()` fills a tensor, one copy per element)
    if len(keys) != 1:
        return False
    key = keys[0]
    # (a slice: `sizes[begin:end] = t.cpu().numpy()` fills a batch's rows of a result array)
    # (a key read from a list of names: `results[names[i]] = emb.cpu().numpy()`)
    return key.type in ("string", "identifier", "slice", "subscript", "attribute") or (
        key.type == "call" and method_name(key) == "format"
    )


def _single_argument(call: Node) -> Optional[Node]:
    positional, keywords = arguments(call)
    return positional[0] if len(positional) == 1 and not keywords else None


def _conversions(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls_in_loops(*CONVERSIONS, *(name.split(".")[-1] for name in MATH_CONVERSIONS)):
        name = dotted_name(callee(call))
        argument = _single_argument(call)
        if (name not in CONVERSIONS and name not in MATH_CONVERSIONS) or argument is None:
            continue
        if not ctx.in_loop(call) or not likely_device(ctx, argument):
            continue
        if (
            name in MATH_CONVERSIONS
            and "loss" in text(argument).lower()
            and device_of(ctx, argument) is not Device.CUDA
        ):
            # (`math.isfinite(metrics["loss/mean"])`: the math module is given numbers; a loss whose
            # device the file does not show is most often one already read, a float in a dict)
            continue
        how = frequency(call)
        statement = statement_of(call)
        drained: Optional[tuple[int, str]] = None
        if how.every_iteration:
            earlier = _read_earlier_in_statement(call, statement, argument)
            drained = (earlier, "read") if earlier is not None else _drained_just_before(ctx, argument, statement)
        if drained is not None:
            how = Frequency(
                how.loop,
                False,
                f"{how.how_often}, but the {drained[1]} on line {drained[0]} just before already waited for it: "
                "no new wait",
            )
        finding = _report(ctx, f"`{name}()` of a CUDA tensor", call, how=how)
        if finding is not None:
            yield finding


def _tensors_from_elements(ctx: LintContext) -> Iterator[Finding]:
    """`torch.tensor([torch.min(x), torch.max(x)])`, `torch.Tensor([s for s in scores])`: a tensor
    built from a list of CUDA tensors copies each element to the host, one wait per element."""
    for call in ctx.calls_in_loops(*(name.split(".")[-1] for name in TENSOR_BUILDERS)):
        builder = torch_name(ctx, callee(call))
        if builder not in TENSOR_BUILDERS or not ctx.in_loop(call):
            continue
        positional, keywords = arguments(call)
        data = strip_parens(positional[0]) if positional else None
        if data is None:
            continue
        if data.type == "identifier":
            # `loss_list = [torch.zeros_like(loss) for _ in range(n)]`, `dist.all_gather(loss_list,
            # loss)`, then `torch.tensor(loss_list)`: the list the name was bound to
            binding = ctx.bindings(data).at(text(data), data.start_byte)
            if binding is not None and binding.value is not None and not binding.augmented:
                bound = strip_parens(binding.value)
                data = bound if bound.type in ("list", "list_comprehension") else data
        if data.type in ("list", "tuple"):
            elements = [c for c in data.named_children if c.type not in ("comment", "list_splat")]
        elif data.type == "list_comprehension":
            body = data.child_by_field_name("body")
            elements = [body] if body is not None else []
        else:
            continue
        # (`torch.tensor([b["action"] for b in batch], device=device)`: building on the device says the
        # data is on the host, whatever the batch is spelled like; only proven CUDA elements count then)
        on_device = "device" in keywords
        shown = next(
            (e for e in elements if device_of(ctx, e) is Device.CUDA or (not on_device and likely_device(ctx, e))), None
        )
        if shown is None:
            continue
        finding = _report(ctx, f"`{builder}(...)` of CUDA tensors (`{_short(shown)}`, one read each)", call)
        if finding is not None:
            yield finding


def _walks_losses(loop: Optional[Node]) -> bool:
    """Does the loop walk a step's losses (`{k: v.detach().cpu().item() for k, v in
    loss_dict.items()}`)? Copies of them are the step's logging, not results kept."""
    if loop is None:
        return False
    clause = (
        loop
        if loop.type == "for_statement"
        else next((c for c in loop.named_children if c.type == "for_in_clause"), None)
    )
    iterable = clause.child_by_field_name("right") if clause is not None else None
    return iterable is not None and b"loss" in (iterable.text or b"").lower()


def _walks_a_loader(loop: Node) -> bool:
    """Does the loop walk a loader or a dataset (`for batch in self.val_loader:`), not the samples
    of one batch (`for b in range(batch_size):`)?"""
    iterable = loop.child_by_field_name("right")
    return iterable is not None and _LOADER_WORD.search(iterable.text or b"") is not None


_LOADER_WORD = re.compile(rb"loader|dataset", re.I)


def _string_expression(node: Node) -> bool:
    """A string, or text built from one (`name + " recall: %.2f" % (t * 100)`): printing it
    reads nothing more; a tensor formatted into it is the formatting's own finding."""
    node = strip_parens(node)
    if node.type in ("string", "concatenated_string"):
        return True
    if node.type != "binary_operator":
        return False
    operator = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if operator is None or left is None or right is None:
        return False
    if operator.type == "%":
        return _string_expression(left)
    return operator.type == "+" and (_string_expression(left) or _string_expression(right))


def _prints(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls_in_loops("print"):
        if dotted_name(callee(call)) != "print" or not ctx.in_loop(call):
            continue
        positional, _ = arguments(call)
        shown = next((a for a in positional if not _string_expression(a) and likely_device(ctx, a)), None)
        if shown is None:
            continue
        finding = _report(ctx, f"printing a CUDA tensor (`{_short(shown)}`)", call)
        if finding is not None:
            yield finding


def _string_formats(ctx: LintContext) -> Iterator[Finding]:
    """`"Grad Norm {:.6f}".format(grad_norm)`: `str.format` formats a tensor as an f-string does
    (a 0-dim tensor through `.item()`). Only a string literal's `format`: `x.format(...)` may be
    anything's."""
    for call in ctx.calls_in_loops("format"):
        function = callee(call)
        owner = (
            function.child_by_field_name("object") if function is not None and function.type == "attribute" else None
        )
        if owner is None or strip_parens(owner).type != "string" or not ctx.in_loop(call):
            continue
        positional, keywords = arguments(call)
        shown = next(
            (
                value
                for value in (*positional, *keywords.values())
                if value.type not in ("string", "integer", "float") and likely_device(ctx, value)
            ),
            None,
        )
        if shown is None:
            continue
        finding = _report(ctx, f"formatting a CUDA tensor (`.format({_short(shown)})`)", call)
        if finding is not None:
            yield finding


def _logged_scalars(ctx: LintContext) -> Iterator[Finding]:
    """`writer.add_scalar("loss", loss, step)` of a CUDA tensor: TensorBoard's SummaryWriter turns
    the value into a number on the host (`make_np`: `.cpu().numpy()`), a wait like `.item()`."""
    for call in ctx.calls_in_loops("add_scalar"):
        if method_name(call) != "add_scalar" or not ctx.in_loop(call):
            continue
        positional, keywords = arguments(call)
        value = positional[1] if len(positional) > 1 else keywords.get("scalar_value")
        if value is None or not likely_device(ctx, value):
            continue
        finding = _report(ctx, f"logging a CUDA tensor (`{_short(value)}`) with `add_scalar`", call)
        if finding is not None:
            yield finding


def _repeats_on_device(ctx: LintContext, call: Node) -> Optional[Node]:
    """The repeats of `torch.repeat_interleave(x, repeats)`, `torch.repeat_interleave(repeats)` or
    `x.repeat_interleave(repeats)` when they are a CUDA tensor and no `output_size=` is given: the
    output's length is their sum, which the host reads first. A number of repeats (`2`, `n_rep`)
    costs nothing, and neither does a tensor the code does not show on the device."""
    positional, keywords = arguments(call)
    if "output_size" in keywords or len(positional) > 3:
        return None
    if (dotted_name(callee(call)) or "") == "torch.repeat_interleave":
        repeats = keywords.get("repeats") or (
            positional[1] if len(positional) > 1 else positional[0] if positional else None
        )
        if len(positional) == 1 and "repeats" not in keywords:
            repeats = positional[0]  # the one-argument form: the repeats themselves
    else:
        repeats = positional[0] if positional else keywords.get("repeats")
    if repeats is None or repeats.type in ("integer", "float", "unary_operator", "binary_operator"):
        return None
    return repeats if likely_device(ctx, repeats) else None


def _data_dependent(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls_in_loops("repeat_interleave"):
        if method_name(call) != "repeat_interleave" or not ctx.in_loop(call):
            continue
        name = dotted_name(callee(call)) or ""
        if name.split(".")[0] in HOST_MODULES:
            continue
        repeats = _repeats_on_device(ctx, call)
        if repeats is None or converted_with_numpy(call):
            continue
        label = "`torch.repeat_interleave(...)`" if name == "torch.repeat_interleave" else "`.repeat_interleave()`"
        finding = _report(
            ctx, f"{label} with repeats in a CUDA tensor (`{_short(repeats)}`; the output's length is their sum)", call
        )
        if finding is not None:
            yield finding
    for call in ctx.calls_in_loops(*DATA_DEPENDENT_METHODS, "where"):
        if not ctx.in_loop(call):
            continue
        name = dotted_name(callee(call)) or ""
        method = method_name(call)
        positional, keywords = arguments(call)
        device_test = maybe_device  # an operation only a tensor has: no evidence needed
        if name in DATA_DEPENDENT_FUNCTIONS or (name == "torch.where" and len(positional) == 1 and not keywords):
            subject = positional[0] if positional else keywords.get("input")
            label = f"`{name}(...)`"
        elif method in DATA_DEPENDENT_METHODS and not name.startswith("torch."):
            if name.split(".")[0] in HOST_MODULES:
                continue  # `np.unique(symbols)`: numpy's, on the host
            subject = receiver(call)
            label = f"`.{method}()`"
            if method == "unique":
                device_test = likely_device  # a pandas column's too (`adata.obs[key].unique()`)
        else:
            continue
        if subject is None or not device_test(ctx, subject) or converted_with_numpy(call):
            continue  # (`torch.where(m)[0].numpy()`: a CUDA result would raise there, so it is on the host)
        finding = _report(ctx, f"{label} (its output's shape depends on the data)", call)
        if finding is not None:
            yield finding


def _conditions(ctx: LintContext) -> Iterator[Finding]:
    root = ctx.source.root
    seen: set[int] = set()
    for match in _keywords_in_loops(ctx):
        keyword = root.descendant_for_byte_range(match.start(1), match.end(1))
        if keyword is None or keyword.type != match.group(1).decode() or keyword.parent is None:
            continue
        statement = keyword.parent
        if statement.type in ("if_statement", "elif_clause", "while_statement", "conditional_expression"):
            condition = statement.child_by_field_name("condition")
            if statement.type == "conditional_expression":
                parts = statement.named_children
                condition = parts[1] if len(parts) >= 2 else None
        elif statement.type == "if_clause":  # `[x for x in xs if t.any()]`
            parts = statement.named_children
            condition = parts[0] if parts else None
        elif statement.type == "assert_statement":
            parts = statement.named_children
            condition = parts[0] if parts else None
        else:
            continue
        if condition is None or condition.id in seen:
            continue
        seen.add(condition.id)
        tested = _tensor_truth_test(ctx, condition)
        if tested is None:
            continue
        finding = _report(ctx, f"a CUDA tensor as a condition (`{_short(tested)}`)", tested)
        if finding is not None:
            yield finding


# `torch.isnan(`, `x.isinf()`, ...: literal words (a substring search; also the definition triggers)
NONFINITE_CALLS = (b"isnan(", b"isinf(", b"isfinite(", b"isposinf(", b"isneginf(")


def _nonfinite_checks(ctx: LintContext) -> Iterator[Finding]:
    """`if not torch.isfinite(loss):` / `if torch.isnan(loss).any():` outside any loop of a
    function that runs once per iteration (`_repeated_call`: called in a loop of the file, or
    taking a training step). Only these checks, of all conditions outside loops: their words keep
    the definition in the parse (RULE.definition_triggers), so the finding does not depend on
    what the command line leaves out."""
    root = ctx.source.root
    seen: set[int] = set()
    for start, end in _nonfinite_calls(ctx.source.data):
        node = root.descendant_for_byte_range(start, start + 1)
        condition = None
        for parent in ancestors(node) if node is not None else ():
            if parent.type in ("if_statement", "elif_clause", "while_statement", "assert_statement"):
                parts = parent.named_children
                condition = parent.child_by_field_name("condition") or (parts[0] if parts else None)
                if condition is not None and not (condition.start_byte <= start and end <= condition.end_byte):
                    condition = None
                break
            if parent.type in ("block", "function_definition", "lambda", "class_definition", "module"):
                break
        if condition is None or condition.id in seen or ctx.in_loop(condition) or is_throttle(condition):
            continue
        seen.add(condition.id)
        caller = _repeated_call(ctx, condition)
        tested = _tensor_truth_test(ctx, condition) if caller is not None else None
        if caller is None or tested is None:
            continue
        finding = _report(
            ctx, f"a CUDA tensor as a condition (`{_short(tested)}`)", tested, how=caller[0], where=caller[1]
        )
        if finding is not None:
            yield finding


def _nonfinite_calls(data: bytes) -> Iterator[tuple[int, int]]:
    for word in NONFINITE_CALLS:
        at = data.find(word)
        while at != -1:
            if at == 0 or not (chr(data[at - 1]).isalnum() or data[at - 1] == ord("_")):
                yield at, at + len(word)
            at = data.find(word, at + 1)


def _tensor_truth_test(ctx: LintContext, condition: Node) -> Optional[Node]:
    """The first part of `condition` whose truth value is taken of a CUDA tensor (also each
    element of `any(...)` / `all(...)` over a generator: `any(torch.isnan(l) for l in losses)`)."""
    node = strip_parens(condition)
    if node.type == "call" and dotted_name(callee(node)) in ("any", "all"):
        element = node.child_by_field_name("arguments")  # `any(x for x in y)`: the generator itself
        if element is not None and element.type == "argument_list":
            positional, keywords = arguments(node)
            element = positional[0] if len(positional) == 1 and not keywords else None
        if element is not None and element.type in ("generator_expression", "list_comprehension"):
            body = element.child_by_field_name("body")
            return _tensor_truth_test(ctx, body) if body is not None else None
        if (
            element is not None
            and element.type in ("identifier", "attribute", "subscript")
            and likely_device(ctx, element)
        ):
            # `while not all(found_valid):` of a CUDA tensor: Python's `all` walks it, one read per row
            return element
    if node.type == "boolean_operator":
        for side in ("left", "right"):
            part = node.child_by_field_name(side)
            found = _tensor_truth_test(ctx, part) if part else None
            if found is not None:
                return found
        return None
    if node.type == "not_operator":
        argument = node.child_by_field_name("argument")
        return _tensor_truth_test(ctx, argument) if argument is not None else None
    if node.type == "comparison_operator":
        operators = [text(c) for c in node.children if not c.is_named]
        if any(op in ("is", "is not", "in", "not in") for op in operators) or " ".join(operators) in (
            "is not",
            "not in",
        ):
            return None
    if node.type in ("call", "identifier", "attribute", "subscript", "comparison_operator"):
        if device_of(ctx, node) is Device.HOST:
            return None
        if node.type == "call" and (dotted_name(callee(node)) or "") in ("isinstance", "hasattr", "callable", "len"):
            return None
        if node.type == "comparison_operator" and any(is_dtype(c) for c in node.named_children):
            return None
        if _is_tensor_valued(ctx, node) and (
            likely_device(ctx, node)
            or (_nonfinite_test(node) and not is_test_name(function_name(node)) and maybe_device(ctx, node))
        ):
            return node
    return None


_NONFINITE_NAMES = frozenset(call.decode().rstrip("(") for call in NONFINITE_CALLS)


def _nonfinite_test(node: Node) -> bool:
    """`torch.isnan(x).any()`, `x.isinf().any()`, `torch.isfinite(x).all()`: a check that only a
    tensor has (as `.nonzero()` is), tested on the device where the tensor is not provably on the
    host in a file that speaks of a device."""
    while node.type == "call":
        dotted = dotted_name(callee(node)) or ""
        if dotted.split(".")[0] in HOST_MODULES:
            return False  # `np.isfinite(a).all()`: numpy's, on the host
        if (dotted.split(".")[-1] or (method_name(node) or "")) in _NONFINITE_NAMES:
            return dotted.startswith("torch.") or method_name(node) is not None
        if method_name(node) not in ("any", "all"):
            return False
        inner = receiver(node)
        if inner is None:
            return False
        node = strip_parens(inner)
    return False


TENSOR_PREDICATES = frozenset(
    {
        "any",
        "all",
        "isnan",
        "isinf",
        "isfinite",
        "isneginf",
        "isposinf",
        "sum",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "max",
        "min",
        "bool",
        "mean",
        "logical_not",
        "logical_and",
        "logical_or",
        "count_nonzero",
        "norm",
        "abs",
    }
)


def _is_tensor_valued(ctx: LintContext, node: Node) -> bool:
    """Is the value tested a tensor? A comparison, a `torch.*` function or a tensor method that
    returns a tensor (`.any()`, `.isnan()`), or a name proven to hold a CUDA tensor; not a
    value that a model's output may carry as a Python flag."""
    if node.type == "call":
        name = dotted_name(callee(node)) or ""
        if name in PYTHON_RESULT_FUNCTIONS or name.startswith("torch.cuda.") or name.startswith("torch.distributed."):
            return False
        method = method_name(node)
        return name.startswith("torch.") or (method in TENSOR_PREDICATES and not name.startswith(("np.", "math.")))
    if node.type == "comparison_operator":
        return True
    return device_of(ctx, node) is Device.CUDA


def _fstrings(ctx: LintContext) -> Iterator[Finding]:
    root = ctx.source.root
    for match in _fstring_prefixes_in_loops(ctx):
        node = root.descendant_for_byte_range(match.start(), match.end())
        while node is not None and node.type != "string":
            node = node.parent if node.type in ("string_start",) else None
        if node is None:
            continue
        for child in node.named_children:
            if child.type != "interpolation":
                continue
            expression = child.child_by_field_name("expression") or (
                child.named_children[0] if child.named_children else None
            )
            if expression is None or strip_parens(expression).type not in (
                "identifier",
                "attribute",
                "subscript",
                "call",
                "binary_operator",
            ):
                continue
            if _formats_host_value(child) or not likely_device(ctx, expression):
                continue
            finding = _report(ctx, f"formatting a CUDA tensor (`{{{_short(expression)}}}`)", child)
            if finding is not None:
                yield finding
                break


# (after a quote, or a bracket: `("%11s" * 2 + "%11.4g" * 5) % (...)`, `_built_string` decides)
_PERCENT = re.compile(rb"[\"')]\s*(%)(?!=)")


def _percent_formats(ctx: LintContext) -> Iterator[Finding]:
    """`"loss=%.4f" % loss` / `"%s %s" % (a, loss)`: formatting a tensor, as an f-string does."""
    root = ctx.source.root
    for match in _matches_before_in_loops(ctx, _PERCENT, b"%"):
        operator = root.descendant_for_byte_range(match.start(1), match.end(1))
        node = operator.parent if operator is not None else None
        if node is None or node.type != "binary_operator" or node.child_by_field_name("operator") != operator:
            continue
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None or not _built_string(left):
            continue
        values = strip_parens(right).named_children if strip_parens(right).type == "tuple" else [right]
        # (`% (epoch, *mloss)`: the elements of a starred tensor are formatted one by one)
        values = [v.named_children[0] if v.type == "list_splat" and v.named_children else v for v in values]
        shown = next(
            (v for v in values if v.type not in ("string", "integer", "float") and likely_device(ctx, v)), None
        )
        if shown is None:
            continue
        finding = _report(ctx, f"formatting a CUDA tensor (`% {_short(shown)}`)", node)
        if finding is not None:
            yield finding


def _built_string(node: Node) -> bool:
    """A string literal, or one built from literals: `("%11s" * 2 + "%11.4g" * 5)`."""
    node = strip_parens(node)
    if node.type == "string":
        return True
    if node.type != "binary_operator" or text(node.child_by_field_name("operator")) not in ("+", "*"):
        return False
    parts = [node.child_by_field_name("left"), node.child_by_field_name("right")]
    return any(p is not None and _built_string(p) for p in parts) and all(
        p is not None and (strip_parens(p).type == "integer" or _built_string(p)) for p in parts
    )


def _formats_host_value(interpolation: Node) -> bool:
    """`{x!r}` still formats the tensor; `{len(x)}` and the like never reach here."""
    return False


def _masked_reads(ctx: LintContext) -> Iterator[Finding]:
    root = ctx.source.root
    for match in _matches_before_in_loops(ctx, _SUBSCRIPT, b"["):
        bracket = root.descendant_for_byte_range(match.start(1), match.end(1))
        node = bracket.parent if bracket is not None and bracket.type == "[" else None
        if node is None or node.type != "subscript":
            continue
        bound = _device_slice_bound(ctx, node)
        if bound is not None:
            finding = _report(ctx, f"a CUDA tensor as a slice bound (`{_short(bound)}`, read as an int)", bound)
            if finding is not None:
                yield finding
        index = _mask_index(ctx, node)
        if _is_store(node):
            finding = _store_into_host(ctx, node)
            if finding is None and index is not None:
                finding = _masked_assignment(ctx, node, index)
            if finding is not None:
                yield finding
            continue
        if index is None:
            continue
        value = node.child_by_field_name("value")
        # (a mask on the GPU can index only a tensor there: `internal[torch.isnan(candidate)]`)
        if not likely_device(ctx, value) and device_of(ctx, index) is not Device.CUDA:
            continue
        if _feeds_a_kept_copy(node):
            continue  # `pairs.append(torch.log(pi[valid]).cpu().numpy())`: the copy's finding says it
        finding = _report(ctx, f"`{_short(node)}` (a boolean mask: the result's shape depends on the data)", node)
        if finding is not None:
            yield finding


def _device_slice_bound(ctx: LintContext, subscript: Node) -> Optional[Node]:
    """`masks[i, y_1 : y_2 + 1]` with `x_1, y_1, x_2, y_2 = box.int()` of a box on the GPU: a bound
    of a slice that is a CUDA tensor goes through `__index__`, a read on the host."""
    for index in subscript.children_by_field_name("subscript"):
        if index.type != "slice":
            continue
        for bound in index.named_children:
            if bound.type != "comment" and device_of(ctx, bound) is Device.CUDA:
                return bound
    return None


def _store_into_host(ctx: LintContext, target: Node) -> Optional[Finding]:
    """`losses[k] = loss` with `losses` made on the CPU and `loss` on the GPU: a device-to-host
    copy, and the host waits for it."""
    assignment = target.parent
    value = assignment.child_by_field_name("right") if assignment is not None else None
    if assignment is None or value is None or device_of(ctx, target.child_by_field_name("value")) is not Device.CPU:
        return None
    if _keyed_by_name(target):
        return None  # `batch["img"] = ...`, `batch[k] = ...` for `k in ["cls", "bboxes"]`: a dict's entry
    if not likely_device(ctx, value) or device_of(ctx, value) is Device.HOST:
        return None
    device = arguments(strip_parens(value))[1].get("device") if strip_parens(value).type == "call" else None
    holder = target.child_by_field_name("value")
    if device is not None and holder is not None and text(device) == f"{text(holder)}.device":
        return None  # `index_map[ids] = torch.arange(n, device=index_map.device)`: made where it is stored
    return _report(ctx, f"writing a CUDA tensor into a CPU tensor (`{_short(target)} = ...`)", assignment)


def _feeds_a_kept_copy(node: Node) -> bool:
    """Is `node` (a masked read) the data of a host copy in the same expression that the loop
    keeps (`lp = torch.log(pi[valid]).detach().cpu().numpy()`, then appended)? The masked read is
    part of producing that result, reported with the copy."""
    current = node
    while current.parent is not None and current.parent.type in (
        "argument_list",
        "call",
        "attribute",
        "parenthesized_expression",
        "binary_operator",
    ):
        current = current.parent
        if current.type == "call" and method_name(current) in ("cpu", "tolist"):
            return _collected(current, repeating_loop(current))
    return False


# A name that holds a key or a name (`target_name`, `key`): an index of a mapping, not a mask
_SPELLED_AS_A_KEY = re.compile(r"(?:^|_)(?:name|key)$", re.I)


def _keyed_by_name(subscript: Node) -> bool:
    """Is `subscript` indexed by a string (`batch["img"]`), by the variable of a loop over
    strings (`for k in ["cls", "bboxes"]: batch[k]`), or by the keys of the container itself (`for
    k in batch: batch[k]`)? Then its value is a mapping, no tensor."""
    keys = [k for k in subscript.children_by_field_name("subscript") if k.type != "comment"]
    if len(keys) != 1:
        return False
    key = strip_parens(keys[0])
    if key.type == "string":
        return True
    if key.type != "identifier":
        return False
    if _SPELLED_AS_A_KEY.search(text(key)):
        return True  # `for target_name in self.model.target_names: batch[target_name] = ...`
    for loop in ancestors(key):
        if loop.type == "for_statement" and text(loop.child_by_field_name("left") or loop) == text(key):
            iterable = strip_parens(loop.child_by_field_name("right") or loop)
            holder = subscript.child_by_field_name("value")
            if holder is not None and text(iterable) in (text(holder), f"{text(holder)}.keys()"):
                return True  # `for k in batch: batch[k] = batch[k].to(device)`: the keys of a dict
            items = [c for c in iterable.named_children if c.type != "comment"]
            return iterable.type in ("list", "tuple") and bool(items) and all(c.type == "string" for c in items)
        if loop.type in ("function_definition", "class_definition"):
            return False
    return False


def _masked_assignment(ctx: LintContext, target: Node, mask: Node) -> Optional[Finding]:
    """`lprobs[lprobs != lprobs] = torch.tensor(-math.inf).to(lprobs)`: a boolean-mask assignment
    whose value is a device tensor. `index_put_` takes the `masked_fill_` path only for a Python
    number or a one-element CPU tensor; with a value on the GPU it turns the mask into indices
    (`nonzero`), and the host waits for the count."""
    assignment = target.parent
    value = assignment.child_by_field_name("right") if assignment is not None else None
    tensor = target.child_by_field_name("value")
    if assignment is None or value is None or tensor is None or not likely_device(ctx, tensor):
        return None
    read = strip_parens(value)
    read_index = read.child_by_field_name("subscript") if read.type == "subscript" else None
    if read_index is not None and _is_mask(ctx, read_index):
        return None  # `best[mask] = loss[mask]`: the masked read of the value is reported on the line
    if not _device_value(ctx, value, tensor):
        return None
    return _report(
        ctx,
        f"`{_short(target)} = {_short(value)}` (a boolean-mask assignment with a device value goes through "
        f"`index_put_`, which turns the mask into indices; `{_short(tensor)}.masked_fill_({_short(mask)}, "
        "<Python number>)` does not wait)",
        assignment,
    )


def _device_value(ctx: LintContext, value: Node, target: Node) -> bool:
    """Is the assigned value a tensor on the device: moved next to the target or another tensor
    (`.to(lprobs)`, `.type_as(t)`), or likely on the device? Not a number, a name bound to one,
    or a CPU tensor (`torch.tensor(0.)`), which `index_put_` fills through `masked_fill_`."""
    value = strip_parens(value)
    if value.type == "call" and method_name(value) in ("to", "type_as"):
        # (checked first: provenance gives `.type_as(t)` its receiver's device)
        positional, keywords = arguments(value)
        other = keywords.get("device") or keywords.get("other") or (positional[0] if positional else None)
        if (
            other is not None
            and not is_dtype(other)
            and not is_cpu_device(other)
            and (text(strip_parens(other)) == text(strip_parens(target)) or maybe_device(ctx, other))
        ):
            return True
    if device_of(ctx, value) in (Device.HOST, Device.CPU):
        return False
    return likely_device(ctx, value)


def _is_store(subscript: Node) -> bool:
    parent = subscript.parent
    return parent is not None and parent.type == "assignment" and parent.child_by_field_name("left") == subscript


def _mask_index(ctx: LintContext, subscript: Node) -> Optional[Node]:
    """The boolean mask among the indices of `subscript`, in any position (`x[mask]`, `x[:,
    labels == 1]`, `x[i, ~keep]`); None when there is none."""
    return next((i for i in subscript.children_by_field_name("subscript") if _is_mask(ctx, i)), None)


def _is_mask(ctx: LintContext, index: Node, depth: int = 0) -> bool:
    index = strip_parens(index)
    if depth > 6:
        return False
    if index.type == "subscript":
        # `xc[xi]` of `xc = scores > conf_thres`: a row of a mask is a mask
        value = index.child_by_field_name("value")
        positions = index.children_by_field_name("subscript")
        return (
            value is not None
            and all(p.type in ("identifier", "integer") for p in positions)
            and _is_mask(ctx, value, depth + 1)
        )
    if index.type == "comparison_operator":
        operators = [text(c) for c in index.children if not c.is_named]
        return (
            all(op in ("==", "!=", "<", ">", "<=", ">=") for op in operators)
            and device_of(ctx, index) is not Device.HOST
        )
    if index.type == "unary_operator" and text(index.children[0]) == "~":
        return True
    if index.type == "binary_operator" and text(index.child_by_field_name("operator") or index) in ("&", "|", "^"):
        # `(reliability > 0) & valid`: masks combined are a mask (a name beside one is a mask too)
        sides = [index.child_by_field_name("left"), index.child_by_field_name("right")]
        operands = [strip_parens(c) for c in sides if c is not None]
        masks = [_is_mask(ctx, c, depth + 1) for c in operands]
        return (
            len(operands) == 2
            and any(masks)
            and all(m or c.type in ("identifier", "attribute") for m, c in zip(masks, operands))
        )
    if index.type == "call":
        name = dotted_name(callee(index)) or ""
        positional, keywords = arguments(index)
        if method_name(index) in ("any", "all") and (positional or "dim" in keywords):
            return True  # `(perm != identity).any(dim=0)`: a reduction along a dimension gives a mask
        if not name:  # a chain: `torch.zeros(n, k).to(tokens).eq(-1)`
            return method_name(index) in MASK_METHODS
        return name.split(".")[-1] in MASK_METHODS and (name.startswith("torch.") or method_name(index) is not None)
    if index.type == "identifier":
        binding = ctx.bindings(index).at(text(index), index.start_byte)
        return binding is not None and binding.value is not None and _is_mask(ctx, binding.value, depth + 1)
    return False


def _scaler_steps(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls_in_loops("step"):
        owner = receiver(call)
        if method_name(call) != "step" or owner is None or not ctx.in_loop(call) or not _is_grad_scaler(ctx, owner):
            continue
        if _scaler_turned_off(ctx, owner):
            continue  # `scaler = GradScaler(enabled=False)`: its step is the optimizer's, nothing read
        how = frequency(call)
        if how.loop is None:
            continue
        yield ctx.finding(
            Code.SYNC,
            "`scaler.step()` reads the GradScaler's inf/NaN check on the host: one wait for the GPU per "
            "optimizer step, the price of fp16 loss scaling (bf16 needs no scaler)",
            call,
            severity="information",
        )


def _is_grad_scaler(ctx: LintContext, owner: Node) -> bool:
    name = dotted_name(owner)
    if name is None:
        return False
    if SCALER_NAME.search(name.split(".")[-1]):
        return True
    if owner.type == "identifier":
        binding = ctx.bindings(owner).at(name, owner.start_byte)
        value = binding.value if binding is not None else None
        return (
            value is not None
            and value.type == "call"
            and (dotted_name(callee(value)) or "").split(".")[-1] == "GradScaler"
        )
    return False


def _scaler_turned_off(ctx: LintContext, owner: Node) -> bool:
    """Is the scaler made with `enabled=False` written out (`scaler = GradScaler(enabled=False)`,
    or `self.scaler = torch.cuda.amp.GradScaler(enabled=False)` in its class)? Such a scaler checks
    nothing: its `step` only calls the optimizer's."""
    if owner.type == "identifier":
        binding = ctx.bindings(owner).at(text(owner), owner.start_byte)
        value = binding.value if binding is not None else None
        return value is not None and value.type == "call" and is_false(arguments(value)[1].get("enabled"))
    name = dotted_name(owner) or ""
    if not name.startswith("self."):
        return False
    holder = next((a for a in ancestors(owner) if a.type == "class_definition"), None)
    made = re.compile(rb"\b" + re.escape(name.encode()) + rb"\s*=\s*[\w.]*GradScaler\(([^()]*)\)")
    # (the class's whole text: its `__init__` may be left out of the parse)
    found = made.findall(class_text(ctx, holder)) if holder is not None else []
    return bool(found) and all(re.search(rb"\benabled\s*=\s*False\b", args) for args in found)


def _short(node: Node) -> str:
    value = " ".join(text(node).split())
    return value if len(value) <= 40 else value[:37] + "..."


RULE = Rule(
    code=Code.SYNC,
    name="sync-in-loop",
    summary="reading a CUDA tensor on the host (`.item()`, `float(t)`, `if t:`, printing, data-dependent "
    "shapes) inside a loop: a host-device sync every iteration",
    calls=CALLS,
    check=check,
    doc=__doc__ or "",
    # Every finding is inside a loop, or in a function that takes a training step (its reads are
    # per step without a loop in the file), and of a value likely on the device, or a
    # GradScaler's step.
    triggers=(
        LOOP + TRAINING_STEP_EVIDENCE + (b"def forward",),  # (a module's forward: once per step)
        DEVICE_EVIDENCE + TRAINING_STEP_EVIDENCE + (b"scaler", b"Scaler", Caseless(b"scaler")),
    ),
    # A definition needs a loop in its code (`for` in its docstring is no loop), or a read that a
    # call in a loop may repeat (`_called_in_loops`).
    # (Not `float(`: it would keep 10% more of transformers' bytes in the parse, 3% for these.)
    definition_triggers=((CODE_LOOP, b".item(", b".tolist(", b".cpu(", *NONFINITE_CALLS),),
)
