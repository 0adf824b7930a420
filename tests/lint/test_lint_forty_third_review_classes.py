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
