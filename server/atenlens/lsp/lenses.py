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

from atenlens.functions import FunctionInfo

CMD_TRACE = "atenlens.trace"
CMD_INSERT_DIRECTIVE = "atenlens.insertDirective"


@dataclass(frozen=True)
class Lens:
    info: FunctionInfo
    title: str
    command: str                  # "" for a lens that only shows text (a trace's summary)
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
    if info.needs_args and info.directive is None:
        return Lens(info, "Trace this step: add an example call", CMD_INSERT_DIRECTIVE)
    return Lens(info, "Trace this step", CMD_TRACE)
