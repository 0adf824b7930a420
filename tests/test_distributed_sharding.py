"""DTensor's sharding propagation of foreach ops once per kind of list element
(torch_compat.foreach_strategy_by_kind, foreach_tensor_meta_by_kind, in spmd_setup_shortcuts): the
outputs are torch's own, element for element, on 1-D and 2-D meshes, with and without redistribution."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed.tensor._ops.utils as strategy_utils
import torch.distributed.tensor._sharding_prop as sharding_prop
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

from atenlens.trace import torch_compat

# (global shape, placements per mesh dimension): 11 parameters of 7 kinds on a 1-D mesh of 4 ranks,
# among them an uneven shard (7 rows on 4 ranks), shapes placed two ways and a bf16 one (5 kinds of
# global shape and dtype)
ONE_D = (
    (4,),
    [
        ((8, 4), (Shard(0),)),
        ((8, 4), (Shard(0),)),
        ((4, 8), (Shard(1),)),
        ((8, 4), (Shard(0),)),
        ((5,), (Replicate(),)),
        ((7, 3), (Shard(0),)),
        ((4, 8), (Shard(1),)),
        ((5,), (Replicate(),)),
        ((8, 4), (Replicate(),)),
        ((4, 8), (Shard(0),)),
        ((8, 4), (Shard(0),)),
    ],
    7,
)
# FSDP2 + TP's layouts on a 2 x 4 mesh: 6 parameters of 4 kinds
TWO_D = (
    (2, 4),
    [
        ((8, 16), (Shard(0), Shard(1))),
        ((8, 16), (Shard(0), Shard(1))),
        ((16, 8), (Shard(0), Shard(0))),
        ((8,), (Replicate(), Replicate())),
        ((16, 8), (Shard(0), Shard(0))),
        ((8, 16), (Shard(0), Shard(1))),
    ],
    4,
)


@pytest.fixture
def fake_group():
    """torch's fake process group of 8 ranks (this is rank 1), destroyed afterwards."""
    dist.init_process_group("fake", rank=1, world_size=8)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _parameters(mesh, layout, dtype_of_last=torch.bfloat16):
    torch.manual_seed(0)
    params = []
    for n, (shape, placements) in enumerate(layout):
        dtype = dtype_of_last if n == len(layout) - 1 else torch.float32
        p = torch.nn.Parameter(distribute_tensor(torch.randn(shape, dtype=dtype), mesh, list(placements)))
        p.grad = distribute_tensor(torch.randn(shape, dtype=dtype), mesh, list(placements))
        params.append(p)
    return params


def _step(mesh, layout, seen):
    """AdamW's foreach step over the parameters, then foreach ops with a redistribution (an add of
    replicated tensors to sharded ones), a scalar list and an out-of-place result per element;
    `seen` gets every (op schema, output sharding) DTensor computes."""
    params = _parameters(mesh, layout)
    real = sharding_prop.ShardingPropagator.propagate_op_sharding_non_cached

    def recorded(self, schema):
        out = real(self, schema)
        seen.append((schema, out))
        return out

    sharding_prop.ShardingPropagator.propagate_op_sharding_non_cached = recorded
    try:
        torch.optim.AdamW(params, lr=0.1, foreach=True).step()
        replicated = [
            distribute_tensor(torch.ones(p.shape, dtype=p.dtype), mesh, [Replicate()] * mesh.ndim) for p in params
        ]
        sums = torch._foreach_add(params, replicated)
        torch._foreach_addcdiv_(sums, params, replicated, [0.5 + n for n in range(len(params))])
        norms = torch._foreach_norm([p.grad for p in params])
    finally:
        sharding_prop.ShardingPropagator.propagate_op_sharding_non_cached = real
    return params, sums, norms


