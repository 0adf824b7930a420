"""Incremental linting of an edited document (lint/incremental.py) gives what a full lint of the
same text gives: the same findings, messages, severities and fixes, byte for byte, over many
random edits of real files: typing and deleting characters, splitting and joining lines, deleting
and duplicating lines, and inserting lines that change a module-wide fact (a synchronize alias,
a pinned DataLoader, a function that waits, a function that seeds the generators, a choice of
the CPU, a framework that moves the batches, an attribute holding a pinned buffer, a call of a
module-level function of the file), and several documents edited in turn."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

from atenlens.lint import incremental
from atenlens.lint.engine import lint_source_strict

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from gen_corpus import generate  # noqa: E402

CORPUS = Path(__file__).parent / "corpus_real"
REAL_FILES = sorted(p for p in CORPUS.glob("*.py") if p.name != "conftest.py")
FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.py"))

# Lines that change what one definition tells the others (lint/facts.py), inserted with the
# indentation of the line they follow.
FACT_LINES = (
    "sync = torch.cuda.synchronize",
    "torch.cuda.synchronize()",
    "loader = DataLoader(dataset, batch_size=8, pin_memory=True)",
    "self.buffer = torch.empty(1024, pin_memory=True)",
    "self.loader = DataLoader(data, pin_memory=True)",
    "host = batch.to('cpu', non_blocking=True)",
    "value = loss.item()",
    "start = time.perf_counter()",
    "device = 'cuda'",
    "self.stream = torch.cuda.Stream()",
    "def helper():",
    "    torch.cuda.synchronize()",
    "torch.manual_seed(0)",
    'device = "cpu"',
    "loader = accelerator.prepare(loader)",
)


def _function_names(lines: list[str]) -> list[str]:
    return [m.group(1) for line in lines if (m := re.match(r"def (\w+)\(", line))]


def _edit(rng: random.Random, lines: list[str]) -> list[str]:
    lines = list(lines)
    row = rng.randrange(len(lines))
    line = lines[row]
    kind = rng.random()
    if kind < 0.35 and line.strip():  # type a letter, a space or a bracket
        col = rng.randint(len(line) - len(line.lstrip()), len(line))
        lines[row] = line[:col] + rng.choice("abcxyz _.(:0") + line[col:]
    elif kind < 0.5 and line:  # delete a character
        col = rng.randrange(len(line))
        lines[row] = line[:col] + line[col + 1 :]
    elif kind < 0.6:  # press Enter in the middle of a line
        col = rng.randint(0, len(line))
        lines[row : row + 1] = [line[:col], " " * (len(line) - len(line.lstrip())) + line[col:]]
    elif kind < 0.68 and row + 1 < len(lines):  # join two lines
        lines[row : row + 2] = [line + lines[row + 1].lstrip()]
    elif kind < 0.74:  # delete a line
        del lines[row]
    elif kind < 0.8:  # duplicate a line
        lines.insert(row, line)
    elif kind < 0.88 and _function_names(lines):
        # a call of a module-level function of the file, passing CUDA tensors: what its
        # parameters are (lint/provenance.py) comes from such calls
        indent = line[: len(line) - len(line.lstrip())]
        name = rng.choice(_function_names(lines))
        lines.insert(row + 1, f"{indent}{name}(batch.cuda(), model(batch.cuda()))")
    else:  # a line that may change a module-wide fact
        indent = line[: len(line) - len(line.lstrip())]
        lines.insert(row + 1, indent + rng.choice(FACT_LINES))
    return lines or [""]


def _check_edits(original: str, document: str, edits: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    modes = {"full": 0, "incremental": 0}
    base = original.split("\n")
    lines = base
    lint_source_strict(original, path=document, incremental=True)
    for step in range(edits):
        # A random walk of edits, back to the file as written now and then (an undo), so that
        # the text stays mostly valid Python as it is while someone types.
        lines = base if rng.random() < 0.15 else _edit(rng, lines)
        text = "\n".join(lines)
        got = lint_source_strict(text, path=document, incremental=True)
        want = lint_source_strict(text)
        assert got == want, f"{document}, edit {step} (seed {seed}): incremental lint differs from a full lint"
        modes[incremental.last_mode[document]] += 1
    incremental.forget(document)
    return modes


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.stem[:40])
def test_incremental_lint_equals_full_lint_over_random_edits_of_real_files(path: Path) -> None:
    for seed in (len(path.name), 1000 + len(path.name)):
        modes = _check_edits(path.read_text(encoding="utf-8"), f"file://{path}", edits=10, seed=seed)
        assert modes["full"] + modes["incremental"] == 10


def test_incremental_lint_equals_full_lint_over_random_edits_of_the_5000_line_corpus() -> None:
    modes = _check_edits(generate(5000), "file:///training_utils.py", edits=30, seed=12)
    assert modes["incremental"] > 0, modes


def test_typing_in_a_function_of_the_5000_line_corpus_relints_incrementally() -> None:
    """The benchmark's edits (bench/lint_latency.py): a letter typed into a code line, then
    deleted again. Those inside a definition (not its header) are linted incrementally."""
    original = generate(5000)
    lines = original.split("\n")
    document = "file:///typing.py"
    lint_source_strict(original, path=document, incremental=True)
    rng = random.Random(3)
    body_rows = [
        i
        for i, line in enumerate(lines)
        if line.startswith("        ") and line.strip() and not line.lstrip().startswith("#")
    ]
    for row in rng.sample(body_rows, 10):
        col = rng.randint(8, len(lines[row]))
        typed = lines[:row] + [lines[row][:col] + "q" + lines[row][col:]] + lines[row + 1 :]
        for text in ("\n".join(typed), original):
            assert lint_source_strict(text, path=document, incremental=True) == lint_source_strict(text)
            assert incremental.last_mode[document] == "incremental", (row, col)
    incremental.forget(document)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_each_definition_of_each_rule_fixture_relinted_alone_gives_the_full_lint(path: Path) -> None:
    """Every top-level definition of every rule's fixture edited in turn (a `pass` put first in
    its body): linted alone against the rest of the file, the result is the full lint's."""
    from atenlens.lint.source import SourceText

    original = path.read_text(encoding="utf-8")
    document = f"file://{path}"
    lines = original.split("\n")
    bodies = []
    for node in SourceText(original).root.children:
        definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        body = definition.child_by_field_name("body") if definition is not None else None
        if (
            node.type in ("function_definition", "class_definition", "decorated_definition")
            and body is not None
            and body.start_point[0] > node.start_point[0]
        ):
            bodies.append(body.start_point)
    assert bodies, "a fixture without definitions tests nothing here"
    for row, column in bodies:
        lint_source_strict(original, path=document, incremental=True)
        edited = "\n".join(lines[:row] + [" " * column + "pass"] + lines[row:])
        assert lint_source_strict(edited, path=document, incremental=True) == lint_source_strict(edited), (row, column)
        assert incremental.last_mode[document] == "incremental"
    incremental.forget(document)


