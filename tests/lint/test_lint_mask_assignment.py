"""A boolean-mask assignment of a device tensor (AL100) and a host read of a CUDA tensor between
two clock reads (AL301), each with a small program and the exact findings: line, column
(0-based), code, severity and message. Each program is also linted without the prefilter (every
definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings


def _assignment(target: str, value: str, tensor: str, mask: str, how: str = "on every iteration") -> str:
    return (
        f"`{target} = {value}` (a boolean-mask assignment with a device value goes through `index_put_`, "
        f"which turns the mask into indices; `{tensor}.masked_fill_({mask}, <Python number>)` does not wait) "
        f"inside a loop: the host waits for the GPU {how}"
    )


DECODING = dedent(
    """\
    import math

    import torch

    NEG = -1e9


    class Generator:
        def generate(self, src_tokens, max_len, beam_size):
            src_tokens = src_tokens.to(self.device)
            bsz = src_tokens.size(0)
            cands_to_ignore = torch.zeros(bsz, beam_size).to(src_tokens).eq(-1)
            for step in range(max_len + 1):
                lprobs, attn = self.model.forward_decoder(src_tokens[:, : step + 1])
                if self.lm_model is not None:
                    lprobs += self.lm_model(src_tokens)
                lprobs[lprobs != lprobs] = torch.tensor(-math.inf).to(lprobs)
                prefix_mask = src_tokens.ne(self.pad)
                lprobs[prefix_mask] = torch.tensor(-math.inf).to(lprobs)
                eos_mask = lprobs.eq(self.eos) & lprobs.ne(-math.inf)
                eos_mask[:, :beam_size][cands_to_ignore] = torch.tensor(0).to(eos_mask)
                lprobs[lprobs != lprobs] = 0
                lprobs[prefix_mask] = -math.inf
                lprobs[prefix_mask] = float("-inf")
                lprobs[prefix_mask] = NEG
                lprobs[prefix_mask] = torch.tensor(0.0)
                lprobs[prefix_mask] = torch.tensor(0.0).to(torch.float16)
                lprobs[prefix_mask] = torch.tensor(0.0).to("cpu")
                if step % 100 == 0:
                    lprobs[prefix_mask] = torch.tensor(0.0).type_as(lprobs)
