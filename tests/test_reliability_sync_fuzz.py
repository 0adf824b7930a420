"""Random incremental edits through the real language server (hypothesis): after every edit the
server's copy of the document (`atenlens/debug/documentText`) equals the client's, computed here
independently from the LSP specification (UTF-16 positions; lines end at \\n, \\r\\n or \\r only)."""

from __future__ import annotations

import itertools
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability_helpers import Server, start_server

EXAMPLES = 300
# Text with what trips position arithmetic: multi-byte and astral characters (two UTF-16 units),
# CRLF and lone CR line ends, tabs, NUL, and characters Python's str.splitlines() treats as line
# breaks but LSP does not (\x0b \x0c \x1c \x85 \u2028).
ALPHABET = st.sampled_from(
    list("ab x=().:")
    + [
        "\n",
        "\r\n",
        "\r",
        "\t",
        "\0",
        "形",
        "状",
        "é",
        "🚀",
        "𝔘",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x85",
        "\u2028",
        "    ",
        "def f():\n",
    ]
)
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)
SEEDS = [
    "",
    "import torch\n\n\ndef step(x):\n    return x.sum().item()\n",
    "# 形状 🚀\r\nx = 1\r\ny = 2\n",
    "a\u2028b\x0cc\x85d\n",
]


@pytest.fixture(scope="module")
def server():
    started = start_server()
    started.stats = {"examples": 0, "edits": 0}
    yield started
    started.stop()


def lsp_lines(text: str) -> list[str]:
    """Lines as LSP counts them, each with its line end."""
    lines, start, index = [], 0, 0
    while index < len(text):
        if text[index] == "\r" and text[index + 1 : index + 2] == "\n":
            lines.append(text[start : index + 2])
            index += 2
            start = index
        elif text[index] in "\r\n":
            lines.append(text[start : index + 1])
            index += 1
            start = index
        else:
            index += 1
    lines.append(text[start:])
    return lines


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def content(line: str) -> str:
    return line.rstrip("\r\n") if line.endswith(("\r\n", "\n", "\r")) else line


def offset_of(text: str, line: int, character: int) -> int:
    """String offset of an LSP position (UTF-16 `character`) that lies inside the document."""
    lines = lsp_lines(text)
    offset = sum(len(item) for item in lines[:line])
    units = 0
    for index, char in enumerate(content(lines[line])):
        if units >= character:
            return offset + index
        units += utf16_units(char)
    return offset + len(content(lines[line]))


@st.composite
def positions(draw, text: str) -> tuple[int, int]:
    lines = lsp_lines(text)
    line = draw(st.integers(0, len(lines) - 1))
    chars = content(lines[line])
    # a position between characters (never inside a surrogate pair): UTF-16 units before index i
    index = draw(st.integers(0, len(chars)))
    return line, utf16_units(chars[:index])


@st.composite
def edit_sessions(draw):
    text = draw(st.sampled_from(SEEDS) | TEXTS)
    edits = []
    current = text
    for _ in range(draw(st.integers(1, 12))):
        start = draw(positions(current))
        end = draw(positions(current))
        if (end[0], end[1]) < (start[0], start[1]):
            start, end = end, start
        new_text = draw(TEXTS)
        a, b = offset_of(current, *start), offset_of(current, *end)
        current = current[:a] + new_text + current[b:]
        edits.append((start, end, new_text, current))
    return text, edits


URIS = itertools.count()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(session=edit_sessions())
def test_random_edits_keep_server_and_client_in_step(server: Server, session, reliability):
    reliability.record(
        "Fuzzing",
        "random incremental edits (hypothesis)",
        f"{EXAMPLES} documents, 1 to 12 random range edits each (UTF-16 positions, CRLF/CR, "
        "astral characters, NUL, characters that only Python counts as line breaks); "
        "the server's text compared with the client's after every edit",
    )
    text, edits = session
    uri = pathlib.Path(f"/tmp/atenlens-fuzz/doc{next(URIS)}.py").as_uri()
    server.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}
    )
    try:
        for version, ((sl, sc), (el, ec), new_text, expected) in enumerate(edits, start=2):
            server.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [
                        {
                            "range": {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}},
                            "text": new_text,
                        }
                    ],
                },
            )
            held = server.result("atenlens/debug/documentText", {"uri": uri})
            assert held == {"uri": uri, "version": version, "text": expected}, (text, edits[: version - 1])
    finally:
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    server.stats["examples"] += 1
    server.stats["edits"] += len(edits)
    assert server.alive
    reliability.number("documents / edits checked", f"{server.stats['examples']} / {server.stats['edits']}")
