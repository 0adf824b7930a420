"""`.atenlens_cache/`: the findings of the files a previous `atenlens lint` run checked, as ruff's
`.ruff_cache/`. A file whose bytes and selected codes are those of its entry is not linted again.

One JSON file per lint build, `lint-<fingerprint>.json`, maps each path to (a hash of its bytes,
the codes that ran, its findings). The fingerprint covers atenlens's version, every source file of
the lint (name, size, modification time: a rule edited in a checkout is a new build) and the
parser's version, so a cache is never read by a lint that could find something else. Entries are
keyed on content, not on modification times: a file rewritten within the same second is still
linted again. A cache that cannot be read is ignored and one that cannot be written is not
written: the run's findings are the same either way. The folder holds a `.gitignore` of `*`
(git skips it in any project) and a `CACHEDIR.TAG` (backup tools skip it), as ruff's does.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

from atenlens.lint.findings import Finding, Fix, TextEdit

CACHE_DIR_NAME = ".atenlens_cache"
CACHE_DIR_ENV = "ATENLENS_CACHE_DIR"
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by atenlens.\n"


def default_cache_dir() -> Path:
    """`$ATENLENS_CACHE_DIR`, else `.atenlens_cache` in the current folder (ruff's rule)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or CACHE_DIR_NAME)


def fingerprint() -> str:
    """What the findings of a text depend on besides the text and the codes: this lint's code and
    the parser's."""
    import tree_sitter
    import tree_sitter_python

    import atenlens
    import atenlens.lint

    parts = [getattr(atenlens, "__version__", "?"), getattr(tree_sitter, "__version__", "?")]
    package = Path(atenlens.lint.__file__).parent
    sources = sorted(package.rglob("*.py")) + [package.parent / "report.py"]
    binding = Path(tree_sitter_python.__file__).parent
    for path in sources + sorted(binding.glob("*.so")) + sorted(binding.glob("*.pyd")):
        try:
            stat = path.stat()
        except OSError:
            continue
        parts.append(f"{path.relative_to(path.parents[1])}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class LintCache:
    """The entries of one cache file: `get` the findings of a path whose hash and codes match,
    `put` new ones, `save` once at the end of a run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.file = folder / f"lint-{fingerprint()}.json"
        self._entries: dict[str, list[Any]] = {}
        self._changed = False
        try:
            loaded = json.loads(self.file.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self._entries = loaded
        except (OSError, ValueError):  # none yet, or damaged: start empty
            pass

    def get(self, path: str, digest: str, codes: str) -> Optional[tuple[Finding, ...]]:
        entry = self._entries.get(path)
        if not isinstance(entry, list) or len(entry) != 3 or entry[0] != digest or entry[1] != codes:
            return None
        try:
            return tuple(_finding(item) for item in entry[2])
        except (TypeError, ValueError, IndexError):  # an entry of another shape: lint the file
            return None

    def put(self, path: str, digest: str, codes: str, findings: tuple[Finding, ...]) -> None:
        self._entries[path] = [digest, codes, [_plain(f) for f in findings]]
        self._changed = True

    def save(self) -> None:
        """Write the entries of the files that still exist (atomically: a concurrent run reads the
        old file or the new one) and remove the files of other lint builds. Nothing happens when the folder is not writable."""
        if not self._changed:
            return
        # Entries of files that are gone are dropped: the file stays the size of the trees linted.
        self._entries = {path: entry for path, entry in self._entries.items() if os.path.isfile(path)}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", _TAG)):
                marker = self.folder / name
                if not marker.exists():
                    marker.write_text(text, encoding="utf-8")
            fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".lint-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._entries, f, separators=(",", ":"))
            os.replace(temporary, self.file)
            for old in self.folder.glob("lint-*.json"):
                if old != self.file:
                    old.unlink(missing_ok=True)
        except OSError:
            pass


def _plain(finding: Finding) -> list[Any]:
    fix = None
    if finding.fix is not None:
        edits = [[e.line, e.column, e.end_line, e.end_column, e.new_text] for e in finding.fix.edits]
        fix = [finding.fix.title, edits]
    return [
        finding.code,
        finding.message,
        finding.line,
        finding.column,
        finding.end_line,
        finding.end_column,
        finding.severity,
        fix,
    ]


def _finding(item: list[Any]) -> Finding:
    code, message, line, column, end_line, end_column, severity, fix = item
    return Finding(
        code,
        message,
        line,
        column,
        end_line,
        end_column,
        None if fix is None else Fix(fix[0], tuple(TextEdit(*edit) for edit in fix[1])),
        severity,
    )
