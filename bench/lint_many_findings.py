"""`lint_source` on a 5,000-line file dense with findings (the rule fixtures with findings,
tests/lint/fixtures/AL*.py without `_clean`, repeated to 5,000 lines: about 1,070 findings),
valid and with `    y = x.to(` typed as the first line of a function in the middle: fresh parse,
and after a one-character edit of the same document (incremental re-parse). Median CPU time of
N runs, milliseconds (`--clock wall` for wall time).

    python bench/lint_many_findings.py [--runs N] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lint_parser import lint_next, one_character_edits, with_half_typed_line  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "lint" / "fixtures"


def many_findings_text(lines: int = 5000) -> str:
    unit = "".join(
        p.read_text(encoding="utf-8") + "\n\n" for p in sorted(FIXTURES.glob("AL*.py")) if not p.stem.endswith("_clean")
    )
    text = unit * (lines // unit.count("\n") + 1)
    return "\n".join(text.split("\n")[:lines]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    from atenlens.lint import lint_source

    def median_ms(fn: Callable[[], object]) -> float:
        times = []
        for _ in range(args.runs):
            start = clock()
            fn()
            times.append(clock() - start)
        return statistics.median(times) * 1e3

    valid = many_findings_text()
    print(f"5000-line file dense with findings, median of {args.runs} runs, {args.clock} time (ms)")
    for label, text in (("valid", valid), ("half-typed line", with_half_typed_line(valid))):
        found = len(lint_source(text))
        fresh = median_ms(functools.partial(lint_source, text))
        print(f"lint_source, fresh parse ({label}): {fresh:.1f}  {found} findings")
        versions = iter(one_character_edits(text, args.runs + 1))
        document = f"bench://many-findings/{label}"
        lint_source(next(versions), path=document)
        edited = median_ms(functools.partial(lint_next, versions, document))
        print(f"lint_source, after a 1-char edit ({label}): {edited:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
