"""What user code does with a CUDA graph's static tensors between replays.

A captured graph reads and writes fixed addresses: the tensors its capture read (static inputs) and
the outputs its ops allocated (static outputs). Two mistakes give wrong numbers on a GPU, with no error:

- AL516: the name the capture read is bound to a new tensor (`static_x = batch.cuda()`) and the graph
  is replayed without anything written into the captured tensor: the replay reads the old address, so
  the new data is never seen. Fix: `static_x.copy_(batch)`.
- AL517: a reference to a static output is kept (appended to a list, put in a dict, bound to another
  variable) and the graph is replayed again before anything read it: the replay overwrites it in place,
  so every kept reference shows the last replay's values. Fix: keep `static_y.clone()`.

Both are decided at `replay()`, from the user frames on the stack: the names the capturing frame bound to
its static tensors when the capture ended (locals, and tensor attributes of its `self`), and, for
AL517, the lists, tuples, dicts and variables of the replaying frames that hold a static output. Only a
capture and replays the user's code makes itself are checked (make_graphed_callables copies into its own
static inputs and clones its outputs).
"""

from __future__ import annotations

import itertools
import os
import weakref
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Callable, Optional

import torch

from atenlens.report import Code
from atenlens.trace.attribution import is_user_file
from atenlens.trace.torch_compat import storage_key, written_arguments

_ATENLENS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_GRAPHS_FILE = os.path.join("torch", "cuda", "graphs.py")
_TAIL = 16  # the last entries of a list or tuple looked at (an append adds at the end)
_DICT_VALUES = 64
aten = torch.ops.aten
# ops that write their first argument without reading it
_WRITES_ONLY = frozenset({aten.copy_.default, aten.zero_.default, aten.fill_.Scalar, aten.fill_.Tensor})


def user_caller(frame: Optional[FrameType]) -> Optional[FrameType]:
    """The user frame that called the simulated CUDAGraph itself (directly, or through the `with` of
    torch.cuda.graph), else None (torch's make_graphed_callables, another library)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_user_file(filename):
            return frame
        through_with = filename.endswith(_GRAPHS_FILE) and frame.f_code.co_name in ("__enter__", "__exit__")
        if not filename.startswith(_ATENLENS_DIR) and not through_with:
            return None
        frame = frame.f_back
    return None


@dataclass
class _Input:
    name: str  # "static_x", or "self.static_x"
    code: Any  # the capturing frame's code object (for a local name)
    owner: Any  # a weak reference to the capturing frame's `self` (for an attribute), else None
    tensor: Any  # a weak reference to the tensor the capture read
    key: int
    shape: torch.Size
    dtype: torch.dtype


@dataclass
class StaticTensors:
    """One capture's static tensors as the user's code names them, and what happened to them since
    the graph's last replay."""

    line: int  # the capture's line, for messages
    inputs: list[_Input]
    input_keys: set[int]
    outputs: dict[int, str]  # storage -> the name the capturing frame gave it ("" if none)
    output_names: set[tuple[int, str]]  # (id of the capturing code, name): the capture's own names
    written: set[int] = field(default_factory=set)  # static inputs written since the last replay
    read: set[int] = field(default_factory=set)  # static outputs read since the last replay
    holders: dict[tuple[int, str], int] = field(default_factory=dict)  # holder -> references at the last replay
    replays: int = 0


def static_tensors(frame: FrameType, line: int, inputs: set[int], outputs: list[torch.Tensor]) -> StaticTensors:
    """At the capture's end: the capturing frame's names for its static inputs and outputs."""
    output_keys = {k: "" for k in (storage_key(t) for t in outputs) if k is not None}
    found: list[_Input] = []
    output_names: set[tuple[int, str]] = set()
    local = dict(frame.f_locals)
    named: list[tuple[str, Any, Any]] = [(name, value, None) for name, value in local.items()]
    owner = local.get("self")
    if owner is not None and hasattr(owner, "__dict__"):
        try:
            ref: Any = weakref.ref(owner)
        except TypeError:
            ref = None
        if ref is not None:
            named += [(f"self.{name}", value, ref) for name, value in vars(owner).items()]
    for name, value, owner_ref in named:
        if not isinstance(value, torch.Tensor):
            continue
        key = storage_key(value)
        if key in inputs:
            found.append(_Input(name, frame.f_code, owner_ref, weakref.ref(value), key, value.shape, value.dtype))
        elif key in output_keys and owner_ref is None:
            output_names.add((id(frame.f_code), name))
            output_keys[key] = output_keys[key] or name
    return StaticTensors(line, found, {i.key for i in found}, output_keys, output_names)


