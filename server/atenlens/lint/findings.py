"""What a lint rule reports. Torch-free and protocol-free: the CLI prints these, the language
server converts them to LSP diagnostics (columns here count Python str characters; the server
converts them to the negotiated position encoding)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class TextEdit:
    line: int  # 1-based
    column: int  # 0-based, in str characters
    end_line: int
    end_column: int
    new_text: str


@dataclass(frozen=True)
class Fix:
    title: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True)
class Finding:
    code: str  # e.g. "AL100" (atenlens.report.Code)
    message: str
    line: int  # 1-based
    column: int  # 0-based, in str characters
    end_line: int
    end_column: int
    fix: Optional[Fix] = None
    severity: str = "warning"
