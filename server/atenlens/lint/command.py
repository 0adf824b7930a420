"""`atenlens lint PATH...`: the CLI of the static lint (docs/lint.md), in ruff's shapes.

Exit status as ruff's: 0 nothing found (or `--exit-zero`), 1 findings remain (or a file could not
be read; with `--exit-non-zero-on-fix`, or anything was fixed), 2 an error: a usage error (a
missing path, an unknown code) or a bad `[tool.atenlens]`. A file that is not UTF-8 is skipped
with a warning and does not fail the run (ruff's "Failed to lint ...: stream did not contain
valid UTF-8").
Whole trees are linted by a pool of processes, one per CPU the process may use (`--jobs`), forked
after the rules are imported and handed the files in chunks of about equal bytes, largest first;
a file whose bytes and codes are unchanged since the last run takes its findings from
.atenlens_cache/ (cache.py; `--no-cache` lints everything again).
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import sys
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional, Sequence, TextIO, cast

from atenlens.lint.cache import LintCache, content_hash, default_cache_dir
from atenlens.lint.config import ConfigCache, ConfigError, LintConfig, Selection, unknown_selectors
from atenlens.lint.engine import lint_source
from atenlens.lint.files import Skipped, python_files
from atenlens.lint.findings import Finding
from atenlens.lint.fixes import fix_source
from atenlens.lint.formats import SUMMARIZED, WRITERS, Located, write_statistics
from atenlens.lint.notebook import NotANotebook, Notebook, read_notebook
from atenlens.lint.rules import RULES

EXIT_CLEAN = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
STDIN = "-"
PARALLEL_MIN_FILES = 8  # below this, starting processes costs more than it saves


def _codes(value: Optional[str]) -> Optional[tuple[str, ...]]:
    if value is None:
        return None
    return tuple(c.strip().upper() for c in value.split(",") if c.strip())


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...] = ()
    error: Optional[str] = None  # could not be read: said on stderr, the run fails
    undecodable: bool = False  # the error is "not UTF-8": said on stderr, the run does not fail
    fixed: int = 0
    diff: str = ""
    fixed_source: Optional[str] = None  # --fix of stdin: the text to print
    notebook: Optional[Notebook] = None  # an .ipynb: its findings' lines are in notebook.source


def decode(data: bytes) -> str:
    """Source bytes as Python reads them: a `# coding:` declaration (PEP 263), else UTF-8; a
    UTF-8 byte-order mark is dropped (it is not code, and it would shift columns on line 1)."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:  # undecodable first lines, no usable declaration
        encoding = "utf-8"
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def _read(path: Path) -> tuple[Optional[str], Optional[str]]:
    """(source, None) or (None, what went wrong)."""
    try:
        return decode(path.read_bytes()), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start}: {exc.reason})"
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"


def lint_text(source: str, path: str, codes: Sequence[str], mode: str) -> FileResult:
    """Lint (mode "check"), fix ("fix": the fixed text is returned, not written) or diff one text."""

    def lint(text: str) -> list[Finding]:
        return lint_source(text, select=list(codes))

    if mode == "check":
        return FileResult(path, tuple(lint(source)))
    fixed_source, fixed, remaining = fix_source(source, lint)
    if mode == "diff":
        diff = "".join(
            difflib.unified_diff(source.splitlines(keepends=True), fixed_source.splitlines(keepends=True), path, path)
        )
        if diff and not diff.endswith("\n"):
            diff += "\n\\ No newline at end of file\n"
        return FileResult(path, tuple(remaining), fixed=fixed, diff=diff)
    return FileResult(path, tuple(remaining), fixed=fixed, fixed_source=fixed_source)


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


def lint_notebook(text: str, path: str, codes: Sequence[str]) -> FileResult:
    """A notebook's code cells linted as one module (notebook.py); no fixes are offered."""
    try:
        notebook = read_notebook(text)
    except NotANotebook as exc:
        return FileResult(path, error=str(exc))
    found = lint_source(notebook.source, select=list(codes))
    return FileResult(path, tuple(replace(f, fix=None) for f in found), notebook=notebook)


