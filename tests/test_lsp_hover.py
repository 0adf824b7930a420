"""The hover laid out for the client (lsp/hover_layout.py), through the real server and a real trace of
examples/train_step.py: VS Code (its markdown has tables: tests/test_lsp_trace.py checks that text),
Neovim (markdown without tables: code blocks, brackets kept as code) and a client whose hover takes
plain text only."""

from __future__ import annotations

import pathlib
import shutil

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import SERVER, editor_capabilities, execute, install_recorder, open_document, trusted
from source_lines import lsp_line

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_step.py"


def plaintext_capabilities() -> types.ClientCapabilities:
    capabilities = editor_capabilities("neovim")
    capabilities.text_document.hover = types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText])
    return capabilities


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), params=["neovim", "plaintext"])
async def client(lsp_client: LanguageClient, request):
    lsp_client.editor = request.param
    lsp_client.recorder = install_recorder(lsp_client)
    capabilities = plaintext_capabilities() if request.param == "plaintext" else editor_capabilities("neovim")
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=trusted(None))
    )
    yield
    await lsp_client.shutdown_session()


NEOVIM_ROLLUP = [
    "**Modules**",
    "",
    "```",
    "MLP            f32[8, 4]         6 ops  10.2 kFLOP  676 params",
    "  fc1  Linear  f32[8, 32]        2 ops  8.19 kFLOP  544 params",
    "  fc2  Linear  f32[8, 4]         2 ops  2.05 kFLOP  132 params",
    "```",
    "",
    "**Inside calls from this line:** 6 forward, 16 backward aten ops · 22.5 kFLOP",
    "",
    "in [MLP.forward]({uri}#L18)",
    "",
    "```",
    "op                  phase     count  FLOPs",
    "mm                  backward  3      12.3 kFLOP",
    "addmm               forward   2      10.2 kFLOP",
    "sum                 backward  2      —",
    "relu                forward   1      —",
    "threshold_backward  backward  1      —",
    "```",
    "",
    "**FLOPs:** 22.5 kFLOP inside calls",
    "",
    "**Cost** (estimate)",
    "- inside calls from this line: ~36 µs, 60.0% of the step",
]

PLAIN_ROLLUP = [
    "Modules",
    "",
    "MLP            f32[8, 4]         6 ops  10.2 kFLOP  676 params",
    "  fc1  Linear  f32[8, 32]        2 ops  8.19 kFLOP  544 params",
    "  fc2  Linear  f32[8, 4]         2 ops  2.05 kFLOP  132 params",
    "",
    "Inside calls from this line: 6 forward, 16 backward aten ops · 22.5 kFLOP",
    "",
    "in MLP.forward ({uri}#L18)",
    "",
    "op                  phase     count  FLOPs",
    "mm                  backward  3      12.3 kFLOP",
    "addmm               forward   2      10.2 kFLOP",
    "sum                 backward  2      —",
    "relu                forward   1      —",
    "threshold_backward  backward  1      —",
    "",
    "FLOPs: 22.5 kFLOP inside calls",
    "",
    "Cost (estimate)",
    "- inside calls from this line: ~36 µs, 60.0% of the step",
]


# a table is aligned columns in a code block: no pipes, and the brackets of its shapes read as they are
NEOVIM_FC1 = [
    "**API calls:** `torch.nn.functional.linear`, `torch.nn.functional.relu`",
    "",
    "**Forward** (4 aten ops; 2 bookkeeping not shown)",
    "",
    "```",
    "op     inputs                                                 outputs",
    "addmm  f32[32] cuda:0, f32[8, 16] cuda:0, f32[16, 32] cuda:0  f32[8, 32] cuda:0",
    "relu   f32[8, 32] cuda:0                                      f32[8, 32] cuda:0",
    "```",
    "",
    "**Backward** (8 aten ops; 5 bookkeeping not shown)",
    "",
    "```",
    "op                  node            inputs                                outputs",
    "threshold_backward  ReluBackward0   f32[8, 32] cuda:0, f32[8, 32] cuda:0  f32[8, 32] cuda:0",
    "mm                  AddmmBackward0  f32[32, 8] cuda:0, f32[8, 16] cuda:0  f32[32, 16] cuda:0",
    "sum                 AddmmBackward0  f32[8, 32] cuda:0                     f32[1, 32] cuda:0",
    "```",
    "",
    "**FLOPs:** 16.4 kFLOP",
    "",
    "**Cost** (estimate)",
    "- time: ~20 µs, 33.3% of the step (forward 8 µs, backward 12 µs)",
    "- memory: allocates 5.5 KiB; 3.5 KiB still held when the line is done (gradients 2.5 KiB, "
    "saved by ReluBackward0 1 KiB)",
    # the step's peak is on this line (backward): its few small blocks take one 2 MiB segment
    "- the step's memory peak (backward): 10.5 KiB allocated, 2 MiB reserved (a model of CUDA's caching "
    "allocator: its segments; at most 2 MiB over the step) of 80 GiB",
]


