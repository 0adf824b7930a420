"""Collectives as report events: which op, which group, how many bytes per rank, and how long NCCL's
ring (or, for an all-reduce across nodes, its tree) takes to move them (docs/distributed.md).

The recorder hands every op of the c10d / functional-collective namespaces here; everything else
about the event (phase, line, stack, module) is decided as for any op. On torch's fake backend the
collectives move nothing; their price is latency plus bandwidth (alpha-beta), the fastest of NCCL's
algorithms and protocols, as NCCL's tuner picks (src/graph/tuning.cc):

    ring:  time = latency + factor x bytes / (bandwidth x share)
           factor:  all-gather, reduce-scatter, all-to-all (n-1)/n; all-reduce 2 (n-1)/n; the others 1
    tree (all-reduce across nodes):  time = latency + 2 x bytes / (bandwidth x share)

with `bytes` the per-rank size (the output of an all-gather, the input of everything else) and the
bandwidth of the slowest link the group spans: the GPU link (NVLink) when all its ranks share a node;
across nodes, the network: one NIC per GPU (the vendors' reference systems, atenlens/gpus.py), and a
group with m ranks on each node moves its data over m NICs at once (NCCL gives each ring channel a NIC
of its own: rails), so min(GPU link, m x NIC). The latency is NCCL's: a base latency per call and one
per step, for each of NCCL's three protocols, which trade latency for the share of the link that
carries data (LL: half, LL128: 120 of 128 bytes, Simple: all). A ring takes n-1 steps (2 (n-1) for an
all-reduce), those crossing nodes at the network's latency; a tree all-reduce goes up and down a chain
within each node and a binary tree across the k nodes: 2 x ((n/k - 1) intra-node + log2(k) network)
steps, at less of the link (LL 1/3.8, Simple 0.92).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional

import torch

from atenlens.gpus import GIGA, GPU
from atenlens.report import Event
from atenlens.trace import torch_compat
from atenlens.trace.ranks import Ranks

NAMESPACES = frozenset({"c10d", "_c10d_functional", "_c10d_functional_autograd"})
# Used for a group that crosses nodes on a GPU whose table row names no network: 400 Gb/s, the NIC per
# GPU of NVIDIA's DGX H100 reference system.
DEFAULT_NETWORK_BANDWIDTH = 50 * GIGA

# c10d's op names (what the dispatcher sees) -> torch.distributed's public names.
_C10D_NAMES = {
    "_allgather_base_": "all_gather_into_tensor",
    "allgather_": "all_gather",
    "allgather_coalesced_": "all_gather_coalesced",
    "allgather_into_tensor_coalesced_": "all_gather_into_tensor_coalesced",
    "_reduce_scatter_base_": "reduce_scatter_tensor",
    "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced",
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce_coalesced",
    "broadcast_": "broadcast",
    "reduce_": "reduce",
    "gather_": "gather",
    "scatter_": "scatter",
    "alltoall_base_": "all_to_all_single",
    "alltoall_": "all_to_all",
    "send": "send",
    "recv_": "recv",
    "recv_any_source_": "recv",
    "barrier": "barrier",
    "monitored_barrier_": "monitored_barrier",
}
# Not collectives: waiting for one (the wait is not communication).
_NOT_COLLECTIVES = frozenset({"wait_tensor"})
# c10d ops whose first argument is the data on this rank (in place); the others take (outputs, inputs).
_IN_PLACE = frozenset(
    {"all_reduce", "all_reduce_coalesced", "broadcast", "reduce", "send", "recv", "barrier", "monitored_barrier"}
)


def public_name(func: Any) -> Optional[str]:
    """`all_gather_into_tensor` for c10d._allgather_base_ / _c10d_functional.all_gather_into_tensor;
    None for an op of these namespaces that is no collective (wait_tensor)."""
    op = torch_compat.op_name(func)
    if func.namespace == "c10d":
        return _C10D_NAMES.get(op, op.rstrip("_"))
    if op in _NOT_COLLECTIVES:
        return None
    if op.endswith("_out"):
        op = op[:-4]
    return op.rstrip("_")


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def payload_bytes(func: Any, name: str, args: tuple, kwargs: dict, out: Any) -> int:
    """Bytes per rank: the output of an all-gather, the input of everything else."""
    gathers = name.startswith("all_gather")
    if func.namespace == "c10d":
        if name in _IN_PLACE or gathers or name == "scatter":
            return _tensor_bytes(args[0]) if args else 0  # in place, or the (outputs, inputs) op's output
        return _tensor_bytes(args[1]) if len(args) > 1 else 0
    if gathers:
        return _tensor_bytes(kwargs["out"]) if "out" in kwargs else _tensor_bytes(out)
    return _tensor_bytes(args[0]) if args else 0


def _group_of(func: Any, args: tuple, kwargs: dict) -> Any:
    """The ProcessGroup of a collective: c10d ops pass it boxed as a ScriptObject, functional ones by
    name (their last string argument; `reduce_op` is a string too, but comes first)."""
    from torch.distributed import ProcessGroup

    names = []
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.ScriptObject):
            try:
                return ProcessGroup.unbox(value)
            except (RuntimeError, TypeError):
                continue
        if isinstance(value, str):
            names.append(value)
    for name in reversed(names):
        try:
            return torch_compat.process_group_named(name)
        except (RuntimeError, ValueError, KeyError):
            continue
    return None


# NCCL's tuning constants, microseconds (NVIDIA/nccl src/graph/tuning.cc, ncclTunerConstantsDefaults,
# as torch/_inductor/comm_analysis.py ports them): (protocol, base latency, per-step latency on
# NVLink / PCIe / the network, share of the link's bandwidth that carries data), for the ring and for
# the tree (an all-reduce's only; its LL128 is left out as across nodes for the ring)
_PROTOCOLS = (
    ("LL", 6.6, {"nvlink": 0.6, "pcie": 1.0, "network": 2.7}, 0.5),
    ("LL128", 14.0, {"nvlink": 1.9, "pcie": 2.5, "network": 4.0}, 120 / 128),
    ("Simple", 8.4, {"nvlink": 3.4, "pcie": 5.7, "network": 14.0}, 1.0),
)
_TREE_PROTOCOLS = (
    ("LL", 6.8, {"nvlink": 0.6, "pcie": 1.0, "network": 5.0}, 1 / 3.8),
    ("Simple", 8.4, {"nvlink": 4.0, "pcie": 4.0, "network": 14.0}, 0.92),
)


def _ring_steps(name: str, n: int) -> int:
    if name.startswith(("all_reduce", "barrier", "monitored_barrier")):  # a barrier is a tiny all-reduce
        return 2 * (n - 1)
    if name in ("send", "recv"):
        return 1
    return n - 1


def _ring_factor(name: str, n: int) -> float:
    if n <= 1 or name in ("barrier", "monitored_barrier"):
        return 0.0
    if name.startswith("all_reduce"):
        return 2 * (n - 1) / n
    if name.startswith(("all_gather", "reduce_scatter", "all_to_all", "scatter", "gather")):
        return (n - 1) / n
    return 1.0


class Collectives:
    """Turns collective ops into events and keeps the totals (kept events or not)."""

    def __init__(self, ranks: Ranks, gpu: GPU) -> None:
        self.ranks = ranks
        self.gpu = gpu
        self.count = 0
        self.seconds = 0.0
        self.bytes = 0
        self.last_stack: tuple = ()  # the user stack of the latest collective (trace/ddp.py places notes there)
        self._groups: dict[int, tuple[int, Optional[str], str, int]] = {}  # id(pg) -> _group()
        self._last_nodes = 1

    def _group(self, group: Any) -> tuple[int, Optional[str], str, int]:
        """(size, description, link, nodes) of a process group (None: the default one)."""
        if group is None:
            members: Any = range(self.ranks.world_size)
            return len(members), None, self._link(members), self._nodes(members)
        found = self._groups.get(id(group))
        if found is None:
            import torch.distributed as dist

            try:
                members = dist.get_process_group_ranks(group)
            except (RuntimeError, ValueError, KeyError):
                members = list(range(group.size()))
            description = getattr(group, "group_desc", None) or None
            found = self._groups[id(group)] = (len(members), description, self._link(members), self._nodes(members))
        return found

    def _nodes(self, members: Any) -> int:
        return len({self.ranks.node_of(r) for r in members})

    def _link(self, members: Any) -> str:
        if self._nodes(members) > 1:
            return "network"
        return self._node_link()

    def _node_link(self) -> str:
        return "nvlink" if self.gpu.gpu_link_bandwidth else "pcie"

    def bandwidth(self, link: str) -> float:
        if link == "network":
            return self.gpu.network_bandwidth or DEFAULT_NETWORK_BANDWIDTH
        if link == "nvlink":
            return self.gpu.gpu_link_bandwidth or self.gpu.host_link_bandwidth
        return self.gpu.host_link_bandwidth

    def estimate(self, name: str, nbytes: int, group_size: int, link: str, nodes: int = 1) -> float:
        """Seconds for one rank's part of the collective (the model above); `nodes`: how many nodes the
        group spans (a group across nodes has `link` "network")."""
        if group_size <= 1:
            return 0.0
        factor = _ring_factor(name, group_size)
        steps = _ring_steps(name, group_size)
        # steps that cross nodes: a ring across k nodes crosses k - 1 boundaries per pass (an all-reduce
        # makes two passes)
        crossing = 0 if nodes <= 1 else min(steps, steps // (group_size - 1) * (nodes - 1))
        bandwidth = self.bandwidth(link)
        intra = self._node_link()
        per_node = -(-group_size // max(nodes, 1))
        if nodes > 1 and per_node > 1:  # rails: the group's m ranks on a node use m NICs at once
            bandwidth = min(self.bandwidth(intra), per_node * bandwidth)
        best = float("inf")
        for protocol, base, hop, share in _PROTOCOLS:
            if protocol == "LL128" and nodes > 1:  # NCCL enables LL128 on NVLink only
                continue
            latency = (base + (steps - crossing) * hop[intra] + crossing * hop["network"]) * 1e-6
            best = min(best, latency + factor * nbytes / (bandwidth * share))
        if nodes > 1 and name.startswith(("all_reduce", "barrier", "monitored_barrier")):
            up_and_down = 0.0 if factor == 0.0 else 2.0  # a barrier moves no data
            for _, base, hop, share in _TREE_PROTOCOLS:
                tree_steps = (per_node - 1) * hop[intra] + (nodes.bit_length() - 1) * hop["network"]
                latency = (base + 2 * tree_steps) * 1e-6
                best = min(best, latency + up_and_down * nbytes / (bandwidth * share))
        return best

    def flattened(self, event: Event) -> Callable[[int], float]:
        """The estimate of `event`'s collective, in its group, for another number of bytes."""
        name, size, link = event.name, event.group_size or 1, event.link or self._node_link()
        nodes = self._last_nodes
        return lambda nbytes: self.estimate(name, nbytes, size, link, nodes)

    def event(self, op_event: Event, func: Any, args: tuple, kwargs: dict, out: Any) -> Event:
        """The collective event for an op event of these namespaces (for a wait, the op event at no cost)."""
        name = public_name(func)
        if name is None:  # wait_tensor: waits for the collective, runs no kernel of its own
            return replace(op_event, bytes_moved=0, estimate_seconds=0.0)
        size, description, link, nodes = self._group(_group_of(func, args, kwargs))
        nbytes = payload_bytes(func, name, args, kwargs, out)
        seconds = self.estimate(name, nbytes, size, link, nodes)
        self._last_nodes = nodes
        self.count += 1
        self.last_stack = op_event.stack
        self.seconds += seconds
        self.bytes += nbytes
        return replace(
            op_event,
            kind="collective",
            name=name,
            group_size=size,
            group=description,
            link=link,
            bytes=nbytes,
            bytes_moved=0,
            flops=None,
            estimate_seconds=seconds,
        )
