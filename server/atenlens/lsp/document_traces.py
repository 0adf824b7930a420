"""What the editor shows of the traces of one document: per line, the events and diagnostics of
the latest trace that covered it, kept in step with the text as the user edits.

Protocol-free (no pygls, no lsprotocol) so that it is tested on its own; lines here are 0-based.
A trace's lines carry the text they had when traced: after an edit, a line whose text differs is
dropped (its hint disappears until the next trace) while untouched lines move with the text.
A trace whose inputs changed -- an edit inside the traced function or its directive, or on any
line the trace ran -- is stale: its hints, hover and lens say "edited since the trace", and its
diagnostics are withdrawn, until it is traced again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator, Optional, Sequence

from atenlens.communication import collectives_hint, ranks_summary
from atenlens.cost import lens_label
from atenlens.lsp.cost_hover import cost_hint
from atenlens.lsp.labels import is_setup_function, line_hint, rollup_hint, summary_label
from atenlens.lsp.settings import HintSettings
from atenlens.lsp.text import LineShift
from atenlens.module_tree import ModuleNode, module_trees
from atenlens.report import (
    Diagnostic,
    Event,
    MemoryLine,
    MemorySummary,
    NamedLine,
    NamedShapes,
    TensorMeta,
    TraceReport,
)

STALE_HINT_SUFFIX = " (stale)"
STALE_LENS_PREFIX = "stale (edited since the trace): "


def same_file(a: Optional[str], b: Optional[str]) -> bool:
    if not a or not b:
        return False
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


@dataclass
class LineTrace:
    text: str  # the line's text when it was traced
    forward: list[Event] = field(default_factory=list)
    backward: list[Event] = field(default_factory=list)
    optimizer: list[Event] = field(default_factory=list)
    calls: list[Event] = field(default_factory=list)  # public API calls made on this line
    collectives: list[Event] = field(default_factory=list)  # collectives issued at this line (docs/distributed.md)
    nested: list[Event] = field(default_factory=list)  # forward/optimizer ops deeper in user code called here
    nested_backward: list[Event] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: tuple[str, ...] = ()  # the trace's notes (report.notes), shown in its hover
    bookkeeping: frozenset = frozenset()  # the trace's bookkeeping ops (report.bookkeeping_ops)
    function: Optional[str] = None  # the function this line's own ops ran in
    in_setup: bool = False  # they ran inside an `__init__` (building a model)
    module_output: Optional[TensorMeta] = None  # what the module called from this line returned
    trees: list[ModuleNode] = field(default_factory=list)  # models called from this line (module trees)
    callees: dict[tuple[str, str], int] = field(default_factory=dict)  # (file, function) rolled up -> first line
    nested_syncs: int = 0  # syncs deeper in the code this line calls
    nested_setup: list[Event] = field(default_factory=list)  # of `nested`, those that ran inside an `__init__`
    memory: Optional[MemoryLine] = None  # cost: what the line allocated and who held it (lsp/cost_hover.py)
    step_seconds: float = 0.0  # cost: the trace's estimated step time
    peak: Optional[MemorySummary] = None  # cost: the step's memory summary, on the line of its peak only
    named: Optional[NamedLine] = None  # named dims: the line's FLOPs and bytes as formulas (lsp/named_hover.py)
    named_shapes: Optional[NamedShapes] = None  # the trace's named dims

    @property
    def has_ops(self) -> bool:
        return bool(
            self.forward or self.backward or self.optimizer or self.nested or self.nested_backward or self.collectives
        )

    @property
    def syncs(self) -> int:
        return sum(d.count for d in self.diagnostics if d.kind == "sync")

    def hint(self, settings: HintSettings) -> Optional[str]:
        cost = cost_hint(self, settings.time, settings.memory) if settings.time or settings.memory else None
        if not cost:
            return self._ops_and_collectives_hint(settings)
        # the ops make room for the cost within hints.maxLength (they drop names, as they would anyway)
        text = self._ops_and_collectives_hint(
            replace(settings, max_length=max(10, settings.max_length - len(cost) - 3))
        )
        return f"{text} · {cost}" if text else None

    def _ops_and_collectives_hint(self, settings: HintSettings) -> Optional[str]:
        ops = self._ops_hint(settings)
        if not self.collectives:
            return ops
        room = settings.max_length - (len(ops) + 3 if ops else 0)  # the ops part is fitted already
        communication = collectives_hint(self.collectives, room)
        return f"{ops} · {communication}" if ops else communication

    def _ops_hint(self, settings: HintSettings) -> Optional[str]:
        hidden = frozenset() if settings.show_bookkeeping else self.bookkeeping
        nested = self.nested
        if self.nested_setup and not settings.show_bookkeeping:
            # building a model (`model = MLP()`) runs its initialisation: not the step's work
            setup = {id(e) for e in self.nested_setup}
            nested = [e for e in nested if id(e) not in setup]
        if nested or self.trees:
            # a call into user code or into a model: what it did in all, and what it returned
            head = f"{self.trees[-1].name} " if self.trees and not nested else ""
            return rollup_hint(
                nested + self.forward + self.optimizer,
                self.nested_backward + self.backward,
                self.module_output,
                settings,
                self.syncs + self.nested_syncs,
                head=head,
            )
        if self.nested and not (self.forward or self.backward or self.optimizer):
            return line_hint([], [], [], settings, syncs=self.syncs + self.nested_syncs)
        if not (self.forward or self.backward or self.optimizer or self.syncs):
            return None
        if self.in_setup and not settings.show_bookkeeping:
            # building a model (`empty`, `uniform_` in __init__): initialisation, not the step's work
            return line_hint([], [], [], settings, syncs=self.syncs)
        return line_hint(self.forward, self.backward, self.optimizer, settings, hidden, self.syncs)


@dataclass
class TracedFunction:
    """One trace of one function, mapped onto the current text of its document."""

    qualname: str
    report: TraceReport
    first: int  # span of the function (decorators..last line)
    last: int
    def_line: int
    lines: dict[int, LineTrace]
    general: list[Diagnostic]  # diagnostics with no line in this document
    stale: bool = False  # edited since the trace (see the module docstring)

    @property
    def summary(self) -> str:
        if self.report.status != "ok":
            return f"trace {self.report.status}: {self.report.message}".rstrip(": ")
        cost = lens_label(self.report.summary)
        ranks = ranks_summary(self.report.summary)  # simulated ranks: who ran, what it sent
        return summary_label(self.report.summary) + (f" · {ranks}" if ranks else "") + (f" · {cost}" if cost else "")

    @property
    def lens_title(self) -> str:
        """The summary lens: the summary, and how many notes the trace has (the notes themselves
        are the lens's tooltip and top the hovers of its lines)."""
        count = len(self.report.notes)
        title = self.summary + (f" · {count} note{'s' if count != 1 else ''}" if count else "")
        return f"{STALE_LENS_PREFIX}{title}" if self.stale else title

    @property
    def lens_tooltip(self) -> Optional[str]:
        notes = list(self.report.notes)
        if self.stale:
            notes.insert(0, self.stale_note)
        return "\n".join(notes) or None

    @property
    def stale_note(self) -> str:
        return f"edited since the trace of {self.qualname}: this is what the earlier text did; trace it again"

    def shift(self, change: LineShift) -> None:
        if change.touches(self.first, self.last) or any(change.touches(line, line) for line in self.lines):
            self.stale = True
        moved: dict[int, LineTrace] = {}
        for line, trace in self.lines.items():
            target = change.map(line)
            if target is not None:
                moved[target] = trace
        self.lines = moved
        for name in ("first", "last", "def_line"):
            target = change.map(getattr(self, name))
            if target is None:
                # the line itself went away: keep the span's end points near the change
                target = change.start if name != "last" else change.start + max(change.delta, 0)
            setattr(self, name, target)
        if self.last < self.first:
            self.last = self.first

    def revalidate(self, current: Sequence[str]) -> None:
        """Drop lines whose text is no longer what was traced."""
        self.lines = {
            line: trace for line, trace in self.lines.items() if line < len(current) and current[line] == trace.text
        }

    def diagnostics(self) -> Iterator[tuple[int, Diagnostic]]:
        if self.stale:
            return
        for diagnostic in self.general:
            yield self.def_line, diagnostic
        for line, trace in sorted(self.lines.items()):
            for diagnostic in trace.diagnostics:
                yield line, diagnostic


def build_traced_function(
    report: TraceReport, path: str, source_lines: Sequence[str], qualname: str, first: int, last: int, def_line: int
) -> TracedFunction:
    """Sort a report's events and diagnostics onto the 0-based lines of `path` as it was traced
    (`source_lines`, the text sent with the request)."""
    lines: dict[int, LineTrace] = {}
    bookkeeping = frozenset(report.bookkeeping_ops)

    def at(line_1based: int) -> Optional[LineTrace]:
        index = line_1based - 1
        if not 0 <= index < len(source_lines):
            return None
        if index not in lines:
            lines[index] = LineTrace(text=source_lines[index], notes=tuple(report.notes), bookkeeping=bookkeeping)
        return lines[index]

    for event in report.events:
        own = at(event.line) if event.line is not None and same_file(event.file, path) else None
        if own is not None:
            if event.stack and own.function is None:
                own.function = event.stack[-1].function
                own.in_setup = any(is_setup_function(f.function) for f in event.stack)
            if event.kind == "call":
                own.calls.append(event)
            elif event.kind == "collective":
                own.collectives.append(event)
            elif event.phase == "backward":
                own.backward.append(event)
            elif event.phase == "optimizer":
                own.optimizer.append(event)
            else:
                own.forward.append(event)
        if event.kind != "op":
            continue
        # Lines further out on the user stack (calls into user code) roll up what happens deeper.
        seen: set[int] = set()
        in_setup = event.phase != "backward" and any(is_setup_function(f.function) for f in event.stack)
        for position, frame in enumerate(event.stack):
            if not same_file(frame.file, path) or frame.line in seen:
                continue
            if own is not None and frame.line == event.line:
                continue
            seen.add(frame.line)
            outer = at(frame.line)
            if outer is None:
                continue
            (outer.nested_backward if event.phase == "backward" else outer.nested).append(event)
            if in_setup:
                outer.nested_setup.append(event)
            if position + 1 < len(event.stack):
                callee = event.stack[position + 1]
                key = (callee.file, callee.function)
                outer.callees[key] = min(outer.callees.get(key, callee.line), callee.line)

    _add_modules(report, path, at)
    _add_costs(report, path, at, lines)
    _add_named(report, path, at)

    general: list[Diagnostic] = []
    for diagnostic in report.diagnostics:
        own = at(diagnostic.line) if diagnostic.line is not None and same_file(diagnostic.file, path) else None
        if diagnostic.kind == "sync":
            # a sync deeper down counts for the lines of this document that called into it
            outer_lines = {f.line for f in diagnostic.stack[:-1] if same_file(f.file, path)} - {diagnostic.line}
            for line in outer_lines:
                outer = at(line)
                if outer is not None:
                    outer.nested_syncs += diagnostic.count
        if own is None:
            general.append(diagnostic)
        else:
            own.diagnostics.append(diagnostic)
    if report.status != "ok" and not report.diagnostics:
        general.append(
            Diagnostic(
                file=path,
                line=def_line + 1,
                column=None,
                severity="error",
                code="",
                kind=report.status,
                message=report.message or report.status,
            )
        )
    return TracedFunction(
        qualname=qualname, report=report, first=first, last=last, def_line=def_line, lines=lines, general=general
    )


def _add_costs(report: TraceReport, path: str, at, lines: dict[int, LineTrace]) -> None:
    """What each line allocated and held (summary.memory.lines), and the step time for its share."""
    time, memory = report.summary.time, report.summary.memory
    for line in memory.lines if memory is not None else ():
        own = at(line.line) if same_file(line.file, path) else None
        if own is not None:
            own.memory = line
    if memory is not None and memory.peak_line is not None and same_file(memory.peak_file, path):
        peak_line = at(memory.peak_line)
        if peak_line is not None:
            peak_line.peak = memory
    step = time.step_seconds if time is not None else 0.0
    for trace in lines.values():
        trace.step_seconds = step


def _add_named(report: TraceReport, path: str, at) -> None:
    """Named dims: each line's formulas (report.named_shapes.lines)."""
    named = report.named_shapes
    for line in named.lines if named is not None else ():
        own = at(line.line) if same_file(line.file, path) else None
        if own is not None:
            own.named = line
            own.named_shapes = named


def _add_modules(report: TraceReport, path: str, at) -> None:
    """Module trees at the lines that called a model, and what each line's module call returned:
    the module called from the line itself (not by another module's forward on that line)."""
    for (file, line), roots in module_trees(report).items():
        if line is not None and same_file(file, path):
            trace = at(line)
            if trace is not None:
                trace.trees = roots
    modules = report.modules
    for index, call in enumerate(modules):
        if call.line is None or not call.outputs or not same_file(call.file, path):
            continue
        parent = modules[call.parent] if call.parent is not None and 0 <= call.parent < index else None
        if parent is not None and parent.line == call.line and parent.file == call.file:
            continue
        trace = at(call.line)
        if trace is not None:
            trace.module_output = call.outputs[0]


class DocumentTraces:
    """The traces of one document, latest last (a line covered by two traces shows the latest)."""

    def __init__(self) -> None:
        self.functions: dict[str, TracedFunction] = {}

    def put(self, traced: TracedFunction) -> None:
        self.functions.pop(traced.qualname, None)
        self.functions[traced.qualname] = traced

    def shift(self, change: LineShift) -> None:
        for traced in self.functions.values():
            traced.shift(change)

    def revalidate(self, current: Sequence[str]) -> None:
        for traced in self.functions.values():
            traced.revalidate(current)

    def owners(self) -> dict[int, TracedFunction]:
        """The trace that speaks for each line: the latest current one, else the latest stale one."""
        owner: dict[int, TracedFunction] = {}
        for traced in self.functions.values():
            for line in traced.lines:
                if line not in owner or not traced.stale or owner[line].stale:
                    owner[line] = traced
        return owner

    def line_traces(self) -> dict[int, LineTrace]:
        return {line: traced.lines[line] for line, traced in self.owners().items()}

    def line(self, line: int) -> Optional[LineTrace]:
        return self.line_traces().get(line)

    def line_owner(self, line: int) -> Optional[TracedFunction]:
        return self.owners().get(line)

    def hints(
        self, settings: HintSettings, first: int = 0, last: Optional[int] = None
    ) -> list[tuple[int, str, Optional[str]]]:
        """(line, label, tooltip): a stale trace's labels end with STALE_HINT_SUFFIX, their
        tooltip says which trace and why."""
        result: list[tuple[int, str, Optional[str]]] = []
        for line, traced in sorted(self.owners().items()):
            if line < first or (last is not None and line > last):
                continue
            label = traced.lines[line].hint(settings)
            if label:
                if traced.stale:
                    result.append((line, label + STALE_HINT_SUFFIX, traced.stale_note))
                else:
                    result.append((line, label, None))
        return result

    def diagnostics(self) -> list[tuple[int, Diagnostic]]:
        return [(line, d) for _, line, d in self.labelled_diagnostics()]

    def labelled_diagnostics(self) -> list[tuple[str, int, Diagnostic]]:
        """(qualname of the trace, line, diagnostic) of the current traces."""
        return [(traced.qualname, line, d) for traced in self.functions.values() for line, d in traced.diagnostics()]

    def lines_run_on_cuda(self) -> set[int]:
        """Lines that a current, successful trace on simulated CUDA ran: there, a hazard the trace
        did not find is not there (the lint finding of it is dropped; lsp/problems.py)."""
        ran: set[int] = set()
        for traced in self.functions.values():
            if traced.stale or traced.report.status != "ok" or traced.report.device != "cuda":
                continue
            ran.update(
                line
                for line, trace in traced.lines.items()
                if trace.forward or trace.backward or trace.optimizer or trace.calls
            )
        return ran

    def summaries(self) -> Iterable[TracedFunction]:
        return self.functions.values()
