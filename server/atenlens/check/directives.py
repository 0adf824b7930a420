"""Budgets where the code is: a `# atenlens-budget:` comment next to a function's example call.

    # atenlens-budget: syncs = 0, peak = "70 GiB", gpu = "h100"
    # atenlens: train_step(*setup())
    def train_step(model, opt, x, y): ...

The comment holds the keys of a `[tool.atenlens.check.functions]` entry as the inside of a TOML inline
table. It may be any line of the comment block directly above the `def` (with `# atenlens:` and
`# atenlens-ranks:`). A pyproject.toml entry for the same function wins over the comment.
"""

from __future__ import annotations

import re
import tokenize
from pathlib import Path
from typing import Iterable, Iterator

from atenlens.lint.config import ConfigError

BUDGET_DIRECTIVE = re.compile(r"^\s*#\s*atenlens-budget:(?P<table>.*)$")
_SKIP = {".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", ".tox"}


def budget_comments(path: Path) -> list[tuple[str, int, dict]]:
    """(qualname, comment line, entry) for each function of `path` with a `# atenlens-budget:`
    comment; ConfigError naming the file and line for one that does not parse."""
    import tomllib

    from atenlens.traceable import find_functions

    try:
        with tokenize.open(path) as f:
            source = f.read()
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    if "atenlens-budget" not in source:
        return []
    try:
        infos = find_functions(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    found = []
    for info in infos:
        index = info.first_line - 2  # the comment block directly above the def
        while 0 <= index < len(lines) and lines[index].lstrip().startswith("#"):
            match = BUDGET_DIRECTIVE.match(lines[index])
            if match:
                try:
                    entry = tomllib.loads(f"budget = {{{match['table'].strip()}}}")["budget"]
                except tomllib.TOMLDecodeError as error:
                    raise ConfigError(
                        f"{path}:{index + 1}: the `# atenlens-budget:` comment is not `key = value, ...` ({error})"
                    ) from None
                found.append((info.qualname, index + 1, entry))
                break
            index -= 1
    return found


def python_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and the `*.py` files below the folders named (sorted; tool folders skipped)."""
    for path in paths:
        if path.is_file():
            yield path
            continue
        for child in sorted(path.rglob("*.py")):
            if not _SKIP.intersection(child.relative_to(path).parts[:-1]) and child.is_file():
                yield child
