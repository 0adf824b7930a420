"""The options of `atenlens lint` (kept apart from the command so that building the CLI's parser
imports nothing of the lint: `atenlens serve` and `trace` do not pay for it)."""

from __future__ import annotations

import argparse

FORMATS = ("text", "concise", "json", "json-lines", "grouped", "pylint", "github", "gitlab", "sarif")


def add_arguments(lint: argparse.ArgumentParser) -> None:
    lint.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or folders (default: the current folder, or stdin with --stdin-filename); "
        "- reads the source from stdin",
    )
    lint.add_argument(
        "--format",
        "--output-format",
        dest="format",
        choices=FORMATS,
        default="text",
        help="output format (default: text); --output-format is ruff's spelling",
    )
    lint.add_argument(
        "--select",
        metavar="CODES",
        help="comma-separated codes or prefixes to run, replacing [tool.atenlens] select (default: all)",
    )
    lint.add_argument("--extend-select", metavar="CODES", help="codes to run on top of the selection")
    lint.add_argument("--ignore", metavar="CODES", help="comma-separated codes or prefixes to skip")
    lint.add_argument("--fix", action="store_true", help="apply the quick fixes the editor offers")
    lint.add_argument(
        "--diff", action="store_true", help="print the quick fixes as a unified diff; change nothing (exit 1 if any)"
    )
    lint.add_argument(
        "--unsafe-fixes",
        "--no-unsafe-fixes",
        dest="unsafe_fixes",
        action="store_true",
        help="accepted for ruff's command lines; every quick fix of atenlens is safe, so it changes nothing",
    )
    lint.add_argument("--statistics", action="store_true", help="print the number of findings per code instead")
    lint.add_argument(
        "--quiet", "-q", action="store_true", help="print the findings and nothing else (no summary lines)"
    )
    lint.add_argument("--silent", "-s", action="store_true", help="print nothing; the exit status says what was found")
    lint.add_argument("--exit-zero", "-e", action="store_true", help="exit 0 even when something is found")
    lint.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="with --fix: exit 1 when anything was fixed, even if nothing remains",
    )
    lint.add_argument("--output-file", "-o", metavar="FILE", help="write the findings to FILE instead of stdout")
    lint.add_argument(
        "--config",
        metavar="PYPROJECT",
        help="use this pyproject.toml's [tool.atenlens] for every file, instead of the nearest one",
    )
    lint.add_argument("--isolated", action="store_true", help="read no configuration file: the defaults apply")
    lint.add_argument(
        "--show-files", action="store_true", help="print the files that would be linted (absolute, sorted) and exit 0"
    )
    lint.add_argument(
        "--force-exclude",
        action="store_true",
        default=None,
        help="apply exclude / extend-exclude to files named on the command line too (as pre-commit passes them)",
    )
    lint.add_argument("--no-force-exclude", dest="force_exclude", action="store_false")
    lint.add_argument(
        "--respect-gitignore",
        action="store_true",
        default=None,
        help="leave out what .gitignore files do (the default; respect-gitignore in the config)",
    )
    lint.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false")
    lint.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="the name of the file read from stdin (its config, per-file ignores and output)",
    )
    lint.add_argument("--jobs", "-j", type=int, metavar="N", help="processes for whole trees (default: one per CPU)")
    lint.add_argument(
        "--no-cache", action="store_true", help="lint every file again; neither read nor write .atenlens_cache/"
    )
    lint.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where the cache of findings lives (default: $ATENLENS_CACHE_DIR, else .atenlens_cache in the current folder)",
    )
