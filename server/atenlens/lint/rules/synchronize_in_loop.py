"""AL101 synchronize-in-loop: `torch.cuda.synchronize()` inside a loop.

What it does:
    Flags `torch.cuda.synchronize()` (also written `cuda.synchronize()` after `from torch import
    cuda`) and `torch.accelerator.synchronize()` when the call runs once per iteration of a loop
    or comprehension (same notion of "per iteration" as AL100).

Why it matters:
    A device synchronize makes the host wait until every kernel queued on the GPU has finished.
    Once per iteration, it removes the overlap between the host queueing the next step and the
    GPU running the current one. Same code as the engine's synchronize diagnostic.

Example:
    for step in range(steps):
        loss = train_step(batch)
        torch.cuda.synchronize()

Fix:
    Remove it, or synchronize once after the loop (for timing, use CUDA events:
    `start.record()`, `end.record()`, `end.synchronize()`, `start.elapsed_time(end)`).
"""
from __future__ import annotations

from typing import Iterator

from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.registry import Rule
from atenlens.lint.syntax import callee, dotted_name, repeating_loop
from atenlens.report import Code

SYNCHRONIZE_NAMES = frozenset({"torch.cuda.synchronize", "cuda.synchronize", "torch.accelerator.synchronize"})


def check(ctx: LintContext) -> Iterator[Finding]:
    for call in ctx.calls("synchronize"):
        name = dotted_name(callee(call))
        if name in SYNCHRONIZE_NAMES and repeating_loop(call) is not None:
            yield ctx.finding(
                Code.SYNC_API,
                f"`{name}()` inside a loop: the host waits for all GPU work on every iteration",
                call,
            )


RULE = Rule(
    code=Code.SYNC_API,
    name="synchronize-in-loop",
    summary="`torch.cuda.synchronize()` inside a loop",
    calls=frozenset({"synchronize"}),
    check=check,
    doc=__doc__ or "",
)
