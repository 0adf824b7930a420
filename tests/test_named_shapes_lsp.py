"""Named dims in the editor through the real server, worker and engine (VS Code's capabilities): the
inlay hints name the dims, the hover gives FLOPs and bytes as formulas and lists the guards."""

from __future__ import annotations

import pathlib
import shutil

from lsprotocol import types

from lsp_helpers import execute, initialize, inlay_hints, open_document
from source_lines import lsp_line

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "shapes" / "named_attention.py"


async def hover(client, uri: str, line: int) -> str:
    answer = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=8)
        )
    )
    assert isinstance(answer.contents, types.MarkupContent), answer
    return answer.contents.value


async def test_hints_and_hover_speak_in_the_named_dims(client, tmp_path):
    await initialize(client)
    path = tmp_path / "named_attention.py"
    shutil.copy(FIXTURE, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": "step"})
    assert outcome["status"] == "ok", outcome
    qkv, att, mask = (
        lsp_line(text, "q, k, v = self.qkv(x)"),
        lsp_line(text, "att = (q @ k.transpose"),
        lsp_line(text, "att = att.masked_fill"),
    )
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(text.split("\n")))}
    # a line that calls a model: what the module returned, in the names too
    assert hints[lsp_line(text, "y = model(x)")] == "41 ops -> f32[B, T, 64] · ∇ 51 ops"
    assert [hints.get(line) for line in (qkv, att, mask)] == [
        "addmm f32[B, T, 64] · ∇ cat, mm×2, sum",
        "clone×2, bmm, mul f32[B, 4, T, T] · ∇ mul, bmm×2",
        "bitwise_not, masked_fill f32[B, 4, T, T] · ∇ masked_fill",
    ]

    qkv_hover = (await hover(client, uri, qkv)).split("\n\n")
    assert "**FLOPs:** 2.36 MFLOP" in qkv_hover
    assert qkv_hover[qkv_hover.index("**FLOPs:** 2.36 MFLOP") + 1] == (
        "**Named dims:** FLOPs `73728*B*T` = 2.36 MFLOP · bytes moved `5376*B*T + 148992` = 314 KiB "
        "(memory and time are estimated at B=2, T=16)"
    )
    att_hover = (await hover(client, uri, att)).split("\n\n")
    assert (
        "**Named dims:** FLOPs `384*B*T**2` = 197 kFLOP · bytes moved `112*B*T**2 + 2560*B*T` = 136 KiB "
        "(memory and time are estimated at B=2, T=16)"
    ) in att_hover
    bmm = "f32[4*B, T, 16] cuda:0, f32[4*B, 16, T] cuda:0"
    assert any(bmm in part for part in att_hover)
    mask_hover = (await hover(client, uri, mask)).split("\n\n")
    assert (
        "**Named dims:** bytes moved `64*B*T**2 + 4*T**2` = 33 KiB (memory and time are estimated at B=2, T=16)"
    ) in mask_hover
    assert mask_hover[-2:] == [
        "**Diagnostics**",
        "- `AL921` assumed T <= 32 (named dims B=2, T=16): the named shapes hold where this does\n"
        "- `AL921` assumed T != 32 (named dims B=2, T=16): the named shapes hold where this does",
    ]


CALL_FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "shapes" / "call_named.py"


async def test_hints_name_the_dims_after_the_example_calls_variables(client, tmp_path):
    await initialize(client)
    path = tmp_path / "call_named.py"
    shutil.copy(CALL_FIXTURE, path)
    text = path.read_text()
    uri = await open_document(client, path, text)
    for qualname in ("project", "heads"):
        outcome = await execute(client, "atenlens.trace", {"uri": uri, "qualname": qualname})
        assert outcome["status"] == "ok", outcome
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(text.split("\n")))}
    assert hints[lsp_line(text, "return y.flatten(0, 1).softmax(-1)") - 1] == "addmm f32[B, T, 256]"
    assert hints[lsp_line(text, "return y.flatten(0, 1).softmax(-1)")] == "_softmax f32[B*T, 256]"
    # B and H are both 8: numbers, and the note at the directive says why
    assert hints[lsp_line(text, "def heads(x):") + 1] == "mul f32[8, 8, 64]"
    project_hover = (await hover(client, uri, lsp_line(text, "return y.flatten(0, 1).softmax(-1)"))).split("\n\n")
    assert (
        "**Named dims:** bytes moved `2048*B*T` = 16 MiB (memory and time are estimated at B=8, T=1024)"
        in project_hover
    )
