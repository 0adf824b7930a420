"""`[tool.atenlens]` in pyproject.toml: which rules run on which files, as in ruff.

    [tool.atenlens]
    select = ["AL1", "AL200"]          # codes or prefixes; default: every rule
    extend-select = ["AL302"]          # added to `select` (or to the default)
    ignore = ["AL101"]                 # removed
    extend-exclude = ["generated", "legacy/*.py"]   # added to the default `exclude`
    per-file-ignores = { "tests/*" = ["AL100"], "!src/*" = ["AL3"] }
    respect-gitignore = true
    force-exclude = false              # true: `exclude` applies to files named on the command line

The rule keys may also sit in a `[tool.atenlens.lint]` table (ruff's `[tool.ruff.lint]`);
`[tool.atenlens.check]` belongs to `atenlens check` and is not read here. `exclude` replaces the
default list (DEFAULT_EXCLUDE, ruff's, plus caches); `extend-exclude` adds to it, as in ruff.

The file that applies to a path is the nearest pyproject.toml above it that has a
`[tool.atenlens]` table (ruff's rule for `[tool.ruff]`); a pyproject.toml without one is passed
over. Patterns (`exclude`, `per-file-ignores`) are globs relative to that file's folder, matched
against the path from there and against the file's (or folder's) own name; `*` also crosses `/`,
and a leading `!` in a per-file-ignores key applies the codes to files that do NOT match.

Select and ignore resolve per code as in ruff: of the selectors that match a code, the most
specific (longest) decides, and `ignore` wins a tie. Command-line `--select` (or the editor's
`lint.select`) replaces the file's `select`; `--extend-select` and `--ignore` add to it.

A bad file (TOML syntax, an unknown key or code, a wrong type) is a `ConfigError` whose message
names the file and the key; nothing is linted with half a configuration.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Optional, Sequence

PYPROJECT = "pyproject.toml"
RULE_KEYS = ("select", "extend-select", "ignore", "per-file-ignores")
KEYS = (
    "select",
    "extend-select",
    "ignore",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "respect-gitignore",
    "force-exclude",
)
OTHER_TABLES = ("lint", "check")  # [tool.atenlens.lint]: the rule keys; .check: `atenlens check`'s

# Ruff's default `exclude` (docs.astral.sh/ruff/settings/#exclude), plus the caches of Python and
# of this lint: folders no one wants linted when they point the linter at a project root.
DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pyenv",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "__pypackages__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
    "__pycache__",
    ".atenlens_cache",
)


class ConfigError(ValueError):
    """A `[tool.atenlens]` table that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Selection:
    """One layer of rule selection (a config file, or the command line on top of it)."""

    select: Optional[tuple[str, ...]] = None  # None: keep what the layer below chose
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileIgnore:
    pattern: str
    negated: bool
    codes: tuple[str, ...]