def _lint_file(task: tuple[str, tuple[str, ...], str]) -> FileResult:
    """One file of a run (in a pool process or not): read, lint, and with --fix write it back."""
    path, codes, mode = task
    source, error = _read(Path(path))
    if source is None:
        return FileResult(path, error=error, undecodable=(error or "").startswith("not UTF-8"))
    if is_notebook(path):
        return lint_notebook(source, path, codes)
    result = lint_text(source, path, codes, mode)
    if mode == "diff":
        return result
    if mode == "fix" and result.fixed:
        try:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(result.fixed_source or "")
        except OSError as exc:
            return FileResult(path, result.findings, error=f"cannot write the fixes ({exc.strerror or exc})")
    return FileResult(path, result.findings, fixed=result.fixed)


Task = tuple[str, tuple[str, ...], str]  # a file's path, the codes to check, the mode


def _jobs(requested: Optional[int]) -> int:
    if requested is not None:
        return max(1, requested)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _run_tasks(tasks: list[tuple[str, tuple[str, ...], str]], jobs: int) -> Iterable[FileResult]:
    """Results in the order of `tasks`; across `jobs` processes for a tree of many files."""
    if jobs <= 1 or len(tasks) < PARALLEL_MIN_FILES:
        return map(_lint_file, tasks)
    import multiprocessing

    # fork: the children start with the rules already imported (a spawned child would import
    # everything again); elsewhere the platform's default.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    jobs = min(jobs, len(tasks))
    results: list[Optional[FileResult]] = [None] * len(tasks)
    with context.Pool(jobs) as pool:
        for chunk in pool.imap_unordered(_lint_chunk, _chunks(tasks, jobs)):
            for at, result in chunk:
                results[at] = result
    return cast(list[FileResult], results)  # every place was filled once


CHUNKS_PER_JOB = 24  # small enough that the last chunks even out the processes' loads


