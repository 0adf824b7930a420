"""torch.compile in a trace: where the compiled function breaks into pieces, and why.

Under the trace's modes a `torch.compile`d callable runs eagerly (Dynamo steps aside while a dispatch
mode is active), so its ops are recorded at the user's lines as for any other code. What the eager
run cannot show is what Dynamo makes of the code: its graph breaks. So `torch.compile` is watched
while the trace runs: each compiled callable's first call is noted (the tensors' metadata only, so
the note keeps no memory alive), and when the traced call has returned, Dynamo runs once on each with
fresh fake tensors of the same shapes and a backend that generates no code (`torch._dynamo.explain`).
Each graph break becomes an AL600 at the user line that caused it, with torch's own explanation and
hint (torch/_dynamo/graph_break_registry.json), and the callable's summary (graphs, breaks, guards) an
AL601 at its `def`. Where Dynamo's resumed Python asks a tensor for its value (`if t.sum() > 0:` after
the break), the analysis answers 1 / True: it decides only which branch the analysis follows, and
the message says so.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import json
import logging
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch

from atenlens.report import Code, Frame
from atenlens.trace import torch_compat as tc
from atenlens.trace.attribution import is_user_file, user_stack
from atenlens.trace.diagnostics import DiagnosticSink


@dataclass
class _Compiled:
    """One callable the traced code compiled, and what its first call passed."""

    original: Callable[..., Any]
    options: dict[str, Any]
    where: tuple[Frame, ...]  # the user's stack at torch.compile(...)
    args: Any = None  # the first call's arguments, tensors as _TensorSpec
    kwargs: Any = None
    called: bool = False


@dataclass(frozen=True)
class _TensorSpec:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool

    def build(self) -> torch.Tensor:
        t = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        return t.requires_grad_(self.requires_grad) if self.dtype.is_floating_point else t


@dataclass
class CompileWatch:
    """Notes every `torch.compile` of the traced program; `analyse()` reports what Dynamo makes of them."""

    sink: DiagnosticSink
    compiled: list[_Compiled] = field(default_factory=list)
    # what the watched torch.compile returned, kept alive: an id of an object that was freed may
    # come back as the id of the traced function itself (a function defined after a compiled one)
    _results: list[Any] = field(default_factory=list)

    def compile_on_request(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """The traced function as `torch.compile(function)` makes it (`--compile`), unless it already is."""
        if any(function is result for result in self._results):
            return function
        return torch.compile(function)  # the watched one, while `watching()`

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        real = torch.compile

        @functools.wraps(real)
        def compile(model: Any = None, **options: Any) -> Any:
            if model is None:  # @torch.compile(mode=...): a decorator
                return lambda m: compile(m, **options)
            return self._wrap(real(model, **options), model, options)

        torch.compile = compile
        try:
            with warnings.catch_warnings():
                # the recorder's global module hooks make OptimizedModule warn that they fire for it too
                warnings.filterwarnings(
                    "ignore", message=r"Using `torch.compile\(module\)` when there are global hooks"
                )
                yield
        finally:
            torch.compile = real

    def _wrap(self, result: Any, model: Any, options: dict[str, Any]) -> Any:
        note = _Compiled(original=model, options=options, where=user_stack())
        if not note.where and _definition(note) == ():  # a library compiling its own code: not ours to report
            return result
        self.compiled.append(note)
        self._results.append(result)

        def first_call(args: tuple, kwargs: dict) -> None:
            if not note.called:
                note.called = True
                note.args, note.kwargs = _specs(args), _specs(kwargs)

        if isinstance(result, torch.nn.Module):  # OptimizedModule: keep the module type

            def pre_hook(module: Any, args: tuple, kwargs: dict) -> None:
                first_call(args, kwargs)

            result.register_forward_pre_hook(pre_hook, with_kwargs=True)
            result.forward = tc.compiled_original(result).__call__  # eager (see below); stays an OptimizedModule
            return result

        @functools.wraps(model)
        def compiled(*args: Any, **kwargs: Any) -> Any:
            first_call(args, kwargs)
            return model(*args, **kwargs)  # eager, as Dynamo runs it under a dispatch mode anyway; and

        self._results.append(compiled)
        return compiled  # fullgraph=True would raise there ("found no compiled frames")

    def analyse(self, fake_mode: Any) -> None:
        """After the traced call: Dynamo on each compiled callable that ran, outside the recorder's modes."""
        for note in self.compiled:
            if note.called:
                self._analyse_one(note, fake_mode)

    def ran_out_of_time(self) -> None:
        self.sink.add(
            "compile",
            Code.COMPILE_SUMMARY,
            "torch.compile: the graph-break analysis ran past the trace's time budget; the trace is "
            "complete, the breaks of the callables not yet analysed are unknown",
            severity="information",
            stack=self.compiled[0].where if self.compiled else (),
        )

    def _analyse_one(self, note: _Compiled, fake_mode: Any) -> None:
        answers = tc.scalar_reads_answered(1)
        with tc.outside_trace_modes(), fake_mode, answers, _dynamo_quiet():
            args, kwargs = _built(note.args), _built(note.kwargs)
            try:
                graphs, guards, messages = tc.dynamo_analysis(note.original, args, kwargs)
                skips = cudagraph_skips(graphs) if note.options.get("mode") in _CUDAGRAPH_MODES else []
            except Exception as error:  # Dynamo itself failed on this code: say so, keep the trace
                self.sink.add(
                    "compile",
                    Code.COMPILE_SUMMARY,
                    f"torch.compile: Dynamo could not analyse this callable on fake inputs "
                    f"({type(error).__name__}: {_first_line(str(error))}); graph breaks unknown",
                    severity="information",
                    stack=_definition(note),
                )
                return
        breaks: dict[Frame, GraphBreak] = {}
        for message in messages:
            found = parse_break(message)
            if found is not None and is_user_file(found.frame.file):
                breaks.setdefault(found.frame, found)  # a break met again (a loop's resumed frames) is one
        for found in breaks.values():
            self.sink.add("graph-break", Code.GRAPH_BREAK, found.message(), severity="warning", stack=(found.frame,))
            self.sink.annotate(
                found.frame.file,
                found.frame.line,
                Code.SYNC,
                f"; torch.compile also breaks its graph at this line (AL600{f', {found.code}' if found.code else ''})",
            )
        for frame, reason in skips:
            self.sink.add(
                "compile",
                Code.CUDAGRAPH_SKIP,
                f'torch.compile(mode="{note.options["mode"]}"): CUDA graphs would skip the graph this '
                f"line is in ({reason}); that graph runs without CUDA graphs, one launch per kernel",
                severity="warning",
                stack=(frame,),
            )
        skipped = any(b.skips_frame for b in breaks.values())
        self.sink.add(
            "compile",
            Code.COMPILE_SUMMARY,
            _summary(note, len(graphs), len(breaks), guards, answers.reads, skipped),
            severity="information",
            stack=_definition(note),
        )


