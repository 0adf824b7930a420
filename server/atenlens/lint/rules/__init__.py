"""Every lint rule, one module each. Adding a rule: write the module (docstring in the sections
What it does / Why it matters / Example / Fix, a `RULE`), list it here, regenerate
docs/rules.md from the docstrings (`python -m atenlens.lint.docs > docs/rules.md`), add a fixture
under tests/lint/fixtures/."""

from __future__ import annotations

from atenlens.lint.registry import Rule
from atenlens.lint.rules import (
    create_then_move,
    empty_cache_in_loop,
    pageable_copy,
    sync_in_loop,
    synchronize_in_loop,
    unsynced_d2h_read,
    unsynced_timing,
)

RULES: tuple[Rule, ...] = (
    sync_in_loop.RULE,
    synchronize_in_loop.RULE,
    pageable_copy.RULE,
    unsynced_d2h_read.RULE,
    empty_cache_in_loop.RULE,
    unsynced_timing.RULE,
    create_then_move.RULE,
)
