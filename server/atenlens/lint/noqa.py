"""`# noqa` and `# noqa: AL100, AL201` suppressions on the line a finding starts on, as in ruff;
`# atenlens: noqa` (or `# atenlens: noqa: AL100`) on a line of its own exempts the whole file,
as ruff's `# ruff: noqa`."""

from __future__ import annotations

import re
from typing import Optional

# The shapes ruff accepts: bare, or a colon and codes split by commas or spaces, in any case.
_NOQA = re.compile(rb"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.I)
NOQA = _NOQA  # the editor's "Disable for this line" adds a code to what this matches
_CODE = re.compile(rb"[A-Za-z]+[0-9]+")

ALL = "*"
_FILE = re.compile(
    rb"^[ \t]*#\s*atenlens\s*:\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?[ \t]*\r?$",
    re.I | re.M,
)


def file_exemption(data: bytes) -> Optional[frozenset[str]]:
    """The codes a file-level `# atenlens: noqa[: CODES]` comment exempts ({"*"}: all), or None."""
    if b"noqa" not in data or b"atenlens" not in data.lower():
        return None
    found: set[str] = set()
    for match in _FILE.finditer(data):
        codes = match.group("codes")
        if codes is None:
            return frozenset({ALL})
        found.update(c.decode("ascii").upper() for c in _CODE.findall(codes))
    return frozenset(found) if found else None


def suppressed_codes(line: bytes) -> Optional[frozenset[str]]:
    """None when the line has no noqa comment; {"*"} for a bare `# noqa`; else the codes."""
    if b"noqa" not in line.lower():
        return None
    match = _NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    if codes is None:
        return frozenset({ALL})
    return frozenset(c.decode("ascii").upper() for c in _CODE.findall(codes))


def is_suppressed(code: str, codes: Optional[frozenset[str]]) -> bool:
    return codes is not None and (ALL in codes or code.upper() in codes)
