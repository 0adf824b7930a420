"""Classes of error found by the tenth whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Tenth review"), each with a small program and the exact findings: line, column (0-based), code,
severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

EVALUATION_PASS = dedent(
    """\
    import torch


    def train(model, loader, optimizer, device):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()


    def test(model, device, test_loader):
        correct = 0
        with torch.no_grad():
            for x, y in test_loader:
                x, y = x.to(device), y.to(device)
                pred = model(x).argmax(dim=1)
                correct += pred.eq(y).sum().item()
        return correct / len(test_loader.dataset)


    def test_accuracy_is_stable(model, device, test_loader):
        for x, y in test_loader:
            x = x.to(device)
            assert model(x).argmax(dim=1).eq(y.to(device)).all().item()
    """
)


def test_a_function_named_test_is_an_evaluation_pass_and_test_something_a_unit_test() -> None:
    """`def test(model, device, test_loader)` is the evaluation pass of a training script (PyTorch's
    examples): its per-batch read is a warning, as in `evaluate`; `test_accuracy_is_stable` is a
    unit test, reported at information level."""
    assert findings(EVALUATION_PASS) == [
        (18, 40, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            25,
            61,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration of a loop in the test "
            "`test_accuracy_is_stable` (a test, not a training step)",
        ),
    ]


UNIT_TEST_CLASS = dedent(
    """\
    import unittest

    import torch
    import torch.nn as nn


    class CompareTest(unittest.TestCase):
        def _train_steps(self, model, optimizer, x, y):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()

        def _compare(self):
            model = nn.Linear(4, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            self._train_steps(model, optimizer, torch.randn(8, 4), torch.randn(8, 2))
            for p in model.parameters():
                if p.grad.norm() < 1e-4:
                    continue
                self.assertTrue(torch.isfinite(p).all())

        def test_compare(self):
            self._compare()


    class Trainer:
        def fit(self, model, optimizer, batches):
            for x, y in batches:
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                if loss < 1e-4:
                    break
    """
)


def test_a_unit_test_class_in_a_file_that_names_no_device_runs_on_the_cpu() -> None:
    """In a `unittest.TestCase` of a file that names no device, another method's `loss.backward()`
    does not make the tensors a test makes into a training loop's tensors on the caller's GPU; a
    plain class that trains the same way still gets that benefit of the doubt."""
    assert findings(UNIT_TEST_CLASS) == [
        (
            32,
            15,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`loss < 1e-4`) inside a loop: the host waits for the GPU on every iteration",
        ),
    ]
    with_device = UNIT_TEST_CLASS.replace("torch.randn(8, 4)", 'torch.randn(8, 4, device="cuda")')
    assert [row[:3] for row in findings(with_device)][:1] == [(18, 15, "AL100")]


RETURNED_NUMBERS = dedent(
    """\
    import numpy as np
    import torch


    def train(model, loader, optimizer, device):
        losses = []
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return np.mean(losses)


    def launch(model, loader, optimizer, device, epochs):
        for epoch in range(epochs):
            train_loss = train(model, loader, optimizer, device)
            print(f"epoch {epoch}: train loss {train_loss:.3f}")


    class Search:
        def _compute_loss(self, a, b, device):
            loss = 0.0
            for ca, cb in zip(torch.split(a, 1024), torch.split(b, 1024)):
                chunk_loss = (ca.to(device) - cb.to(device)).pow(2).sum().item()
                loss += chunk_loss
            loss /= a.numel()
            return loss

        def search(self, x, ref, module, device):
            best_error = float("inf")
            best = None
            for ratio in range(20):
                out = module(x * ratio / 20)
                loss = self._compute_loss(ref, out, device)
                if loss < best_error:
                    best_error = loss
                    best = ratio
            return best
    """
)


def test_functions_that_return_numpy_or_python_numbers_give_no_loss_tensor() -> None:
    """`train_loss = train(...)` of a function that returns `np.mean(losses)`, and a method whose
    loss starts as `0.0`, grows by a name bound to `.item()` and is divided by `a.numel()`, return
    numbers: formatting or comparing them waits for nothing (only the reads inside are reported)."""
    assert findings(RETURNED_NUMBERS) == [
        (12, 27, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (26, 70, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


CHUNKED_BY_SIZE = dedent(
    """\
    import torch


    @torch.no_grad()
    def knn_accuracy(train_features, train_targets, test_features, test_targets, k=20):
        n_test = test_targets.size(0)
        chunk_size = max(1, 5_000_000 // train_targets.size(0))
        one_hot = torch.zeros(k, 10, device=train_features.device)
        top1, top5 = 0.0, 0.0
        for idx in range(0, n_test, chunk_size):
            features = test_features[idx : idx + chunk_size]
            similarity = torch.mm(features, train_features.t())
            _, indices = similarity.topk(k)
            correct = (train_targets[indices[:, 0]] + one_hot.sum().long()).eq(test_targets[idx : idx + chunk_size])
            top1 = top1 + correct.sum().item()
        for start in range(0, test_features.shape[0], chunk_size):
            block = test_features[start : start + chunk_size] @ train_features.t() + one_hot.sum()
            top5 = top5 + block.max().item()
        return top1, top5
    """
)


def test_a_walk_in_chunks_counts_rows_with_size_shape_or_a_name_set_to_them() -> None:
    """`range(0, n_test, chunk_size)` with `n_test = test_targets.size(0)`, and `range(0,
    x.shape[0], chunk_size)`, walk a tensor in chunks as `range(0, len(x), chunk_size)` does: one
    read per chunk of a metric, information."""
    assert findings(CHUNKED_BY_SIZE) == [
        (
            15,
            36,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU once per chunk of `chunk_size` rows of `test_targets`",
        ),
        (
            18,
            34,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU once per chunk of `chunk_size` rows of `test_features`",
        ),
    ]


WRITTEN_OUT = dedent(
    """\
    import numpy as np
    import torch


    @torch.no_grad()
    def eval_fn(model, val_dl, eval_dir, save_mels, device="cuda"):
        for i, batch in enumerate(val_dl):
            x = batch["wavs"].to(device)
            pred = model(x)
            save_mels(eval_dir / f"{i:03}.png", cond_mel=x[0].cpu().numpy(), pred_mel=pred[0].cpu().numpy())
            np.save(eval_dir / f"{i:03}.npy", pred.cpu().numpy())


    def train(model, loader, optimizer, save_curve, device="cuda"):
        for x in loader:
            loss = model(x.to(device)).mean()
            loss.backward()
            optimizer.step()
            save_curve(loss.cpu())
    """
)


def test_a_copy_handed_to_a_function_that_writes_it_is_a_result_kept() -> None:
    """`save_mels(path, pred_mel=pred[0].cpu().numpy())` and `np.save(path, pred.cpu().numpy())`
    write each result out, as intended: information. In a loop that takes a training step the
    copy is still a wait per step."""
    written = (
        "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
        "(`save(path, t.cpu())`: one copy per result written, as intended)"
    )
    assert findings(WRITTEN_OUT) == [
        (10, 58, "AL100", "information", written),
        (10, 90, "AL100", "information", written),
        (11, 47, "AL100", "information", written),
        (19, 24, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]


KEPT_IN_LITERALS = dedent(
    """\
    import torch


    def validate(model, loader, device, save_results):
        results = []
        for graphs, targets in loader:
            graphs = [g.to(device) for g in graphs]
            prediction = model(graphs)
            for jj, g in enumerate(graphs):
                tmp = {
                    "id": jj,
                    "energy": {"prediction": prediction["e"][jj].cpu().detach().tolist()},
                }
                results.append(tmp)
        return results


    def quantize_layers(named_linears, quantize, device):
        for name, linear_layer in named_linears.items():
            linear_layer = linear_layer.to(device).half()
            linear_layer.weight.data = quantize(linear_layer.weight.data)
            linear_layer.cpu()


    def sync_found_inf(found_inf_per_device, all_reduce):
        for v in found_inf_per_device.values():
            v_on_cuda = v.cuda()
            all_reduce(v_on_cuda)
            v_on_cuda.cpu()
    """
)


def test_copies_in_a_kept_dict_literal_and_a_layer_moved_to_the_host() -> None:
    """A copy inside a (nested) dict literal that the loop appends is a result kept; `linear_layer
    .cpu()` as a statement moves a module's parameters (no value read); `v_on_cuda.cpu()` as a
    statement still copies a tensor and drops it: a wait for nothing, every iteration."""
    assert findings(KEPT_IN_LITERALS) == [
        (
            12,
            61,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
        (29, 18, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]


MASKS_IN_ANY_POSITION = dedent(
    """\
    import torch


    def nms(prediction, conf_thres=0.25):
        xc = prediction[:, 4:].amax(1) > conf_thres
        xinds = torch.arange(prediction.shape[-1], device=prediction.device).expand(prediction.shape[0], -1)
        output = []
        for xi, xk in enumerate(xinds):
            output.append(xk[xc[xi]])
        return output


    def point_prompt(results, labels, device="cuda"):
        out = []
        for masks in results:
            masks = masks.to(device)
            labels = torch.as_tensor(labels, device=device)
            pos = masks[:, labels == 1].any(1)
            out.append(masks[0, ~pos])
        return out
    """
)


def test_a_row_of_a_mask_and_a_mask_in_a_later_index_position_are_masks() -> None:
    """`xk[xc[xi]]` with `xc = scores > conf_thres` (a row of a mask is a mask), `masks[:, labels ==
    1]` and `masks[0, ~pos]` (a mask after other indices) are boolean-mask reads as `x[mask]` is:
    the result's shape depends on the data."""
    shape = "(a boolean mask: the result's shape depends on the data) inside a loop: the host waits for the GPU on every iteration"
    assert findings(MASKS_IN_ANY_POSITION) == [
        (9, 22, "AL100", "warning", f"`xk[xc[xi]]` {shape}"),
        (18, 14, "AL100", "warning", f"`masks[:, labels == 1]` {shape}"),
        (19, 19, "AL100", "warning", f"`masks[0, ~pos]` {shape}"),
    ]


NONFINITE_CHECKS = dedent(
    """\
    import numpy as np
    import torch


    def check_nan_in_transition(observations: dict, actions, device="cuda"):
        for key, tensor in observations.items():
            if torch.isnan(tensor).any():
                return True
        for convolved in observations.values():
            if not np.isfinite(convolved).all():
                return True
        return False


    def test_observations_are_finite(observations):
        for tensor in observations.values():
            assert torch.isfinite(tensor).all()
    """
)


def test_a_nan_check_in_a_loop_is_a_tensor_operation_not_provably_on_the_host() -> None:
    """`if torch.isnan(tensor).any():` per observation, in a file that speaks of a device: only a
    tensor has the check, as `.nonzero()`, so it is reported unless the tensor is provably on the
    host; NumPy's `np.isfinite(a).all()` is not, nor a unit test's check (CPU tensors, usually)."""
    assert findings(NONFINITE_CHECKS) == [
        (
            7,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(tensor).any()`) inside a loop: the host waits for the GPU on "
            "every iteration",
        ),
    ]


LITERAL_BOUND_LOOPS = dedent(
    """\
    import numpy as np
    import torch


    def split_masks(data, graph, device="cuda"):
        masks = ["train_mask", "val_mask", "test_mask"]
        out = []
        for mask in masks:
            out.append(torch.nonzero(data[mask].to(device)).squeeze())
        return out


    def body(model, img, device="cuda"):
        scale_search = [0.5]
        multiplier = [x * 368 / img.shape[0] for x in scale_search]
        heatmap = np.zeros(img.shape[:2])
        for m in range(len(multiplier)):
            out = model(torch.from_numpy(img * multiplier[m]).to(device))
            heatmap += out.cpu().numpy()[0, 0]
        return heatmap


    def predict(model, results, device="cuda"):
        if not isinstance(results, list):
            results = [results]
        for result in results:
            if model(result.to(device)).sum() == 0:
                continue


    def read_edges(edges, device):
        adj = []
        for edge in edges:
            adj.append(torch.from_numpy(np.vstack((edge.nonzero()[0], edge.nonzero()[1]))))
        return [a.to(device) for a in adj]
    """
)


def test_loops_over_a_name_bound_to_a_literal_and_numpy_arguments() -> None:
    """`masks = [...three keys...]; for mask in masks:` runs 3 times (information), as the literal
    written in the `for` does; `range(len(multiplier))` of a comprehension over `[0.5]` runs once
    (silent); a name bound to a literal only in a branch (`results = [results]`) is not known; a
    `.nonzero()` handed to `np.vstack` is NumPy's (a CUDA tensor would raise there)."""
    assert findings(LITERAL_BOUND_LOOPS) == [
        (
            9,
            19,
            "AL100",
            "information",
            "`torch.nonzero(...)` (its output's shape depends on the data) inside a loop: the host waits for the GPU "
            "3 times (the loop runs 3 times)",
        ),
        (
            27,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`model(result.to(device)).sum() == 0`) inside a loop: the host waits for "
            "the GPU on every iteration",
        ),
    ]


THROTTLE_FLAG = dedent(
    """\
    import torch


    def train(model, loader, optimizer, steps, device="cuda"):
        for batch in loader:
            apply_penalty = steps > 5000 and steps % 32 == 0
            loss = model(batch.to(device)).mean()
            if apply_penalty:
                penalty = loss.pow(2)
                if not torch.isnan(penalty):
                    loss = loss + penalty
            loss.backward()
            optimizer.step()
            steps += 1
    """
)


def test_a_flag_bound_to_a_modulo_test_is_a_throttle() -> None:
    """`apply_penalty = steps > 5000 and steps % 32 == 0`, then `if apply_penalty:`: the block runs
    on every 32nd step, as under `if steps % 32 == 0:` written in place."""
    assert findings(THROTTLE_FLAG) == [
        (
            10,
            19,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`torch.isnan(penalty)`) inside a loop: the host waits for the GPU only on "
            "iterations where `apply_penalty`",
        ),
    ]


FIRST_AND_LAST_STEPS = dedent(
    """\
    import numpy as np
    import torch


    def tune(model, batches, config, device="cuda"):
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        log_every = max(1, config.steps // 10)
        history = []
        for step in range(1, config.steps + 1):
            kl = model(batches[step % len(batches)].to(device)).mean()
            kl.backward()
            optimizer.step()
            if step == 1 or step % log_every == 0 or step == config.steps:
                history.append(float(kl.detach()))
            mean_loss = np.mean(history)
            if mean_loss < 0.1:
                break
        return history


    def torch_sync(device=None):
        if device is None:
            for idx in range(torch.cuda.device_count()):
                torch.cuda.synchronize(idx)
        else:
            torch.cuda.synchronize(device)
    """
)


def test_first_and_last_steps_a_numpy_mean_and_a_barrier_across_devices() -> None:
    """`step == 1 or step % log_every == 0 or step == config.steps` in `for step in range(1,
    config.steps + 1)` holds on a few steps (the last one by the range's own bound); `mean_loss =
    np.mean(history)` is a NumPy number, whatever its name; `torch.cuda.synchronize(idx)` for each
    device of `range(torch.cuda.device_count())` waits once for each device: one barrier."""
    assert findings(FIRST_AND_LAST_STEPS) == [
        (
            14,
            27,
            "AL100",
            "information",
            "`float()` of a CUDA tensor inside a loop: the host waits for the GPU only on iterations where `step == 1 "
            "or step % log_every == 0 or step == config.steps`",
        ),
        (
            24,
            12,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop over the devices: the host waits for all GPU work on every "
            "iteration, on purpose: each iteration waits for another device: one barrier across them",
        ),
    ]


KEPT_UNDER_NAMES = dedent(
    """\
    import torch


    def embeddings(model, num_nodes, names, device="cuda"):
        results = {}
        for i in range(num_nodes):
            emb = model(torch.tensor([i], device=device))
            results[names[i]] = emb.cpu().detach().numpy()
        return results


    def predict(model, loader, device="cuda"):
        stresses = []
        for batch in loader:
            result = model(batch.to(device))
            stresses.extend(list(result["stresses"].cpu().detach().numpy()))
        return stresses
    """
)


def test_results_kept_under_a_key_read_from_a_list_or_extended_through_list() -> None:
    """`results[names[i]] = emb.cpu().numpy()` keeps a result under a key, as `results[i] = ...`
    does; `stresses.extend(list(t.cpu().numpy()))` appends its rows, as `.extend(t.cpu())` does."""
    assert findings(KEPT_UNDER_NAMES) == [
        (
            8,
            32,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`results[key] = t.cpu()`: one copy per result, as intended)",
        ),
        (
            16,
            48,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`outputs.append(t.cpu())`: one copy per batch, as intended)",
        ),
    ]


