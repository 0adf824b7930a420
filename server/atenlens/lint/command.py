"""`atenlens lint PATH... [--format text|json] [--select CODES] [--ignore CODES]`.

Text output is ruff's shape, `path:line:col: CODE message` with a 1-based column; JSON is a list
of objects with the same fields plus the end position and the fix. Exit status: 0 clean, 1 when
anything is found (or a file could not be read), 2 on a usage error (a missing path).
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import sys
import tokenize
from pathlib import Path
from typing import Iterator, Optional, TextIO

from atenlens.lint.engine import lint_source, select_rules
from atenlens.lint.findings import Finding

EXIT_CLEAN = 0
EXIT_FOUND = 1
EXIT_USAGE = 2

# Folders no one wants linted when they point the linter at a project root.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules",
                          ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", "build", "dist"})


def _codes(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    return [c.strip().upper() for c in value.split(",") if c.strip()]


def python_files(path: Path) -> Iterator[Path]:
    """`path` itself when it is a file; every `*.py` below it (sorted) when it is a folder."""
    if not path.is_dir():
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(root) / name


def _decode(data: bytes) -> str:
    """Source bytes as Python reads them: a `# coding:` declaration (PEP 263), else UTF-8."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:                 # undecodable first lines, no usable declaration
        encoding = "utf-8"
    return data.decode(encoding)


def run_lint_command(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    select, ignore = _codes(getattr(args, "select", None)), _codes(getattr(args, "ignore", None))
    known = {r.code for r in select_rules()}
    for code in (select or []) + (ignore or []):
        if not any(k.startswith(code) for k in known):
            print(f"atenlens lint: unknown rule code {code!r} (known: {', '.join(sorted(known))})", file=err)
            return EXIT_USAGE
    paths = [Path(p) for p in args.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        for p in missing:
            print(f"atenlens lint: {p}: no such file or folder", file=err)
        return EXIT_USAGE

    results: list[tuple[str, Finding]] = []
    unreadable = 0
    for root in paths:
        for file in python_files(root):
            try:
                source = _decode(file.read_bytes())
            except UnicodeDecodeError as exc:
                print(f"{file}: not UTF-8 (byte {exc.start}: {exc.reason}); skipped", file=err)
                unreadable += 1
                continue
            except OSError as exc:
                print(f"{file}: cannot read ({exc.strerror or exc}); skipped", file=err)
                unreadable += 1
                continue
            if source.startswith("\ufeff"):
                # A BOM is not part of the code; dropping it keeps columns on line 1 right.
                source = source[1:]
            for finding in lint_source(source, path=str(file), select=select, ignore=ignore):
                results.append((str(file), finding))

    if args.format == "json":
        json.dump([_as_json(path, f) for path, f in results], out, indent=2)
        out.write("\n")
    else:
        for path, f in results:
            out.write(f"{path}:{f.line}:{f.column + 1}: {f.code} {f.message}\n")
        if results:
            files = len({p for p, _ in results})
            out.write(f"Found {len(results)} problem{'s' if len(results) != 1 else ''}"
                      f" in {files} file{'s' if files != 1 else ''}.\n")
    return EXIT_FOUND if results or unreadable else EXIT_CLEAN


def _as_json(path: str, finding: Finding) -> dict:
    data = dataclasses.asdict(finding)
    data["path"] = path
    return data
