"""Benchmark 2 — start-up: process spawn to the first diagnostics, atenlens serve vs ruff server vs pylsp.

Each round spawns every server afresh (in rotating order), sends initialize / initialized at once,
opens the generated 5,000-line file and stops the clock when its diagnostics arrive (pushed, or
pulled right after didOpen). Also shown: spawn to the initialize response, and, in the same rounds,
two reference processes that bound a Python language server from below: the bare interpreter
(`python -c pass`) and the import of pygls's server with its protocol types, spawn to exit.

    python bench/startup.py [--quick] [--servers atenlens,ruff,pylsp] [--rounds N] [--lines N] [--json PATH]

atenlens's package is byte-compiled first (as installing its wheel leaves it, and as pygls and
the other peers are installed): from an editable checkout under PYTHONDONTWRITEBYTECODE=1 every
start would compile its sources again and measure that instead.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time

from gen_corpus import generate
from harness import Result, Table, Target, byte_compile_atenlens, finish, median, ms, parser, rotated, spread
from servers import ALL, available, start_session

TARGET_MS = 1000.0  # "well under a second" (issue 4)
FLOOR_MARGIN_MS = 60.0  # first diagnostics within this of `import pygls.lsp.server` (issue 12)
REFERENCES = [
    ("reference: python -c pass", [sys.executable, "-c", "pass"]),
    ("reference: import pygls.lsp.server", [sys.executable, "-c", "import pygls.lsp.server"]),
]


async def spawn_to_exit(argv: list[str]) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await process.wait()
    return time.perf_counter() - started


async def one_start(spec, root: str, path: str, text: str) -> tuple[float, float]:
    session = await start_session(spec, root)
    try:
        spawned = session.client.spawned_at
        initialized = session.client.initialize_answered_at
        first = await session.open(path, text)
        return initialized - spawned, first - spawned
    finally:
        await session.client.shutdown()


async def measure(specs, root: str, text: str, rounds: int):
    path = os.path.join(root, "training_utils.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    to_init: dict[str, list[float]] = {s.name: [] for s in specs}
    to_diag: dict[str, list[float]] = {s.name: [] for s in specs}
    to_exit: dict[str, list[float]] = {name: [] for name, _ in REFERENCES}
    for r in range(rounds):
        for spec in rotated(specs + REFERENCES, r):
            if isinstance(spec, tuple):
                to_exit[spec[0]].append(await spawn_to_exit(spec[1]))
                continue
            init, diag = await one_start(spec, root, path, text)
            to_init[spec.name].append(init)
            to_diag[spec.name].append(diag)
    return to_init, to_diag, to_exit


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--lines", type=int, default=5000)
    p.add_argument("--servers", default="atenlens,ruff,pylsp", help="comma-separated subset to measure")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.lines = 1, 600
    wanted = [n.strip() for n in args.servers.split(",")]
    specs, absent = available([s for s in ALL if s.name in wanted])
    text = generate(args.lines)
    byte_compile_atenlens()
    with tempfile.TemporaryDirectory(prefix="atenlens-bench-") as root:
        to_init, to_diag, to_exit = asyncio.run(measure(specs, root, text, args.rounds))
    result = Result(
        "startup",
        f"Start-up: spawn to first diagnostics ({args.lines}-line file)",
        "python bench/startup.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    table = Table(
        f"milliseconds, {args.rounds} rounds",
        ["server", "to initialize result: median", "spread", "to first diagnostics: median", "spread"],
    )
    for spec in specs:
        init = [ms(x) for x in to_init[spec.name]]
        diag = [ms(x) for x in to_diag[spec.name]]
        table.add(spec.name, median(init), spread(init), median(diag), spread(diag))
    for name, _ in REFERENCES:
        done = [ms(x) for x in to_exit[name]]
        table.add(name + " (to exit)", "-", "-", median(done), spread(done))
    result.tables.append(table)
    result.raw = {
        "to_initialize_ms": {k: [ms(x) for x in v] for k, v in to_init.items()},
        "to_first_diagnostics_ms": {k: [ms(x) for x in v] for k, v in to_diag.items()},
        "references_to_exit_ms": {k: [ms(x) for x in v] for k, v in to_exit.items()},
    }
    if "atenlens" in to_diag:
        result.targets.append(
            Target(
                "atenlens spawn to first diagnostics, median (well under a second)",
                ms(median(to_diag["atenlens"])),
                TARGET_MS,
                "ms",
            )
        )
        floor = ms(median(to_exit["reference: import pygls.lsp.server"]))
        result.targets.append(
            Target(
                f"atenlens first diagnostics within {FLOOR_MARGIN_MS:.0f} ms of the pygls import floor (same rounds)",
                ms(median(to_diag["atenlens"])),
                floor + FLOOR_MARGIN_MS,
                "ms",
            )
        )
    result.notes += absent
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