def test_an_edit_that_adds_a_synchronize_alias_relints_the_whole_file() -> None:
    source = "import torch\n\n\ndef train(xs):\n    for x in xs:\n        sync()\n\n\ndef setup():\n    pass\n"
    document = "file:///alias.py"
    assert lint_source_strict(source, path=document, incremental=True) == []
    edited = source.replace("    pass\n", "    pass\n\n\nsync = torch.cuda.synchronize\n")
    # A module-level line: a full lint, and `sync()` in `train` is now a synchronize in a loop.
    found = lint_source_strict(edited, path=document, incremental=True)
    assert incremental.last_mode[document] == "full"
    assert [(f.line, f.column, f.code) for f in found] == [(6, 8, "AL101")]
    # Typing inside `setup` then re-lints `setup` only and keeps `train`'s finding.
    typed = edited.replace("    pass\n", "    passx\n")
    assert lint_source_strict(typed, path=document, incremental=True) == found
    assert incremental.last_mode[document] == "incremental"
    incremental.forget(document)


def test_findings_below_an_inserted_line_move_with_it_and_cite_their_new_lines() -> None:
    source = (
        "import time\nimport torch\n\n\ndef first():\n    pass\n\n\n"
        "def timed(model, x):\n    start = time.time()\n    model(x)\n    device = 'cuda'\n"
        "    for _ in range(10):\n        end = time.time() - start\n"
    )
    document = "file:///timed.py"
    before = lint_source_strict(source, path=document, incremental=True)
    assert [(f.line, f.code) for f in before] == [(14, "AL301")]
    assert "line 10" in before[0].message
    edited = source.replace("    pass\n", "    pass\n    pass\n")
    after = lint_source_strict(edited, path=document, incremental=True)
    assert incremental.last_mode[document] == "incremental"
    assert after == lint_source_strict(edited)
    assert [(f.line, f.code) for f in after] == [(15, "AL301")]
    assert "line 11" in after[0].message
    incremental.forget(document)