@dataclass(frozen=True)
class GraphBreak:
    frame: Frame
    code: Optional[str]  # torch's GB code
    text: str  # type, explanation and hints
    skips_frame: bool  # Dynamo gave up on the whole function (a break inside a loop): it runs eagerly

    def message(self) -> str:
        text = f"torch.compile graph break{f' ({self.code})' if self.code else ''}: {self.text}"
        if self.skips_frame:
            text += (
                "; the break is inside a loop, so Dynamo skips the whole function and runs it eagerly "
                "(nothing of it is compiled)"
            )
        return text


_BREAK_AT = re.compile(r"Graph break in user code at (.+):(\d+)\n")
_WRAPPERS = ("Failed to handle graph break gracefully", "Encountered graph break when attempting to trace")


def parse_break(message: str) -> Optional[GraphBreak]:
    """One graph-break log message -> where and why (None for a message of another shape)."""
    at = _BREAK_AT.match(message)
    if at is None or "Graph Break Reason: " not in message:
        return None
    reason = message.split("Graph Break Reason: ", 1)[1].split("\nUser code traceback:", 1)[0]
    reason, nested, _ = reason.partition("\n\n*** While handling this graph break, another graph break occurred")
    skips = bool(nested) and "graph break in loop" in message
    while True:  # Dynamo wraps the reason in context paragraphs ending with ':'
        head, sep, rest = reason.partition("\n\n")
        if sep and head.startswith(_WRAPPERS) and head.rstrip().endswith(":"):
            skips = skips or "Skipping the function" in head
            reason = rest
        else:
            break
    code, text = describe_break(reason)
    frame = Frame(at.group(1), int(at.group(2)), "")
    return GraphBreak(frame=frame, code=code, text=text, skips_frame=skips)


_CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
_TRACE_FILE = re.compile(r'File "(.+)", line (\d+)')


def cudagraph_skips(graphs: list[Any]) -> list[tuple[Frame, str]]:
    """Why inductor's CUDA graphs (cudagraph trees) would skip each graph, at the first user line that
    causes it: a CPU tensor in the graph, or an input the graph mutates that is not a parameter or a
    buffer (inductor's "skipping cudagraphs due to cpu device" / "due to mutated inputs"). One reason
    per graph, the first found."""
    found = []
    for gm in graphs:
        placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
        for node in gm.graph.nodes:
            reason = _skip_reason(node, placeholders)
            frame = _node_frame(node) if reason else None
            if reason and frame is not None:
                found.append((frame, reason))
                break
    return found


def _skip_reason(node: Any, placeholders: set) -> Optional[str]:
    value = node.meta.get("example_value")
    if (
        node.op in ("placeholder", "call_function", "call_method")
        and isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.dim() > 0
    ):
        return f"a CPU tensor {_shape_text(_spec_of(value))} in it"
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if (
        node.op in ("call_method", "call_function")
        and isinstance(name, str)
        and name.endswith("_")
        and not name.endswith("__")
        and node.args
        and node.args[0] in placeholders
    ):
        source = str(node.args[0].target)
        if "_parameters" not in source and "_buffers" not in source:
            return f"it mutates its input `{source.removeprefix('L_').rstrip('_')}` in place with {name}"
    return None


def _node_frame(node: Any) -> Optional[Frame]:
    for file, line in reversed(_TRACE_FILE.findall(node.meta.get("stack_trace") or "")):
        if is_user_file(file):
            return Frame(file, int(line), "")
    return None


def _spec_of(t: torch.Tensor) -> _TensorSpec:
    return _TensorSpec(tuple(t.shape), tuple(t.stride()), t.dtype, t.device, False)


def _summary(note: _Compiled, graphs: int, breaks: int, guards: int, reads: int, skipped: bool) -> str:
    shapes = ", ".join(_shape_text(a) for a in (note.args or ()) if isinstance(a, _TensorSpec))
    text = (
        f"torch.compile: {graphs} graph{'s' if graphs != 1 else ''}, {breaks} graph "
        f"break{'s' if breaks != 1 else ''}, {guards} guard{'s' if guards != 1 else ''} "
        f"(Dynamo on the first call's inputs{f': {shapes}' if shapes else ''}"
    )
    if reads:
        text += f"; {reads} value read{'s' if reads != 1 else ''} in resumed code assumed 1 / True"
    text += ")"
    if skipped:
        text += "; a break inside a loop made Dynamo run a function eagerly"
    if breaks and note.options.get("fullgraph"):
        text += "; fullgraph=True: on a GPU this raises at the first break"
    return text


def _shape_text(spec: _TensorSpec) -> str:
    return f"{str(spec.dtype).removeprefix('torch.')}{list(spec.shape)}"


# Reason texts that carry no GB code: Dynamo builds them itself (symbolic_convert.generic_jump).
_UNCODED = (("generic_jump", "GB0170"),)
_GB_URL = re.compile(r"/gb/(gb\d{4})\.html", re.IGNORECASE)