async def hover(client: LanguageClient, uri: str, line: int) -> types.MarkupContent:
    answer = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=8)
        )
    )
    assert isinstance(answer.contents, types.MarkupContent), answer
    return answer.contents


async def test_hover_layout_follows_the_clients_capabilities(client, tmp_path):
    path = tmp_path / "train_step.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"})
    assert outcome["status"] == "ok", outcome

    rollup = await hover(client, uri, lsp_line(text, "logits = model(x)"))
    fc1 = await hover(client, uri, lsp_line(text, "h = F.relu(self.fc1(x))"))
    if client.editor == "neovim":
        assert rollup.kind == fc1.kind == types.MarkupKind.Markdown
        assert rollup.value == "\n".join(NEOVIM_ROLLUP).replace("{uri}", path.as_uri())
        assert fc1.value == "\n".join(NEOVIM_FC1)
    else:
        assert rollup.kind == fc1.kind == types.MarkupKind.PlainText
        assert rollup.value == "\n".join(PLAIN_ROLLUP).replace("{uri}", path.as_uri())
        plain = [line for line in NEOVIM_FC1 if line != "```"]
        plain = [line.replace("**", "").replace("`", "") for line in plain]
        assert fc1.value == "\n".join(plain)
        assert fc1.value.startswith(
            "API calls: torch.nn.functional.linear, torch.nn.functional.relu\n\n"
            "Forward (4 aten ops; 2 bookkeeping not shown)\n\n"
            "op     inputs "
        )


def test_brackets_outside_code_become_code_and_plain_text_has_no_markers():
    """Diagnostic messages are free text: `[2, 3]` would be a link to Neovim (its brackets hidden)."""
    from atenlens.lsp.hover_layout import MARKDOWN, MARKDOWN_NO_TABLES, PLAINTEXT, hover_layout, lay_out

    markdown = (
        "_Stale: edited since the trace._\n\n**Diagnostics**\n\n"
        "- `AL900` a and b must have same reduction dim, but got [2, 3] X [2, 3].\n"
        "- `AL100` `.item()` copies a value of cuda f32[] to the host\n\n"
        "in [MLP.forward](file:///w/m.py#L18)\n\n| op | outputs |\n|---|---|\n| `cat` | f32[2\\|3] |"
    )
    assert lay_out(markdown, MARKDOWN) == markdown
    assert lay_out(markdown, MARKDOWN_NO_TABLES) == (
        "_Stale: edited since the trace._\n\n**Diagnostics**\n\n"
        "- `AL900` a and b must have same reduction dim, but got `[2, 3]` X `[2, 3]`.\n"
        "- `AL100` `.item()` copies a value of cuda `f32[]` to the host\n\n"
        "in [MLP.forward](file:///w/m.py#L18)\n\n```\nop   outputs\ncat  f32[2|3]\n```"
    )
    assert lay_out(markdown, PLAINTEXT) == (
        "Stale: edited since the trace.\n\nDiagnostics\n\n"
        "- AL900 a and b must have same reduction dim, but got [2, 3] X [2, 3].\n"
        "- AL100 .item() copies a value of cuda f32[] to the host\n\n"
        "in MLP.forward (file:///w/m.py#L18)\n\nop   outputs\ncat  f32[2|3]"
    )
    # VS Code names its parser (marked): tables; Neovim names none: no tables; plain text when markdown is not taken
    assert hover_layout(["markdown", "plaintext"], "marked") == MARKDOWN
    assert hover_layout(["markdown", "plaintext"], None) == MARKDOWN_NO_TABLES
    assert hover_layout(None, None) == MARKDOWN_NO_TABLES
    assert hover_layout(["plaintext"], "marked") == PLAINTEXT