"""
)


def test_mask_assignments_of_device_values_in_a_decoding_loop() -> None:
    """fairseq's sequence generator, once per decoding step: `lprobs[lprobs != lprobs] =
    torch.tensor(-math.inf).to(lprobs)` (also after `lprobs += ...` in a branch), a mask given as a
    name, a chained mask (`torch.zeros(...).to(t).eq(-1)`) indexing a slice; a Python number, a
    name bound to one, a CPU scalar tensor (cast, or moved to the CPU) take `masked_fill_` and are
    silent; under `if step % 100 == 0:` the wait is information. The buffer made on the CPU and
    moved to `src_tokens`' device is AL302's."""
    assert findings(DECODING) == [
        (
            12,
            54,
            "AL302",
            "warning",
            "`torch.zeros(...)` is created on the CPU and then copied to the device of `src_tokens`: "
            "create it there with `device=`",
        ),
        (
            17,
            12,
            "AL100",
            "warning",
            _assignment("lprobs[lprobs != lprobs]", "torch.tensor(-math.inf).to(lprobs)", "lprobs", "lprobs != lprobs"),
        ),
        (
            19,
            12,
            "AL100",
            "warning",
            _assignment("lprobs[prefix_mask]", "torch.tensor(-math.inf).to(lprobs)", "lprobs", "prefix_mask"),
        ),
        (
            21,
            12,
            "AL100",
            "warning",
            _assignment(
                "eos_mask[:, :beam_size][cands_to_ignore]",
                "torch.tensor(0).to(eos_mask)",
                "eos_mask[:, :beam_size]",
                "cands_to_ignore",
            ),
        ),
        (
            30,
            16,
            "AL100",
            "information",
            _assignment(
                "lprobs[prefix_mask]",
                "torch.tensor(0.0).type_as(lprobs)",
                "lprobs",
                "prefix_mask",
                "only on iterations where `step % 100 == 0`",
            ),
        ),
    ]


HOST_ONLY = dedent(
    """\
    import math

    import torch


    def generate(model, tokens, steps):
        for step in range(steps):
            lprobs = model(tokens)
            lprobs[lprobs != lprobs] = torch.tensor(-math.inf).to(lprobs)
            lprobs[lprobs.eq(0)] = torch.tensor(0.0).type_as(lprobs)
        return lprobs
"""
)


def test_mask_assignments_in_a_file_with_no_device_are_silent() -> None:
    """No device anywhere in the file and no training step: the tensors may all be on the CPU,
    where a one-element value takes `masked_fill_`."""
    assert findings(HOST_ONLY) == []


def _timing(read: str, start: int) -> str:
    return (
        f"`{read}()` read with no synchronize since the clock read on line {start}: CUDA work is "
        "asynchronous, so the interval measures its launch, not its run time"
    )


FAB = dedent(
    """\
    import time

    import torch


    def attack(model, x, steps, device):
        x = x.to(device)
        startt = time.time()
        for _ in range(steps):
            x = x + 0.01 * torch.sign(model(x))
        ind_succ = x.abs().sum(1) > 1.0
        print(
            "success rate: {:.0f}".format(ind_succ.float().sum())
            + " in {:.1f} s".format(time.time() - startt)
        )
        return x


    def attack_counted(model, x, steps, device):
        x = x.to(device)
        startt = time.time()
        for _ in range(steps):
            x = x + 0.01 * torch.sign(model(x))
        print("steps: {:.0f}".format(steps) + " in {:.1f} s".format(time.time() - startt))
        return x


    def train(model, loader, optimizer, device):
        start = time.perf_counter()
        for x, y in loader:
            loss = model(x.to(device), y.to(device))
            loss.backward()
            optimizer.step()
            total = float(loss)
        elapsed = time.perf_counter() - start
        return total, elapsed
"""
)


def test_a_host_read_of_a_device_tensor_before_the_clock_read_is_a_wait() -> None:
    """torchattacks' FAB: the `format` of a CUDA tensor, evaluated before `time.time()` in the
    same expression, waits for the attack (silent); the format of a host number does not
    (reported); `float(loss)` of a model's loss in the timed loop waits (silent; AL100 reports
    the read itself)."""
    assert findings(FAB) == [
        (24, 64, "AL301", "warning", _timing("time.time", 21)),
        (
            34,
            16,
            "AL100",
            "warning",
            "`float()` of a CUDA tensor inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


ORDER = dedent(
    """\
    import time

    import torch


    def evaluate_fstring(model, loader, device):
        t0 = time.time()
        for x, y in loader:
            acc = (model(x.to(device)).argmax(1) == y.to(device)).float().mean()
        print(f"accuracy {acc} in {time.time() - t0:.1f} s")


    def evaluate_format(model, loader, device):
        t0 = time.time()
        for x, y in loader:
            acc = (model(x.to(device)).argmax(1) == y.to(device)).float().mean()
        print("accuracy {} in {:.1f} s".format(acc, time.time() - t0))


    def evaluate_print(model, loader, device):
        t0 = time.time()
        for x, y in loader:
            acc = (model(x.to(device)).argmax(1) == y.to(device)).float().mean()
        print(acc, time.time() - t0)


    def evaluate_percent(model, loader, device):
        t0 = time.time()
        for x, y in loader:
            loss = model(x.to(device), y.to(device))
        line = "loss %.4f" % loss
        elapsed = time.time() - t0
        return line, elapsed


    def evaluate_target(model, loader, device, times):
        t0 = time.time()
        for x, y in loader:
            loss = model(x.to(device), y.to(device))
        times[int(loss)] = time.time() - t0
        return times
"""
)


def test_a_host_read_counts_only_when_it_runs_before_the_clock_read() -> None:
    """An f-string formats `{acc}` before it evaluates `{time.time() - t0}`, and a `%` format in an
    earlier statement waits (silent); `"...".format(acc, time.time() - t0)` and `print(acc,
    time.time() - t0)` format the tensor after the clock read, and an assignment's target
    (`times[int(loss)] = ...`) is evaluated after its value (reported)."""
    assert findings(ORDER) == [
        (17, 48, "AL301", "warning", _timing("time.time", 14)),
        (24, 15, "AL301", "warning", _timing("time.time", 21)),
        (40, 23, "AL301", "warning", _timing("time.time", 37)),
    ]
