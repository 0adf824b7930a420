"""Which lint rules run on an open document: the `[tool.atenlens]` table of the pyproject.toml
that applies to its file (the CLI's rule, docs/lint.md), with the editor's `lint.select` /
`lint.ignore` on top, as the command line's `--select` / `--ignore` are. Protocol-free.

A document whose file an `exclude` pattern matches (the file or a folder above it, up to the
pyproject.toml's folder) gets no lint findings. A bad pyproject.toml is reported once per
version of the file and the document is linted with the editor's settings alone, as ruff's
server does: the user sees the problem and keeps a working editor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from atenlens.lint.config import ConfigCache, ConfigError, LintConfig, Selection, default_config
from atenlens.lsp.settings import LintSettings


class WorkspaceLintConfig:
    def __init__(self, known: tuple[str, ...]) -> None:
        self.known = known
        self._cache = ConfigCache(known)
        self._reported: set[str] = set()

    def codes(self, path: Optional[str], settings: LintSettings) -> tuple[list[str], Optional[str]]:
        """(the codes to run on the document at `path`, a message to show the user or None).
        `path` is the document's file; None for a document that is not a file."""
        editor = Selection(select=tuple(settings.select) or None, ignore=tuple(settings.ignore))
        problem = None
        config: LintConfig
        if path is None:
            config = default_config(Path.cwd())
        else:
            try:
                config = self._cache.for_path(Path(path), check_changes=True)
            except ConfigError as exc:
                message = f"atenlens: {exc}; linting with the editor's settings only"
                if message not in self._reported:
                    self._reported.add(message)
                    problem = message
                config = default_config(Path(path).parent)
            else:
                if config.excluded_here_or_above(Path(path)):
                    return [], None
        return sorted(config.codes(Path(path) if path else None, self.known, editor)), problem
