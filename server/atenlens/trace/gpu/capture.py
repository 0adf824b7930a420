"""CUDA graph capture on simulated CUDA: what a real capture would reject or silently get wrong.

`torch.cuda.CUDAGraph` / `torch.cuda.graph(g)` / `torch.cuda.make_graphed_callables` run in the trace
(the simulated `CUDAGraph` in cuda_api.py); the ops between `capture_begin()` and `capture_end()` run
once, as the capture does on a GPU, and are recorded at their lines; `replay()` runs nothing (the
values are fake anyway) and is counted. While a capture is open:

- a sync (`.item()`, `if t:`, a data-dependent size, `torch.cuda.synchronize()`) is an error on a GPU
  (the capture is invalidated: cudaErrorStreamCaptureUnsupported): AL510 instead of AL100 / AL101 (so is a capture begun on the default stream);
- work that reads a CPU tensor is captured once and replayed from the same host buffer, or not at all
  (CPU ops never replay): AL511;
- work on a stream that did not branch from the capturing stream (`side.wait_stream(capturing)`),
  or a capture that ends before the capturing stream waited for such work, raises on a GPU
  (cudaErrorStreamCaptureIsolation / cudaErrorStreamCaptureUnjoined): AL510;
- `step()` of an optimizer built with `capturable=False` (Adam, AdamW, ...) raises on a GPU, from
  torch's own health check, which a CPU-only torch skips: AL510;
- a capture that begins before any work ran on a side stream had no warm-up, which torch requires
  (lazy initialisation inside a capture fails or is captured): AL512;
- a random op drawing from a CUDA generator the graph was not told about
  (`g.register_generator_state(gen)`) raises on a GPU; torch.cuda.graph registers only the default
  generator: AL514;
- each capture gets a summary at its line (AL513): ops captured, replays, collectives, and whether it
  is capturable.

After `capture_end()`, the captured ops' outputs hold nothing until the first `replay()` (a capture
records kernels without running them): user code that reads one before that reads uninitialised
memory, with no error: AL515. Between replays, a static input's name bound to a new tensor (AL516)
and a static output kept by reference across a replay (AL517): replays.py.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from atenlens.report import Code, Frame
from atenlens.trace.attribution import library_cause, user_stack
from atenlens.trace.gpu.replays import ReplayChecks, StaticTensors, static_tensors, user_caller
from atenlens.trace.torch_compat import generator_id, storage_key

_MAX_OUTPUTS = 100_000  # outputs kept per capture for the replays' writes (a bound, not a model limit)


@dataclass
class _Capture:
    graph_id: int
    where: tuple[Frame, ...]  # the user's stack at capture_begin
    on_default_stream: bool
    ops: int = 0
    collectives: int = 0
    problems: list[str] = field(default_factory=list)  # "AL510 line 12", for the summary
    lines: set[int] = field(default_factory=set)  # the user lines whose ops were captured
    replays: int = 0
    outputs: list[Any] = field(default_factory=list)  # weak references to the captured ops' outputs
    synced: bool = False  # torch.cuda.graph synchronized the device before it
    generators: set[int] = field(default_factory=set)  # ids of generators registered with the graph
    stream: int = 0  # id of the capturing stream
    joined: set[int] = field(default_factory=set)  # streams that branched from the capturing stream
    unjoined: dict[int, Any] = field(default_factory=dict)  # streams whose work it has not waited for yet
    by_user: bool = False  # the user's code began it (not make_graphed_callables): its static tensors are checked
    inputs: set[int] = field(default_factory=set)  # storages read before any captured op wrote them
    produced: set[int] = field(default_factory=set)  # storages the captured ops wrote
    static: Optional[StaticTensors] = None  # the capturing frame's names for them (replays.py)


class CaptureTracker:
    """The open capture (one at a time, as on a GPU) and every finished one, for their summaries.
    `report(kind, code, message, op, severity)` is the hazard tracker's reporter."""

    def __init__(
        self,
        report: Callable[..., None],
        add: Callable[..., Any],
        current_stream: Callable[[], Any],
        describe: Callable[[Any], str],
    ) -> None:
        self._report = report
        self._add = add  # the sink's add, for the summaries
        self._current_stream = current_stream
        self._describe = describe  # a stream, as messages name it
        self._event_streams: dict[int, int] = {}  # event -> the stream it was recorded on, in a capture
        self._step_hook: Any = None  # the optimizer step pre-hook, while the trace has captured
        self.active: Optional[_Capture] = None
        self._captures: dict[int, _Capture] = {}
        self.side_stream_work = False  # any op ran on a side stream so far (a warm-up)
        self._cpu_lines: set[tuple[int, int]] = set()
        self.library_synced = False  # torch.cuda.graph's synchronize, for the next capture
        # storage -> (graph id, the capture's line, the tensor's label): outputs of captures that were
        # not replayed yet; empty on the common path, so the per-op check is one truth test
        self.unreplayed: dict[int, tuple[int, int, str]] = {}
        self._registered: dict[int, set[int]] = {}  # graph id -> generators registered before capture
        self._unregistered_lines: set[tuple[int, int]] = set()
        # static inputs rebound and static outputs kept across replays (AL516, AL517): empty until a
        # capture ends, so the per-op check is one truth test
        self.replays = ReplayChecks(self._report_replay, _label)

    # -- the simulated CUDAGraph's calls --------------------------------------------------------
    def begin(self, graph: Any, on_default_stream: bool) -> None:
        if self.active is not None:
            raise RuntimeError("CUDA graph capture already in progress (the simulated GPU captures one at a time)")
        capture = _Capture(
            id(graph),
            user_stack(sys._getframe(2)),
            on_default_stream,
            synced=self.library_synced,
            generators=self._registered.get(id(graph), set()),
        )
        capture.stream = id(self._current_stream())
        capture.joined = {capture.stream}
        capture.by_user = user_caller(sys._getframe(1)) is not None
        self.library_synced = False
        self.active = capture
        if self._step_hook is None:
            self._step_hook = register_optimizer_step_pre_hook(self._optimizer_step)
        self._captures[id(graph)] = capture
        if on_default_stream:
            self._report(
                "capture",
                Code.UNSUPPORTED_IN_CAPTURE,
                "CUDA graph capture begins on the default stream: on a GPU capture_begin() raises "
                "(the legacy default stream cannot be captured); capture under `torch.cuda.graph(g)`, "
                "which uses a side stream, or inside `with torch.cuda.stream(side):`",
                None,
                "error",
                name_library=False,
            )
            capture.problems.append(f"captured on the default stream ({Code.UNSUPPORTED_IN_CAPTURE})")
        if not self.side_stream_work:
            self._report(
                "capture",
                Code.CAPTURE_WITHOUT_WARMUP,
                "CUDA graph capture with no warm-up: no work ran on a side stream before it. torch "
                "requires running the captured code a few times on a side stream first (lazy "
                "initialisation inside a capture, such as cuBLAS workspaces, optimizer state or "
                "autograd's streams, fails or is captured as work that never replays)",
                None,
                "warning",
                name_library=False,
            )
            capture.problems.append(f"no warm-up ({Code.CAPTURE_WITHOUT_WARMUP})")

    def end(self, graph: Any) -> None:
        capture = self.active
        if capture is None or capture.graph_id != id(graph):
            raise RuntimeError("capture_end() without a capture in progress on this graph")
        if capture.unjoined:
            names = ", ".join(self._describe(stream) for stream in capture.unjoined.values())
            self._report(
                "capture",
                Code.UNSUPPORTED_IN_CAPTURE,
                f"the CUDA graph capture ends while work captured on {names} was not waited for by the capturing "
                "stream: on a GPU capture_end() raises (cudaErrorStreamCaptureUnjoined); rejoin before the "
                "capture ends: `torch.cuda.current_stream().wait_stream(side)`",
                None,
                "error",
                name_library=False,
            )
            capture.problems.append(f"a side stream not rejoined ({Code.UNSUPPORTED_IN_CAPTURE})")
        self.active = None
        self._event_streams.clear()
        line = capture.where[-1].line if capture.where else 0
        frame = user_caller(sys._getframe(1)) if capture.by_user else None
        if frame is not None:
            alive = [t for t in (ref() for ref in capture.outputs) if t is not None]
            capture.static = static_tensors(frame, line, capture.inputs, alive)
            self.replays.watch(capture.static)
        if capture.replays == 0:
            for ref in capture.outputs:
                t = ref()
                key = storage_key(t) if t is not None else None
                if key is not None:
                    self.unreplayed.setdefault(key, (capture.graph_id, line, _label(t)))

    def register_generator(self, graph: Any, generator: Any) -> None:
        """`graph.register_generator_state(generator)`: its random ops may draw from it."""
        self._registered.setdefault(id(graph), set()).add(generator_id(generator))

    def replayed(self, graph: Any) -> list[torch.Tensor]:
        """A replay; returns the captured outputs still alive, which the replay writes again (on the
        stream current at the replay, where torch launches the graph)."""
        capture = self._captures.get(id(graph))
        if capture is None:
            raise RuntimeError("replay() of a CUDA graph that was never captured")
        if self.active is not None:
            raise RuntimeError("replay() while a CUDA graph capture is in progress")
        capture.replays += 1
        if capture.static is not None:
            self.replays.replayed(capture.static, user_caller(sys._getframe(1)))
        if self.unreplayed:
            self.unreplayed = {k: v for k, v in self.unreplayed.items() if v[0] != capture.graph_id}
        return [t for t in (ref() for ref in capture.outputs) if t is not None]

    def _report_replay(self, code: str, message: str) -> None:
        self._report("capture", code, message, None, "warning", name_library=False)

    def _optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch's optimizers check `capturable` before a step inside a capture, but only where a
        CUDA build of torch runs (torch.accelerator): the simulated GPU makes the same check."""
        capture = self.active
        if capture is None or not isinstance(optimizer, _CAPTURE_CHECKED_OPTIMIZERS):
            return
        if all(group.get("capturable", False) for group in optimizer.param_groups):
            return
        name = type(optimizer).__name__
        self._report(
            "capture",
            Code.UNSUPPORTED_IN_CAPTURE,
            f"`{name}.step()` inside a CUDA graph capture, built with capturable=False: on a GPU step() raises "
            f"`RuntimeError: Attempting CUDA graph capture of step() for an instance of {name} but param_groups' "
            f"capturable is False.`; build it with `{name}(..., capturable=True)` (its step counters then stay "
            "on the GPU)",
            None,
            "error",
            name_library=False,
        )
        capture.problems.append(
            f"{name} with capturable=False at line {_line(sys._getframe(1))} ({Code.UNSUPPORTED_IN_CAPTURE})"
        )

    def stream_waits(self, waiter: Any, other: Optional[int]) -> None:
        """`waiter.wait_stream(other)` or `waiter.wait_event(e)` of an event recorded on `other`, in a
        capture: a stream that waits for a joined one branches from the capture; the capturing stream
        waiting for a side stream joins that stream's work back."""
        capture = self.active
        if capture is None or other is None:
            return
        if other in capture.joined:
            capture.joined.add(id(waiter))
        if id(waiter) == capture.stream:
            capture.unjoined.pop(other, None)

    def event_recorded(self, event: Any, stream: Any) -> None:
        if self.active is not None:
            self._event_streams[id(event)] = id(stream)

    def event_stream(self, event: Any) -> Optional[int]:
        return self._event_streams.get(id(event))

    def is_capturing(self) -> bool:
        return self.active is not None

    def read_before_replay(self, args: tuple, kwargs: dict, op: str) -> None:
        """An op outside any capture: does user code read a captured output before its graph's
        first replay? Reported once per capture, at the read."""
        for t in _tensors(args, kwargs):
            key = storage_key(t)
            found = self.unreplayed.get(key) if key is not None else None
            if found is None or library_cause(sys._getframe(2)) is not None:
                continue
            graph_id, line, label = found
            self.unreplayed = {k: v for k, v in self.unreplayed.items() if v[0] != graph_id}
            self._report(
                "capture",
                Code.CAPTURED_OUTPUT_BEFORE_REPLAY,
                f"{label} is an output of the CUDA graph captured at line {line}, read before the graph's first "
                "`replay()`: a capture records the kernels without running them, so on a GPU this reads "
                "uninitialised memory, with no error; replay the graph before reading its outputs",
                op,
                "warning",
            )
            return

    # -- what runs while a capture is open ---------------------------------------------------------
    def sync(self, what: str, op: Optional[str]) -> None:
        """A sync inside the capture: `what` is the sync's own message."""
        assert self.active is not None
        self._report(
            "capture",
            Code.UNSUPPORTED_IN_CAPTURE,
            f"{what}, inside a CUDA graph capture: on a GPU this invalidates "
            "the capture (cudaErrorStreamCaptureUnsupported) and raises; a captured graph cannot wait for "
            "its own results: keep the value on the device, or move this out of the captured region",
            op,
            "error",
        )
        self.active.problems.append(f"a sync at line {_line(sys._getframe(1))} ({Code.UNSUPPORTED_IN_CAPTURE})")

    def op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        capture = self.active
        assert capture is not None
        capture.ops += 1
        stream = self._current_stream()
        if id(stream) != capture.stream:
            if id(stream) not in capture.joined:
                capture.joined.add(id(stream))  # reported once per stream
                self._report(
                    "capture",
                    Code.UNSUPPORTED_IN_CAPTURE,
                    f"work on {self._describe(stream)} inside a CUDA graph capture, and that stream did not branch "
                    "from the capturing stream: on a GPU this raises (cudaErrorStreamCaptureIsolation); make it "
                    "wait first: `side.wait_stream(torch.cuda.current_stream())` inside the capture",
                    str(func),
                    "error",
                )
                capture.problems.append(
                    f"a stream not branched from the capture at line {_line(sys._getframe(1))} "
                    f"({Code.UNSUPPORTED_IN_CAPTURE})"
                )
            capture.unjoined[id(stream)] = stream
        if capture.by_user:
            for t in _tensors(args, kwargs):
                key = storage_key(t) if t.device.type == "cuda" else None
                if key is not None and key not in capture.produced:
                    capture.inputs.add(key)
            for t in out if isinstance(out, (tuple, list)) else (out,):
                key = storage_key(t) if isinstance(t, torch.Tensor) else None
                if key is not None:
                    capture.produced.add(key)
        if len(capture.outputs) < _MAX_OUTPUTS:
            capture.outputs += [
                weakref.ref(t)
                for t in (out if isinstance(out, (tuple, list)) else (out,))
                if isinstance(t, torch.Tensor) and t.device.type == "cuda"
            ]
        line = _line(sys._getframe(1))
        if line is not None:
            capture.lines.add(line)
        if func.namespace == "_c10d_functional" or "c10d" in func.namespace:
            capture.collectives += 1
        generator = kwargs.get("generator") if kwargs else None
        if (
            isinstance(generator, torch.Generator)
            and generator.device.type == "cuda"
            and generator_id(generator) not in capture.generators
            and generator_id(generator) not in _default_generators()
            and (capture.graph_id, line or 0) not in self._unregistered_lines
        ):
            self._unregistered_lines.add((capture.graph_id, line or 0))
            self._report(
                "capture",
                Code.CAPTURE_UNREGISTERED_GENERATOR,
                "a random op draws from a CUDA generator that this graph does not know about: on a GPU the capture "
                "raises `RuntimeError: Attempt to increase offset for a CUDA generator not in capture mode.` "
                "(torch.cuda.graph registers only the default generator); call "
                "`g.register_generator_state(generator)` before the capture, so each replay draws new numbers",
                str(func),
                "error",
            )
            capture.problems.append(f"an unregistered generator at line {line} ({Code.CAPTURE_UNREGISTERED_GENERATOR})")
        cpu = next((t for t in _tensors(args, kwargs) if t.device.type == "cpu" and t.dim() > 0), None)
        if cpu is not None and (capture.graph_id, line or 0) not in self._cpu_lines:
            self._cpu_lines.add((capture.graph_id, line or 0))
            copy = func is torch.ops.aten.copy_.default or func is torch.ops.aten._to_copy.default
            detail = (
                (
                    "the captured copy reads this host buffer's address on every replay: the program must "
                    "write each step's data into that same buffer (pinned; a pageable source cannot be "
                    "captured)"
                )
                if copy
                else ("CPU work is not captured: it ran once now and does not run on replay")
            )
            self._report(
                "capture",
                Code.CPU_IN_CAPTURE,
                f"a CPU tensor {_label(cpu)} is used inside a CUDA graph capture: {detail}",
                str(func),
                "warning",
            )
            capture.problems.append(f"a CPU tensor at line {line} ({Code.CPU_IN_CAPTURE})")

    def stream_work(self, on_side_stream: bool) -> None:
        if on_side_stream:
            self.side_stream_work = True

    # -- the end of the trace: one summary per capture ----------------------------------------------
    def finish(self) -> None:
        """One summary per line that captured (a capture in a loop captures once per iteration)."""
        by_line: dict[tuple[Frame, ...], list[_Capture]] = {}
        for capture in self._captures.values():
            by_line.setdefault(capture.where, []).append(capture)
        for where, captures in by_line.items():
            self._add("capture", Code.CAPTURE_SUMMARY, _summary(captures), severity="information", stack=where)
        self._captures.clear()
        self.replays.watched.clear()
        if self._step_hook is not None:
            self._step_hook.remove()
            self._step_hook = None


