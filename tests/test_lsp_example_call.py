""" "Add an example call" as a whole flow, through the real server, as VS Code and as Neovim: the directive
it inserts (a call the file already makes, else the parameters' names), as a snippet with tab stops for a
client that takes snippets in workspace edits, and a lens that says "Trace this step" only once the
call reads nothing the module does not define. Torch-free: nothing is traced here."""

from __future__ import annotations

import pathlib
import shutil

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import (
    SERVER,
    change,
    code_lenses,
    editor_capabilities,
    execute,
    initialize,
    install_recorder,
    open_document,
    server_info,
    trusted,
)
from source_lines import lsp_line

ROOT = pathlib.Path(__file__).resolve().parent.parent
GPT_TRAIN = ROOT / "tests" / "fixtures" / "lsp" / "gpt_train.py"
ADD = ("Add an example call to trace", "atenlens.insertDirective")
FILL_IN = ("Fill in the example call to trace: model, opt, x, device, y", "atenlens.insertDirective")
DIRECTIVE = "# atenlens: train_step(model, opt, x.to(device), y.to(device))"

SETUP_IN_MAIN = """import torch


def setup(batch: int = 8):
    model = torch.nn.Linear(16, 4)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(batch, 16), torch.randint(0, 4, (batch,))


def train_step(model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


if __name__ == "__main__":
    model, opt, x, y = setup()
    for _ in range(10):
        train_step(model, opt, x, y)
"""


def inserted(client: LanguageClient) -> types.TextEdit:
    """The one plain text edit of the last workspace/applyEdit."""
    (edit,) = next(iter(client.recorder.applied_edits[-1].edit.changes.values()))
    return edit


async def test_the_call_in_main_with_its_placeholders_then_filled_in(client, tmp_path):
    await initialize(client)
    text = GPT_TRAIN.read_text()
    uri = await open_document(client, tmp_path / "gpt_train.py", text)
    step = lsp_line(text, "def train_step(")
    assert (step, *ADD) in await code_lenses(client, uri)

    # the call `if __name__ == "__main__":` makes, with what it passes; the names the module does not
    # define at its top level are the placeholders
    answer = await execute(client, "atenlens.insertDirective", {"uri": uri, "qualname": "train_step"})
    directive = "# atenlens: train_step(model, opt, x.to(device), y.to(device))"
    assert answer == {"applied": True, "directive": directive, "placeholders": ["model", "opt", "x", "device", "y"]}
    edit = inserted(client)
    assert (edit.range.start.line, edit.range.start.character, edit.new_text) == (step, 0, directive + "\n")

    # applied: the lens asks for the placeholders, it does not offer a trace, and a trace asked for runs nothing
    change(client, uri, 2, (step, 0), (step, 0), directive + "\n")
    assert (step + 1, *FILL_IN) in await code_lenses(client, uri)
    refused = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"})
    assert refused == {
        "status": "needs-inputs",
        "qualname": "train_step",
        "message": (
            "atenlens: the example call of train_step reads model, opt, x, device, y, which the module does not "
            "define at its top level: fill them in (no code was run)"
        ),
    }
    assert (await server_info(client))["workerStarts"] == 0

    # filled in with what the module defines: now it is a step to trace
    filled = "# atenlens: train_step(GPT(GPTConfig()), None, torch.zeros(2, 8, dtype=torch.long), None)"
    change(client, uri, 3, (step, 0), (step, len(directive)), filled)
    assert (step + 1, "Trace this step", "atenlens.trace") in await code_lenses(client, uri)


async def test_a_call_whose_arguments_main_made_needs_nothing_filled_in(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "setup_in_main.py", SETUP_IN_MAIN)
    answer = await execute(client, "atenlens.insertDirective", {"uri": uri, "qualname": "train_step"})
    # `model, opt, x, y = setup()` just before the call: `*setup()`, which the module defines
    assert answer == {"applied": True, "directive": "# atenlens: train_step(*setup())", "placeholders": []}
    step = lsp_line(SETUP_IN_MAIN, "def train_step(")
    change(client, uri, 2, (step, 0), (step, 0), inserted(client).new_text)
    assert (step + 1, "Trace this step", "atenlens.trace") in await code_lenses(client, uri)


