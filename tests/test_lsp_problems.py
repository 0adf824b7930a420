"""One problem, one diagnostic, and no stale result shown as current: the lint's findings and the
traces' diagnostics as the user sees them, through the real server, worker and engine."""

from __future__ import annotations

import pathlib
import shutil

from lsprotocol import types

from lsp_helpers import (
    change,
    code_lenses,
    encoding_of,
    execute,
    initialize,
    inlay_hints,
    open_document,
    units,
    wait_for_diagnostics,
)
from source_lines import lsp_line

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "lsp" / "problems.py"
SYNC = (
    "`.item()` copies a value of cuda f32[] to the host: the host waits until the GPU has finished all "
    "queued work [aten._local_scalar_dense]"
)


def shown(diagnostics: list[types.Diagnostic]) -> list[tuple[int, int, int, str, str, str]]:
    return sorted(
        (d.range.start.line, d.range.start.character, d.range.end.character, str(d.code), d.source or "", d.message)
        for d in diagnostics
    )


async def hover_text(client, uri: str, line: int) -> str:
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=8)
        )
    )
    return hover.contents.value if hover is not None else ""


async def test_one_problem_one_diagnostic(client, tmp_path):
    encoding = encoding_of(await initialize(client))
    path = tmp_path / "problems.py"
    shutil.copy(FIXTURE, path)
    text = path.read_text()
    lines = text.split("\n")
    uri = await open_document(client, path, text)
    in_loop, in_total, copy = (
        lsp_line(text, s)
        for s in ("t = x.sum().item()", "return x.sum().item()", 'batch.to("cuda", non_blocking=True)')
    )
    col = lambda line, needle: units(lines[line][: lines[line].index(needle)], encoding)  # noqa: E731
    end = lambda line: units(lines[line], encoding)  # noqa: E731

    lint = client.diagnostics[uri]
    lint_sync = next(d for d in lint if d.code == "AL100")
    assert [(d.range.start.line, d.code, d.source) for d in sorted(lint, key=lambda d: d.range.start.line)] == [
        (in_loop, "AL100", "atenlens"),
        (copy, "AL200", "atenlens"),
    ]
    assert (lint_sync.range.start.character, lint_sync.range.end.character) == (
        col(in_loop, "item()"),
        col(in_loop, "item()") + len("item()"),
    )

    # step_a confirms the lint's AL100 in its loop: one diagnostic, the trace's facts at the lint's
    # columns; and finds the one in `total` the lint does not see
    published = len(client.recorder.published)
    assert (await execute(client, "atenlens.trace", {"uri": uri, "qualname": "step_a"}))["status"] == "ok"
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    assert shown(diagnostics) == sorted(
        [
            (in_total, col(in_total, "x.sum()"), end(in_total), "AL100", "atenlens trace", SYNC),
            (
                in_loop,
                lint_sync.range.start.character,
                lint_sync.range.end.character,
                "AL100",
                "atenlens trace",
                SYNC + " (×2 in this trace)",
            ),
            (
                copy,
                col(copy, "non_blocking=True"),
                col(copy, "non_blocking=True") + len("non_blocking=True"),
                "AL200",
                "atenlens",
                next(d for d in lint if d.code == "AL200").message,
            ),
        ]
    )

    # step_b runs the non_blocking copy from pinned memory: the lint's AL200 goes; it calls `total`
    # too: that line's AL100 is one diagnostic, its counts labelled by trace
    published = len(client.recorder.published)
    assert (await execute(client, "atenlens.trace", {"uri": uri, "qualname": "step_b"}))["status"] == "ok"
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    assert shown(diagnostics) == sorted(
        [
            (
                in_total,
                col(in_total, "x.sum()"),
                end(in_total),
                "AL100",
                "atenlens trace",
                SYNC + " (×1 in the trace of step_a, ×3 in the trace of step_b)",
            ),
            (
                in_loop,
                lint_sync.range.start.character,
                lint_sync.range.end.character,
                "AL100",
                "atenlens trace",
                SYNC + " (×2 in this trace)",
            ),
        ]
    )
    hover = await hover_text(client, uri, in_total)
    assert hover.count("`AL100`") == 1
    # Neovim: the bracket of `f32[]` is kept as code (it would be taken for a link: docs/lsp.md, "Hover layout")
    message = (
        SYNC.replace("f32[]", "`f32[]`").replace("[aten._local_scalar_dense]", "`[aten._local_scalar_dense]`")
        if client.editor == "neovim"
        else SYNC
    )
    assert f"**Diagnostics**\n\n- `AL100` {message} (×3)" in hover

    # an edit inside step_b makes its trace stale: its diagnostics are withdrawn (the lint's AL200
    # is back: nothing current shows it wrong), its hints and lens say so, step_a's stay current
    published = len(client.recorder.published)
    loop_b = lsp_line(text, "for _ in range(3):")
    change(client, uri, 2, (loop_b, 19), (loop_b, 20), "5")
    diagnostics = await wait_for_diagnostics(client, uri, 2, after=published)
    assert [
        (d.range.start.line, d.code, d.source, d.message) for d in sorted(diagnostics, key=lambda d: d.range.start.line)
    ] == [
        (in_total, "AL100", "atenlens trace", SYNC),
        (in_loop, "AL100", "atenlens trace", SYNC + " (×2 in this trace)"),
        (copy, "AL200", "atenlens", next(d for d in lint if d.code == "AL200").message),
    ]
    hints = {line: label for line, _, label in await inlay_hints(client, uri, len(lines))}
    call_b = lsp_line(text, "        total(x)")
    assert hints[call_b].endswith(" (stale)") and not hints[in_total].endswith(" (stale)")
    assert not hints[in_loop].endswith(" (stale)")
    lenses = [title for _, title, command in await code_lenses(client, uri) if command == ""]
    assert len(lenses) == 2
    assert [t.startswith("stale (edited since the trace): ") for t in lenses] == [False, True]  # step_a, step_b
    assert (await hover_text(client, uri, call_b)).startswith(
        "_Stale: edited since the trace of step_b: this is what the earlier text did; trace it again._"
    )