LAYER_BY_LAYER = dedent(
    """\
    import gc

    import torch


    def quantize_model(model, hidden_states):
        for module in model.modules:
            module.load()
            module.quantize(hidden_states)
            torch.cuda.synchronize()
            gc.collect()
            torch.cuda.empty_cache()
            error = torch.zeros((), device="cuda")
            for x in hidden_states:
                error += module.forward(x.to("cuda")).float().norm()
            print(f"error: {error.item() / len(hidden_states):.6f}")
            module.unload()


    def probe(model, batches):
        for x in batches:
            layer_logits = model(x.cuda())
            print(layer_logits.cpu())


    def sync_all(devices_by_key, ordered_keys, batches):
        for key in ordered_keys:
            dev = devices_by_key[key]
            with torch.cuda.device(dev.index):
                torch.cuda.synchronize()
        for batch in batches:
            torch.cuda.synchronize(batch.device)
    """
)


def test_a_layer_by_layer_pass_and_a_barrier_through_a_device_context() -> None:
    """A loop whose own body loads, quantizes or offloads a module (`module.load()`,
    `module.unload()`) does a whole layer's work per iteration: its synchronize, `empty_cache()`
    and read are once per layer, information (a tensor merely named `layer_logits` is no layer);
    `with torch.cuda.device(dev.index): torch.cuda.synchronize()` over a table of devices waits
    for each device once; `torch.cuda.synchronize(batch.device)` per batch waits every time."""
    layer = "once per layer of a layer-by-layer pass (`module.load(...)` loads, quantizes or offloads each)"
    assert findings(LAYER_BY_LAYER) == [
        (
            10,
            8,
            "AL101",
            "information",
            f"`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work {layer}",
        ),
        (
            12,
            8,
            "AL300",
            "information",
            f"`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate "
            f"again; it runs {layer}",
        ),
        (16, 30, "AL100", "information", f"`.item()` inside a loop: the host waits for the GPU {layer}"),
        (23, 27, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (
            30,
            12,
            "AL101",
            "information",
            "`torch.cuda.synchronize()` inside a loop over the devices: the host waits for all GPU work on every "
            "iteration, on purpose: each iteration waits for another device: one barrier across them",
        ),
        (
            32,
            8,
            "AL101",
            "warning",
            "`torch.cuda.synchronize()` inside a loop: the host waits for all GPU work on every iteration",
        ),
    ]


NUMBER_ATTRIBUTES = dedent(
    """\
    import numpy as np
    import torch


    class Trainer:
        def __init__(self, model, optimizer, device="cuda"):
            self.model, self.optimizer, self.device = model, optimizer, device
            self.best_loss = float("inf")

        def fit(self, loader, epochs):
            for epoch in range(epochs):
                collector = []
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device))
                    loss.backward()
                    self.optimizer.step()
                    collector.append(loss.item())
                mean_train_loss = np.mean(collector)
                mean_loss = mean_train_loss
                if mean_loss < self.best_loss:
                    self.best_loss = mean_loss
                if self.last_loss < 1.0:
                    break

        def step(self, x, y):
            self.last_loss = torch.nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device))
    """
)


def test_an_attribute_spelled_loss_that_the_class_only_sets_to_numbers_is_a_number() -> None:
    """`self.best_loss` set to `float("inf")` and to `mean_loss`, itself bound only to a name bound
    to `np.mean(...)`, holds a number: the epoch's comparison waits for nothing; `self.last_loss`,
    set to a loss tensor, still does."""
    assert findings(NUMBER_ATTRIBUTES) == [
        (17, 38, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            22,
            15,
            "AL100",
            "information",
            "a CUDA tensor as a condition (`self.last_loss < 1.0`) inside a loop: the host waits for the GPU once per "
            "epoch",
        ),
    ]


ATTRIBUTE_GROWN_BY_TENSORS = dedent(
    """\
    import torch


    class Trainer:
        def __init__(self, model, device="cuda"):
            self.model, self.device = model, device
            self.total_loss = 0.0
            self.logged_loss = 0.0

        def fit(self, loader):
            for x in loader:
                loss = self.model(x.to(self.device)).mean()
                self.total_loss += loss
                print(f"{self.total_loss:.3f}")
                loss = loss.item()
                self.logged_loss += loss
                print(f"{self.logged_loss:.3f}")
    """
)


def test_an_attribute_spelled_loss_that_grows_by_a_tensor_is_a_tensor() -> None:
    """`self.total_loss = 0.0`, then `self.total_loss += loss` with `loss` the model's output: a
    CUDA tensor, formatted every iteration; `self.logged_loss += loss` after `loss = loss.item()`
    adds a float and stays a number."""
    assert [row[:4] for row in findings(ATTRIBUTE_GROWN_BY_TENSORS)] == [
        (14, 20, "AL100", "warning"),  # formatting `self.total_loss`
        (15, 24, "AL100", "warning"),  # the `.item()`; `self.logged_loss` on line 17 is a float
    ]