CALLS_SOURCE = (
    "import torch\n\n\n"
    "def accuracy(output, target, topk=(1,)):\n"
    "    pred = output.topk(max(topk), 1, True, True)[1].t()\n"
    "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
    "    return [float(correct[:k].reshape(-1).float().sum(0)) for k in topk]\n\n\n"
    "def run(model, loader):\n"
    "    for images, target in loader:\n"
    "        logits = model(images.cuda())\n"
    "        print(accuracy(logits, target.cuda(), topk=(1, 5)))\n"
)


def test_an_edit_of_a_call_relints_the_function_it_calls() -> None:
    """`accuracy`'s `output` is a CUDA tensor because `run` passes it one in a loop: an edit of
    that call in `run` changes what is found in `accuracy`, which is linted again with `run`
    (and nothing else: still incremental)."""
    document = "file:///calls.py"
    found = lint_source_strict(CALLS_SOURCE, path=document, incremental=True)
    assert [(f.line, f.column, f.code) for f in found] == [(7, 12, "AL100")]
    assert found[0].message.startswith("`float()` of a CUDA tensor inside a loop")
    renamed = CALLS_SOURCE.replace("print(accuracy(", "print(accuracx(")
    assert lint_source_strict(renamed, path=document, incremental=True) == [] == lint_source_strict(renamed)
    assert incremental.last_mode[document] == "incremental"
    assert lint_source_strict(CALLS_SOURCE, path=document, incremental=True) == found
    assert incremental.last_mode[document] == "incremental"
    incremental.forget(document)


SEEDING_SOURCE = (
    "import torch\n\n\n"
    "def _init_env(rank):\n"
    "    torch.backends.cudnn.deterministic = True\n\n\n"
    "def run(rank, model):\n"
    "    _init_env(rank)\n"
    "    for step in range(100):\n"
    "        model(torch.randn(4, 2).cuda())\n"
)


def test_an_edit_that_seeds_in_a_helper_relints_the_draws_after_its_calls() -> None:
    """`torch.randn(4, 2).cuda()` gets a rewrite to the device until `_init_env`, which `run` calls
    first, seeds the default generators: then the draw keeps its numbers and loses the rewrite,
    though the edit was in another function (a module-wide fact, lint/facts.py)."""
    document = "file:///seeding.py"
    found = lint_source_strict(SEEDING_SOURCE, path=document, incremental=True)
    assert [(f.line, f.code, f.fix is not None) for f in found] == [(11, "AL302", True)]
    seeded = SEEDING_SOURCE.replace("deterministic = True\n", "deterministic = True\n    torch.manual_seed(rank)\n")
    after = lint_source_strict(seeded, path=document, incremental=True)
    assert after == lint_source_strict(seeded)
    assert [(f.line, f.code, f.fix is not None) for f in after] == [(12, "AL302", False)]
    incremental.forget(document)


