"""The rule type. Each rule module in `atenlens.lint.rules` defines one `RULE`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from atenlens.lint.findings import Finding

if TYPE_CHECKING:
    from atenlens.lint.context import LintContext


@dataclass(frozen=True)
class Rule:
    code: str                      # atenlens.report.Code, e.g. "AL100"
    name: str                      # kebab-case, e.g. "sync-in-loop"
    summary: str                   # one line
    calls: frozenset[str]          # callee names (last dotted part) the rule looks at
    check: Callable[["LintContext"], Iterable[Finding]]
    doc: str                       # the module docstring: What it does / Why it matters / Example / Fix
    fixable: bool = False          # offers a quick fix (in some cases): docs/rules.md's "Quick fix" column
