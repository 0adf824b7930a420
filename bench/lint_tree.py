"""Benchmark — `atenlens lint` on a whole tree against `ruff check`, side by side in one run.

The tree is a folder of real code given with --tree (for example an unpacked transformers wheel:
`pip download --no-deps transformers && python -m zipfile -e transformers-*.whl tree`), or with
--quick the generated corpus written as 40 files. Each round runs, in rotating order: atenlens
with one process (`--jobs 1`), atenlens with its default pool (one process per CPU), and ruff
(`ruff check --no-cache --isolated`, its default rules, its own threads), all three uncached;
then both again with their caches (`.atenlens_cache`, `.ruff_cache`, in a temporary folder), each
cache written by one unmeasured run before the rounds: the second run over an unchanged tree.
atenlens's package is byte-compiled first, as installing its wheel leaves it (harness.py). The
clock runs from spawn to exit; output goes to /dev/null. Ratios are of medians from the same
rounds: the uncached runs to uncached ruff, the cached to cached ruff.

    python bench/lint_tree.py --tree DIR [--rounds N] [--json PATH]
    python bench/lint_tree.py --quick
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

from gen_corpus import generate
from harness import (
    Result,
    Table,
    Target,
    byte_compile_atenlens,
    finish,
    median,
    ms,
    parser,
    rotated,
    ruff_binary,
    spread,
)

TARGET_VS_RUFF = 2.0  # atenlens (all cores) <= 2 x ruff on the same tree


def count_py(tree: str) -> int:
    return sum(1 for _, _, files in os.walk(tree) for name in files if name.endswith(".py"))


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--tree", help="folder to lint (default with --quick: a generated one)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    tmp = None
    if args.quick or not args.tree:
        tmp = tempfile.TemporaryDirectory(prefix="atenlens-bench-tree-")
        text = generate(5000)
        chunk = text.split("\n")
        for i in range(40):
            with open(os.path.join(tmp.name, f"m{i:02d}.py"), "w", encoding="utf-8") as f:
                f.write("\n".join(chunk[i * 125 : (i + 1) * 125]) + "\n")
        args.tree = tmp.name
        if args.quick:
            args.rounds = 1
    byte_compile_atenlens()
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    caches = tempfile.TemporaryDirectory(prefix="atenlens-bench-caches-")
    lint = [sys.executable, "-m", "atenlens", "lint", "--exit-zero", args.tree]
    cold = lint + ["--no-cache"]
    runners = [("atenlens, 1 process", cold + ["--jobs", "1"]), (f"atenlens, {jobs} processes", cold)]
    ruff = ruff_binary()
    ruff_check = [ruff or "ruff", "check", "--isolated", "--exit-zero", "-q", args.tree]
    if ruff:
        runners.append(("ruff check", ruff_check + ["--no-cache"]))
    warm = [("atenlens, cached", lint + ["--cache-dir", os.path.join(caches.name, "atenlens")])]
    if ruff:
        warm.append(("ruff check, cached", ruff_check + ["--cache-dir", os.path.join(caches.name, "ruff")]))
    for _, command in warm:
        timed(command)  # writes the cache the measured runs read
    runners += warm
    times: dict[str, list[float]] = {name: [] for name, _ in runners}
    cpu: dict[str, list[float]] = {name: [] for name, _ in runners}
    for r in range(args.rounds):
        for name, command in rotated(runners, r):
            wall, used = timed(command)
            times[name].append(wall)
            cpu[name].append(used)
    files = count_py(args.tree)
    result = Result(
        "lint_tree",
        f"Whole-tree lint: atenlens lint vs ruff check ({files} files)",
        "python bench/lint_tree.py " + ("--quick" if args.quick else f"--tree {args.tree}"),
        quick=args.quick,
    )
    table = Table(
        f"seconds, spawn to exit, {args.rounds} rounds",
        ["run", "wall: median", "spread", "x ruff", "CPU: median", "x ruff"],
    )
    for name, _ in runners:
        reference = "ruff check, cached" if name.endswith("cached") else "ruff check"
        ruff_median = median(times[reference]) if ruff else None
        ruff_cpu = median(cpu[reference]) if ruff else None
        m, c = median(times[name]), median(cpu[name])
        table.add(
            name,
            m,
            spread(times[name]),
            (m / ruff_median) if ruff_median else "-",
            c,
            (c / ruff_cpu) if ruff_cpu else "-",
        )
    result.tables.append(table)
    result.raw = {"seconds": times, "cpu_seconds": cpu, "files": files, "jobs": jobs}
    if ruff:
        ruff_median = median(times["ruff check"])
        result.targets.append(
            Target(
                f"atenlens ({jobs} processes) <= 2 x ruff",
                ms(median(times[runners[1][0]])),
                ms(TARGET_VS_RUFF * ruff_median),
                "ms",
            )
        )
    else:
        result.notes.append("ruff is not installed here (pip install ruff); not measured")
    result.notes.append(f"{jobs} CPUs available to the process; ruff runs its default rule set with its own threads")
    caches.cleanup()
    if tmp is not None:
        tmp.cleanup()
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
