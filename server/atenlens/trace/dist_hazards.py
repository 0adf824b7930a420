"""Distributed performance hazards a trace sees on simulated ranks (docs/diagnostics.md):

- AL910 `host-waits-for-collective`: the host reads a value a collective the program issued wrote
  (`dist.all_reduce(loss)` then `loss.item()`, or a scalar computed from it), or calls `dist.barrier()`:
  every rank's host stops until the communication, and so the slowest rank, is done;
- AL911 `per-parameter-collectives`: one line issues a collective per parameter (or gradient), a
  Python loop over `model.parameters()`: each call pays the collective's latency once;
- AL912 `fsdp-root-only`: FSDP2's `fully_shard` wraps only the root of a model made of blocks: every
  parameter is gathered by one all-gather before the forward and stays gathered through it.

Only collectives the program calls itself count (the innermost user frame called torch.distributed
directly), not FSDP2's or DDP's own, which run inside module calls and `backward()`.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from atenlens.cost import format_bytes, format_seconds
from atenlens.report import Code, Event, Frame
from atenlens.trace import torch_compat as tc
from atenlens.trace.attribution import user_callee

# the files a program's `dist.all_reduce(...)` passes through on its way to the dispatcher
_DIRECT_API_FILES = (
    "torch/distributed/distributed_c10d.py",
    "torch/distributed/c10d_logger.py",
    "torch/distributed/_functional_collectives.py",
)
# a small result computed from a reduced value is still it (`(loss / world).item()`); large ones are not
# followed (a scalar loss, a few metrics: not activations)
SMALL = 64
_Tensor = torch.Tensor


def _storage(t: Any) -> Optional[int]:
    try:
        return tc.storage_id(t.untyped_storage())
    except Exception:  # no storage of its own (a wrapper subclass)
        return None


def _tensors(value: Any) -> list:
    if isinstance(value, _Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, _Tensor)]
    return []


def called_directly(frame: Any) -> bool:
    """Did the innermost user frame above `frame` call torch.distributed's API itself?"""
    callee = user_callee(frame)
    return callee is not None and callee.replace("\\", "/").endswith(_DIRECT_API_FILES)


