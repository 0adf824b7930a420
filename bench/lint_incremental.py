"""Incremental against full re-lint of an edited document, in one process, CPU time.

The edit script of bench/lint_latency.py (a letter typed into a random code line of the 5,000-line
corpus, then deleted again) is applied to two copies of the document; each version is linted in
full (`lint_source(text, path)`) and incrementally (`lint_source(text, path, incremental=True)`,
lint/incremental.py), the two interleaved edit by edit so that load hits both alike. Prints the
CPU milliseconds per edit and how many edits the incremental path linted in full (an edit of a
`def` line, of module-level code, or one that changes a module-wide fact).

    python bench/lint_incremental.py [--edits N] [--lines N] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from atenlens.lint import incremental  # noqa: E402
from atenlens.lint.engine import lint_source  # noqa: E402
from gen_corpus import generate  # noqa: E402
from lint_latency import edit_script  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--edits", type=int, default=100)
    p.add_argument("--lines", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    text = generate(args.lines)
    lines = {"full": text.split("\n"), "incremental": text.split("\n")}
    cpu: dict[str, list[float]] = {"full": [], "incremental": []}
    relinted_in_full = 0
    for name in lines:
        lint_source(text, f"bench://{name}", incremental=name == "incremental")
    load_before = os.getloadavg()[0]
    for k, (row, col, end, new) in enumerate(edit_script(text.split("\n"), args.edits, args.seed)):
        for name in ("full", "incremental") if k % 2 == 0 else ("incremental", "full"):
            current = lines[name]
            current[row] = current[row][:col] + new + current[row][end:]
            started = time.process_time()
            lint_source("\n".join(current), f"bench://{name}", incremental=name == "incremental")
            cpu[name].append((time.process_time() - started) * 1000)
            if name == "incremental" and incremental.last_mode[f"bench://{name}"] == "full":
                relinted_in_full += 1
    print(
        f"{args.edits} edits of the {args.lines}-line corpus, CPU ms per edit "
        f"(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )
    for name, values in cpu.items():
        values.sort()
        print(
            f"  {name:12s} p50 {values[len(values) // 2]:7.1f}  p95 {values[int(len(values) * 0.95)]:7.1f}  "
            f"max {values[-1]:7.1f}"
        )
    print(f"  incremental path linted {relinted_in_full} of {args.edits} edits in full")
    return 0


if __name__ == "__main__":
    sys.exit(main())
