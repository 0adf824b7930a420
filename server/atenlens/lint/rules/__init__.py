"""Every lint rule, one module each. Adding a rule: write the module (docstring in the sections
What it does / Why it matters / Example / Fix, a `RULE`), list it here, document it in
docs/rules.md, add a fixture under tests/lint/fixtures/."""
from __future__ import annotations

from atenlens.lint.registry import Rule
from atenlens.lint.rules import (
    empty_cache_in_loop,
    sync_in_loop,
    synchronize_in_loop,
)

RULES: tuple[Rule, ...] = (
    sync_in_loop.RULE,
    synchronize_in_loop.RULE,
    empty_cache_in_loop.RULE,
)