class DistributedHazards:
    """Fed by the recorder: each collective event, and each op while a reduced value is alive."""

    def __init__(self, sink: Any, is_parameter: Any) -> None:
        self.sink = sink
        self.is_parameter = is_parameter  # tensor -> bool: a parameter or a parameter's gradient
        self.reduced: dict[int, tuple[str, Optional[int]]] = {}  # storage -> (collective, its line)
        # (stack, collective) -> [count, parameter storages, seconds, bytes, one-call seconds for the bytes]
        self._per_line: dict[tuple, list] = {}
        self._fsdp_groups: dict[int, tuple[tuple, int]] = {}  # id(FSDP2 param group) -> (modules, bytes)
        self._first_gather: Optional[tuple[Frame, ...]] = None
        self.last_collective_stack: Any = lambda: ()

    def fsdp_gathered(self, group: Any, modules: tuple, nbytes: int) -> None:
        """FSDP2 unsharded a parameter group (torch_compat.fsdp2_storage_roles)."""
        if id(group) not in self._fsdp_groups:
            self._fsdp_groups[id(group)] = (modules, nbytes)
            if self._first_gather is None:
                self._first_gather = self.last_collective_stack()

    def collective(self, event: Event, args: tuple, kwargs: dict, out: Any, frame: Any, flattened: Any) -> None:
        """`flattened(nbytes)`: the estimate of one such collective moving `nbytes`."""
        if not called_directly(frame):
            return
        if event.name in ("barrier", "monitored_barrier"):
            self.sink.add(
                "host-waits-for-collective",
                Code.HOST_WAITS_FOR_COLLECTIVE,
                f"dist.{event.name}() blocks the host until all {event.group_size} ranks reach it: each "
                "rank waits for the slowest (on NCCL, it also waits for the GPU to finish its queued "
                f"work) [{event.name}]",
                stack=event.stack,
            )
            return
        written = _tensors(out) + (_tensors(args[0]) if args else [])
        for t in written:
            key = _storage(t)
            if key is not None:
                self.reduced[key] = (event.name, event.line)
        first = _tensors(args[0]) if args else []  # c10d ops take a list of tensors, functional ones one
        tensor = first[0] if first else None
        if tensor is not None and self.is_parameter(tensor):
            entry = self._per_line.setdefault((event.stack, event.name), [0, set(), 0.0, 0, flattened])
            entry[0] += 1
            entry[1].add(_storage(tensor))
            entry[2] += event.estimate_seconds or 0.0
            entry[3] += event.bytes or 0

    def op(self, func: Any, args: tuple, out: Any, stack: Optional[tuple[Frame, ...]]) -> None:
        """While reduced values live: follow them into small results; report the host reading one."""
        source = None
        for t in args:
            if isinstance(t, _Tensor):
                source = self.reduced.get(_storage(t))  # type: ignore[arg-type]
                if source is not None:
                    break
        if source is None:
            return
        if _reads_on_host(func, out):
            name, line = source
            where = f" at line {line}" if line is not None else ""
            self.sink.add(
                "host-waits-for-collective",
                Code.HOST_WAITS_FOR_COLLECTIVE,
                f"reading the result of {name}{where} on the host waits until every rank has sent "
                "its part: each step stalls all ranks' hosts for the communication and the slowest "
                "rank; log it every N steps, or keep it on the device and reduce it when you log "
                f"[{func.namespace}.{tc.op_name(func)}]",
                op=str(func),
                stack=stack,
            )
            return
        for t in _tensors(out):
            if t.numel() <= SMALL:
                key = _storage(t)
                if key is not None:
                    self.reduced[key] = source

    def finish(self) -> None:
        self._root_only()
        for (stack, name), (count, parameters, seconds, nbytes, flattened) in self._per_line.items():
            if len(parameters) < 2:
                continue
            one = flattened(nbytes)
            self.sink.add(
                "per-parameter-collectives",
                Code.PER_PARAMETER_COLLECTIVES,
                f"{count} {name} calls at this line, one per parameter ({len(parameters)} tensors, "
                f"{format_bytes(nbytes)} per rank): ~{format_seconds(seconds)} in all, where one {name} "
                f"of the same bytes flattened into one buffer takes ~{format_seconds(one)}; each call "
                "pays the collective's latency. Flatten them (torch._utils._flatten_dense_tensors), or "
                "let DDP or FSDP2 bucket them",
                stack=stack,
            )
        self._per_line.clear()
        self.reduced.clear()
        self._fsdp_groups.clear()
        self._first_gather = None

    def _root_only(self) -> None:
        if len(self._fsdp_groups) != 1:
            return
        ((modules, nbytes),) = self._fsdp_groups.values()
        blocks = [
            child for module in modules for child in module.children() if next(child.parameters(), None) is not None
        ]
        if len(blocks) < 2:
            return
        self.sink.add(
            "fsdp-root-only",
            Code.FSDP_ROOT_ONLY,
            f"fully_shard wraps only the root module: its {len(blocks)} blocks' parameters "
            f"({format_bytes(nbytes)} unsharded) are gathered by one all-gather before the forward: "
            "every rank holds the whole unsharded model at once, and no communication overlaps "
            "compute; call fully_shard on each block (each transformer layer) before the root",
            stack=self._first_gather or (),
        )


def _reads_on_host(func: Any, out: Any) -> bool:
    """`.item()`, `float(t)`, `bool(t)`, `.tolist()` (a scalar each) or a copy to the CPU (`.cpu()`)."""
    if func is torch.ops.aten._local_scalar_dense.default:
        return True
    if func in (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default):
        return any(t.device.type == "cpu" for t in _tensors(out))
    return False