def _chunks(tasks: list[Task], jobs: int) -> list[list[tuple[int, Task]]]:
    """The tasks (with their places) in chunks of about equal bytes, the largest first: a lint's
    cost grows with a file's size, so what is left when one process runs dry is a few small
    chunks, not a run of large files that one process works through while the other waits.
    One chunk is one message each way, not one per file."""
    sizes = []
    for path, _, _ in tasks:
        try:
            sizes.append(os.stat(path).st_size)
        except OSError:
            sizes.append(0)  # the lint says why
    budget = max(1, sum(sizes) // (jobs * CHUNKS_PER_JOB))
    chunks: list[list[tuple[int, Task]]] = []
    weights: list[int] = []
    current: list[tuple[int, Task]] = []
    weight = 0
    for at, task in enumerate(tasks):
        current.append((at, task))
        weight += sizes[at] + 1
        if weight >= budget:
            chunks.append(current)
            weights.append(weight)
            current, weight = [], 0
    if current:
        chunks.append(current)
        weights.append(weight)
    order = sorted(range(len(chunks)), key=lambda i: -weights[i])
    return [chunks[i] for i in order]


def _lint_chunk(chunk: list[tuple[int, Task]]) -> list[tuple[int, FileResult]]:
    return [(at, _lint_file(task)) for at, task in chunk]


def _run_cached(
    tasks: list[tuple[str, tuple[str, ...], str]], jobs: int, cache: Optional[LintCache]
) -> list[FileResult]:
    """`_run_tasks`, less the files whose bytes and codes have findings in `cache` (cache.py);
    the others' findings are stored there for the next run."""
    if cache is None:
        return list(_run_tasks(tasks, jobs))
    done: dict[int, FileResult] = {}
    keys: dict[int, tuple[str, str, str]] = {}
    for at, (path, codes, _) in enumerate(tasks):
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue  # the lint says why
        key = (os.path.abspath(path), content_hash(data), ",".join(codes))
        findings = cache.get(*key)
        if findings is None:
            keys[at] = key
        else:
            done[at] = FileResult(path, findings)
    missed = [at for at in range(len(tasks)) if at not in done]
    for at, result in zip(missed, _run_tasks([tasks[at] for at in missed], jobs)):
        done[at] = result
        if result.error is None and at in keys:
            cache.put(*keys[at], result.findings)
    cache.save()
    return [done[at] for at in range(len(tasks))]


def run_lint_command(
    args: argparse.Namespace,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    stdin: Optional[io.BufferedIOBase] = None,
) -> int:
    def fail(message: str) -> int:
        print(f"atenlens lint: {message}", file=err)
        return EXIT_USAGE

    known = [rule.code for rule in RULES]
    cli = Selection(
        select=_codes(getattr(args, "select", None)),
        extend_select=_codes(getattr(args, "extend_select", None)) or (),
        ignore=_codes(getattr(args, "ignore", None)) or (),
    )
    for code in unknown_selectors((cli.select or ()) + cli.extend_select + cli.ignore, known):
        return fail(f"unknown rule code {code!r} (known: {', '.join(sorted(known))})")
    fix, diff = bool(getattr(args, "fix", False)), bool(getattr(args, "diff", False))
    mode = "diff" if diff else "fix" if fix else "check"
    fmt = getattr(args, "format", "text")
    stdin_name = getattr(args, "stdin_filename", None)
    paths = list(args.paths) or [STDIN if stdin_name else "."]  # as ruff: no path is the current folder
    if STDIN in paths and len(paths) > 1:
        return fail("- (stdin) cannot be combined with other paths")
    missing = [p for p in paths if p != STDIN and not os.path.lexists(p)]
    if missing:
        for p in missing:
            print(f"atenlens lint: {p}: no such file or folder", file=err)
        return EXIT_USAGE
    config_file = getattr(args, "config", None)
    if config_file is not None and not os.path.isfile(config_file):
        return fail(f"--config {config_file}: no such file")
    configs = ConfigCache(known, Path(config_file) if config_file else None, bool(getattr(args, "isolated", False)))
    overrides = {
        key: value
        for key, value in (
            ("force_exclude", getattr(args, "force_exclude", None)),
            ("respect_gitignore", getattr(args, "respect_gitignore", None)),
        )
        if value is not None
    }

    def config_for(path: Path) -> LintConfig:
        config = configs.for_path(path)
        return replace(config, **overrides) if overrides else config

    results: list[FileResult] = []
    try:
        if paths == [STDIN]:
            shown = stdin_name or STDIN
            config = config_for(Path(stdin_name) if stdin_name else Path.cwd())
            codes = tuple(sorted(config.codes(Path(stdin_name) if stdin_name else None, known, cli)))
            data = (stdin or sys.stdin.buffer).read()
            try:
                source = decode(data)
            except UnicodeDecodeError as exc:
                print(f"{shown}: not UTF-8 (byte {exc.start}: {exc.reason}); skipped", file=err)
                return EXIT_CLEAN
            if stdin_name and config.force_exclude and config.excluded_here_or_above(Path(stdin_name)):
                # ruff's --force-exclude on stdin: nothing is linted; --fix gives the text back as it came
                results.append(FileResult(shown, fixed_source=source if mode == "fix" else None))
            elif is_notebook(shown):
                results.append(
                    replace(lint_notebook(source, shown, codes), fixed_source=source if mode == "fix" else None)
                )
            else:
                results.append(lint_text(source, shown, codes, mode))
        else:
            tasks: list[tuple[str, tuple[str, ...], str]] = []
            for root in paths:
                for item in python_files(Path(root), config_for):
                    if isinstance(item, Skipped):
                        if item.reason.startswith("cannot read"):  # ruff's E902: the run fails
                            results.append(FileResult(str(item.path), error=item.reason))
                        else:  # a FIFO, a device: never opened, said, and not a failure
                            print(f"{item.path}: {item.reason}; skipped", file=err)
                        continue
                    codes = tuple(sorted(config_for(item).codes(item, known, cli)))
                    tasks.append((str(item), codes, mode))
            if getattr(args, "show_files", False):  # ruff's --show-files: what would be linted, absolute
                for path in sorted({os.path.abspath(task[0]) for task in tasks}):
                    print(path, file=out)
                return EXIT_CLEAN
            cache = None
            if mode == "check" and not getattr(args, "no_cache", False):
                folder = getattr(args, "cache_dir", None)
                cache = LintCache(Path(folder) if folder else default_cache_dir())
            results.extend(_run_cached(tasks, _jobs(getattr(args, "jobs", None)), cache))
    except ConfigError as exc:
        return fail(str(exc))
    output_file = getattr(args, "output_file", None)
    if output_file is None:
        return _report(results, args, fmt, mode, out, err)
    try:
        with open(output_file, "w", encoding="utf-8") as written:
            return _report(results, args, fmt, mode, written, err)
    except OSError as exc:
        return fail(f"--output-file {output_file}: {exc.strerror or exc}")


def _located(result: FileResult) -> list[Located]:
    """The result's findings with their file; a notebook's placed in their cells (a result from
    the cache has no `notebook`: the file is read again for its cells)."""
    if not is_notebook(result.path) or not result.findings:
        return [Located(result.path, f) for f in result.findings]
    notebook = result.notebook
    if notebook is None:
        source, _ = _read(Path(result.path))
        try:
            notebook = read_notebook(source or "")
        except NotANotebook:
            return [Located(result.path, f) for f in result.findings]
    located = []
    for f in result.findings:
        cell, row = notebook.locate(f.line)
        end_row = f.end_line - (f.line - row)
        located.append(Located(result.path, replace(f, line=row, end_line=end_row), cell))
    return located


def _report(results: list[FileResult], args: argparse.Namespace, fmt: str, mode: str, out: TextIO, err: TextIO) -> int:
    unreadable = 0
    located: list[Located] = []
    for result in results:
        if result.error is not None:
            print(f"{result.path}: {result.error}; skipped", file=err)
            unreadable += 0 if result.undecodable else 1
        located.extend(_located(result))
    fixed = sum(r.fixed for r in results)
    machine = fmt in ("json", "json-lines", "sarif", "github", "gitlab")
    quiet, silent = bool(getattr(args, "quiet", False)), bool(getattr(args, "silent", False))
    if silent:  # ruff's --silent: nothing printed, the exit status says it all
        out = io.StringIO()
    if mode == "diff":
        for result in results:
            out.write(result.diff)
        if not quiet:
            print(f"Would fix {fixed} problem{'s' if fixed != 1 else ''}.", file=err if machine else out)
        if getattr(args, "exit_zero", False):
            return EXIT_CLEAN
        return EXIT_FOUND if fixed or unreadable else EXIT_CLEAN
    report_out = out
    if mode == "fix" and results and results[0].fixed_source is not None:
        out.write(results[0].fixed_source)  # stdin: the fixed text goes to stdout, the report to stderr
        report_out = io.StringIO() if silent else err
    if getattr(args, "statistics", False):
        write_statistics(located, "json" if fmt == "json" else "text", report_out)
    else:
        if fmt in SUMMARIZED:
            WRITERS[fmt](located, report_out, summary=not quiet)  # type: ignore[call-arg]
        else:
            WRITERS[fmt](located, report_out)
    if mode == "fix" and fixed and not quiet and not silent:
        print(
            f"Fixed {fixed} problem{'s' if fixed != 1 else ''} ({len(located)} remaining).",
            file=err if machine else report_out,
        )
    if getattr(args, "exit_zero", False):
        return EXIT_CLEAN
    if mode == "fix" and fixed and getattr(args, "exit_non_zero_on_fix", False):
        return EXIT_FOUND
    return EXIT_FOUND if located or unreadable else EXIT_CLEAN