def _summary(captures: list[_Capture]) -> str:
    lines = set().union(*(c.lines for c in captures))
    span = (
        (f"line {min(lines)}" if len(lines) == 1 else f"lines {min(lines)}-{max(lines)}")
        if lines
        else "all in library code"
    )
    ops, replays = max(c.ops for c in captures), sum(c.replays for c in captures)
    text = f"CUDA graph: {len(captures)} captures here, up to " if len(captures) > 1 else "CUDA graph: "
    text += f"{ops} op{'s' if ops != 1 else ''} captured ({span}), replayed {replays} time{'s' if replays != 1 else ''}"
    if any(c.synced for c in captures):
        text += "; torch.cuda.graph synchronized the device before capturing (by design: capture once, replay often)"
    collectives = max(c.collectives for c in captures)
    if collectives:
        text += (
            f"; captures {collectives} collective{'s' if collectives != 1 else ''} "
            "(NCCL >= 2.9.6 and a capture-safe process group are needed)"
        )
    problems = list(dict.fromkeys(p for c in captures for p in c.problems))
    if problems:
        text += "; not capturable as written: " + ", ".join(problems)
    else:
        text += "; capturable: no sync, CPU tensor or missing warm-up seen inside it"
    return text


# the optimizers whose step() runs torch's capture health check (torch/optim/*.py in torch 2.13:
# `self._accelerator_graph_capture_health_check()`); SGD and Adagrad do not check
_CAPTURE_CHECKED_OPTIMIZERS = tuple(
    getattr(torch.optim, name)
    for name in ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "ASGD", "Adadelta", "RMSprop", "Rprop", "Adafactor")
    if hasattr(torch.optim, name)
)


def _default_generators() -> set[int]:
    """torch.cuda's default generators, which every capture registers itself."""
    return {generator_id(g) for g in getattr(torch.cuda, "default_generators", ())}


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    found = [a for a in args if isinstance(a, torch.Tensor)]
    for a in args:
        if isinstance(a, (list, tuple)):
            found += [t for t in a if isinstance(t, torch.Tensor)]
    return found + [v for v in kwargs.values() if isinstance(v, torch.Tensor)]


def _line(frame: Any) -> Optional[int]:
    stack = user_stack(frame)
    return stack[-1].line if stack else None


def _label(t: torch.Tensor) -> str:
    from atenlens.trace.gpu.tracker import tensor_label

    return tensor_label(t)
