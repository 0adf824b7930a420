"""Benchmark 1 — lint latency while typing: atenlens serve vs ruff server vs pylsp (pyflakes).

Each server opens the same generated 5,000-line PyTorch file (bench/gen_corpus.py). A fixed, seeded
script of 200 single-character edits (100 random lines, each one letter typed into the code, then
deleted again) is sent as incremental didChange notifications; for each edit the clock runs from
handing the didChange to the pipe to the arrival of the diagnostics of that document version
(pushed, or pulled right after the change from a server that advertises pull diagnostics). The
servers take turns edit by edit (A B C, B C A, ...), so noise hits all of them. Then the settle
time: 50 changes sent back to back, clock from the last one to the diagnostics of the final version.
Then, for each server that gives code lenses (atenlens), the code-lens latency after an edit: 40
more edits of the same kind, each followed, once its diagnostics arrived, by a textDocument/codeLens
request (as VS Code asks after a change; one request before them, untimed, as on opening); the
clock runs from the request to its answer.

    python bench/lint_latency.py [--quick] [--servers atenlens,ruff,pylsp] [--edits N] [--bursts N] [--lens-edits N] [--lines N] [--json PATH]
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile

from gen_corpus import generate
from harness import Result, Table, Target, finish, median, ms, parser, percentile, rotated, spread
from servers import ALL, Session, available, start_session

TARGET_VS_RUFF = 2.0  # atenlens p95 <= 2 x ruff p95


def edit_script(lines: list[str], count: int, seed: int) -> list[tuple[int, int, int, str]]:
    """`count` single-character edits: pairs of (type one letter into a code line, delete it)."""
    rng = random.Random(seed)
    code_lines = [i for i, text in enumerate(lines) if text.strip() and not text.lstrip().startswith("#")]
    script = []
    for _ in range(count // 2):
        line = rng.choice(code_lines)
        indent = len(lines[line]) - len(lines[line].lstrip())
        col = rng.randint(indent, len(lines[line]))
        letter = rng.choice("abcdefghijklmnopqrstuvwxyz")
        script.append((line, col, col, letter))  # type
        script.append((line, col, col + 1, ""))  # delete it again
    return script


async def measure(specs, root: str, text: str, edits: int, bursts: int, burst_size: int, seed: int, lens_edits: int):
    path = os.path.join(root, "training_utils.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    sessions: list[Session] = []
    try:
        for spec in specs:
            session = await start_session(spec, root)
            await session.open(path, text)
            sessions.append(session)
        script = edit_script(text.split("\n"), edits, seed)
        per_edit: dict[str, list[float]] = {s.spec.name: [] for s in sessions}
        for k, edit in enumerate(script):
            for session in rotated(sessions, k):
                sent, waiting = await session.change([edit])
                per_edit[session.spec.name].append(await session.diagnostics(sent, waiting))
        settle: dict[str, list[float]] = {s.spec.name: [] for s in sessions}
        burst_rng = random.Random(seed + 1)
        for r in range(bursts):
            burst = edit_script(text.split("\n"), burst_size, burst_rng.randrange(1 << 30))
            for session in rotated(sessions, r):
                waiting = None
                for edit in burst:
                    sent, waiting = await session.change([edit])
                settle[session.spec.name].append(await session.diagnostics(sent, waiting))
        lens: dict[str, list[float]] = {}
        lensed = [s for s in sessions if s.client.server_capabilities.get("codeLensProvider")]
        for session in lensed:  # the lenses of the opened text, as an editor asks for them on opening
            await session.client.request("textDocument/codeLens", {"textDocument": {"uri": session.uri}})
        for k, edit in enumerate(edit_script(text.split("\n"), lens_edits, seed + 2)):
            for session in rotated(lensed, k):
                sent, waiting = await session.change([edit])
                await session.diagnostics(sent, waiting)
                asked, answer = await session.client.request(
                    "textDocument/codeLens", {"textDocument": {"uri": session.uri}}
                )
                lens.setdefault(session.spec.name, []).append(answer.at - asked)
        return per_edit, settle, lens, {s.spec.name: ("pull" if s.pulls else "push") for s in sessions}
    finally:
        await asyncio.gather(*(s.client.shutdown() for s in sessions), return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--edits", type=int, default=200)
    p.add_argument("--bursts", type=int, default=5, help="rounds of the burst test")
    p.add_argument("--burst-size", type=int, default=50)
    p.add_argument("--lens-edits", type=int, default=40, help="edits followed by a code-lens request")
    p.add_argument("--lines", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--servers", default="atenlens,ruff,pylsp", help="comma-separated subset to measure")
    args = p.parse_args(argv)
    if args.quick:
        args.edits, args.bursts, args.burst_size, args.lines, args.lens_edits = 6, 1, 10, 600, 4
    wanted = [n.strip() for n in args.servers.split(",")]
    specs, absent = available([s for s in ALL if s.name in wanted])
    text = generate(args.lines, args.seed)
    with tempfile.TemporaryDirectory(prefix="atenlens-bench-") as root:
        per_edit, settle, lens, modes = asyncio.run(
            measure(specs, root, text, args.edits, args.bursts, args.burst_size, args.seed, args.lens_edits)
        )

    result = Result(
        "lint_latency",
        f"Lint latency while typing ({args.lines}-line file, {args.edits} edits)",
        "python bench/lint_latency.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    edits = Table(
        "didChange -> diagnostics of that version (ms)",
        [
            "server",
            "diagnostics",
            "p50",
            "p95",
            "max",
            f"settle after {args.burst_size} changes: median",
            "settle spread",
        ],
    )
    for spec in specs:
        lat = [ms(x) for x in per_edit[spec.name]]
        st = [ms(x) for x in settle[spec.name]]
        edits.add(
            spec.name, modes[spec.name], percentile(lat, 50), percentile(lat, 95), max(lat), median(st), spread(st)
        )
    result.tables.append(edits)
    if lens:
        lenses = Table(
            f"after an edit and its diagnostics: textDocument/codeLens -> answer (ms, {args.lens_edits} edits)",
            ["server", "p50", "p95", "max"],
        )
        for name, values in lens.items():
            lat = [ms(x) for x in values]
            lenses.add(name, percentile(lat, 50), percentile(lat, 95), max(lat))
        result.tables.append(lenses)
    result.raw = {
        "per_edit_ms": {k: [ms(x) for x in v] for k, v in per_edit.items()},
        "settle_ms": {k: [ms(x) for x in v] for k, v in settle.items()},
        "code_lens_ms": {k: [ms(x) for x in v] for k, v in lens.items()},
    }
    p95 = {name: ms(percentile(v, 95)) for name, v in per_edit.items()}
    if "atenlens" in p95 and "ruff" in p95:
        result.targets.append(
            Target("atenlens p95 <= 2 x ruff p95", p95["atenlens"], TARGET_VS_RUFF * p95["ruff"], "ms")
        )
    if "atenlens" in p95 and "pylsp" in p95:
        result.targets.append(Target("atenlens p95 below pylsp p95", p95["atenlens"], p95["pylsp"], "ms"))
    result.notes += absent
    result.notes.append(
        "each server runs with its defaults (ruff: its default rule set, no configuration file in "
        "the workspace; pylsp: pyflakes only, its other linters switched off)"
    )
    result.notes.append(
        f"{len(specs)} servers interleaved edit by edit; edits: {args.edits // 2} random code "
        f"lines, one letter typed then deleted; bursts: {args.bursts} rounds"
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
