"""Benchmark 4 — editor round trip: "Trace this step" to hints on screen, and hint / hover latency.

Drives `atenlens serve` as VS Code would, on a copy of examples/train_step.py:
- cold: a fresh server (no trace worker yet) gets `workspace/executeCommand atenlens.trace` for
  `train_step`; the clock stops when the server asks the editor to refresh its inlay hints
  (`workspace/inlayHint/refresh`), i.e. when the hints can be shown. Each cold round is a new server.
- warm: the same command again in the same server (worker warm).
- cached: `textDocument/inlayHint` over the whole file and `textDocument/hover` on a traced line,
  answered from the trace cache; beside them, in turn, a hover on an untraced line (`import torch`):
  no work to do, so its latency is the floor set by the transport and the machine.
For reference, the same trace from a terminal: `atenlens trace examples/train_step.py::train_step`
(a new process each time), interleaved with the warm editor traces.

    python bench/editor_roundtrip.py [--quick] [--rounds N] [--warm N] [--requests N] [--json PATH]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time

from harness import REPO_ROOT, Result, Table, Target, finish, median, ms, parser, percentile, spread
from lsp_client import LspClient, Message
from servers import ATENLENS, CLIENT_CAPABILITIES

EXAMPLE = os.path.join(REPO_ROOT, "examples", "train_step.py")
QUALNAME = "train_step"
HOVER_SOURCE_LINE = "    logits = model(x)"
IDLE_SOURCE_LINE = "import torch"
TARGET_WARM_MS = 300.0
TARGET_CACHED_P95_MS = 5.0
INIT_OPTIONS = {"trace": {"enabled": True}}
CLI_RUNS_PER_ROUND = 3  # the terminal reference pays a torch import each time: a few suffice


def _is_refresh(message: Message) -> bool:
    return message.get("method") == "workspace/inlayHint/refresh"


async def trace_once(client: LspClient, uri: str) -> tuple[float, float, Message]:
    """(seconds to the inlay-hint refresh, seconds to the command's answer, the answer)."""
    refreshed = client.expect(_is_refresh)
    sent, answer = await client.request(
        "workspace/executeCommand",
        {"command": "atenlens.trace", "arguments": [{"uri": uri, "qualname": QUALNAME}]},
        timeout=300,
    )
    refresh = await asyncio.wait_for(refreshed, 300)
    return refresh.at - sent, answer.at - sent, answer.message.get("result")


async def cli_trace(path: str) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "atenlens",
        "trace",
        f"{path}::{QUALNAME}",
        "--json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    await process.wait()
    return time.perf_counter() - started


async def server_round(root: str, path: str, text: str, warm: int, requests: int, with_cli: bool) -> dict:
    client = LspClient(ATENLENS.command(), cwd=root)
    await client.start()
    out: dict = {"warm": [], "warm_answer": [], "cli": [], "hints": [], "hover": [], "idle": [], "hint_count": 0}
    try:
        await client.initialize(root, CLIENT_CAPABILITIES, INIT_OPTIONS)
        uri = f"file://{path}"
        await client.notify(
            "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}
        )
        out["cold"], out["cold_answer"], out["answer"] = await trace_once(client, uri)
        for k in range(warm):
            refresh, answer, _ = await trace_once(client, uri)
            out["warm"].append(refresh)
            out["warm_answer"].append(answer)
            if with_cli and k < CLI_RUNS_PER_ROUND:
                out["cli"].append(await cli_trace(path))
        lines = text.split("\n")
        whole = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
        hover_line = lines.index(HOVER_SOURCE_LINE)
        hover_at = {"line": hover_line, "character": lines[hover_line].index("model")}
        idle_at = {"line": lines.index(IDLE_SOURCE_LINE), "character": 0}  # nothing traced there
        for _ in range(requests):
            sent, answer = await client.request(
                "textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": whole}
            )
            out["hints"].append(answer.at - sent)
            out["hint_count"] = len(answer.message.get("result") or [])
            sent, answer = await client.request(
                "textDocument/hover", {"textDocument": {"uri": uri}, "position": hover_at}
            )
            out["hover"].append(answer.at - sent)
            out["hover_found"] = answer.message.get("result") is not None
            sent, answer = await client.request(
                "textDocument/hover", {"textDocument": {"uri": uri}, "position": idle_at}
            )
            out["idle"].append(answer.at - sent)
            out["idle_empty"] = answer.message.get("result") is None
    finally:
        await client.shutdown()
    return out


