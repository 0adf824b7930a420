"""`atenlens check [PATHS] [--format text|json|github|junit] [--update-baseline] [--baseline FILE]`.

Exit codes: 0 every function within its budget and the baseline; 1 a budget broken, a regression
against the baseline, or a function that could not be traced; 2 a usage or configuration error
(the message names the file and the key).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, TextIO

FORMATS = ("text", "json", "github", "junit")     # atenlens/check/formats.py writes them (imported when run)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="check only the configured functions in these files or folders (default: all)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="the pyproject.toml with [tool.atenlens.check] (default: the nearest one above "
                             "the first PATH, or the current folder)")
    parser.add_argument("--baseline", metavar="FILE",
                        help="the baseline file (default: the table's `baseline`, else atenlens-baseline.toml "
                             "next to pyproject.toml)")
    parser.add_argument("--update-baseline", action="store_true",
                        help="write what each function does now to the baseline file (budgets still apply)")


def _selected(functions, paths: list[str]):
    if not paths:
        return functions
    roots = [os.path.abspath(p) for p in paths]
    for root in roots:
        if not os.path.exists(root):
            raise ValueError(f"no such file or folder: {root}")
    chosen = tuple(f for f in functions
                   if any(f.file == root or f.file.startswith(root.rstrip(os.sep) + os.sep) for root in roots))
    if not chosen:
        raise ValueError(f"no function of [tool.atenlens.check] is in {', '.join(paths)}")
    return chosen


def run_check_command(args: argparse.Namespace, stdout: Optional[TextIO] = None,
                      stderr: Optional[TextIO] = None) -> int:
    from atenlens.check.baseline import entry_of, read_baseline, write_baseline
    from atenlens.check.budgets import find_check_pyproject, load_check_config
    from atenlens.check.formats import WRITERS
    from atenlens.check.run import trace_all
    from atenlens.lint.config import ConfigError

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        if args.config is not None:
            pyproject = Path(args.config)
            if not pyproject.is_file():
                raise ConfigError(f"--config: no such file: {args.config}")
        else:
            start = Path(args.paths[0]) if args.paths else Path.cwd()
            pyproject = find_check_pyproject(start)
            if pyproject is None:
                raise ConfigError(f"no pyproject.toml with a [tool.atenlens.check] table at or above {start}")
        config = load_check_config(pyproject)
        functions = _selected(config.functions, list(args.paths))
        baseline_path = Path(args.baseline) if args.baseline is not None else config.baseline
        baseline = read_baseline(baseline_path) if baseline_path.is_file() else None
        if args.baseline is not None and baseline is None and not args.update_baseline:
            raise ConfigError(f"--baseline: no such file: {args.baseline} (--update-baseline writes it)")
    except (ConfigError, ValueError) as error:
        stderr.write(f"atenlens check: {error}\n")
        return EXIT_USAGE
    try:
        results = trace_all(functions, config, None if args.update_baseline else baseline)
    except KeyboardInterrupt:
        stderr.write("atenlens check: interrupted\n")
        return 130
    WRITERS[args.format](results, stdout)
    if args.update_baseline:
        # A run over some PATHS keeps the others' entries; a full run drops functions no longer configured.
        configured = {f.target for f in config.functions}
        entries = {t: e for t, e in (baseline or {}).items() if args.paths or t in configured}
        for r in results:
            if r.measurement is not None:
                entries[r.function.target] = entry_of(r.measurement)
        try:
            write_baseline(baseline_path, entries)
        except OSError as error:
            stderr.write(f"atenlens check: cannot write {baseline_path}: {error.strerror or error}\n")
            return EXIT_USAGE
        stderr.write(f"atenlens check: wrote {baseline_path} ({len(entries)} functions)\n")
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED
