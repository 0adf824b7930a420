"""Which functions get a code lens, and what it says. Protocol-free: the server turns `Lens` into
`types.CodeLens`.

A lens above every method is noise (`__init__`, `__len__`, `__getitem__`: 14 lenses on a 137-line
training script), so by default (`lenses.functions = "steps"`) only functions worth tracing get one:
those that can be traced as they are (no required parameters), those with a `# atenlens:` directive,
and those that look like a training step (`forward`, a name ending in `step`, a body that calls
`.backward()` or `.step()`). `"all"` gives every function and method one, `"none"` none. A function
that was traced keeps its summary lens whatever the choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from atenlens.lsp.trace_log import running_title
from atenlens.traceable import FunctionInfo

CMD_TRACE = "atenlens.trace"
CMD_INSERT_DIRECTIVE = "atenlens.insertDirective"
CMD_CANCEL_TRACE = "atenlens.cancelTrace"


@dataclass(frozen=True)
class Lens:
    info: FunctionInfo
    title: str
    command: str  # "" for a lens that only shows text (a trace's summary)
    tooltip: Optional[str] = None


def looks_like_step(info: FunctionInfo) -> bool:
    return info.name == "forward" or info.name.endswith("step") or info.calls_step


def wants_lens(info: FunctionInfo, functions: str) -> bool:
    """Whether `info` gets a trace lens under the `lenses.functions` choice."""
    if functions == "all":
        return True
    if functions == "none":
        return False
    return not info.needs_args or info.directive is not None or looks_like_step(info)


def trace_lens(info: FunctionInfo) -> Lens:
    """ "Trace this step" only where the function can be traced: not before it has an example call, nor
    while that call still reads names the module does not define (its placeholders)."""
    if info.needs_args and info.directive is None:
        return Lens(info, "Add an example call to trace", CMD_INSERT_DIRECTIVE)
    if info.directive_missing:
        names = ", ".join(info.directive_missing)
        return Lens(
            info,
            f"Fill in the example call to trace: {names}",
            CMD_INSERT_DIRECTIVE,
            f"The `# atenlens:` example call reads {names}, which the module does not define at its top "
            'level (the trace imports it: `if __name__ == "__main__":` does not run). Click to type over them.',
        )
    return Lens(info, "Trace this step", CMD_TRACE)


def running_lenses(info: FunctionInfo, started: Optional[float], now: float) -> list[Lens]:
    """The lenses of a trace in flight: how long it has run, and a way to stop it."""
    return [Lens(info, running_title(started, now), ""), Lens(info, "Cancel", CMD_CANCEL_TRACE)]
