"""Which functions get a code lens (lenses.functions), through the real server, as VS Code and as Neovim:
a 137-line GPT training script and a generated 5,000-line file. Torch-free: no trace runs here."""

from __future__ import annotations

import pathlib
import random
import warnings

from lsprotocol import types

from atenlens import traceable
from lsp_helpers import change, code_lenses, initialize, open_document

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


async def lenses_with_arguments(client, uri: str) -> list[tuple[int, str, str, list]]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return [
        (lens.range.start.line, lens.command.title, lens.command.command, list(lens.command.arguments))
        for lens in found or []
    ]


async def test_lenses_after_edits_of_a_5000_line_file_are_those_of_the_edited_text(client, tmp_path):
    """The functions for lenses are found again after each edit by re-parsing only the top-level
    statements it changed: a line inserted above a unit moves every lens below it, a renamed step
    is traced under its new name, a new step gets its lens, an example call that reads an
    undefined name asks to be filled in, and a half-typed line keeps the last good lenses (moved
    with the edits). After each edit the lenses equal those of the same text opened fresh."""
    await initialize(client)
    text = large_file()
    path = tmp_path / "large.py"
    uri = await open_document(client, path, text)
    assert len(await lenses_with_arguments(client, uri)) == 400
    lines = text.split("\n")
    version = 1

    async def edit(start: tuple[int, int], end: tuple[int, int], new: str) -> list[tuple[int, str, str, list]]:
        nonlocal version, lines
        version += 1
        change(client, uri, version, start, end, new)
        joined = "\n".join(lines)
        offsets = [len("\n".join(lines[:row])) + (1 if row else 0) for row in (start[0], end[0])]
        joined = joined[: offsets[0] + start[1]] + new + joined[offsets[1] + end[1] :]
        lines = joined.split("\n")
        return await lenses_with_arguments(client, uri)

    def arguments(qualname: str) -> list:
        return [{"uri": uri, "qualname": qualname}]

    # a comment line inserted above unit 50: its lenses and all below move down one line
    unit50 = lines.index("# part 50")
    before = await lenses_with_arguments(client, uri)
    after = await edit((unit50, 0), (unit50, 0), "# inserted\n")
    assert after == [(line + (line > unit50), *rest) for line, *rest in before]
    # update7 renamed: traced under its new name, on the same line
    update7 = def_line("\n".join(lines), "update7")
    lenses = await edit((update7, 4), (update7, 11), "fit_step7")
    assert (update7, *ADD, arguments("fit_step7")) in lenses
    assert all(args != arguments("update7") for *_, args in lenses)
    # a new step function after smoke12's body: a lens of its own, the lenses below move by 3
    smoke12 = def_line("\n".join(lines), "smoke12")
    lenses = await edit((smoke12 + 2, 0), (smoke12 + 2, 0), "def extra_step(model):\n    model.step()\n\n")
    assert (smoke12 + 2, *ADD, arguments("extra_step")) in lenses
    assert len(lenses) == 401
    # an example call above collate9 that reads a name the module does not define
    collate9 = def_line("\n".join(lines), "collate9")
    lenses = await edit((collate9, 0), (collate9, 0), "# atenlens: collate9(batch_of_nine)\n")
    assert (
        collate9 + 1,
        "Fill in the example call to trace: batch_of_nine",
        "atenlens.insertDirective",
        arguments("collate9"),
    ) in lenses
    # each time, the lenses of the same text opened as a new document
    fresh_uri = await open_document(client, tmp_path / "fresh.py", "\n".join(lines))
    fresh = await lenses_with_arguments(client, fresh_uri)
    assert lenses == [
        (line, title, command, [{"uri": uri, "qualname": a[0]["qualname"]}]) for line, title, command, a in fresh
    ]
    # a half-typed line in update20: the text does not parse; the lenses stay, the ones below move
    update20 = def_line("\n".join(lines), "update20")
    half = await edit((update20 + 1, 0), (update20 + 1, 0), "    y = (\n")
    assert half == [(line + (line > update20), *rest) for line, *rest in lenses]


ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = sorted(
    path
    for path in [*ROOT.glob("examples/**/*.py"), *ROOT.glob("tests/fixtures/**/*.py"), *ROOT.glob("tests/lint/**/*.py")]
    if path.stat().st_size < 20_000  # the large third-party corpus files would cost seconds, and add no case
)
# Texts the chunking must not cut wrongly: text at column 0 in a docstring, `else:` and a closing
# bracket at column 0, a decorator above a blank line and a comment, a lone "\r", a directive
# above a decorator.
TRICKY = [
    '"""Module.\n\ndef not_code():\n"""\n\n\ndef f():\n    return 1\n',
    "if x:\n    def a():\n        pass\nelse:\n    def b():\n        pass\n\ndef c(): pass\n",
    "items = [\n1,\n2\n]\ndef d(x):\n    x.backward()\n",
    "@dec\n\n# note\ndef e(self):\n    pass\n",
    "def g():\r    pass\rdef h(y):\r    pass\r",
    "# atenlens: step(make())\n@torch.no_grad()\ndef step(batch):\n    opt.step()\n",
    "class A:\n    def m(self):\n        pass\n\n\n    def n(self, x=1):\n        pass\nx = '''\nclass B:\n'''\n",
]


def functions_or_error(source: str, by_chunk: bool) -> object:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # `1x` typed into a number
            if by_chunk:
                return traceable.find_functions_by_chunk(source, check_directives=True)
            return traceable.find_functions(source, check_directives=True)
    except (SyntaxError, ValueError) as error:
        return type(error).__name__


def test_functions_found_by_chunk_are_those_of_the_whole_parse_on_every_program_and_random_edits() -> None:
    assert len(PROGRAMS) > 150
    rng = random.Random(12)
    inserts = [
        "x",
        "\n",
        "(",
        '"""',
        "    ",
        "\ndef g(a):\n    pass\n",
        "# atenlens: g(zz)\n",
        ":",
        "\n@dec\n",
        "else:\n",
    ]
    texts = list(TRICKY)
    for path in PROGRAMS:
        source = path.read_text(encoding="utf-8")
        texts.append(source)
        for _ in range(2):
            at = rng.randrange(len(source) + 1)
            texts.append(source[:at] + rng.choice(inserts) + source[at:])
    found = [functions_or_error(text, by_chunk=False) for text in texts]
    assert [functions_or_error(text, by_chunk=True) for text in texts] == found
    # the cases above are found as written (not all by falling back to the whole parse)
    assert [[info.qualname for info in infos] for infos in found[: len(TRICKY)]] == [
        ["f"],
        ["c"],
        ["d"],
        ["e"],
        ["g", "h"],
        ["step"],
        ["A.m", "A.n"],
    ]
    step = found[5]
    assert isinstance(step, list) and step[0].directive == "step(make())" and step[0].directive_missing == ("make",)
    assert sum(isinstance(result, str) for result in found) > 50  # half the edits break the text