async def measure(rounds: int, warm: int, requests: int, with_cli: bool) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="atenlens-bench-") as root:
        path = os.path.join(root, "train_step.py")
        shutil.copy(EXAMPLE, path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return [await server_round(root, path, text, warm, requests, with_cli) for _ in range(rounds)]


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="cold starts (each a new server)")
    p.add_argument("--warm", type=int, default=10, help="warm traces per server")
    p.add_argument("--requests", type=int, default=200, help="hint and hover requests per server")
    p.add_argument("--no-cli", action="store_true", help="skip the terminal reference")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.warm, args.requests, args.no_cli = 1, 1, 10, True
    if ATENLENS.command() is None:
        raise SystemExit("atenlens.lsp.server is not importable")
    rounds = asyncio.run(measure(args.rounds, args.warm, args.requests, not args.no_cli))

    def pooled(key: str) -> list[float]:
        return [ms(x) for r in rounds for x in r[key]]

    cold = [ms(r["cold"]) for r in rounds]
    cold_answer = [ms(r["cold_answer"]) for r in rounds]
    warm, warm_answer, cli = pooled("warm"), pooled("warm_answer"), pooled("cli")
    hints, hover, idle = pooled("hints"), pooled("hover"), pooled("idle")

    result = Result(
        "editor_roundtrip",
        "Editor round trip: trace command to inlay hints (examples/train_step.py::train_step)",
        "python bench/editor_roundtrip.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    trace = Table(
        "executeCommand atenlens.trace -> (ms)",
        ["worker", "runs", "command answered: median", "inlayHint/refresh: median", "spread", "p95"],
    )
    trace.add(
        "cold (new server)", str(len(cold)), median(cold_answer), median(cold), spread(cold), percentile(cold, 95)
    )
    trace.add("warm", str(len(warm)), median(warm_answer), median(warm), spread(warm), percentile(warm, 95))
    if cli:
        trace.add(
            "terminal: atenlens trace (new process)", str(len(cli)), "-", median(cli), spread(cli), percentile(cli, 95)
        )
    cache = Table("answered from the trace cache (ms)", ["request", "requests", "p50", "p95", "max", "result"])
    cache.add(
        "textDocument/inlayHint (whole file)",
        str(len(hints)),
        percentile(hints, 50),
        percentile(hints, 95),
        max(hints),
        f"{rounds[-1]['hint_count']} hints",
    )
    cache.add(
        "textDocument/hover (traced line)",
        str(len(hover)),
        percentile(hover, 50),
        percentile(hover, 95),
        max(hover),
        "markdown" if rounds[-1].get("hover_found") else "empty",
    )
    cache.add(
        "reference: textDocument/hover (untraced line)",
        str(len(idle)),
        percentile(idle, 50),
        percentile(idle, 95),
        max(idle),
        "null (nothing to show)" if rounds[-1].get("idle_empty") else "content",
    )
    result.tables += [trace, cache]
    result.targets += [
        Target("warm trace -> hints refresh, median", median(warm), TARGET_WARM_MS, "ms"),
        Target("inlay hints from cache, p95", percentile(hints, 95), TARGET_CACHED_P95_MS, "ms"),
        Target("hover from cache, p95", percentile(hover, 95), TARGET_CACHED_P95_MS, "ms"),
    ]
    result.raw = {
        "cold_ms": cold,
        "warm_ms": warm,
        "cli_ms": cli,
        "hints_ms": hints,
        "hover_ms": hover,
        "idle_ms": idle,
        "command_result": rounds[-1]["answer"],
    }
    result.notes.append(
        f"the terminal reference runs interleaved with the first {CLI_RUNS_PER_ROUND} warm editor traces "
        "of each round (editor, terminal, ...)"
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
