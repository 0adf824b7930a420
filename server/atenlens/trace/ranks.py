"""Simulated ranks: the traced program runs as one rank of an N-rank job, on torch's own "fake"
process group (torch.distributed itself; no process group of our own making).

While a trace runs:
- `torch.distributed.init_process_group(...)`, whatever its backend, `init_method`, store or the
  torchrun variables, initializes `init_process_group("fake", rank=R, world_size=N)`: no rendezvous,
  no store, no socket. An information diagnostic (AL908) at the calling line says so.
- `init_device_mesh(...)` builds its mesh outside the fake and recording modes (its bookkeeping is
  real tensors), any shape, 1-D or 2-D; so do the meshes its slices (`mesh["tp"]`) and flattenings
  make, and a mesh's `mesh` tensor.
- With a requested world size, the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT) are set, so code that reads them sees the simulated rank.
When the trace ends the process group is destroyed and everything is restored.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from atenlens.report import Code

# Torch-free at import: the CLI checks a request's ranks with `ranks_of` before starting torch.

DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Ranks:
    world_size: int = 1
    rank: int = 0
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    requested: bool = False  # the caller asked for a world size (else: a single-process run)

    def node_of(self, global_rank: int) -> int:
        return global_rank // self.gpus_per_node

    def describe(self) -> str:
        nodes = -(-self.world_size // self.gpus_per_node)
        where = f"{nodes} nodes of {self.gpus_per_node} GPUs" if nodes > 1 else "one node"
        return f"rank {self.rank} of {self.world_size} ({where})"


def ranks_of(world_size: Optional[int], rank: Optional[int], gpus_per_node: Optional[int]) -> Ranks:
    """The simulated ranks of a request; raises ValueError with a message for impossible values."""
    if world_size is not None and world_size < 1:
        raise ValueError(f"the world size must be 1 or more, got {world_size}")
    size = world_size or 1
    chosen = rank if rank is not None else 0
    if not 0 <= chosen < size:
        raise ValueError(f"the rank must be between 0 and {size - 1} for a world size of {size}, got {chosen}")
    per_node = gpus_per_node if gpus_per_node is not None else DEFAULT_GPUS_PER_NODE
    if per_node < 1:
        raise ValueError(f"the GPUs per node must be 1 or more, got {per_node}")
    return Ranks(size, chosen, per_node, requested=world_size is not None)


def _torchrun_environment(ranks: Ranks) -> dict[str, str]:
    local_world = min(ranks.gpus_per_node, ranks.world_size)
    return {
        "RANK": str(ranks.rank),
        "WORLD_SIZE": str(ranks.world_size),
        "LOCAL_RANK": str(ranks.rank % ranks.gpus_per_node),
        "LOCAL_WORLD_SIZE": str(local_world),
        "GROUP_RANK": str(ranks.node_of(ranks.rank)),
        # what torchrun's rendezvous would name; nothing connects to it (init_process_group is the fake one)
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }


@contextlib.contextmanager
def simulated_ranks(ranks: Ranks, sink: Any, collectives: Any = None) -> Iterator[None]:
    """`sink`: the trace's DiagnosticSink; `collectives`: its trace/collectives.py Collectives."""
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh
    import torch.distributed.distributed_c10d as c10d

    from atenlens.trace import torch_compat
    from atenlens.trace.ddp import ddp_on_fake_backend

    real_init = c10d.init_process_group
    real_mesh = device_mesh.init_device_mesh

    def init_process_group(
        backend: Any = None,
        init_method: Any = None,
        timeout: Any = None,
        world_size: int = -1,
        rank: int = -1,
        store: Any = None,
        group_name: str = "",
        pg_options: Any = None,
        device_id: Any = None,
    ) -> None:
        chosen = ranks
        if not ranks.requested and world_size > 0:  # the program's own numbers, when none were asked for
            chosen = Ranks(world_size, max(rank, 0), ranks.gpus_per_node)
        asked = f"backend={backend!r}" if backend is not None else "the default backend"
        if init_method is not None:
            asked += f", init_method={init_method!r}"
        sink.add(
            "simulated-ranks",
            Code.SIMULATED_RANKS,
            f"init_process_group({asked}) runs on torch's fake backend as {chosen.describe()}: nothing is "
            "sent, collectives are recorded and priced (docs/distributed.md)",
            severity="information",
        )
        kwargs = {"timeout": timeout} if timeout is not None else {}
        real_init("fake", rank=chosen.rank, world_size=chosen.world_size, **kwargs)

    def init_device_mesh(*args: Any, **kwargs: Any) -> Any:
        with torch_compat.outside_trace_modes():
            return real_mesh(*args, **kwargs)

    # Slicing a mesh (`mesh["tp"]`), flattening it, and its `mesh` tensor compute rank coordinates with
    # real tensor indexing: under fake mode the indices are garbage ("index 1397... is out of bounds").
    DeviceMesh = device_mesh.DeviceMesh
    real_mesh_init, real_mesh_tensor = DeviceMesh.__init__, DeviceMesh.__dict__["mesh"]

    def mesh_init(self: Any, *args: Any, **kwargs: Any) -> None:
        with torch_compat.outside_trace_modes():
            real_mesh_init(self, *args, **kwargs)

    def mesh_tensor(self: Any) -> Any:
        with torch_compat.outside_trace_modes():
            return real_mesh_tensor.__get__(self)

    patches = [
        (c10d, "init_process_group", init_process_group),
        (dist, "init_process_group", init_process_group),
        (device_mesh, "init_process_group", init_process_group),
        (device_mesh, "init_device_mesh", init_device_mesh),
        (DeviceMesh, "__init__", mesh_init),
        (DeviceMesh, "mesh", property(mesh_tensor)),
    ]
    if hasattr(dist, "init_device_mesh"):
        patches.append((dist, "init_device_mesh", init_device_mesh))
    patches = [patch for patch in patches if hasattr(patch[0], patch[1])]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    environment = _torchrun_environment(ranks) if ranks.requested else {}
    saved_environment = {name: os.environ.get(name) for name in environment}
    was_initialized = dist.is_initialized()
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    os.environ.update(environment)
    try:
        with ddp_on_fake_backend(sink, collectives):
            yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
        for name, value in saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if dist.is_initialized() and not was_initialized:
            with torch_compat.outside_trace_modes():
                dist.destroy_process_group()