def describe_break(reason: str) -> tuple[Optional[str], str]:
    """(GB code or None, one readable sentence: torch's explanation and hints) for a Dynamo break reason.
    Coded reasons carry their filled-in text ("<type>\\n  Explanation: ...\\n  Hint: ..."); the registry's
    entries are templates, used only for the few reasons Dynamo writes without a code."""
    match = _GB_URL.search(reason)
    code = match.group(1).upper() if match else None
    if code is None:
        code = next((gb for prefix, gb in _UNCODED if reason.startswith(prefix)), None) or _registry_code_of(
            _first_line(reason)
        )
        entry = _registry().get(code or "")
        if entry is not None and "{" not in entry.get("Explanation", ""):
            return code, _sentence(entry["Gb_type"], _clean(entry.get("Explanation", "")), [])
        return code, _first_line(reason)
    lines = [line.strip() for line in reason.strip().splitlines()]
    explanation = " ".join(
        line.removeprefix("Explanation:").strip() for line in lines if line.startswith("Explanation:")
    )
    hints = [line.removeprefix("Hint:").strip() for line in lines if line.startswith("Hint:")]
    hints = [h for h in hints if not h.startswith("Your code may") and "report an issue" not in h.lower()]
    return code, _sentence(lines[0], explanation, hints)


def _sentence(gb_type: str, explanation: str, hints: list[str]) -> str:
    parts = [gb_type] + ([explanation] if explanation else []) + (["Hint: " + " ".join(hints)] if hints else [])
    return " ".join(p if p.endswith((".", "!", "?")) else p + "." for p in (p.strip() for p in parts)).rstrip(".")


def _clean(text: str) -> str:
    """The registry keeps some texts as the source wrote them (quoted, with `+ trace_info`)."""
    text = re.sub(r'"\s+"', "", text.strip())
    text = re.sub(r"\s*\+\s*\w+$", "", text).strip().strip('"').strip()
    return " ".join(text.split())


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


@functools.lru_cache(maxsize=1)
def _registry() -> dict[str, dict[str, Any]]:
    path = tc.dynamo_file("graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as f:
            return {code: entries[0] for code, entries in json.load(f).items() if entries}
    except (OSError, ValueError):
        return {}


def _registry_code_of(gb_type: str) -> Optional[str]:
    for code, entry in _registry().items():
        if entry.get("Gb_type") == gb_type:
            return code
    return None


@contextlib.contextmanager
def _dynamo_quiet() -> Iterator[None]:
    """Dynamo logs each break as a warning on stderr (the diagnostics say it at the line instead), and the
    analysis re-runs the user's Python: what it prints was printed by the traced run already."""
    logger = logging.getLogger("torch._dynamo")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def _definition(note: _Compiled) -> tuple[Frame, ...]:
    """Where the summary stands: the compiled function's `def` when it is the user's, else torch.compile(...)."""
    target = note.original
    owner = getattr(target, "__self__", None)
    if isinstance(owner, torch.nn.Module):  # module.compile() compiles its bound _call_impl
        target = owner
    if isinstance(target, torch.nn.Module):
        target = type(target).forward
    target = inspect.unwrap(getattr(target, "__func__", target))
    code = getattr(target, "__code__", None)
    if code is not None and is_user_file(code.co_filename):
        return (Frame(code.co_filename, code.co_firstlineno, code.co_qualname),)
    return note.where


def _specs(value: Any) -> Any:
    return tc.tree_map(
        lambda v: (
            _TensorSpec(tuple(v.shape), tuple(v.stride()), v.dtype, tc.tensor_device(v), v.requires_grad)
            if isinstance(v, torch.Tensor)
            else v
        ),
        value,
    )


def _built(value: Any) -> Any:
    return tc.tree_map(lambda v: v.build() if isinstance(v, _TensorSpec) else v, value)