class ReplayChecks:
    """The static tensors of every capture the user's code made, watched between replays.
    `report(code, message)` reports at the replaying line."""

    def __init__(self, report: Callable[[str, str], None], label: Callable[[torch.Tensor], str]) -> None:
        self._report = report
        self._label = label
        self.watched: dict[int, list[StaticTensors]] = {}  # storage -> the captures it is static in
        self._reported: set[tuple[int, str, str]] = set()  # (capture line, code, name)

    def watch(self, graph_tensors: StaticTensors) -> None:
        for key in (*graph_tensors.input_keys, *graph_tensors.outputs):
            self.watched.setdefault(key, []).append(graph_tensors)

    def op(self, func: Any, args: tuple, kwargs: dict) -> None:
        """An op outside any capture while static tensors are watched: writes of static inputs, reads
        of static outputs."""
        positions, names = _written(func)
        for index, t in enumerate(args):
            if isinstance(t, torch.Tensor):
                self._used(t, index in positions, func in _WRITES_ONLY and index == 0)
            elif isinstance(t, (list, tuple)):
                for item in t:
                    if isinstance(item, torch.Tensor):
                        self._used(item, False, False)
        for name, t in kwargs.items():
            if isinstance(t, torch.Tensor):
                self._used(t, name in names, name in names)

    def _used(self, t: torch.Tensor, written: bool, only_written: bool) -> None:
        key = storage_key(t)
        for tensors in self.watched.get(key, ()) if key is not None else ():
            if written and key in tensors.input_keys:
                tensors.written.add(key)
            if not only_written and key in tensors.outputs:
                tensors.read.add(key)

    def replayed(self, tensors: StaticTensors, frame: Optional[FrameType]) -> None:
        """`replay()` of a graph whose static tensors are watched, called from `frame` (a user frame)."""
        tensors.replays += 1
        if frame is not None:
            frames = _user_frames(frame)
            self._rebound_inputs(tensors, frames)
            self._kept_outputs(tensors, frames)
        tensors.written.clear()
        tensors.read.clear()

    def _rebound_inputs(self, tensors: StaticTensors, frames: list[FrameType]) -> None:
        for static in tensors.inputs:
            if (
                static.key in tensors.written
                or (tensors.line, Code.STATIC_INPUT_REBOUND, static.name) in self._reported
            ):
                continue
            value = _current_value(static, frames)
            captured = static.tensor()
            if (
                not isinstance(value, torch.Tensor)
                or value is captured
                or storage_key(value) == (static.key if captured is not None else None)
                or value.shape != static.shape
                or value.dtype != static.dtype
            ):
                continue
            self._reported.add((tensors.line, Code.STATIC_INPUT_REBOUND, static.name))
            self._report(
                Code.STATIC_INPUT_REBOUND,
                f"`{static.name}` is bound to a new tensor {self._label(value)} since the CUDA graph captured at line "
                f"{tensors.line} read the one it held, and nothing was written into that one before this replay: "
                "the graph reads the address it captured, so the new data is never seen, with no error; copy into "
                f"the captured tensor instead: `{static.name}.copy_(new_data)`",
            )

    def _kept_outputs(self, tensors: StaticTensors, frames: list[FrameType]) -> None:
        counts: dict[tuple[int, str], tuple[int, str, int, str]] = {}  # holder -> (references, kind, key, name)
        for f in frames:
            for name, value in dict(f.f_locals).items():
                holder = (id(f.f_code), name)
                if holder in tensors.output_names:
                    continue
                found = _references(value, tensors.outputs)
                if found is not None:
                    counts[holder] = (found[0], _kind(value), found[1], name)
        for holder, (references, kind, key, name) in counts.items():
            before = tensors.holders.get(holder, 0)
            tensors.holders[holder] = references
            if (
                tensors.replays < 2
                or references <= before
                or key in tensors.read
                or (tensors.line, Code.STATIC_OUTPUT_KEPT, name) in self._reported
            ):
                continue
            self._reported.add((tensors.line, Code.STATIC_OUTPUT_KEPT, name))
            output = tensors.outputs[key]
            copy = f"`{output}.clone()`" if output else "a `.clone()`"
            self._report(
                Code.STATIC_OUTPUT_KEPT,
                f"`{name}`{kind} keeps a reference to a static output of the CUDA graph captured at line {tensors.line}, "
                "and this replay overwrites that output in place before anything read it: every reference kept "
                f"shows the last replay's values, with no error; keep a copy instead: {copy}",
            )
        for holder in [h for h in tensors.holders if h not in counts]:
            del tensors.holders[holder]


_WRITTEN: dict[Any, tuple[tuple[int, ...], tuple[str, ...]]] = {}


def _written(func: Any) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The arguments an op writes, cached per op (its schema is read once)."""
    found = _WRITTEN.get(func)
    if found is None:
        try:
            found = written_arguments(func)
        except AttributeError:  # no schema: writes nothing the trace can name
            found = ((), ())
        _WRITTEN[func] = found
    return found


def _user_frames(frame: FrameType) -> list[FrameType]:
    frames: list[FrameType] = []
    f: Optional[FrameType] = frame
    while f is not None:
        if is_user_file(f.f_code.co_filename):
            frames.append(f)
        f = f.f_back
    return frames


def _current_value(static: _Input, frames: list[FrameType]) -> Any:
    """What the name the capture read is bound to now, in the frames on the stack (None: not found)."""
    if static.owner is None:
        for f in frames:
            if f.f_code is static.code:
                return f.f_locals.get(static.name)
        return None
    owner = static.owner()
    if owner is None:
        return None
    for f in frames:
        if f.f_locals.get("self") is owner:
            return getattr(owner, static.name[len("self.") :], None)
    return None


def _references(value: Any, outputs: dict[int, str]) -> Optional[tuple[int, int]]:
    """(how many, which storage) when `value` is a static output or a list, tuple or dict holding one."""
    if isinstance(value, torch.Tensor):
        key = storage_key(value)
        return (1, key) if key is not None and key in outputs else None
    if isinstance(value, (list, tuple)):
        items: Any = value[-_TAIL:]
    elif isinstance(value, dict):
        items = list(itertools.islice(value.values(), _DICT_VALUES))
    else:
        return None
    keys = [storage_key(t) for t in items if isinstance(t, torch.Tensor)]
    kept = [k for k in keys if k is not None and k in outputs]
    return (len(kept), kept[-1]) if kept else None


def _kind(value: Any) -> str:
    kinds: dict[type, str] = {list: " (a list)", tuple: " (a tuple)", dict: " (a dict)"}
    return kinds.get(type(value), "")