CPU_SOURCE = (
    "import torch\n\n\n"
    "def main(num_episodes, model, x, y):\n"
    '    """Trains on the device."""\n'
    "    optimizer = torch.optim.Adam(model.parameters())\n"
    "    for e in range(num_episodes):\n"
    "        loss_val = torch.nn.functional.mse_loss(model(x), y)\n"
    "        loss_val.backward()\n"
    "        optimizer.step()\n"
    "        print(loss_val.item())\n\n\n"
    "def setup():\n"
    "    pass\n"
)


def test_an_edit_that_chooses_the_cpu_in_another_function_relints_the_loop() -> None:
    """`device = "cpu"` written in `setup` makes the whole file one that chooses the CPU (and never
    says `cuda`): the read in `main`'s training loop is gone, though the edit was in another
    function (a module-wide fact)."""
    document = "file:///cpu_only.py"
    found = lint_source_strict(CPU_SOURCE, path=document, incremental=True)
    assert [(f.line, f.code) for f in found] == [(11, "AL100")]
    edited = CPU_SOURCE.replace("    pass\n", '    device = "cpu"\n')
    assert lint_source_strict(edited, path=document, incremental=True) == [] == lint_source_strict(edited)
    incremental.forget(document)


RARE_CALLER_SOURCE = (
    "import torch\n\n\n"
    "class MaskGenerator(torch.nn.Module):\n"
    "    def __init__(self, width):\n"
    "        super().__init__()\n"
    "        self.width = width\n"
    "        self.pdf = self.get_pdf()\n\n"
    "    def get_pdf(self):\n"
    '        pdf = torch.linspace(0, 1, self.width, device="cuda")\n'
    "        total = 0.0\n"
    "        for i in range(self.width):\n"
    "            total += pdf[i].item()\n"
    "        return pdf / total\n\n\n"
    "class Sampler(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x * self.generator.pdf\n"
)


def test_an_edit_that_calls_a_method_from_another_class_relints_its_class() -> None:
    """`get_pdf`, called only from its class's `__init__`, runs once per object: information. An
    edit in another class that calls it from `forward` (`self.generator.get_pdf()`) makes it run
    every step: the warning comes back, though the edit was outside the class."""
    document = "file:///rare_caller.py"
    found = lint_source_strict(RARE_CALLER_SOURCE, path=document, incremental=True)
    assert [(f.line, f.code, f.severity) for f in found] == [(14, "AL100", "information")]
    edited = RARE_CALLER_SOURCE.replace("self.generator.pdf", "self.generator.get_pdf()")
    after = lint_source_strict(edited, path=document, incremental=True)
    assert after == lint_source_strict(edited)
    assert [(f.line, f.code, f.severity) for f in after] == [(14, "AL100", "warning")]
    incremental.forget(document)


@pytest.mark.parametrize("seed", range(6))
def test_documents_edited_in_turn_each_lint_like_a_full_lint(seed: int) -> None:
    """Three documents open at once, edited in a random order (the editor's tabs): each one's
    incremental lint is its own text's full lint, whatever was linted in between; one of them
    is then replaced by another program under the same name (a branch switch)."""
    rng = random.Random(seed)
    documents = {f"file:///tab{i}.py": rng.choice(REAL_FILES).read_text(encoding="utf-8").split("\n") for i in range(3)}
    for document, lines in documents.items():
        lint_source_strict("\n".join(lines), path=document, incremental=True)
    for step in range(24):
        document = rng.choice(sorted(documents))
        if step == 12:
            documents[document] = rng.choice(REAL_FILES).read_text(encoding="utf-8").split("\n")
        else:
            documents[document] = _edit(rng, documents[document])
        text = "\n".join(documents[document])
        got = lint_source_strict(text, path=document, incremental=True)
        assert got == lint_source_strict(text), f"{document}, step {step} (seed {seed})"
    for document in documents:
        incremental.forget(document)