def shard_through_view(
    placements: str,
    global_shape: tuple[int, ...],
    in_shape: tuple[int, ...],
    in_stride: tuple[int, ...],
    out_shape: tuple[int, ...],
    out_stride: tuple[int, ...],
) -> Optional[tuple[str, tuple[int, ...]]]:
    """The placements and global shape of a view (view, reshape without a copy, transpose, permute) of
    a local shard: `placements` names one `Shard(d)` (a 1-D mesh's, or one dimension of a 2-D mesh's
    "Replicate(), Shard(1)"). The shard's dimension d is followed through the view by its strides: the
    output dimensions laid out within d's span of memory are its pieces (one when the view keeps it,
    several when it splits it: [8, 32] as [8, 4, 8], heads of 8 features). Every rank holds the same
    contiguous 1/n of d, so the outermost piece is the one sharded, n times larger globally; so is a
    dimension that merges d with the dimensions inside it ([4, 64] as [256]). None when the view merges
    d with a dimension outside it, its pieces do not cover d whole, or it adds or drops a
    dimension of size 1 (which of them is sharded is then not told by the strides)."""
    labels = placements.split(", ")
    sharded = [i for i, label in enumerate(labels) if label.startswith("Shard(")]
    if len(sharded) != 1:
        return None
    try:
        dim = int(labels[sharded[0]][len("Shard(") : -1])
    except ValueError:
        return None
    if not 0 <= dim < len(in_shape) or len(global_shape) != len(in_shape) or in_shape[dim] < 1:
        return None
    if out_shape.count(1) != in_shape.count(1):  # a new size-1 dimension could be the piece sharded
        return None
    size, stride = in_shape[dim], in_stride[dim]
    if global_shape[dim] % size:
        return None
    ranks = global_shape[dim] // size
    pieces = [
        j
        for j, (n, s) in enumerate(zip(out_shape, out_stride))
        if n > 1 and s >= stride and s % stride == 0 and s * n <= stride * size
    ]
    if not pieces:  # d merged with the dimensions inside it ([4, 64] as [256]): still its outermost part
        pieces = [
            j
            for j, (n, s) in enumerate(zip(out_shape, out_stride))
            if 0 < s < stride and stride % s == 0 and s * n == stride * size
        ]
        if len(pieces) != 1:
            return None
        labels[sharded[0]] = f"Shard({pieces[0]})"
        return ", ".join(labels), tuple(n * ranks if j == pieces[0] else n for j, n in enumerate(out_shape))
    covered = 1
    for j in pieces:
        covered *= out_shape[j]
    if covered != size:
        return None
    outer = max(pieces, key=lambda j: out_stride[j])
    if out_stride[outer] * out_shape[outer] != stride * size:
        return None
    labels[sharded[0]] = f"Shard({outer})"
    shape = tuple(n * ranks if j == outer else n for j, n in enumerate(out_shape))
    return ", ".join(labels), shape
