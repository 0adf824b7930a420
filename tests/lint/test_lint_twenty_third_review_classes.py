"""Classes of error found by the twenty-third whole-tree review (tests/lint/corpus_real/WHOLE_TREES.md
"Twenty-third review"), each with a small program and the exact findings: line, column (0-based),
code, severity and message. Each program is also linted without the prefilter (every definition
parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from class_findings import findings

DEVICE_MODULE_FROM_A_GETTER = dedent(
    """\
    import torch


    def _torch_get_device_module():
        if torch.cuda.is_available():
            return torch.cuda, "cuda"
        return None, None


    def inventory(device_indices):
        mod, backend = _torch_get_device_module()
        totals = []
        for ordinal in device_indices:
            props = mod.get_device_properties(ordinal)
            totals.append(int(props.total_memory))
        return totals
    """
)


def test_a_getter_spelled_with_module_runs_no_model() -> None:
    """`_torch_get_device_module()` fetches `torch.cuda`: a getter (a word, then `get_`), not a
    module run, so `mod.get_device_properties(i).total_memory` is a Python int (unsloth's hardware
    inventory)."""
    assert findings(DEVICE_MODULE_FROM_A_GETTER) == []


DECORATED_SET_UP_HELPER = dedent(
    """\
    import torch


    class Engine(torch.nn.Module):
        def __init__(self, model, max_batch_size):
            super().__init__()
            self.model = model
            self.build_buffers(max_batch_size)

        @torch.inference_mode()
        def build_buffers(self, max_batch_size):
            self.input_tokens = torch.zeros(max_batch_size).cuda()

        def step(self, tokens):
            return self.model(tokens.cuda())
    """
)


def test_a_decorated_helper_only_init_calls_runs_once() -> None:
    """`@torch.inference_mode()` does not change how `build_buffers` is called: only `__init__` calls
    it, so its create-then-move runs once per object (colossalai's CUDA-graph capture)."""
    assert findings(DECORATED_SET_UP_HELPER) == [
        (
            12,
            56,
            "AL302",
            "information",
            "`torch.zeros(...)` is created on the CPU and then copied to the device: create it there with "
            "`device=`; it runs in `build_buffers`, which this file calls only from `__init__` (once per "
            "object or run): a small cost, not paid every step",
        )
    ]


RARE_PASS_OVER_BATCHES = dedent(
    """\
    import torch


    class Trainer:
        @torch.no_grad()
        def calculate_fid(self, num_batches):
            for batch_num in range(num_batches):
                latents = torch.randn(self.batch_size, self.latent_dim).cuda(self.rank)
                self.save(self.generator(latents), batch_num)

        def train(self):
            if self.steps % self.calculate_fid_every == 0:
                self.calculate_fid(8)
    """
)


def test_a_create_then_move_per_batch_of_a_rare_pass_stays_a_warning() -> None:
    """`calculate_fid` runs every N steps, but its loop generates a batch with a model on each
    iteration: the copy is paid per batch of that pass, a warning (lightweight-gan's FID, labelled
    so in `corpus_heldout`)."""
    assert findings(RARE_PASS_OVER_BATCHES) == [
        (
            8,
            68,
            "AL302",
            "warning",
            "`torch.randn(...)` is created on the CPU and then copied to the device: create it there with `device=`",
        )
    ]


META_FUNCTIONS = dedent(
    """\
    import torch

    aten = torch.ops.aten

    if torch.__version__ >= "1.12":

        @register_meta(aten.index.Tensor)
        def meta_index_tensor(self, indices):
            result = []
            for index in indices:
                if index.dtype == torch.bool:
                    result.extend(index.nonzero().unbind(1))
            return self.new_empty([len(result)])

    @torch.library.register_fake("mylib::gather")
    def gather_fake(x, index):
        for row in index:
            if row.sum().item() > 0:
                return x.new_empty(row.shape)
        return x.new_empty(0)


    def gather_cuda(x, index):
        x = x.cuda()
        for row in index.cuda():
            if row.sum().item() > 0:
                return x[row]
        return x[:0]
    """
)


def test_meta_and_fake_functions_read_no_device_data() -> None:
    """A function registered for the meta device or for fake tensors (`@register_meta(...)`, also
    under a module-level `if`; `@torch.library.register_fake(...)`) sees tensors that hold no
    data: nothing in it waits for the GPU (colossalai's meta registrations). The same loop on
    CUDA tensors does, and so does the meta function's `nonzero()` once it is registered as a real
    operator."""
    assert findings(META_FUNCTIONS) == [
        (26, 21, "AL100", "warning", "`.item()` inside a loop: the host waits for the GPU on every iteration")
    ]
    registered_otherwise = META_FUNCTIONS.replace("@torch.library.register_fake", "@torch.library.custom_op")
    assert [(f[0], f[2]) for f in findings(registered_otherwise.replace("@register_meta", "@register_op"))] == [
        (12, "AL100"),
        (26, "AL100"),
    ]