@pytest.mark.parametrize("mesh_shape, layout, kinds", [ONE_D, TWO_D], ids=["1-D mesh", "2-D mesh"])
def test_foreach_sharding_once_per_kind_is_torchs_own(fake_group, mesh_shape, layout, kinds):
    mesh = init_device_mesh("cpu", mesh_shape)
    seen: list = []
    with torch_compat.spmd_setup_shortcuts():
        _step(mesh, layout, seen)
    foreach = [(schema, out) for schema, out in seen if schema.op.name().startswith("aten::_foreach_")]
    adamw = [
        "aten._foreach_mul_.Scalar",  # exp_avg_sq *= beta2, ...: for the fp32 parameters, then the bf16 one
        "aten._foreach_lerp_.Scalar",
        "aten._foreach_addcmul_.Scalar",
        "aten._foreach_sqrt.default",
        "aten._foreach_div_.ScalarList",
        "aten._foreach_add_.Scalar",
        "aten._foreach_addcdiv_.ScalarList",
    ]
    assert [str(schema.op) for schema, _ in foreach] == [
        *adamw,
        *adamw,
        "aten._foreach_add.List",
        "aten._foreach_addcdiv_.ScalarList",
        "aten._foreach_norm.Scalar",
    ]
    propagator = DTensor._op_dispatcher.sharding_propagator
    for schema, out in seen:  # torch's own propagation of the same schema, without the shortcuts
        assert out == propagator.propagate_op_sharding_non_cached(schema), schema.op
    add_schema, add = foreach[-3]
    assert add.needs_redistribute and len(add.output_spec) == len(layout)
    assert [spec.placements for spec in add.output_spec] == [placements for _, placements in layout]
    assert [tuple(spec.tensor_meta.shape) for spec in add.output_spec] == [shape for shape, _ in layout]

    # one strategy expansion per kind of parameter, where torch makes one per parameter
    expansions = []
    real_expand = strategy_utils.expand_to_full_mesh_op_strategy

    def counted(*args, **kwargs):
        expansions.append(1)
        return real_expand(*args, **kwargs)

    strategy_utils.expand_to_full_mesh_op_strategy = counted
    try:
        with torch_compat.spmd_setup_shortcuts():
            propagator.propagate_op_sharding_non_cached(add_schema)
        per_kind = len(expansions)
        propagator.propagate_op_sharding_non_cached(add_schema)
        per_element = len(expansions) - per_kind
    finally:
        strategy_utils.expand_to_full_mesh_op_strategy = real_expand
    assert (per_kind, per_element) == (kinds, len(layout))


def test_foreach_tensor_meta_runs_one_element_per_kind(fake_group):
    """The global-shape run that gives a foreach op's output TensorMetas sees one element of each kind
    and hands back one TensorMeta per element, torch's own."""
    mesh = init_device_mesh("cpu", (4,))
    params = _parameters(mesh, ONE_D[1])
    schemas = []
    real = sharding_prop.ShardingPropagator.propagate_op_sharding_non_cached

    def recorded(self, schema):
        schemas.append(schema)
        return real(self, schema)

    sharding_prop.ShardingPropagator.propagate_op_sharding_non_cached = recorded
    try:
        torch._foreach_sqrt(params)
    finally:
        sharding_prop.ShardingPropagator.propagate_op_sharding_non_cached = real
    (schema,) = schemas
    lengths = []
    torch_meta = sharding_prop.ShardingPropagator._propagate_tensor_meta_non_cached

    def counted(self, op_schema):
        lengths.append(len(op_schema.args_schema[0]))
        return torch_meta(self, op_schema)

    propagator = DTensor._op_dispatcher.sharding_propagator
    by_kind = torch_compat.foreach_tensor_meta_by_kind(counted)(propagator, schema)
    assert lengths == [5]
    assert by_kind == torch_meta(propagator, schema)
    assert [tuple(meta.shape) for meta in by_kind] == [shape for shape, _ in ONE_D[1]]
    assert [meta.dtype for meta in by_kind] == [torch.float32] * 10 + [torch.bfloat16]
