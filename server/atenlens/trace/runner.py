"""Run one traced function in this process: load the user's module, build the example call, record.

`run_trace` is the engine's entry point. The worker imports this module before it forks (so every
import here is paid once, not per trace) and calls it in a fresh, disposable child process (user
code never runs in a long-lived process); tests call it directly. It never raises for anything
the user's code does: exceptions, `SystemExit`, time running out and missing inputs all become a
report with a status and a diagnostic.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
import importlib
import importlib.util
import inspect
import io
import logging
import os
import signal
import sys
import threading
import time
import tokenize
import types
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Optional, Union, cast

import torch

from atenlens.call_dims import NO_CALL_DIMS, CallDims, call_dims, notes_text
from atenlens.dims import dims_text, parse_dims
from atenlens.gpus import find_gpu
from atenlens.report import Code, Diagnostic, Event, Frame, NamedShapes, Summary, Target, TraceReport, TraceRequest
from atenlens.trace import torch_compat
from atenlens.trace.attribution import EXAMPLE_CALL_FILENAME, is_user_file, traceback_stack
from atenlens.trace.collectives import Collectives
from atenlens.trace.compiled import CompileWatch
from atenlens.trace.cost_report import cost_summaries
from atenlens.trace.dataloader import workers_in_process
from atenlens.trace.device import simulated_device
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.libraries import eager_views_for_libraries
from atenlens.trace.overlap import Overlap
from atenlens.trace.ranks import Ranks, ranks_of, simulated_ranks
from atenlens.trace.recorder import Recorder
from atenlens.trace.shapes import (
    SymbolicPass,
    named_modules,
    named_shapes,
    report_guards,
    report_kept,
    report_left_out,
    report_problem,
    symbolic_pass,
)
from atenlens.traceable import (
    FunctionInfo,
    argv_directive,
    directive_template,
    find_functions,
    ranks_directive,
    split_example_call,
)

_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
MAX_GENERATOR_ITEMS = 100


TIMEOUT_RETRY_SECONDS = 1.0  # after the budget, the timeout is raised again this often (`_time_budget`)


class TraceTimeout(BaseException):
    """Raised in the main thread when the time budget runs out. A BaseException so that the user's
    `except Exception:` cannot swallow it."""


@dataclass(frozen=True)
class _Ending:
    """How a trace ended, for its report: its status, the message saying why when it is not "ok",
    and the diagnostic at the line where it ended (an exception, a timeout, needed inputs)."""

    status: str = "ok"
    message: str = ""
    diagnostic: Optional[Diagnostic] = None


class _Stop(Exception):
    """Ends a trace early with a finished report (needs-inputs, target not found)."""

    def __init__(self, status: str, message: str, diagnostic: Optional[Diagnostic] = None) -> None:
        super().__init__(message)
        self.ending = _Ending(status, message, diagnostic)


@dataclass(frozen=True)
class ExampleCall:
    expression: Optional[str]  # None: call the function with no arguments
    function: Callable[..., Any]
    args: tuple
    kwargs: dict


def run_trace(request: TraceRequest) -> TraceReport:
    started = time.perf_counter()
    deadline = started + request.timeout_seconds
    file = os.path.abspath(request.file)
    target = Target(file=file, qualname=request.qualname)
    sink = DiagnosticSink()
    gpu, gpu_note = _gpu_of(request)
    recorder = Recorder(sink, gpu=gpu, cost=request.cost)
    ending = _Ending()
    call_expression: Optional[str] = None
    notes: tuple[str, ...] = gpu_note
    device: str = request.device
    stage = "load"
    info: Optional[FunctionInfo] = None
    syncs_before: Optional[int] = None  # syncs found before the traced call started (load, setup)
    named: Optional[tuple[NamedShapes, SymbolicPass]] = None  # `dims:`: the report's named_shapes, the pass

    with _user_import_state(file), torch_compat.fake_module_fixes(), _quiet_torch_logs():
        try:
            with _time_budget(deadline):  # inside the try: an expiry at any point is handled
                source = request.source if request.source is not None else _read_source(file)
                info = _function_info(source, file, request.qualname)
                argv = _program_argv(source, request.argv)
                ranks = _ranks_of(request, source, info)
                recorder.collectives = Collectives(ranks, gpu)
                recorder.overlap = Overlap() if ranks.world_size > 1 else None
                with simulated_device(request.device) as session, contextlib.ExitStack() as modes:
                    modes.enter_context(simulated_ranks(ranks, sink, recorder.collectives))
                    modes.enter_context(torch_compat.sharding_propagation_through(recorder.hidden))
                    modes.enter_context(torch_compat.spmd_setup_shortcuts())
                    modes.enter_context(torch_compat.dtensor_handing_back(recorder.handed_back))
                    modes.enter_context(
                        torch_compat.fsdp2_storage_roles(recorder.memory.mark, recorder.hazards.fsdp_gathered)
                    )
                    modes.enter_context(_sys_argv([file, *argv]))
                    modes.enter_context(eager_views_for_libraries())
                    modes.enter_context(workers_in_process(sink))
                    device = session.device
                    notes += tuple(session.notes)
                    recorder.set_device(device)
                    session.use_memory(recorder.memory, gpu.memory_bytes)
                    fake_mode = modes.enter_context(session.make_fake_mode())
                    compiles = CompileWatch(sink)
                    modes.enter_context(compiles.watching())
                    # The recorder's modes are the trace's only Python modes: from loading on they run
                    # every call and op through the device's hooks (hazards at load time are found too)
                    # and record only from `start()`.
                    device_hooks = session.hooks(sink, recorder.values)
                    recorder.use_device_hooks(device_hooks)
                    for mode in recorder.modes():
                        modes.enter_context(mode)
                    modes.enter_context(recorder.recompute_under_modes())
                    module = _load_module(file, source)
                    stage = "setup"
                    function = _resolve(module, request.qualname)
                    example = _example_call(module, function, info, request.call)
                    if _compile_requested(request, info):
                        example = replace(example, function=compiles.compile_on_request(example.function))
                    call_expression = example.expression
                    stage = "trace"
                    syncs_before = _sync_count(sink.diagnostics())
                    # Storages end when their last reference goes, those in reference cycles at a garbage
                    # collection: collecting now makes when collections happen during the call depend on the
                    # call alone, not on what loading and setup allocated (the memory lines stay the same)
                    gc.collect()
                    recorder.start(boundary=sys._getframe().f_code)
                    try:
                        roots = (
                            example.args,
                            example.kwargs,
                            getattr(example.function, "__self__", None),
                            list(vars(module).values()),
                        )
                        with recorder.memory.watching(roots):
                            notes += _drive(example.function(*example.args, **example.kwargs))
                    finally:
                        recorder.stop()
                        finish = getattr(device_hooks, "finish", None)  # AL502 needs the whole trace
                        if finish is not None:
                            finish()
                    try:  # after the call: Dynamo's view never enters the recording
                        compiles.analyse(fake_mode)
                    except TraceTimeout:  # the recorded trace is complete: keep it
                        compiles.ran_out_of_time()
                    dims = _dims_of(request, info)
                    # a bare `dims:` asks for the names the example call's variables give (call_dims.py)
                    spec = _call_dims(example, source, module) if dims is not None and not dims.strip() else dims
                    if spec is not None:
                        modes.close()  # the symbolic pass has modes of its own
                        named = _named_dims(
                            spec, session, file, source, argv, module, example, ranks, recorder, sink, info
                        )
        except _Stop as stop:
            ending = stop.ending
        except TraceTimeout as timeout:
            ending = _timed_out(timeout, request, stage, file, info)
        except BaseException as error:  # the user's code raised (SystemExit and KeyboardInterrupt too)
            behind = _timeout_behind(error)
            ending = _raised(error, file) if behind is None else _timed_out(behind, request, stage, file, info)
    report = _report(target, ending, device, recorder, sink, syncs_before, started, call_expression, notes)
    if named is None:
        return report
    names, found = named
    return replace(report, named_shapes=names, modules=named_modules(report.modules, found))


def _dims_of(request: TraceRequest, info: Optional[FunctionInfo]) -> Optional[str]:
    """The `dims:` text of the request's call, else of the directive (a request's call replaces it)."""
    if request.call:
        return split_example_call(request.call)[1]
    return info.dims if info is not None else None


def _call_dims(example: ExampleCall, source: str, module: types.ModuleType) -> CallDims:
    """For a bare `dims:`, the names the example call's own variables give its sizes (call_dims.py).
    Asked for, not automatic: the second, symbolic run costs 2-3 times the trace itself."""
    return call_dims(example.expression or "", source, vars(module))


def _compile_requested(request: TraceRequest, info: Optional[FunctionInfo]) -> bool:
    """--compile (the editor's trace.compile setting), or `compile` in the call or the directive."""
    if request.compile:
        return True
    if request.call:
        return split_example_call(request.call)[2]
    return info.compile if info is not None else False


def _named_dims(
    spec: Union[str, CallDims],
    session: Any,
    file: str,
    source: str,
    argv: tuple[str, ...],
    module: types.ModuleType,
    example: ExampleCall,
    ranks: Ranks,
    recorder: Recorder,
    sink: DiagnosticSink,
    info: Optional[FunctionInfo],
) -> Optional[tuple[NamedShapes, SymbolicPass]]:
    """After the concrete trace: the symbolic pass of the named dims (trace/shapes.py), its names
    put on the recorder's events, its guards and problems reported at their lines."""
    line = (info.directive_line or info.line) if info is not None else 1
    at = Frame(file, line, info.qualname if info is not None else "<module>")
    if isinstance(spec, CallDims):
        left_out = notes_text(spec.notes)
        if left_out is not None:
            report_left_out(sink, left_out, at)
        if not spec.dims:
            if left_out is None:
                report_problem(sink, "from the example call", NO_CALL_DIMS, at)
            return None
        dims = spec.dims
    else:
        try:
            dims = parse_dims(spec, vars(module).__getitem__)  # a bare name: the module's variable
        except ValueError as error:
            report_problem(sink, repr(spec), str(error), at)
            return None
    expression = example.expression or ""

    @contextlib.contextmanager
    def environment(pass_recorder: Recorder) -> Iterator[None]:
        # the module loads and runs again: what it prints was printed by the concrete trace; with
        # simulated ranks the fake process group is set up again (the concrete trace's is destroyed)
        # and the pass sees the same DTensor and FSDP2 shortcuts the concrete trace did
        pass_sink = pass_recorder.sink
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            simulated_ranks(ranks, pass_sink, Collectives(ranks, recorder.collectives.gpu)),
            torch_compat.sharding_propagation_through(pass_recorder.hidden),
            torch_compat.spmd_setup_shortcuts(),
            torch_compat.dtensor_handing_back(pass_recorder.handed_back),
            _sys_argv([file, *argv]),
            eager_views_for_libraries(),
            workers_in_process(pass_sink),
            CompileWatch(pass_sink).watching(),
        ):
            yield

    found = symbolic_pass(
        dims,
        session,
        load=lambda: _load_module(file, source),
        build_call=lambda module: build_example_call(module, expression),
        environment=environment,
        drive=_drive,
    )
    events, named = named_shapes(dims, recorder.events, found)
    named = replace(named, inferred=isinstance(spec, CallDims))
    recorder.events[:] = events
    if found.problem is not None:
        report_problem(sink, dims_text(dims), found.problem, at)
    elif found.kept:
        report_kept(sink, dims_text(dims), found.kept, at)
    report_guards(sink, dims, found, at)
    return named, found


