"""Named dims: shapes as the user thinks of them (`bf16[B, T, 768]`), FLOPs and bytes as formulas.

With `# atenlens: train_step(*setup())  dims: B=8 T=1024` the trace runs twice in its process:
1. the ordinary trace on concrete sizes, which decides everything the report says in numbers
   (events, syncs, memory, time: they stay exactly what they are without dims);
2. this module's symbolic pass: the module is loaded again under a FakeTensorMode with a ShapeEnv,
   the example call's arguments are built again, and every input tensor (an argument, or one in a
   list, tuple or dict argument) that has a named size gets that dimension replaced by the name's
   symbol: the size 8 anywhere in an input becomes B. Parameters and buffers keep their sizes (a
   weight's 768 is not a batch). The call then runs under a recorder of its own whose events carry
   the symbolic sizes, each op's FLOPs and bytes as sympy expressions, and the guards torch had to
   add ("T <= 1024" from slicing a 1024-row mask) at the user line that made each.

The two passes are matched op by op: the n-th op `aten.mm.default` of phase forward at line 12 in
one is the n-th in the other, and the names are used only where both agree on the concrete sizes.
A symbolic pass that fails (a data-dependent size, an op without a symbolic kernel, a guard torch
cannot decide) leaves the concrete trace as it is, and an AL920 at the directive line says why.

Two names with the same value are refused (atenlens/dims.py): a size 8 could not be told B from H.
torch names its symbols after a hash of their source (`s44`); they are mapped back to the user's
names here, and only here.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ContextManager, Optional

import sympy
import torch
from torch.utils.flop_counter import flop_registry

from atenlens.dims import dims_text
from atenlens.report import Code, Event, Frame, ModuleCall, NamedLine, NamedShapes, TensorMeta
from atenlens.trace import torch_compat as tc
from atenlens.trace.attribution import traceback_stack
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.recorder import Recorder
from atenlens.trace.roofline import bytes_moved
from atenlens.trace.values import Values

_MAX_CONTAINER_DEPTH = 3  # inputs inside lists / tuples / dicts of the arguments, this deep


class _Names:
    """torch's symbols and the user's names for them."""

    def __init__(self, dims: tuple[tuple[str, int], ...]) -> None:
        self.dims = dims
        self.by_value = {value: name for name, value in dims}
        self.sizes: dict[str, Any] = {}  # name -> SymInt
        self.symbols: dict[Any, sympy.Symbol] = {}  # torch's symbol -> a symbol printed as the name

    def size(self, env: Any, name: str, value: int) -> Any:
        found = self.sizes.get(name)
        if found is None:
            found, symbol = tc.named_size(env, name, value)
            self.sizes[name] = found
            self.symbols[symbol] = sympy.Symbol(name, positive=True, integer=True)
        return found

    def expr(self, value: Any) -> Any:
        """A size, FLOP count or guard as a sympy expression in the user's names (ints stay ints)."""
        expr = tc.size_expr(value)
        return expr.xreplace(self.symbols) if isinstance(expr, sympy.Basic) else expr

    def label(self, size: Any) -> str:
        return text_of(self.expr(size))


def text_of(expr: Any) -> str:
    """`4718592*B*T`, `T <= 1024`, `T != 2`: sympy's own printing, with relations as Python writes them."""
    if isinstance(expr, sympy.core.relational.Relational):
        return f"{text_of(expr.lhs)} {expr.rel_op} {text_of(expr.rhs)}"
    if isinstance(expr, sympy.Not):
        return f"not ({text_of(expr.args[0])})"
    return str(expr)


class _NoShadows(Values):
    """The symbolic pass keeps no real shadows of small tensors: measuring a symbolic tensor's size
    against the shadow limit would itself be a guard (the concrete trace already decided every value)."""

    def after_op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        return None


