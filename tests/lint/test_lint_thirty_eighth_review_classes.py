"""Classes of error found in the thirty-eighth and thirty-ninth reviews (tests/lint/corpus_real/WHOLE_TREES.md),
each with a small program and the exact findings: line, column (0-based), code, severity and message. Each
program is also linted without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

EPOCH_BAR = dedent(
    """\
    import torch
    import tqdm


    def train(model, optimizer, train_dataloader, device, epochs):
        for epoch in range(epochs):
            with tqdm.tqdm(train_dataloader, desc=f"Training epoch {epoch}") as tepoch:
                for batch_idx, batch in enumerate(tepoch):
                    out = model(batch.to(device))
                    loss, norm = out.mean(), out.norm()
                    loss.backward()
                    optimizer.step()
                    raw_loss = loss.item()
                    tepoch.set_postfix(loss=raw_loss, refresh=False)
                    parts = {"norm": norm.item()}
            with tqdm.tqdm(validation_epochs(epochs)) as tepoch:
                for step in tepoch:
                    print(model(step.to(device)).item())
    """
)


def test_a_progress_bar_named_for_its_epoch_walks_batches() -> None:
    """A loop over `enumerate(tepoch)` with `tepoch` bound by `with tqdm(train_dataloader, desc=f"epoch {e}") as tepoch:`
    walks batches: the value the name is bound to speaks, not the name. A progress bar of `range(epochs)`
    stays an epoch loop. A read after a read with only a progress bar's `set_postfix` between adds no wait."""
    assert findings(EPOCH_BAR) == [
        (13, 32, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
        (
            15,
            38,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU on every iteration, but the read on line 13 just before already waited for it: no new wait",
        ),
        (18, 45, "AL100", "information", "`.item()` inside a loop: the host waits for the GPU once per epoch"),
    ]


SCALER_OFF = dedent(
    """\
    import torch
    from torch.cuda.amp import GradScaler


    def train(model, optimizer, loader):
        scaler = GradScaler(enabled=False)
        on = GradScaler()
        for batch in loader:
            loss = model(batch.cuda()).mean()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            on.step(optimizer)
            scaler.update()


    class Trainer:
        def __init__(self):
            self.scaler = torch.cuda.amp.GradScaler(enabled=False)

        def fit(self, loader):
            for batch in loader:
                loss = self.model(batch.cuda()).mean()
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
    """
)


def test_a_grad_scaler_made_disabled_reads_nothing() -> None:
    """`GradScaler(enabled=False)`, as a local or as `self.scaler` set in the class: its `step` only calls the
    optimizer's, so there is no inf/NaN check to read. An enabled scaler's step is still reported."""
    assert findings(SCALER_OFF) == [
        (
            12,
            8,
            "AL100",
            "information",
            "`scaler.step()` reads the GradScaler's inf/NaN check on the host: one wait for the GPU per optimizer step, "
            "the price of fp16 loss scaling (bf16 needs no scaler)",
        ),
    ]


MOVED_SIBLING = dedent(
    """\
    import torch


    def train(model, optimizer, train_loader):
        for i_batch, batch in enumerate(train_loader):
            batch, gotit = batch
            if not all(gotit):
                continue
            batch = batch.cuda()
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()
            print(loss.item())
    """
)


def test_the_other_parts_of_a_batch_moved_later_are_on_the_host() -> None:
    """`batch, gotit = batch` of a loader, then `batch = batch.cuda()`: the parts unpacked with the part that is moved
    came from the host too (`if not all(gotit):` tests Python bools)."""
    assert findings(MOVED_SIBLING) == [
        (13, 19, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


RESULT_COPIES = dedent(
    """\
    import numpy as np
    import torch


    def test(model, loader, device):
        preds, trues = [], []
        with torch.no_grad():
            for i, (batch_x, batch_y) in enumerate(loader):
                batch_x = batch_x.float().to(device)
                batch_y = batch_y.float().to(device)
                outputs = model(batch_x)
                outputs = outputs[:, -4:, :]
                outputs = outputs.detach().cpu().numpy()
                batch_y = batch_y.detach().cpu().numpy()
                if outputs.shape[-1] != batch_y.shape[-1]:
                    outputs = np.tile(outputs, [1, 1, batch_y.shape[-1]])
                pred, true = outputs, batch_y
                preds.append(pred)
                trues.append(true)
        return np.concatenate(preds), np.concatenate(trues)


    def train(model, optimizer, loader, device):
        for x, y in loader:
            out = model(x.to(device))
            loss = (out - y.to(device)).pow(2).mean()
            loss.backward()
            optimizer.step()
            a = out.detach().cpu()
            b = loss.detach().cpu()
    """
)


def test_a_second_result_copy_after_a_copy_in_an_inference_loop_adds_no_wait() -> None:
    """In a loop that takes no training step, `batch_y.detach().cpu().numpy()` right after `outputs.detach().cpu().numpy()`
    copies a value the first copy already waited for. In a training step each copy stays a warning, as the labelled
    corpora have it."""
    assert findings(RESULT_COPIES) == [
        (
            13,
            39,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration of a loop that takes no training step, "
            "bringing the output home as NumPy (`t.cpu().numpy()`: an inference pass's result, one copy per batch)",
        ),
        (
            14,
            39,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, but the read on line 13 just before already waited for it: no new wait",
        ),
        (29, 25, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
        (30, 26, "AL100", "warning", "`.cpu()` inside a loop: the host waits for the GPU on every iteration"),
    ]


SHAPE_PROBE = dedent(
    """\
    import torch
    from torch import nn


    class Decomposition(nn.Module):
        def __init__(self, length, device):
            super().__init__()
            self.device = device
            self.width = self._dummy_forward(length)

        def _dummy_forward(self, length):
            x = torch.ones((1, 1, length)).to(self.device)
            return self.dwt(x).shape[-1]

        def _forward(self, x):
            mask = torch.ones(x.shape).to(x.device)
            return x * mask

        def forward(self, x):
            return self._forward(x)


    class Koopman(nn.Module):
        def forward(self, z):
            self.K = torch.linalg.lstsq(z[:, :-1], z[:, 1:]).solution
            if torch.isnan(self.K).any():
                self.K = torch.eye(self.K.shape[1]).to(self.K.device)
            return torch.bmm(z[:, -1:], self.K)
    """
)


def test_a_shape_probe_and_a_nan_fallback_run_rarely() -> None:
    """A helper spelled as a forward (`_dummy_forward`) that only `__init__` calls measures shapes once per model; a move
    in the fallback of `if torch.isnan(self.K).any():` runs only when the check fails. `_forward` that `forward`
    calls is still per step."""
    assert findings(SHAPE_PROBE) == [
        (
            12,
            39,
            "AL302",
            "information",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`; it "
            "runs in `_dummy_forward`, which this file calls only from `__init__` (once per object or run): a small cost, "
            "not paid every step",
        ),
        (
            16,
            35,
            "AL302",
            "warning",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            26,
            11,
            "AL100",
            "warning",
            "a CUDA tensor as a condition (`torch.isnan(self.K).any()`) in `forward`: the host waits for the GPU on every forward pass",
        ),
        (
            27,
            48,
            "AL302",
            "information",
            "`torch.eye(...)` is created on the CPU and then copied to the device: create it there with `device=`; it runs "
            "only when a value is not finite (the fallback of a NaN or inf check): a small cost, not paid every step",
        ),
    ]


MASK_CLASS = dedent(
    """\
    import torch


    class TriangularCausalMask():
        def __init__(self, B, L, device="cpu"):
            self._mask = torch.triu(torch.ones([B, 1, L, L], dtype=torch.bool), diagonal=1).to(device)


    class Settings:
        def __init__(self, n, device="cpu"):
            self.table = torch.ones(n).to(device)
    """
)


def test_a_plain_mask_class_is_built_per_batch() -> None:
    """A plain class spelled as a mask (`class TriangularCausalMask():`) is built in an attention's forward, once per
    batch: the move in its `__init__` is a warning. Other plain classes are built once."""
    assert findings(MASK_CLASS) == [
        (
            6,
            88,
            "AL302",
            "warning",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        ),
        (
            11,
            35,
            "AL302",
            "information",
            "`torch.ones(...)` is created on the CPU and then copied to the device: create it there with `device=`; it "
            "runs once per call of `__init__` (set-up, not a step): a small cost, not paid every step",
        ),
    ]


INPUT_FILES = dedent(
    """\
    import glob
    import torch


    def restore(net, input_img_list, device):
        for i, img_path in enumerate(input_img_list):
            img = load(img_path).to(device)
            with torch.no_grad():
                out = net(img)
            save(out.squeeze().cpu().numpy(), img_path)
            torch.cuda.empty_cache()


    def encode(vqgan, test_path, device):
        for path in sorted(glob.glob(test_path + "/*.png")):
            x = load(path).to(device)
            code = vqgan.encoder(x)
            torch.cuda.empty_cache()


    def warm_up(net, sizes, device):
        for size in sizes:
            net(torch.zeros(size, device=device))
            torch.cuda.empty_cache()
    """
)


def test_a_loop_over_input_files_that_runs_a_model_is_per_inference() -> None:
    """`for img_path in input_img_list:` or `for path in glob(...)` with a model call in the body runs one inference
    per input: `empty_cache()` there is paid per inference (a warning). A warm-up over sizes stays information."""
    assert findings(INPUT_FILES) == [
        (
            10,
            27,
            "AL100",
            "information",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host "
            "(`save(path, t.cpu())`: one copy per result written, as intended)",
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
            "AL300",
            "warning",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again",
        ),
        (
            24,
            8,
            "AL300",
            "information",
            "`torch.cuda.empty_cache()` inside a loop: frees cached blocks that the next iteration must allocate again; it "
            "runs per item in `warm_up` (once per call, not per training step)",
        ),
    ]


ONNX = dedent(
    """\
    import onnxruntime
    import torch


    class Embedder:
        def embed_all(self, feats):
            out = []
            for feat in feats:
                emb = self.spk_model.run(None, {"input": feat.unsqueeze(0).numpy()})[0].flatten().tolist()
                out.append(emb[0] > 0)
            return out

        def embed_torch(self, feats):
            for feat in feats:
                emb = self.model(feat.cuda()).flatten().tolist()
                print(emb)
    """
)


def test_onnx_runtime_outputs_are_numpy() -> None:
    """`session.run(None, {...})` is ONNX Runtime's: its outputs are NumPy arrays, reshaped on the host. A model's
    own output read the same way is still reported."""
    assert findings(ONNX) == [
        (15, 52, "AL100", "warning", "`.tolist()` inside a loop: the host waits for the GPU on every iteration"),
    ]


CONFIG_FILES = dedent(
    """\
    import yaml
    import torch


    def best(paths, device):
        scores = []
        for p in paths:
            with open(p) as f:
                dic = yaml.load(f, Loader=yaml.BaseLoader)
                loss = float(dic["loss_dict"]["loss"])
                scores.append(loss)
        return torch.tensor(scores, device=device)
    """
)


def test_values_read_from_a_config_file_are_host_values() -> None:
    """`yaml.load(f)` gives strings and numbers: `float(dic["loss_dict"]["loss"])` reads no tensor."""
    assert findings(CONFIG_FILES) == []


SELF_TEST = dedent(
    """\
    import torch

    if __name__ == "__main__":
        model = build().to("cuda")
        max_len, chunk_size = 300, 30
        full = model(torch.rand(1, max_len, device="cuda"))
        for i in range(0, max_len, chunk_size):
            part = model(torch.rand(1, i + chunk_size, device="cuda"))
            print((full[:, i:i + chunk_size] - part[:, i:]).abs().max().item())
        width = 10 * model.chunk
        step = model.chunk
        for i in range(0, width, step):
            print(model(torch.rand(1, i + step, device="cuda")).abs().max().item())
        for i in range(0, width, chunk_size):
            print(model(torch.rand(1, i + 1, device="cuda")).abs().max().item())
    """
)


def test_a_range_over_bound_multiples_of_one_quantity_runs_few_times() -> None:
    """`range(0, max_len, chunk_size)` after `max_len, chunk_size = 300, 30`, or after `width = 10 * model.chunk` and
    `step = model.chunk`, runs 10 times: a smoke test's reads. With a step of another quantity the count is unknown."""
    assert findings(SELF_TEST) == [
        (
            9,
            68,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU 10 times (the loop runs 10 times)",
        ),
        (
            13,
            72,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU 10 times (the loop runs 10 times)",
        ),
        (15, 69, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration"),
    ]


COLLATED = dedent(
    """\
    import torch


    def collate_fn(data):
        images = torch.stack([example["image"] for example in data])
        drop_image_embeds = [example["drop_image_embed"] for example in data]
        return {"images": images, "drop_image_embeds": drop_image_embeds}


    def train(accelerator, model, optimizer, loader):
        loader = accelerator.prepare(loader)
        for step, batch in enumerate(loader):
            embeds = model(batch["images"].to(accelerator.device))
            kept = []
            for embed, drop in zip(embeds, batch["drop_image_embeds"]):
                if drop == 1:
                    kept.append(torch.zeros_like(embed))
                else:
                    kept.append(embed)
            if batch["images"].sum() > 0:
                pass
            loss = torch.stack(kept).mean()
            accelerator.backward(loss)
            optimizer.step()
    """
)


def test_a_list_that_the_collate_function_builds_holds_no_tensor() -> None:
    """`drop_image_embeds = [example["drop_image_embed"] for example in data]` returned by `collate_fn` under its key:
    `batch["drop_image_embeds"]` holds Python values that no framework moves. The stacked images are still a tensor."""
    assert findings(COLLATED) == [
        (
            20,
            11,
            "AL100",
            "warning",
            'a CUDA tensor as a condition (`batch["images"].sum() > 0`) inside a loop: the host waits for the GPU on every iteration',
        ),
    ]


VISUALS = dedent(
    """\
    import torch
    from collections import OrderedDict


    class SRModel:
        def validation(self, dataloader):
            for idx, val_data in enumerate(dataloader):
                self.feed_data(val_data)
                self.test()
                visuals = self.get_current_visuals()
                save(tensor2img([visuals["result"]]), idx)

        def get_current_visuals(self):
            out_dict = OrderedDict()
            out_dict["lq"] = self.lq.detach().cpu()
            out_dict["result"] = self.output.detach().cpu()
            return out_dict

        def test(self):
            self.output = self.net_g(self.lq.cuda())
    """
)


def test_copies_a_function_returns_in_a_container_to_a_validation_loop_are_results() -> None:
    """`out_dict["result"] = self.output.detach().cpu()` ... `return out_dict` in a `get_current_visuals` that a
    validation loop calls: the results brought home, one copy per batch (information)."""
    assert findings(VISUALS) == [
        (
            16,
            50,
            "AL100",
            "information",
            "`.cpu()` in `get_current_visuals`, which `validation` calls in a loop: the host waits for the GPU on every "
            "iteration, collecting results on the host (one copy per batch, as intended)",
        ),
    ]


EVALUATE = dedent(
    """\
    import torch


    class Trainer:
        def train(self, loader, dev_data, epochs):
            best = 0.0
            for epoch in range(epochs):
                for batch in loader:
                    loss = self.model.forward_loss(batch.cuda())
                    loss.backward()
                    self.optimizer.step()
                result = self.model.evaluate(dev_data)
                print(f"DEV : loss {result.loss} score {result.main_score}")
                if result.main_score > best:
                    best = result.main_score
    """
)


def test_what_a_models_evaluate_returns_is_its_scores() -> None:
    """`result = self.model.evaluate(dev_data)`: flair's and Keras-style models return scores, Python values, and
    so do their attributes (`result.main_score`)."""
    assert findings(EVALUATE) == []


PREDICTIONS = dedent(
    """\
    import torch


    class Regressor(torch.nn.Module):
        def predict(self, dataloader, label_name):
            with torch.no_grad():
                for batch in dataloader:
                    scores = self.decoder(self.encode(batch))
                    for sentence, score in zip(batch, scores.tolist()):
                        sentence.set_label(label_name, value=str(score[0]))

        def fit(self, dataloader, optimizer):
            for batch in dataloader:
                scores = self.decoder(self.encode(batch))
                loss = scores.sum()
                loss.backward()
                optimizer.step()
                for sentence, score in zip(batch, scores.tolist()):
                    sentence.set_label("score", value=str(score[0]))
    """
)


def test_a_batchs_predictions_handed_to_its_items_are_results() -> None:
    """`for sentence, score in zip(batch, scores.tolist()):` in a loop over batches that takes no
    training step brings the batch's predictions home once per batch to label its items: information.
    In a training loop the same copy is a wait per step."""
    assert findings(PREDICTIONS) == [
        (
            9,
            57,
            "AL100",
            "information",
            "`.tolist()` inside a loop: the host waits for the GPU on every iteration of a loop that takes no "
            "training step, bringing a batch's predictions home to hand them to its items (one copy per batch, "
            "as intended)",
        ),
        (18, 53, "AL100", "warning", "`.tolist()` inside a loop: the host waits for the GPU on every iteration"),
    ]


MOVED_ITSELF = dedent(
    """\
    import torch
    import torch.nn.functional as F


    def train(generator, optimizer, loader, device, stdout_interval):
        for steps, batch in enumerate(loader):
            x, y_mel = batch
            x = x.to(device, non_blocking=True)
            y_mel = y_mel.to(device, non_blocking=True)
            loss = F.l1_loss(generator(x), y_mel)
            loss.backward()
            optimizer.step()
            if steps % stdout_interval == 0:
                print(F.l1_loss(y_mel, generator(x)).item())
    """
)


def test_a_part_unpacked_beside_moved_parts_and_moved_itself_is_on_the_device() -> None:
    """`x, y_mel = batch`, then both moved: `y_mel` after its own move is a CUDA tensor, and a loss
    of it read every few steps is reported (the rule of the test above is asked at the read, of
    the value read, not of every name a value was made from)."""
    assert findings(MOVED_ITSELF) == [
        (
            14,
            49,
            "AL100",
            "information",
            "`.item()` inside a loop: the host waits for the GPU only on iterations where `steps % "
            "stdout_interval == 0`",
        ),
    ]
