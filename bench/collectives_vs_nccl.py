"""Benchmark — atenlens's collective estimates side by side with NCCL's own tuning model.

torch's `torch/_inductor/comm_analysis.py` ports NCCL's tuner (src/graph/tuning.cc: ring and tree
algorithms, LL / LL128 / Simple protocols, the fastest taken). On a machine without a GPU it would
guess the GPU type, so it is told: Hopper, NVLink within a node, 8 GPUs per node. atenlens's model
(server/atenlens/trace/collectives.py, docs/distributed.md) prices the same collective on the H100 SXM
row of its GPU table: a ring (or, for an all-reduce across nodes, NCCL's tree when faster), NCCL's
latencies, the datasheet bandwidth, across nodes one NIC per rank on a node. Both are pure functions
of (collective, bytes, ranks): this prints estimates, it times nothing.

    python bench/collectives_vs_nccl.py [--quick] [--json PATH]     (--quick: fewer sizes)
"""

from __future__ import annotations

import sys

from harness import Result, Table, finish, parser

KiB, MiB, GiB = 2**10, 2**20, 2**30
SIZES = (64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB, 1 * GiB)
QUICK_SIZES = (1 * MiB, 1 * GiB)
GROUPS = ((8, "8 ranks, one node"), (16, "16 ranks, 2 nodes"), (64, "64 ranks, 8 nodes"))
COLLECTIVES = ("all_gather_into_tensor", "all_reduce")  # reduce-scatter prices as all-gather in both


def nccl_model():
    import torch._inductor.comm_analysis as ca

    ca.get_gpu_type = lambda: ca.NVIDIA_GPU_TYPE.HOPPER  # no GPU here: say which
    ca._has_nvlink = lambda: True
    kinds = {"all_gather_into_tensor": ca.NCCL_COLL.ALL_GATHER, "all_reduce": ca.NCCL_COLL.ALL_REDUCE}
    return lambda name, nbytes, n: ca.estimate_nccl_collective_runtime_impl(nbytes, n, kinds[name]) / 1e3


def size_label(nbytes: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= size:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    from atenlens.gpus import find_gpu
    from atenlens.trace.collectives import Collectives
    from atenlens.trace.ranks import Ranks

    nccl = nccl_model()
    gpu = find_gpu("h100-sxm")
    result = Result(
        "collectives_vs_nccl",
        "Collective estimates: atenlens vs NCCL's tuning model",
        "python bench/collectives_vs_nccl.py" + (" --quick" if args.quick else ""),
        quick=args.quick,
    )
    table = Table(
        "estimated time of one collective, microseconds, H100 SXM, 8 GPUs per node",
        ["group", "collective", "bytes per rank", "atenlens", "of it latency", "NCCL model", "NCCL / atenlens"],
    )
    for n, label in GROUPS:
        prices = Collectives(Ranks(n, 0, 8, requested=True), gpu)
        members = range(n)
        link, nodes = prices._link(members), prices._nodes(members)
        for name in COLLECTIVES:
            for nbytes in QUICK_SIZES if args.quick else SIZES:
                ours = prices.estimate(name, nbytes, n, link, nodes)
                latency = prices.estimate(name, 0, n, link, nodes)
                theirs = nccl(name, nbytes, n)
                table.add(label, name, size_label(nbytes), ours * 1e6, latency * 1e6, theirs * 1e6, theirs / ours)
                result.raw.setdefault(label, []).append(
                    {"collective": name, "bytes": nbytes, "atenlens": ours, "latency": latency, "nccl": theirs}
                )
    result.tables.append(table)
    result.notes.append("'of it latency': the estimate for 0 bytes, the fastest protocol's latency (LL)")
    result.notes.append(
        "across nodes torch's port prices the network at one NIC's rate (with an efficiency fit and, past "
        "2 nodes, an empirical multi-rail gain); atenlens at the NICs of the group's ranks on a node "
        "(docs/distributed.md)"
    )
    return finish(result, args)


if __name__ == "__main__":
    sys.exit(main())