def _timed_out(
    timeout: TraceTimeout, request: TraceRequest, stage: str, file: str, info: Optional[FunctionInfo]
) -> _Ending:
    """The ending of a trace that ran past its budget, at the line it had reached."""
    if stage == "load":
        message = (
            f"loading {os.path.basename(file)} ran past the {request.timeout_seconds:g} s budget; "
            'guard script code with `if __name__ == "__main__":`'
        )
        code = Code.LOAD_TIMEOUT
    else:
        message = f"the trace ran past its {request.timeout_seconds:g} s budget; events so far are kept"
        code = Code.TIMEOUT
    stack = traceback_stack(timeout.__traceback__)
    return _Ending(
        "timeout",
        message,
        _diagnostic_at(
            stack, "timeout", code, message, severity="error", fallback=(file, info.line if info is not None else None)
        ),
    )


def _timeout_behind(error: BaseException) -> Optional[TraceTimeout]:
    """The timeout that an exception was raised while handling, if any. A timeout that lands while
    the user's `finally:` or a mode's `__exit__` runs makes that cleanup fail in its own way (a fake
    mode left half-exited: "Attempted to unset FakeTensorMode"); the trace still ended by running out
    of time, and says so rather than blaming the cleanup's error."""
    seen: set[int] = set()
    cause: Optional[BaseException] = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, TraceTimeout):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _raised(error: BaseException, file: str) -> _Ending:
    """The ending of a trace whose program raised, at the user's line that raised."""
    message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if isinstance(error, SystemExit):
        message = f"SystemExit({error.code!r}): the traced code called exit()"
    stack = traceback_stack(error.__traceback__)
    column = _column_of(error.__traceback__)
    if isinstance(error, SyntaxError) and error.filename and os.path.abspath(error.filename) == file:
        stack = (Frame(file, error.lineno or 1, "<module>"),)
        column = (error.offset - 1) if error.offset else None
    return _Ending(
        "error",
        message,
        _diagnostic_at(
            stack, "exception", Code.EXCEPTION, message, severity="error", column=column, fallback=(file, None)
        ),
    )