async def test_editing_the_directive_makes_the_trace_stale(client, tmp_path):
    await initialize(client)
    path = tmp_path / "train_step.py"
    shutil.copy(ROOT / "examples" / "train_step.py", path)
    text = path.read_text()
    lines = text.split("\n")
    uri = await open_document(client, path, text)
    assert (await execute(client, "atenlens.trace", {"uri": uri, "qualname": "train_step"}))["status"] == "ok"
    before = await inlay_hints(client, uri, len(lines))
    assert before and not any(label.endswith(" (stale)") for _, _, label in before)
    directive = lsp_line(text, "# atenlens: train_step(*setup())")
    change(client, uri, 2, (directive, len(lines[directive])), (directive, len(lines[directive])), "  # 32 rows")
    # every hint of the trace is still there, marked as about the earlier text
    after = await inlay_hints(client, uri, len(lines))
    assert after == [(line, column, label + " (stale)") for line, column, label in before]
    (summary,) = [title for _, title, command in await code_lenses(client, uri) if command == ""]
    assert summary.startswith("stale (edited since the trace): fwd 9 · bwd 24 · opt 1 · 0 syncs")


NOQA = """import torch


def step():
    x = torch.randn(4, device="cuda")
    a = x.sum().item()  # noqa: AL100
    b = x.max().item()
    return a + b
"""


async def test_noqa_silences_the_trace_and_codes_link_to_their_docs(client, tmp_path):
    await initialize(client)
    uri = await open_document(client, tmp_path / "noqa.py", NOQA)
    assert list(client.diagnostics[uri]) == []
    published = len(client.recorder.published)
    assert (await execute(client, "atenlens.trace", {"uri": uri, "qualname": "step"}))["status"] == "ok"
    diagnostics = await wait_for_diagnostics(client, uri, 1, after=published)
    # the trace found both reads; the one under a noqa comment for AL100 is silenced as the lint's would be
    assert [(d.range.start.line, d.code, d.source, d.code_description.href) for d in diagnostics] == [
        (
            lsp_line(NOQA, "b = x.max().item()"),
            "AL100",
            "atenlens trace",
            "https://github.com/atenlens/atenlens/blob/main/docs/rules.md#al100-sync-in-loop",
        )
    ]
