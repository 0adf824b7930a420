"""Tool — every finding of `lint_source` on whole trees, one line per file, to compare two
versions of the lint byte for byte (a speed change must change no finding).

Writes `path<TAB>repr(findings)` for each `*.py` below each folder (sorted), then the same for
the generated corpus (`gen_corpus.generate(5000, seed)`, seeds 0-2), and prints the number of
findings. Run it before and after a change, then `cmp` the two files:

    python bench/lint_findings.py -o before.txt TREE [TREE ...]
"""

from __future__ import annotations

import argparse
import os
import sys

from atenlens.lint.command import decode
from atenlens.lint.engine import lint_source
from gen_corpus import generate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trees", nargs="+", help="folders to lint")
    p.add_argument("-o", "--output", required=True, help="file to write")
    args = p.parse_args(argv)
    total = 0
    with open(args.output, "w", encoding="utf-8") as out:
        for tree in args.trees:
            for folder, dirs, files in os.walk(tree):
                dirs.sort()
                for name in sorted(files):
                    if not name.endswith(".py"):
                        continue
                    path = os.path.join(folder, name)
                    try:
                        with open(path, "rb") as f:
                            source = decode(f.read())
                    except (OSError, UnicodeDecodeError):
                        continue
                    found = lint_source(source)
                    total += len(found)
                    out.write(f"{path}\t{found!r}\n")
        for seed in range(3):
            found = lint_source(generate(5000, seed))
            total += len(found)
            out.write(f"generated seed {seed}\t{found!r}\n")
    print(f"{total} findings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
