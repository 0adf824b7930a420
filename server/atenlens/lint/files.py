"""Which files `atenlens lint PATH...` reads: the `*.py` and `*.ipynb` files below each folder, in sorted order,
less what `.gitignore` files and `[tool.atenlens] exclude` leave out, and never anything but a
regular file.

A file named on the command line is linted whatever its extension and even when a pattern would
exclude it, unless `force-exclude` is on (as in ruff); a folder named on the command line is
walked even when excluded. Below it, a folder or file matched by `exclude` (by default
config.DEFAULT_EXCLUDE: `.git`, `.venv`, `build`, ...) or by a `.gitignore` (the folder's own,
those of the folders above it up to the repository root, and the repository's
`.git/info/exclude`) is not visited. A FIFO, socket or device (also one reached through a
symbolic link, such as a link to /dev/zero) is never opened: reading one could block forever or
never end; it is reported as skipped. A symbolic link to a folder is not followed during the walk.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from atenlens.lint.config import LintConfig


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def not_regular(path: Path) -> Optional[str]:
    """Why `path` must not be read (a FIFO, a device, ...), or None for a regular file. Follows
    symbolic links: what matters is what a read would open."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "not a regular file"
    )
    via = " (through a symbolic link)" if os.path.islink(path) else ""
    return f"{kind}{via}, not a regular file"


class _GitIgnores:
    """The `.gitignore` rules that apply in one folder: those of the folders above it (up to the
    repository root) and its own, deeper files taking precedence, as git does."""

    def __init__(self, specs: tuple[tuple[Path, object], ...] = ()) -> None:
        self.specs = specs

    @staticmethod
    def _read(folder: Path, name: str = ".gitignore") -> Optional[object]:
        path = folder / name
        try:
            if not path.is_file():
                return None
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None
        import pathspec  # only walks that meet a .gitignore pay for the import

        return pathspec.GitIgnoreSpec.from_lines(lines)

    @classmethod
    def above(cls, folder: Path) -> "_GitIgnores":
        """The rules of the folders above `folder` (not its own), from the repository root down."""
        chain: list[Path] = []
        for parent in Path(os.path.abspath(folder)).parents:
            chain.append(parent)
            if (parent / ".git").exists():
                break
        else:
            chain = []  # not in a repository: no .gitignore above applies
        specs = []
        for parent in reversed(chain):
            if (parent / ".git").is_dir():
                spec = cls._read(parent / ".git" / "info", "exclude")
                if spec is not None:
                    specs.append((parent, spec))
            spec = cls._read(parent)
            if spec is not None:
                specs.append((parent, spec))
        return cls(tuple(specs))

    def entering(self, folder: Path) -> "_GitIgnores":
        spec = self._read(folder)
        if spec is None:
            return self
        return _GitIgnores(self.specs + ((Path(os.path.abspath(folder)), spec),))

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict: Optional[bool] = None
        full = os.path.abspath(path)
        for base, spec in self.specs:
            rel = os.path.relpath(full, base).replace(os.sep, "/")
            if rel.startswith(".."):
                continue
            result = spec.check_file(rel + "/" if is_dir else rel)  # type: ignore[attr-defined]
            if result.include is not None:
                verdict = result.include
        return bool(verdict)


def python_files(root: Path, config_for: Callable[[Path], LintConfig]) -> Iterator[Union[Path, Skipped]]:
    """`root` itself when it is not a folder; else every `*.py` below it (sorted), less the
    excluded and ignored ones, and a `Skipped` for each `*.py` that is not a regular file."""
    config = config_for(root)
    if config.force_exclude and config.excluded_here_or_above(root):
        return  # ruff's --force-exclude: excluded even when named (pre-commit names every file)
    if not root.is_dir():
        reason = not_regular(root)
        yield root if reason is None else Skipped(root, reason)
        return
    ignores = _GitIgnores.above(root) if config.respect_gitignore else _GitIgnores()
    yield from _walk(root, config_for, ignores)


def _walk(
    folder: Path, config_for: Callable[[Path], LintConfig], ignores: _GitIgnores
) -> Iterator[Union[Path, Skipped]]:
    config = config_for(folder)
    if config.respect_gitignore:
        ignores = ignores.entering(folder)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield Skipped(folder, f"cannot read ({exc.strerror or exc})")
        return
    files: list[os.DirEntry[str]] = []
    dirs: list[os.DirEntry[str]] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        (dirs if is_dir else files).append(entry)
    for entry in files:
        if not entry.name.endswith((".py", ".ipynb")):  # notebooks too, as ruff since 0.6
            continue
        path = Path(entry.path)
        if config.excluded(path) or (config.respect_gitignore and ignores.ignored(path, False)):
            continue
        reason = not_regular(path)
        yield path if reason is None else Skipped(path, reason)
    for entry in dirs:
        path = Path(entry.path)
        if config.excluded(path) or (config.respect_gitignore and ignores.ignored(path, True)):
            continue
        yield from _walk(path, config_for, ignores)
