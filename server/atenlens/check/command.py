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

FORMATS = ("text", "json", "github", "junit")  # atenlens/check/formats.py writes them (imported when run)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="check only the configured functions in these files or folders (default: all)",
    )
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument(
        "--config",
        metavar="PYPROJECT",
        help="the pyproject.toml with [tool.atenlens.check] (default: the nearest one above "
        "the first PATH, or the current folder)",
    )
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="the baseline file (default: the table's `baseline`, else atenlens-baseline.toml next to pyproject.toml)",
    )
    parser.add_argument(
        "--update-baseline",
        action="store_true",
        help="write what each function does now to the baseline file (budgets still apply)",
    )


def _selected(functions, paths: list[str]):
    if not paths:
        return functions
    roots = [os.path.abspath(p) for p in paths]
    for root in roots:
        if not os.path.exists(root):
            raise ValueError(f"no such file or folder: {root}")
    chosen = tuple(
        f for f in functions if any(f.file == root or f.file.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
    )
    return chosen


def _commented(root: Path, paths: list[Path], configured: set[str]) -> tuple:
    """The functions with a `# atenlens-budget:` comment in `paths` (atenlens/check/directives.py),
    named relative to `root`, less those the table already names."""
    from atenlens.check.budgets import _function
    from atenlens.check.directives import budget_comments, python_files

    found = []
    for path in python_files(p for p in paths if p.exists()):
        for qualname, line, entry in budget_comments(path):
            rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
            target = f"{rel}::{qualname}"
            if target not in configured:
                found.append(_function(f"{path}:{line}: `# atenlens-budget:`", root, target, entry))
    return tuple(found)


def run_check_command(
    args: argparse.Namespace, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None
) -> int:
    from atenlens.check.baseline import entry_of, read_baseline, write_baseline
    from atenlens.check.budgets import DEFAULT_BASELINE, CheckConfig, find_check_pyproject, load_check_config
    from atenlens.check.formats import WRITERS
    from atenlens.check.run import trace_all
    from atenlens.lint.config import ConfigError

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        if args.config is not None:
            given = Path(args.config)
            if not given.is_file():
                raise ConfigError(f"--config: no such file: {args.config}")
            pyproject: Optional[Path] = given
        else:
            start = Path(args.paths[0]) if args.paths else Path.cwd()
            pyproject = find_check_pyproject(start)
        config = load_check_config(pyproject) if pyproject is not None else None
        root = pyproject.parent if pyproject is not None else Path.cwd()
        functions = _selected(config.functions, list(args.paths)) if config is not None else ()
        functions += _commented(root, [Path(p) for p in args.paths] or [root], {f.target for f in functions})
        if not functions:
            where = ", ".join(args.paths) or str(root)
            raise ConfigError(
                f"nothing to check: no pyproject.toml with a [tool.atenlens.check] table at or above "
                f"{start if args.config is None else pyproject}, and no `# atenlens-budget:` "
                f"comment in {where}"
            )
        if config is None:
            config = CheckConfig(path=None, functions=functions, baseline=root / DEFAULT_BASELINE)
        baseline_path = Path(args.baseline) if args.baseline is not None else config.baseline
        baseline = read_baseline(baseline_path) if baseline_path.is_file() else None
        if args.baseline is not None and baseline is None and not args.update_baseline:
            raise ConfigError(f"--baseline: no such file: {args.baseline} (--update-baseline writes it)")
    except (ConfigError, ValueError) as error:  # ValueError: a PATH that names nothing
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
