"""The static lint: error-tolerant parse, one rule per module, no torch, no execution.

lint_source(source, path=None, select=None, ignore=None) -> list[Finding]
RULES: every registered rule (code, name, summary, docstring)
"""

from atenlens.lint.engine import lint_source, select_rules
from atenlens.lint.findings import Finding, Fix, TextEdit
from atenlens.lint.registry import Rule
from atenlens.lint.rules import RULES

__all__ = ["Finding", "Fix", "RULES", "Rule", "TextEdit", "lint_source", "select_rules"]
