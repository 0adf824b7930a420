"""Parser choice for the static lint: tree-sitter vs ast vs parso on a 5,000-line file.

Times, on the generated 5,000-line corpus (bench/gen_corpus.py) and on the same file with a
half-typed line (`    y = x.to(`) in its middle:
- parse only: tree-sitter-python, `ast.parse`, parso (when installed; not a dependency);
- the whole `lint_source` (parse, recovery, all rules), warm (median of N runs in this process)
  with a fresh parse each time and, as in the editor, on the same document after a one-character
  edit (incremental re-parse); and cold (a fresh interpreter: import of atenlens.lint, then the
  first `lint_source`).

    python bench/lint_parser.py [--runs N] [--lines N] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import ast
import functools
import os
import statistics
import subprocess
import sys
import time
from typing import Callable, Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_corpus import generate  # noqa: E402

COLD = r"""
import sys, time
src = open(sys.argv[1], encoding="utf-8").read()
clock = time.process_time if sys.argv[2] == "cpu" else time.perf_counter
t0 = clock()
from atenlens.lint import lint_source
t1 = clock()
found = lint_source(src)
t2 = clock()
print(f"{(t1 - t0) * 1e3:.1f} {(t2 - t1) * 1e3:.1f} {len(found)}")
"""


# CPU time of this process by default: everything measured runs on one thread, so on a quiet
# machine it equals wall time, and on a shared one it does not count the time other work held
# the core (`--clock wall` for wall time).
CLOCK = time.process_time


def median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = CLOCK()
        fn()
        times.append(CLOCK() - start)
    return statistics.median(times) * 1e3


def with_half_typed_line(text: str) -> str:
    """The corpus with `    y = x.to(` typed as a new statement at the top of a function body
    in the middle of the file (what an editor sends while the user types)."""
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    while not (lines[middle].startswith("def ") and lines[middle].rstrip().endswith(":")):
        middle += 1
    return "".join(lines[: middle + 1] + ["    y = x.to(\n"] + lines[middle + 1 :])


def lint_next(versions: Iterator[str], document: str) -> object:
    """Lints the next version of `document` (an incremental re-parse of the one before)."""
    from atenlens.lint import lint_source  # imported when measured warm, as in main()

    return lint_source(next(versions), path=document)


def one_character_edits(text: str, count: int) -> list[str]:
    """`count` versions of `text`: alternately the text with one letter typed into an
    assignment's right side (`a = foo(...)` -> `a = xfoo(...)`, still valid) on lines spread over
    the file, and the text as it was."""
    lines = text.splitlines(keepends=True)
    targets = [i for i, line in enumerate(lines) if " = " in line and not line.lstrip().startswith("#")]
    targets = targets[:: max(1, len(targets) // count)]
    versions = []
    for k in range(count):
        row = targets[k % len(targets)]
        line = lines[row]
        cut = line.index(" = ") + 3
        edited = lines[:row] + [line[:cut] + "x" + line[cut:]] + lines[row + 1 :] if k % 2 == 0 else lines
        versions.append("".join(edited))
    return versions


def main(argv: list[str] | None = None) -> int:
    args_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args_parser.add_argument("--runs", type=int, default=30)
    args_parser.add_argument("--lines", type=int, default=5000)
    args_parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = args_parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    from tree_sitter import Parser

    from atenlens.lint import lint_source
    from atenlens.lint.source import python_language

    valid = generate(lines=args.lines)
    broken = with_half_typed_line(valid)
    ts_parser = Parser(python_language())
    rows: list[tuple[str, str, str]] = []

    for label, text in (("valid", valid), ("half-typed line", broken)):
        data = text.encode()
        parsed = median_ms(functools.partial(ts_parser.parse, data), args.runs)
        rows.append((f"tree-sitter parse ({label})", f"{parsed:.2f}", "error-tolerant"))

        def parse_ast(text: str = text) -> object:
            try:
                return ast.parse(text)
            except SyntaxError:
                return None

        ok = parse_ast() is not None
        rows.append(
            (
                f"ast.parse ({label})",
                f"{median_ms(parse_ast, args.runs):.2f}",
                "tree" if ok else "SyntaxError: no tree at all",
            )
        )
        try:
            import parso

            grammar = parso.load_grammar()
            parsed = median_ms(
                functools.partial(grammar.parse, text, error_recovery=True, cache=False), max(3, args.runs // 5)
            )
            rows.append((f"parso parse ({label})", f"{parsed:.2f}", "error-tolerant"))
        except ImportError:
            rows.append((f"parso parse ({label})", "-", "parso not installed"))
        found = len(lint_source(text))
        fresh = median_ms(functools.partial(lint_source, text), args.runs)
        rows.append((f"lint_source, fresh parse ({label})", f"{fresh:.2f}", f"{found} findings"))
        versions = iter(one_character_edits(text, args.runs + 1))
        document = f"bench://{label}"
        lint_source(next(versions), path=document)
        edited = median_ms(functools.partial(lint_next, versions, document), args.runs)
        rows.append(
            (
                f"lint_source, after a 1-char edit ({label})",
                f"{edited:.2f}",
                "incremental re-parse" if label == "valid" else "half-typed line blanked, incremental re-parse",
            )
        )

    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as handle:
        handle.write(valid)
    try:
        out = subprocess.run(
            [sys.executable, "-c", COLD, handle.name, args.clock], capture_output=True, text=True, check=True
        ).stdout.split()
    finally:
        os.unlink(handle.name)
    rows.append(("import atenlens.lint (cold process)", out[0], ""))
    rows.append(("first lint_source (cold process, valid)", out[1], f"{out[2]} findings"))

    print(f"{args.lines}-line file, median of {args.runs} runs, {args.clock} time (ms)")
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>8}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