@dataclass(frozen=True)
class LintConfig:
    path: Optional[Path]  # the pyproject.toml; None: no file, the defaults
    root: Path  # the folder patterns are relative to
    selection: Selection = field(default_factory=Selection)
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE  # `exclude` (or the default) + `extend-exclude`
    per_file_ignores: tuple[FileIgnore, ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False

    def relative(self, path: Path) -> Optional[str]:
        """`path` from the config's folder, in `/` form; None when it lies outside."""
        try:
            rel = os.path.relpath(os.path.abspath(path), self.root)
        except ValueError:  # another drive (Windows)
            return None
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            return None
        return PurePosixPath(Path(rel)).as_posix()

    def excluded(self, path: Path) -> bool:
        """Does an `exclude` pattern match `path` (a file or a folder)?"""
        return bool(self.exclude) and _matches_any(self.exclude, self.relative(path), path.name)

    def excluded_here_or_above(self, path: Path) -> bool:
        """Is `path`, or a folder above it up to the config's folder, excluded? (What
        `force-exclude` asks of a file named on the command line, and the editor of a document.)"""
        if not self.exclude:
            return False
        current = Path(os.path.abspath(path))
        root = Path(os.path.abspath(self.root))
        if self.excluded(current):
            return True
        while root in current.parent.parents:
            current = current.parent
            if self.excluded(current):
                return True
        return False

    def codes(self, path: Optional[Path], known: Sequence[str], cli: Optional[Selection] = None) -> frozenset[str]:
        """The codes that run on `path`: this file's selection, then `cli` on top, then the
        per-file ignores that match `path`."""
        chosen = _resolved((self.selection,) + ((cli,) if cli is not None else ()), tuple(known))
        if path is not None and self.per_file_ignores:
            rel, name = self.relative(path), path.name
            for entry in self.per_file_ignores:
                hit = _matches_any((entry.pattern,), rel, name)
                if hit != entry.negated:
                    chosen = frozenset(c for c in chosen if not _matching_selector(c, entry.codes))
        return chosen


def default_config(root: Path) -> LintConfig:
    return LintConfig(path=None, root=root)


def _matches_any(patterns: tuple[str, ...], rel: Optional[str], name: str) -> bool:
    """Does one of the glob `patterns` match the path's name, or its path `rel` from the
    config's folder? (`fnmatchcase` for each pattern, asked of one regular expression per
    list: a whole-tree run asks this of every file and folder, with ruff's twenty defaults.)"""
    by_name, by_path = _globs(patterns)
    return by_name.match(name) is not None or (rel is not None and by_path.match(rel) is not None)


@lru_cache(maxsize=256)
def _globs(patterns: tuple[str, ...]) -> tuple["re.Pattern[str]", "re.Pattern[str]"]:
    """The patterns as `fnmatch.translate` writes them, as one alternation for names and one for
    paths (a path's pattern without its leading `./`); a trailing `/` does not count."""
    trimmed = [pattern.rstrip("/") or pattern for pattern in patterns]
    by_name = "|".join(fnmatch.translate(pattern) for pattern in trimmed) or "(?!)"
    by_path = "|".join(fnmatch.translate(pattern.removeprefix("./")) for pattern in trimmed) or "(?!)"
    return re.compile(by_name), re.compile(by_path)


def _matching_selector(code: str, selectors: Iterable[str]) -> Optional[str]:
    """The longest selector in `selectors` that `code` starts with."""
    best: Optional[str] = None
    for selector in selectors:
        if code.startswith(selector) and (best is None or len(selector) > len(best)):
            best = selector
    return best


@lru_cache(maxsize=64)
def _resolved(layers: tuple[Selection, ...], known: tuple[str, ...]) -> frozenset[str]:
    """`resolve`, remembered: a whole-tree run asks it for every file, with the same few layers."""
    return resolve(layers, known)


def resolve(layers: Sequence[Selection], known: Sequence[str]) -> frozenset[str]:
    """Apply the layers in order, ruff's way: a layer with `select` starts afresh from it (plus
    its extend-select); one without keeps the codes chosen so far and adds its extend-select.
    Within a layer the most specific matching selector decides; `ignore` wins a tie."""
    chosen = frozenset(known)
    for layer in layers:
        base = frozenset() if layer.select is not None else chosen
        selectors = tuple(layer.select or ()) + tuple(layer.extend_select)
        next_chosen = set()
        for code in known:
            picked = _matching_selector(code, selectors)
            dropped = _matching_selector(code, layer.ignore)
            if dropped is not None and (picked is None or len(dropped) >= len(picked)):
                continue
            if picked is not None or code in base:
                next_chosen.add(code)
        chosen = frozenset(next_chosen)
    return chosen


def unknown_selectors(selectors: Iterable[str], known: Sequence[str]) -> list[str]:
    return [s for s in selectors if not any(code.startswith(s) for code in known)]


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml at or above `start` (a file or folder) with `[tool.atenlens]`."""
    folder = Path(os.path.abspath(start))
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / PYPROJECT
        if path.is_file() and _has_table(path):
            return path
    return None


def _has_table(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    # Cheap test first: most pyproject.toml files say nothing about atenlens.
    return b"atenlens" in data and "atenlens" in _tool_tables(path, data)


def _tool_tables(path: Path, data: bytes) -> dict[str, Any]:
    import tomllib  # only a pyproject.toml that mentions atenlens is parsed: start-up skips it

    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    tool = document.get("tool", {})
    return tool if isinstance(tool, dict) else {}


def load_config(pyproject: Path, known: Sequence[str]) -> LintConfig:
    """Read `[tool.atenlens]` of `pyproject`; `known` are the rule codes (to reject unknown ones)."""
    try:
        data = pyproject.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{pyproject}: cannot read ({exc.strerror or exc})") from None
    table = _tool_tables(pyproject, data).get("atenlens", {})
    where = f"{pyproject}: [tool.atenlens]"
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: `tool.atenlens` must be a table")
    unknown = sorted(set(table) - set(KEYS) - set(OTHER_TABLES))
    if unknown:
        raise ConfigError(f"{where} unknown key {unknown[0]!r} (known: {', '.join(KEYS + ('lint',))})")
    lint = table.get("lint", {})
    if not isinstance(lint, dict):
        raise ConfigError(f"{pyproject}: `tool.atenlens.lint` must be a table")
    unknown = sorted(set(lint) - set(RULE_KEYS))
    if unknown:
        raise ConfigError(f"{where}.lint unknown key {unknown[0]!r} (known: {', '.join(RULE_KEYS)})")
    twice = sorted(set(lint) & set(table))
    if twice:
        raise ConfigError(f"{where} {twice[0]} is given both here and in [tool.atenlens.lint]")
    table = {**{k: v for k, v in table.items() if k not in OTHER_TABLES}, **lint}

    def codes(key: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} {key} must be a list of rule codes, got {_shown(value)}")
        result = tuple(v.strip().upper() for v in value if v.strip())
        bad = unknown_selectors(result, known)
        if bad:
            raise ConfigError(f"{where} {key}: unknown rule code {bad[0]!r} (known: {', '.join(sorted(known))})")
        return result

    def patterns(key: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} {key} must be a list of glob patterns, got {_shown(value)}")
        return tuple(value)

    select = codes("select", table["select"]) if "select" in table else None
    extend = codes("extend-select", table["extend-select"]) if "extend-select" in table else ()
    ignore = codes("ignore", table["ignore"]) if "ignore" in table else ()
    exclude = patterns("exclude", table["exclude"]) if "exclude" in table else DEFAULT_EXCLUDE
    exclude += patterns("extend-exclude", table["extend-exclude"]) if "extend-exclude" in table else ()
    per_file: list[FileIgnore] = []
    raw = table.get("per-file-ignores", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} per-file-ignores must be a table of pattern = [codes], got {_shown(raw)}")
    for pattern, value in raw.items():
        entry_codes = codes(f"per-file-ignores.{pattern!r}", value)
        negated = pattern.startswith("!")
        per_file.append(FileIgnore(pattern[1:] if negated else pattern, negated, entry_codes))
    gitignore = table.get("respect-gitignore", True)
    if not isinstance(gitignore, bool):
        raise ConfigError(f"{where} respect-gitignore must be true or false, got {_shown(gitignore)}")
    force = table.get("force-exclude", False)
    if not isinstance(force, bool):
        raise ConfigError(f"{where} force-exclude must be true or false, got {_shown(force)}")
    return LintConfig(
        path=pyproject,
        root=pyproject.parent,
        selection=Selection(select, extend, ignore),
        exclude=exclude,
        per_file_ignores=tuple(per_file),
        respect_gitignore=gitignore,
        force_exclude=force,
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ConfigCache:
    """Config files found and read, keyed by folder and re-read when a file changes (the
    language server keeps one for the life of the process; the CLI one per run)."""

    def __init__(self, known: Sequence[str], config_file: Optional[Path] = None, isolated: bool = False) -> None:
        """`config_file` (`--config`): that file applies to every path, found or not; `isolated`
        (`--isolated`): no file does, every path gets the defaults."""
        self.known = tuple(known)
        self.config_file = Path(os.path.abspath(config_file)) if config_file is not None else None
        self.isolated = isolated
        self._nearest: dict[Path, Optional[Path]] = {}
        self._loaded: dict[Path, tuple[tuple[int, int], LintConfig]] = {}

    def for_path(self, path: Path, check_changes: bool = False) -> LintConfig:
        """The config that applies to `path`; raises ConfigError for a bad file. With
        `check_changes` the folder walk and the file are looked at again (an editor's
        pyproject.toml may be edited while the server runs)."""
        folder = Path(os.path.abspath(path))
        if not folder.is_dir():
            folder = folder.parent
        if self.isolated:
            return default_config(Path.cwd())
        if self.config_file is not None:
            pyproject: Optional[Path] = self.config_file
        else:
            if check_changes or folder not in self._nearest:
                self._nearest[folder] = find_pyproject(folder)
            pyproject = self._nearest[folder]
        if pyproject is None:
            return default_config(folder)
        cached = self._loaded.get(pyproject)
        if cached is None or check_changes:  # else the file is not looked at again (a stat per file)
            stamp = _stamp(pyproject)
            if cached is None or cached[0] != stamp:
                cached = (stamp, load_config(pyproject, self.known))
                self._loaded[pyproject] = cached
        return cached[1]


def _stamp(path: Path) -> tuple[int, int]:
    """What tells a changed file: its modification time and size ((0, 0) if it cannot be read)."""
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)
