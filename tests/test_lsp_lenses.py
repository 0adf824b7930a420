"""Which functions get a code lens (lenses.functions), through the real server, as VS Code and as Neovim:
a 137-line GPT training script and a generated 5,000-line file. Torch-free: no trace runs here."""

from __future__ import annotations

import pathlib

from lsprotocol import types

from lsp_helpers import code_lenses, initialize, open_document

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "lsp"
GPT_TRAIN = FIXTURES / "gpt_train.py"
TRACE, ADD = ("Trace this step", "atenlens.trace"), ("Add an example call to trace", "atenlens.insertDirective")


def def_line(text: str, name: str, after: int = 0) -> int:
    """0-based line of the first `def NAME(` at or after line `after`."""
    lines = text.split("\n")
    return next(i for i in range(after, len(lines)) if lines[i].lstrip().startswith(f"def {name}("))


def class_line(text: str, name: str) -> int:
    return text.split("\n").index(f"class {name}(nn.Module):")


async def set_lenses(client, value: object) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"atenlens": {"lenses": {"functions": value}}})
    )


async def test_a_training_script_gets_lenses_on_its_steps_only(client, tmp_path):
    await initialize(client)
    text = GPT_TRAIN.read_text()
    assert len(text.split("\n")) - 1 == 137
    uri = await open_document(client, tmp_path / "gpt_train.py", text)
    forwards = [
        def_line(text, "forward", class_line(text, cls)) for cls in ("CausalSelfAttention", "MLP", "Block", "GPT")
    ]
    # the four `forward`s (they need an example call) and train_step (it calls backward() and step());
    # not __init__, __len__, __getitem__, configure_optimizers, get_lr or estimate_loss
    assert await code_lenses(client, uri) == [(line, *ADD) for line in forwards] + [
        (def_line(text, "train_step"), *ADD)
    ]

    await set_lenses(client, "all")
    everything = await code_lenses(client, uri)
    assert len(everything) == 15
    assert (def_line(text, "__len__"), *ADD) in everything
    # estimate_loss is decorated: its lens is on the `def` line, below `@torch.no_grad()`
    estimate = def_line(text, "estimate_loss")
    assert text.split("\n")[estimate - 1] == "@torch.no_grad()"
    assert (estimate, *ADD) in everything

    await set_lenses(client, "none")
    assert await code_lenses(client, uri) == []

    # a value that is not a choice: the default, and one message saying so
    await set_lenses(client, "some")
    assert len(await code_lenses(client, uri)) == 5
    warnings = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert warnings == [
        "atenlens: invalid settings, defaults used instead: atenlens.lenses.functions must be one "
        'of "steps", "all", "none" (got \'some\'); using the default \'steps\''
    ]


# One 50-line unit of a large file (100 of them and 4 lines of imports: 5,004 lines): a dataset, a model with a helper method, free helpers, a step,
# a zero-argument entry point under a decorator, and one function with an example call.
UNIT = """

# part {n}
class Data{n}(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return torch.randn(8), i % 4


class Net{n}(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def extra_repr(self) -> str:
        return "net {n}"

    def forward(self, x):
        return self.fc(x)


def collate{n}(batch):
    xs, ys = zip(*batch)
    return torch.stack(xs), torch.tensor(ys)


def accuracy{n}(logits, y) -> float:
    return (logits.argmax(-1) == y).float().mean().item()


def update{n}(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@torch.no_grad()
def smoke{n}():
    return Net{n}()(torch.randn(2, 8))


# atenlens: scaled{n}(torch.randn(4, 8))
def scaled{n}(x):
    return x * 2
"""
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.data import Dataset\n"


def large_file() -> str:
    return HEADER + "".join(UNIT.replace("{n}", str(n)) for n in range(100))


async def test_a_5000_line_file_gets_three_lenses_per_unit_not_one_per_method(client, tmp_path):
    await initialize(client)
    text = large_file()
    assert text.count("\n") == 5004
    uri = await open_document(client, tmp_path / "large.py", text)
    lenses = await code_lenses(client, uri)
    # per unit: Net.forward and update (steps) need an example call; smoke (no arguments) and scaled
    # (its directive) are traced as they are
    assert len(lenses) == 400
    assert lenses[:4] == [
        (def_line(text, "forward"), *ADD),
        (def_line(text, "update0"), *ADD),
        (def_line(text, "smoke0"), *TRACE),
        (def_line(text, "scaled0"), *TRACE),
    ]
    assert text.split("\n")[def_line(text, "smoke0") - 1] == "@torch.no_grad()"
    await set_lenses(client, "all")
    assert len(await code_lenses(client, uri)) == 1100  # 11 functions per unit