def _gpu_of(request: TraceRequest) -> tuple[Any, tuple[str, ...]]:
    """The GPU to forecast for; an unknown name falls back to the default and says so."""
    try:
        return find_gpu(request.gpu), ()
    except KeyError as error:
        return find_gpu(None), (f"{error.args[0]}: forecast for {find_gpu(None).name} instead",)


def _drive(result: Any) -> tuple[str, ...]:
    """Run what calling the function only started: a coroutine to completion, a generator for up to
    MAX_GENERATOR_ITEMS items (a data pipeline may never end). Returns notes for the report."""
    if inspect.iscoroutine(result):
        asyncio.run(result)
    elif inspect.isgenerator(result):
        for count, _item in enumerate(result, 1):
            if count >= MAX_GENERATOR_ITEMS:
                result.close()
                return (f"the generator was traced for its first {MAX_GENERATOR_ITEMS} items",)
    return ()


# -- the report -------------------------------------------------------------------------------------


def _report(
    target: Target,
    ending: _Ending,
    device: str,
    recorder: Any,
    sink: DiagnosticSink,
    syncs_before: Optional[int],
    started: float,
    call: Optional[str],
    notes: tuple[str, ...],
) -> TraceReport:
    """The report of every trace, however it ended."""
    if getattr(recorder, "overlap", None) is not None:
        recorder.overlap_finished()
    events = tuple(recorder.events)
    extra = (ending.diagnostic,) if ending.diagnostic is not None else ()
    diagnostics = sink.diagnostics(steps=getattr(recorder, "optimizer_steps", 0)) + extra
    # the traced call's syncs: counts only grow, so those found before it started are subtracted
    syncs = _sync_count(diagnostics) - syncs_before if syncs_before is not None else 0
    summary = summarize(events, syncs, time.perf_counter() - started)
    summary = replace(summary, assumptions=sum(d.count for d in diagnostics if d.kind == "assumption"))
    if recorder.dropped:
        ops = dict(summary.ops)
        for phase, count in recorder.dropped_ops.items():
            ops[phase] = ops.get(phase, 0) + count
        summary = replace(
            summary, ops=ops, calls=summary.calls + recorder.dropped_calls, flops=summary.flops + recorder.dropped_flops
        )
        notes = notes + (
            f"kept the first {len(events)} events; {recorder.dropped} more were counted in the summary but not kept",
        )
    if recorder.modules.dropped:
        notes = notes + (
            f"the module tree keeps the first {len(recorder.modules.calls)} module calls; "
            f"{recorder.modules.dropped} more ran",
        )
    summary, oom = cost_summaries(recorder, events, summary)
    collectives = recorder.collectives
    if collectives is not None:
        summary = replace(
            summary,
            world_size=collectives.ranks.world_size,
            rank=collectives.ranks.rank,
            gpus_per_node=collectives.ranks.gpus_per_node,
            collectives=collectives.count,
            communication_seconds=collectives.seconds,
            exposed_communication_seconds=recorder.overlap.exposed_seconds if recorder.overlap is not None else 0.0,
        )
    diagnostics += oom
    return TraceReport(
        target=target,
        status=ending.status,  # type: ignore[arg-type]
        device=device,
        events=events,
        diagnostics=diagnostics,
        summary=summary,
        message=ending.message,
        call=call,
        notes=notes,
        torch_version=torch.__version__,
        modules=recorder.modules.module_calls(),
        bookkeeping_ops=tuple(sorted(recorder.bookkeeping_ops)),
    )