class _ShapeRecorder(Recorder):
    """The recorder of the symbolic pass: events as the concrete trace records them, with each
    tensor's dims named, and each op's FLOPs and bytes kept as expressions."""

    # torch's formulas run in `_extras`, without guards: the recorder's own int() of a symbolic FLOP
    # count would guard on it and make the symbols constants for the rest of the pass
    flop_formulas: Any = {}

    def __init__(self, names: _Names, env: Any) -> None:
        super().__init__(DiagnosticSink(), cost=False)
        self.names = names
        self.env = env
        self.values = _NoShadows(self.sink)
        self.extras: dict[int, tuple[Any, Any]] = {}  # event index -> (FLOPs, bytes) as expressions
        self.op_extras = self._extras

    def meta(self, t: torch.Tensor) -> TensorMeta:
        shape = t.shape
        dims = tuple(self.names.label(s) for s in shape)
        sizes = tuple(tc.size_hint(s) for s in shape)
        named = any(not isinstance(s, int) for s in shape)
        return TensorMeta(str(t.dtype)[6:], sizes, str(tc.tensor_device(t)), dims=dims if named else None)

    def _extras(self, index: int, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        flops: Any = None
        with tc.no_guards(self.env):
            formula = flop_registry.get(func.overloadpacket)
            if formula is not None:
                try:
                    flops = formula(*args, **kwargs, out_val=out)
                except Exception:  # a formula that does not cover this overload's arguments
                    flops = None
            moved = bytes_moved(func, args, kwargs, out)
        self.extras[index] = (self.names.expr(flops), self.names.expr(moved))


@dataclass
class _Guard:
    stack: tuple[Frame, ...]
    text: str


@dataclass
class SymbolicPass:
    """What the symbolic pass found; `problem` says why it found nothing (the concrete trace stands)."""

    problem: Optional[str] = None
    events: list[Event] = field(default_factory=list)
    extras: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    guards: list[_Guard] = field(default_factory=list)
    modules: tuple[ModuleCall, ...] = ()  # the module calls of the symbolic pass, with named outputs
    kept: tuple[str, ...] = ()  # inputs with a named size that kept their sizes: "x (not a leaf of autograd)"


def symbolic_pass(
    dims: tuple[tuple[str, int], ...],
    session: Any,
    load: Callable[[], Any],
    build_call: Callable[[Any], Any],
    environment: Callable[[Recorder], ContextManager[None]],
    drive: Callable[[Any], Any],
) -> SymbolicPass:
    """Run the example call again with the named sizes symbolic. `load()` loads the user's module,
    `build_call(module)` evaluates the example call's callee and arguments, `environment(recorder)`
    enters the trace's other contexts for the pass's recorder (argv, library patches, simulated ranks)
    and `drive` runs what the call returned. Never raises for what the user's code does: that is the pass's `problem`."""
    names = _Names(dims)
    guards: list[_Guard] = []
    recorder: Optional[_ShapeRecorder] = None

    def on_guard(expr: Any) -> None:
        if recorder is None or not recorder.recording:
            return  # loading and setup: sizes are still concrete there
        stack = recorder.user_stack(sys._getframe(2))
        if not stack and recorder._in_backward:
            stack = recorder._backward_stack
        guards.append(_Guard(stack, text_of(names.expr(expr))))

    env = tc.symbolic_shape_env(on_guard)
    recorder = _ShapeRecorder(names, env)
    hooks = session.hooks(recorder.sink, recorder.values)
    recorder.use_device_hooks(hooks)
    found = SymbolicPass()
    try:
        with contextlib.ExitStack() as modes:
            modes.enter_context(session.make_fake_mode(shape_env=env))
            modes.enter_context(environment(recorder))
            for mode in recorder.modes():
                modes.enter_context(mode)
            modes.enter_context(recorder.recompute_under_modes())
            module = load()
            call = build_call(module)
            args, kwargs, named, kept = _symbolic_inputs(call.function, call.args, call.kwargs, names, env)
            if not named:
                if kept:  # inputs with a named size, none of which could be made symbolic
                    problem = f"no input with a named size ({dims_text(dims)}) could take the names: {'; '.join(kept)}"
                else:
                    problem = f"no input of the example call has a named size ({dims_text(dims)})"
                return SymbolicPass(problem=problem)
            recorder.start(boundary=sys._getframe().f_code)
            try:
                drive(call.function(*args, **kwargs))
            finally:
                recorder.stop()
    except BaseException as error:  # the user's code, torch's symbolic kernels, the time budget
        return SymbolicPass(problem=_failure(error, data_dependent=_has_data_dependent_sizes(env)))
    found.events = recorder.events
    found.extras = recorder.extras
    found.guards = guards
    found.modules = recorder.modules.module_calls()
    found.kept = tuple(kept)
    return found


def _has_data_dependent_sizes(env: Any) -> bool:
    """Whether an op made a size only the data decides (`x[mask]`, `nonzero`: torch's `u0`, `u1`)."""
    return any(str(symbol).startswith("u") for symbol in getattr(env, "var_to_range", ()))


def _failure(error: BaseException, data_dependent: bool = False) -> str:
    if type(error).__name__ == "TraceTimeout":  # runner.py's: the budget is the whole trace's
        return "the trace with symbolic sizes ran past the time budget"
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    what = f"{type(error).__name__}: {message}" if message else type(error).__name__
    if data_dependent:  # what failed is a consequence: say the cause, which the user can act on
        what = (
            "a size only the data decides (a boolean mask, nonzero, unique) has no value in a symbolic trace; "
            f"torch then raised {what}"
        )
    if len(what) > 300:
        what = what[:297] + "..."
    stack = traceback_stack(error.__traceback__)
    where = f" at line {stack[-1].line} of {os.path.basename(stack[-1].file)}" if stack else ""
    return f"the trace with symbolic sizes failed{where} ({what})"


def _symbolic_inputs(
    function: Any, args: tuple, kwargs: dict, names: _Names, env: Any
) -> tuple[tuple, dict, int, list[str]]:
    """The arguments with each input tensor's named sizes made symbolic; how many tensors changed,
    and the inputs with a named size that kept their sizes, each with why ("x (not a leaf of autograd ...)")."""
    made: dict[int, Any] = {}  # id of an input -> its symbolic twin (an input passed twice stays one)
    kept: list[str] = []

    def convert(value: Any, depth: int, path: str) -> Any:
        if isinstance(value, torch.Tensor):
            twin, why = _symbolic_tensor(value, names, env, made)
            if why is not None:
                kept.append(f"{path} ({why})")
            return twin
        if depth >= _MAX_CONTAINER_DEPTH:
            return value
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(convert(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))
        if isinstance(value, list):
            return [convert(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: convert(v, depth + 1, f"{path}[{k!r}]") for k, v in value.items()}
        return value

    labels = _argument_names(function, len(args))
    new_args = tuple(convert(a, 0, label) for a, label in zip(args, labels))
    new_kwargs = {k: convert(v, 0, k) for k, v in kwargs.items()}
    return new_args, new_kwargs, len(made), kept


def _argument_names(function: Any, count: int) -> list[str]:
    """What the note calls each positional argument: its parameter's name, else "argument 3"."""
    try:
        parameters = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        parameters = []
    return [parameters[i] if i < len(parameters) else f"argument {i + 1}" for i in range(count)]


def _symbolic_tensor(
    t: torch.Tensor, names: _Names, env: Any, made: dict[int, Any]
) -> tuple[torch.Tensor, Optional[str]]:
    """The input's symbolic twin, or the input itself with why it kept its sizes (None: it has no named
    size, or it is a weight). A dense layout in another dim order (a transpose, channels_last) is
    made again in that order; a view with gaps or overlaps, or a tensor autograd made, cannot be."""
    if id(t) in made:
        return made[id(t)], None
    if isinstance(t, torch.nn.Parameter):
        return t, None  # weights keep their sizes: a weight's 768 is not a batch
    sizes = [int(s) for s in t.shape]
    if not any(s in names.by_value for s in sizes):
        return t, None
    if not t.is_leaf:
        return t, "not a leaf of autograd: an op on a tensor that requires grad made it"
    try:
        order = list(t.dim_order())
    except (RuntimeError, TypeError):  # a sparse or nested layout has no dim order
        return t, f"a {t.layout} layout"
    if not t.permute(order).is_contiguous():
        return t, "a view with gaps or overlaps: a strided slice, an expand"
    shape = [names.size(env, names.by_value[s], s) if s in names.by_value else s for s in sizes]
    twin = torch.empty([shape[d] for d in order], dtype=t.dtype, device=tc.tensor_device(t))
    if order != sorted(order):  # the same dense layout in the same dim order: a transpose stays one
        twin = twin.permute([order.index(d) for d in range(len(order))])
    if t.requires_grad:
        twin = twin.detach().requires_grad_(True)
    made[id(t)] = twin
    return twin, None


# -- the two passes together --------------------------------------------------------------------------


def _key(event: Event) -> tuple:
    return (event.file, event.line, event.name, event.phase)


def named_events(
    events: list[Event], found: SymbolicPass, values: dict[str, int]
) -> tuple[list[Event], tuple[NamedLine, ...]]:
    """The concrete trace's events with the symbolic pass's dims where both agree on the sizes, and
    each line's FLOPs and bytes as formulas (only lines whose every op has one)."""
    occurrences: dict[tuple, list[int]] = defaultdict(list)
    for index, event in enumerate(found.events):
        if event.kind == "op":
            occurrences[_key(event)].append(index)
    seen: dict[tuple, int] = defaultdict(int)
    flops: dict[tuple[str, int], list[Any]] = defaultdict(list)
    moved: dict[tuple[str, int], list[Any]] = defaultdict(list)
    out: list[Event] = []
    for event in events:
        if event.kind != "op" or event.file is None or event.line is None:
            out.append(event)
            continue
        key = _key(event)
        twin_index = _twin(event, found.events, occurrences.get(key, []), seen, key)
        twin = found.events[twin_index] if twin_index is not None else None
        line = (event.file, event.line)
        if twin is None:
            flops[line].append(None if event.flops else 0)
            moved[line].append(None if event.bytes_moved else 0)
            out.append(event)
            continue
        assert twin_index is not None
        flop_expr, bytes_expr = found.extras.get(twin_index, (None, None))
        flops[line].append(_agreeing(flop_expr, event.flops or 0, values))
        moved[line].append(_agreeing(bytes_expr, event.bytes_moved, values))
        out.append(
            replace(event, outputs=_named(event.outputs, twin.outputs), inputs=_named(event.inputs, twin.inputs))
        )
    lines = []
    for line in sorted(set(flops) | set(moved)):
        flop_formula, flop_value = _line_formula(flops[line], values)
        bytes_formula, bytes_value = _line_formula(moved[line], values)
        if flop_formula is not None or bytes_formula is not None:
            lines.append(NamedLine(line[0], line[1], flop_formula, flop_value, bytes_formula, bytes_value))
    return out, tuple(lines)


def _twin(event: Event, found: list[Event], candidates: list[int], seen: dict[tuple, int], key: tuple) -> Optional[int]:
    """The symbolic pass's next op at the event's line with its name, phase and concrete output sizes.
    Sizes decide, not only order: Python indexing skips a full slice `x[:, -48:]` of a static size,
    but must issue it for a symbolic one, so one pass may have an op the other has not."""
    shapes = [m.shape for m in event.outputs]
    for position in range(seen[key], len(candidates)):
        index = candidates[position]
        if [m.shape for m in found[index].outputs] == shapes:
            seen[key] = position + 1
            return index
    return None


def _named(concrete: tuple[TensorMeta, ...], symbolic: tuple[TensorMeta, ...]) -> tuple[TensorMeta, ...]:
    if len(concrete) != len(symbolic):
        return concrete
    return tuple(
        replace(c, dims=s.dims) if s.dims is not None and s.shape == c.shape and s.dtype == c.dtype else c
        for c, s in zip(concrete, symbolic)
    )


def _agreeing(expr: Any, value: int, values: dict[str, int]) -> Any:
    """The expression when it evaluates to the concrete trace's number at the given sizes (else None:
    the passes disagree and no formula is shown)."""
    if expr is None:
        return 0 if not value else None
    if isinstance(expr, int):
        return expr if expr == value else None
    return expr if _evaluated(expr, values) == value else None


def _evaluated(expr: Any, values: dict[str, int]) -> Optional[int]:
    """The expression at the given sizes; None when it holds a symbol that is not a named dim."""
    found = expr.subs({s: values[s.name] for s in expr.free_symbols if s.name in values})
    return int(found) if not getattr(found, "free_symbols", None) else None


def _line_formula(parts: list[Any], values: dict[str, int]) -> tuple[Optional[str], int]:
    if not parts or any(p is None for p in parts):
        return None, 0
    total = sympy.expand(sympy.Add(*parts))
    if not isinstance(total, sympy.Basic) or not total.free_symbols:
        return None, int(total)  # no named dim in it: the plain number says it all
    return str(total), _evaluated(total, values) or 0


def named_shapes(
    dims: tuple[tuple[str, int], ...],
    events: list[Event],
    found: SymbolicPass,
) -> tuple[list[Event], NamedShapes]:
    """The events with names, and the report's named_shapes (symbolic only when the pass worked)."""
    labels = tuple(f"{name}={value}" for name, value in dims)
    if found.problem is not None:
        return events, NamedShapes(labels, symbolic=False)
    named, lines = named_events(events, found, dict(dims))
    return named, NamedShapes(labels, symbolic=True, lines=lines)


def named_modules(concrete: tuple[ModuleCall, ...], found: SymbolicPass) -> tuple[ModuleCall, ...]:
    """The concrete trace's module calls with the names on their outputs (the hints of a line that
    calls a model show what it returned): paired in order, where both passes called the same module."""
    if found.problem is not None or len(found.modules) != len(concrete):
        return concrete
    return tuple(
        replace(c, outputs=_named(c.outputs, s.outputs)) if (c.path, c.type) == (s.path, s.type) else c
        for c, s in zip(concrete, found.modules)
    )


def report_guards(sink: DiagnosticSink, dims: tuple[tuple[str, int], ...], found: SymbolicPass, at: Frame) -> None:
    """One AL921 per guard and line (`at`: the directive, for guards made with no user frame)."""
    seen: set[tuple] = set()
    for guard in found.guards:
        stack = guard.stack or (at,)
        key = (stack[-1].file, stack[-1].line, guard.text)
        if key in seen:
            continue
        seen.add(key)
        sink.add(
            "shape-guard",
            Code.SHAPE_GUARD,
            f"assumed {guard.text} (named dims {dims_text(dims)}): the named shapes hold where this does",
            severity="information",
            stack=stack,
        )


def report_problem(sink: DiagnosticSink, dims_label: str, problem: str, at: Frame) -> None:
    """The AL920 at the directive line: why the shapes are shown with concrete sizes."""
    sink.add(
        "named-dims",
        Code.NAMED_DIMS,
        f"dims {dims_label}: {problem}; shapes are shown with concrete sizes",
        severity="information",
        stack=(at,),
    )


def report_left_out(sink: DiagnosticSink, text: str, at: Frame) -> None:
    """The AL920 at the directive line: names of the example call that were not used, and why."""
    sink.add("named-dims", Code.NAMED_DIMS, text, severity="information", stack=(at,))


def report_kept(sink: DiagnosticSink, dims_label: str, kept: tuple[str, ...], at: Frame) -> None:
    """The AL920 at the directive line: the inputs with a named size that kept their sizes."""
    sink.add(
        "named-dims",
        Code.NAMED_DIMS,
        f"dims {dims_label}: these inputs keep their concrete sizes, and what is computed from them shows "
        f"numbers: {'; '.join(kept)}",
        severity="information",
        stack=(at,),
    )
