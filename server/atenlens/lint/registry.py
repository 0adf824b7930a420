"""The rule type. Each rule module in `atenlens.lint.rules` defines one `RULE`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from atenlens.lint.findings import Finding
from atenlens.lint.triggers import TriggerGroups

if TYPE_CHECKING:
    from atenlens.lint.context import LintContext


@dataclass(frozen=True)
class Rule:
    code: str  # atenlens.report.Code, e.g. "AL100"
    name: str  # kebab-case, e.g. "sync-in-loop"
    summary: str  # one line
    calls: frozenset[str]  # callee names (last dotted part) the rule looks at
    check: Callable[["LintContext"], Iterable[Finding]]
    doc: str  # the module docstring: What it does / Why it matters / Example / Fix
    fixable: bool = False  # offers a quick fix (in some cases): docs/rules.md's "Quick fix" column
    # Byte patterns without which the rule cannot fire (triggers.py): every group must match
    # somewhere in the file. No groups: the rule runs on every file.
    triggers: TriggerGroups = ()
    # The same for one top-level definition, for a rule whose findings in a definition depend
    # only on it, the module-level code and byte-level facts of the file; None: the rule needs
    # the whole file parsed (it follows attributes or helper functions across definitions).
    definition_triggers: Optional[TriggerGroups] = None