def _sync_count(diagnostics: tuple[Diagnostic, ...]) -> int:
    return sum(d.count for d in diagnostics if d.kind == "sync")


def summarize(events: tuple[Event, ...], syncs: int, seconds: float) -> Summary:
    """`syncs`: how many host-device syncs the traced call made."""
    ops: dict[str, int] = {"forward": 0, "backward": 0, "optimizer": 0}
    calls = 0
    flops = 0
    for event in events:
        if event.kind == "op":
            ops[event.phase] = ops.get(event.phase, 0) + 1
            flops += event.flops or 0
        elif event.kind == "call":
            calls += 1
    return Summary(ops=ops, calls=calls, flops=flops, syncs=syncs, seconds=round(seconds, 4))


def _column_of(tb: Optional[types.TracebackType]) -> Optional[int]:
    """0-based column of the expression that raised in the innermost user frame (Python 3.11+)."""
    innermost = None
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            innermost = tb
        tb = tb.tb_next
    if innermost is None:
        return None
    try:
        positions = list(innermost.tb_frame.f_code.co_positions())
        line, _end_line, column, _end_column = positions[innermost.tb_lasti // 2]
    except (AttributeError, IndexError, ValueError):
        return None
    return column if line == innermost.tb_lineno else None


def _diagnostic_at(
    stack: tuple[Frame, ...],
    kind: str,
    code: str,
    message: str,
    *,
    severity: str,
    column: Optional[int] = None,
    fallback: tuple[Optional[str], Optional[int]] = (None, None),
) -> Diagnostic:
    file, line = (stack[-1].file, stack[-1].line) if stack else fallback
    return Diagnostic(
        file=file,
        line=line,
        column=column,
        severity=severity,  # type: ignore[arg-type]
        code=code,
        kind=kind,
        message=message,
        stack=stack,
    )


# -- loading the user's module ----------------------------------------------------------------------


def _read_source(file: str) -> str:
    with tokenize.open(file) as f:  # as Python reads it: a `# coding:` declaration, else UTF-8
        return f.read()


def _program_argv(source: str, requested: Optional[tuple[str, ...]]) -> tuple[str, ...]:
    """sys.argv[1:] for the program: the request's, else the file's `# atenlens-argv:` comment, else
    none (never the worker's own flags: a module-level `parser.parse_args()` must parse the user's)."""
    if requested is not None:
        return tuple(requested)
    try:
        found = argv_directive(source)
    except ValueError as error:
        raise _Stop("error", f"the `# atenlens-argv:` comment cannot be split into arguments: {error}") from None
    return found if found is not None else ()


def _ranks_of(request: TraceRequest, source: str, info: Optional[FunctionInfo]) -> Ranks:
    """The request's simulated ranks, else the function's `# atenlens-ranks:` comment's, else one rank."""
    try:
        found = ranks_directive(source, info) if request.world_size is None else {}
        return ranks_of(
            request.world_size if request.world_size is not None else found.get("world_size"),
            request.rank if request.rank is not None else found.get("rank"),
            request.gpus_per_node if request.gpus_per_node is not None else found.get("gpus_per_node"),
        )
    except ValueError as error:
        raise _Stop("error", f"simulated ranks: {error}") from None


@contextlib.contextmanager
def _sys_argv(argv: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved


def _function_info(source: str, file: str, qualname: str) -> Optional[FunctionInfo]:
    tree = cast(
        ast.Module, compile(source, file, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    )  # SyntaxError: the user's
    for info in find_functions(source, tree):
        if info.qualname == qualname:
            return info
    return None


def project_root(folder: str) -> str:
    """The nearest folder at or above `folder` with a project marker, or `folder` itself."""
    current = folder
    while True:
        if any(os.path.exists(os.path.join(current, marker)) for marker in _PROJECT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return folder
        current = parent


def module_name_for(file: str) -> tuple[str, str]:
    """(dotted module name, folder to put on sys.path) as `import` would see the file: the file's
    package chain (folders with __init__.py) is kept so relative imports work."""
    folder, base = os.path.split(file)
    parts = [os.path.splitext(base)[0]]
    while os.path.exists(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return ".".join(parts), folder


def _load_module(file: str, source: str) -> types.ModuleType:
    name, _import_root = module_name_for(file)
    package = name.rpartition(".")[0]
    if package:
        importlib.import_module(package)  # relative imports need the parent package (its errors are the user's)
    elif name in sys.modules:
        # a file named like an already imported module (`copy.py`, `test.py`): keep both importable
        name = f"{name}__atenlens_traced"
    module = types.ModuleType(name)
    module.__file__ = file
    module.__package__ = package
    module.__spec__ = importlib.util.spec_from_file_location(name, file)
    sys.modules[name] = module
    code = compile(source, file, "exec", dont_inherit=True)
    exec(code, module.__dict__)
    return module


@contextlib.contextmanager
def _user_import_state(file: str) -> Iterator[None]:
    """The file's folder and project root on sys.path (sibling modules import normally); on exit
    sys.path is restored and the user's modules are dropped from sys.modules, so the next trace
    in this process loads fresh code."""
    folder = os.path.dirname(file)
    _name, import_root = module_name_for(file)
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    for entry in (project_root(folder), import_root, folder):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:
            module_file = getattr(sys.modules[name], "__file__", None)
            if module_file is None or is_user_file(module_file):
                del sys.modules[name]


@contextlib.contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    """FakeTensorMode logs an internal traceback at ERROR level when a meta kernel rejects the user's
    shapes; the user gets that error as a diagnostic at their line, so torch's log would only clutter
    the captured stderr."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


# -- the time budget --------------------------------------------------------------------------------


@contextlib.contextmanager
def _time_budget(deadline: float) -> Iterator[None]:
    """Raise TraceTimeout in the main thread at `deadline`, and again every second after it until
    the block is left (a soft limit: the worker's hard limit kills the process if the code never
    returns to Python). Again, because where the signal lands may swallow the first one: a weakref
    callback or a `__del__` (Python prints "Exception ignored" and goes on), or a library's `except
    BaseException:`; a spinning loop then ran on until the hard kill, and its events were lost.
    No-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TraceTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.perf_counter(), 0.001), TIMEOUT_RETRY_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- the example call -------------------------------------------------------------------------------


def _resolve(module: types.ModuleType, qualname: str) -> Callable[..., Any]:
    value: Any = module
    for part in qualname.split("."):
        if not hasattr(value, part):
            raise _Stop(
                "error",
                f"{qualname} is not defined at the top level of {os.path.basename(module.__file__ or module.__name__)}",
            )
        value = getattr(value, part)
    if not callable(value):
        raise _Stop("error", f"{qualname} is not a function")
    return value


def _example_call(
    module: types.ModuleType, function: Callable[..., Any], info: Optional[FunctionInfo], override: Optional[str]
) -> ExampleCall:
    expression = split_example_call(override)[0] if override else (info.directive if info is not None else None)
    if expression is None:
        needs_args = info.needs_args if info is not None else _needs_args(function)
        if needs_args:
            template = directive_template(info) if info is not None else f"# atenlens: {function.__name__}(...)"
            message = (
                f"{getattr(function, '__qualname__', 'this function')} needs example inputs: "
                f"add a directive above the def, e.g. `{template}`, or pass --call"
            )
            line = (info.directive_line or info.first_line) if info is not None else None
            diagnostic = Diagnostic(
                file=module.__file__,
                line=line,
                column=info.column if info else None,
                severity="information",
                code=Code.NEEDS_INPUTS,
                kind="needs-inputs",
                message=message,
            )
            raise _Stop("needs-inputs", message, diagnostic)
        return ExampleCall(None, function, (), {})
    return build_example_call(module, expression)


def _needs_args(function: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    return any(
        p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        for p in signature.parameters.values()
    )


def build_example_call(module: types.ModuleType, expression: str) -> ExampleCall:
    """Evaluate the callee and the arguments of `expression` (not recorded: `*setup()` is not the
    traced function's work); the call itself is made by the caller, recorded."""
    try:
        tree = ast.parse(expression.strip(), EXAMPLE_CALL_FILENAME, mode="eval")
    except SyntaxError as error:
        raise _Stop("error", f"the example call `{expression}` is not valid Python: {error.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise _Stop("error", f"the example call `{expression}` must be a call, e.g. `f(x)`")
    namespace = module.__dict__

    def evaluate(node: ast.expr) -> Any:
        return eval(compile(ast.Expression(node), EXAMPLE_CALL_FILENAME, "eval"), namespace)

    function = evaluate(call.func)
    args: list[Any] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            args.extend(evaluate(arg.value))
        else:
            args.append(evaluate(arg))
    kwargs: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            kwargs.update(evaluate(keyword.value))
        else:
            kwargs[keyword.arg] = evaluate(keyword.value)
    return ExampleCall(expression.strip(), function, tuple(args), kwargs)