async def test_without_a_call_the_parameters_are_the_placeholders(client, tmp_path):
    """examples/train_step.py's MLP.forward: its class is built without arguments, `x` is to fill in."""
    await initialize(client)
    path = tmp_path / "train_step.py"
    shutil.copy(ROOT / "examples" / "train_step.py", path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    forward = lsp_line(text, "def forward(")
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=forward, character=8), end=types.Position(line=forward, character=8)
            ),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert [a.title for a in actions] == ["Add an atenlens example call for MLP.forward"]
    (edit,) = actions[0].edit.changes[uri]
    assert (edit.range.start.line, edit.new_text) == (forward, "    # atenlens: MLP().forward(x)\n")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def snippet_client(lsp_client: LanguageClient):
    """A client that takes snippets in workspace edits (LSP 3.18 `snippetEditSupport`)."""
    lsp_client.recorder = install_recorder(lsp_client)
    capabilities = editor_capabilities("visual-studio-code")
    capabilities.workspace.workspace_edit.snippet_edit_support = True
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=trusted(None))
    )
    yield
    await lsp_client.shutdown_session()


async def test_a_client_that_takes_snippets_gets_tab_stops(snippet_client, tmp_path):
    client = snippet_client
    text = GPT_TRAIN.read_text()
    uri = await open_document(client, tmp_path / "gpt_train.py", text)
    answer = await execute(client, "atenlens.insertDirective", {"uri": uri, "qualname": "train_step"})
    assert answer["applied"] is True
    (document_edit,) = client.recorder.applied_edits[-1].edit.document_changes
    assert (document_edit.text_document.uri, document_edit.text_document.version) == (uri, 1)
    (edit,) = document_edit.edits
    # the same name is the same tab stop (`device` twice: typed once)
    assert edit.snippet.value == (
        "# atenlens: train_step(${1:model}, ${2:opt}, ${3:x}.to(${4:device}), ${5:y}.to(${4:device}))\n"
    )
    assert edit.range.start.line == lsp_line(text, "def train_step(")


async def test_the_fill_in_lens_selects_the_first_name_to_type_over(client, tmp_path):
    """A client without snippets in workspace edits (VS Code 1.65's capabilities): the "Fill in" lens
    shows the file with the first undefined name of the directive selected."""
    await initialize(client)
    text = GPT_TRAIN.read_text()
    step = lsp_line(text, "def train_step(")
    lines = text.split("\n")
    lines.insert(step, DIRECTIVE)
    uri = await open_document(client, tmp_path / "gpt_train.py", "\n".join(lines))
    assert (step + 1, *FILL_IN) in await code_lenses(client, uri)
    answer = await execute(client, "atenlens.insertDirective", {"uri": uri, "qualname": "train_step"})
    assert answer == {
        "applied": False,
        "selected": True,
        "directive": DIRECTIVE,
        "placeholders": ["model", "opt", "x", "device", "y"],
    }
    (shown,) = client.shown_documents
    selection = shown.selection
    # `model` in `# atenlens: train_step(model, ...`: columns 23-28 of the directive's line
    assert (shown.uri, shown.take_focus) == (uri, True)
    assert (selection.start.line, selection.start.character, selection.end.line, selection.end.character) == (
        step,
        DIRECTIVE.index("model"),
        step,
        DIRECTIVE.index("model") + len("model"),
    )


async def test_the_fill_in_lens_gives_a_snippet_client_its_tab_stops(snippet_client, tmp_path):
    """A client that takes snippets in workspace edits: the directive's call becomes a snippet whose tab
    stops are the names to fill in; what the module defines stays as it was."""
    client = snippet_client
    text = GPT_TRAIN.read_text()
    step = lsp_line(text, "def train_step(")
    lines = text.split("\n")
    lines.insert(step, "# atenlens: train_step(GPT(GPTConfig()), opt, x, None)")
    uri = await open_document(client, tmp_path / "gpt_train.py", "\n".join(lines))
    answer = await execute(client, "atenlens.insertDirective", {"uri": uri, "qualname": "train_step"})
    assert answer == {
        "applied": True,
        "directive": "# atenlens: train_step(GPT(GPTConfig()), opt, x, None)",
        "placeholders": ["opt", "x"],
    }
    (document_edit,) = client.recorder.applied_edits[-1].edit.document_changes
    (edit,) = document_edit.edits
    start = len("# atenlens: ")
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character) == (
        step,
        start,
        step,
        len(lines[step]),
    )
    assert edit.snippet.value == "train_step(GPT(GPTConfig()), ${1:opt}, ${2:x}, None)"
