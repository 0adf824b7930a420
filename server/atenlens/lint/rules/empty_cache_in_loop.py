"""AL300 empty-cache-in-loop: `torch.cuda.empty_cache()` inside a loop.

What it does:
    Flags `torch.cuda.empty_cache()` (or `cuda.empty_cache()`, or `empty_cache()` after `from
    torch.cuda import empty_cache`) when the call runs once per
    iteration of a loop or comprehension (same notion of "per iteration" as AL100). Under
    `if step % N == 0:` and the like, in an epoch loop, a loop over a few literal values or a
    layer-by-layer pass (a quantizer freeing each layer's memory) it is information, with a
    message that says how often (see AL100). As with AL101, the call is written on purpose, so it
    is a warning only where the loop shows that it runs once per training or inference step (it
    walks batches, counts steps, takes a training step, walks input files or images and runs a
    model on each, runs a model on each chunk of an input or a whole generation on each iteration
    (`response = model.generate(...)`), or is in `forward` or a `*_step` method),
    and information elsewhere or under an option that asks for it (`if self.cpu_cache:`,
    `if args.empty_cache_after_prefix:`).

Why it matters:
    `empty_cache()` returns the caching allocator's free blocks to the driver. The next
    iteration then has to get them back with `cudaMalloc`, which is slow and synchronizes the
    device; it does not give your own code more memory. Lint only: the engine does not report it.

Example:
    for batch in loader:
        loss = step(batch)
        torch.cuda.empty_cache()

Fix:
    Remove it. If memory is fragmented, call it once (outside the loop), or set
    `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
"""

from __future__ import annotations

from typing import Iterator

from atenlens.codes import Code
from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.frequency import frequency, on_purpose_reason
from atenlens.lint.registry import Rule
from atenlens.lint.syntax import callee, dotted_name
from atenlens.lint.triggers import LOOP
from atenlens.lint.waits import torch_cuda_imports

EMPTY_CACHE_NAMES = frozenset({"torch.cuda.empty_cache", "cuda.empty_cache"})


def check(ctx: LintContext) -> Iterator[Finding]:
    bare = "empty_cache" in torch_cuda_imports(ctx)  # `from torch.cuda import empty_cache`
    for call in ctx.calls("empty_cache"):
        name = dotted_name(callee(call))
        if name not in EMPTY_CACHE_NAMES and not (bare and name == "empty_cache"):
            continue
        how = frequency(call)
        if how.loop is None:
            continue
        often = "" if how.every_iteration else f"; it runs {how.how_often}"
        severity = "warning" if how.every_iteration else "information"
        because = on_purpose_reason(call, how.loop) if how.every_iteration else None
        if because is not None:
            said, is_option = because
            often, severity = (f"; it runs {said}" if is_option else f"; {said}"), "information"
        yield ctx.finding(
            Code.EMPTY_CACHE_IN_LOOP,
            f"`{name}()` inside a loop: frees cached blocks that the next iteration must allocate again{often}",
            call,
            severity=severity,
        )


RULE = Rule(
    code=Code.EMPTY_CACHE_IN_LOOP,
    name="empty-cache-in-loop",
    summary="`torch.cuda.empty_cache()` inside a loop",
    calls=frozenset({"empty_cache"}),
    check=check,
    doc=__doc__ or "",
    triggers=((b"empty_cache",), LOOP),
    definition_triggers=((b"empty_cache",), LOOP),
)
