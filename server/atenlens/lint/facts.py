"""The module-wide facts: what a rule knows about one definition from the text of the others.

Every rule looks at one place of the file and what its own function binds, except for these
facts about the whole file. Incremental linting (lint/incremental.py) re-lints only the
definition an edit lies in and reuses the other definitions' findings; that is correct only
because a definition's findings depend on its own text, the module-level code and these facts.
So a new question a rule asks about the whole file belongs here, or incremental linting would
reuse findings that the edit changed (tests/lint/test_lint_incremental.py compares the two).

The one other way across definitions, `LintContext.attribute_assignments` (the values stored in
`self.loader` anywhere in the file), is checked per edit by the dotted names asked of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Optional, Sequence

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.provenance import (
    collated_lists,
    cpu_only_file,
    device_attributes,
    framework_moves_batches,
    host_imported_functions,
    host_loss_functions,
    module_may_page,
    module_mentions_device,
    pins_within,
    seeding_functions,
    torch_aliases,
)
from atenlens.lint.waits import callers_within, close_waiting_functions, synchronize_aliases, waits_within


@dataclass(frozen=True)
class Fact:
    name: str
    compute: Callable[[LintContext], Hashable]  # on the whole file (memoized on the context)


# Facts cheap to compute on the whole file (a byte search, a few calls).
FACTS: tuple[Fact, ...] = (
    Fact("mentions-device", module_mentions_device),  # the words `cuda` / `device`
    Fact("cpu-only", cpu_only_file),  # `device = "cpu"` and no `cuda` anywhere
    Fact("framework-moves-batches", framework_moves_batches),  # `accelerator.prepare(loader)`
    Fact("synchronize-aliases", synchronize_aliases),  # `sync = torch.cuda.synchronize`
    Fact("may-page", module_may_page),  # a DataLoader that may not pin
    Fact("torch-aliases", torch_aliases),  # `import torch as th`
    Fact("device-attributes", device_attributes),  # `self.x = torch.ones(1, device=d)` in any method
    Fact("host-loss-functions", host_loss_functions),  # `def accuracy(...): return [float(...) ...]`
    Fact("host-imported-functions", host_imported_functions),  # `from sklearn.metrics import log_loss`
    Fact("seeding-functions", seeding_functions),  # `def _init_env(rank): torch.manual_seed(rank)`
    Fact("collated-lists", collated_lists),  # `return {"flags": flags}` of a list in `collate_fn`
)
# Facts summed up from each top-level statement's share, which is kept with the statement's text
# from one lint to the next: `pins-host-memory` (a pinned DataLoader or buffer: any statement's)
# and `waiting-functions` (`def sync_all(): ...synchronize()`, and the functions calling those).
PER_STATEMENT_FACTS = ("pins-host-memory", "waiting-functions")
# Facts that are sets of function names, read by a rule only at a call of one of them
# (`sync_all()` waits): when such a fact changes, only the definitions that write a name that
# came or went can find something else (lint/incremental.py lints those again).
NAME_SET_FACTS = frozenset({"waiting-functions", "host-loss-functions", "host-imported-functions", "seeding-functions"})


@dataclass
class StatementFacts:
    """One top-level statement's share of the per-statement facts."""

    pins: bool
    waits: frozenset[Optional[str]]  # functions in which a wait is written
    callers: dict[frozenset[str], frozenset[Optional[str]]] = field(default_factory=dict)


# The text of a statement (as parsed) and the file's synchronize aliases -> its share.
FactCache = dict[tuple[bytes, frozenset[str]], StatementFacts]


def module_facts(
    ctx: LintContext, statements: Sequence[Node], cache: FactCache
) -> tuple[dict[str, Hashable], FactCache]:
    """Every fact's value for the whole file by name (FACTS and PER_STATEMENT_FACTS), remembered on
    `ctx` for the rules, and the shares of `statements` (the module's children) for the next
    version. Call before `ctx.narrow`."""
    values = [fact.compute(ctx) for fact in FACTS]
    aliases = synchronize_aliases(ctx)
    data = ctx.source.data
    shares: FactCache = {}
    parts: list[tuple[Node, StatementFacts]] = []
    for node in statements:
        key = (data[node.start_byte : node.end_byte], aliases)
        share = shares.get(key) or cache.get(key)
        if share is None:
            share = StatementFacts(
                pins_within(ctx, node.start_byte, node.end_byte), waits_within(ctx, node.start_byte, node.end_byte)
            )
        shares[key] = share
        parts.append((node, share))

    def callers(names: frozenset[str]) -> frozenset[Optional[str]]:
        found: set[Optional[str]] = set()
        for node, share in parts:
            if names not in share.callers:
                share.callers[names] = callers_within(ctx, names, node.start_byte, node.end_byte)
            found |= share.callers[names]
        return frozenset(found)

    pins = any(share.pins for _, share in parts)
    waiting = close_waiting_functions(frozenset().union(*(share.waits for _, share in parts)), callers)
    ctx.memo["pins-host-memory"] = pins
    ctx.memo["waiting-functions"] = waiting
    named: dict[str, Hashable] = {fact.name: value for fact, value in zip(FACTS, values)}
    named["pins-host-memory"] = pins
    named["waiting-functions"] = waiting
    return named, shares
