"""The recorder's shortcuts for speed give what the slow ways give: an Event made by `_event` is the
Event the dataclass makes, and the recorder's answer to `prim.device` is FakeTensorMode's."""

from __future__ import annotations

import dataclasses

import torch
from torch._subclasses.fake_tensor import FakeTensorMode, in_kernel_invocation_manager

from atenlens.report import Event, Frame, TensorMeta
from atenlens.trace import torch_compat as tc
from atenlens.trace.recorder import _event


def test_an_op_event_made_directly_equals_the_dataclass_one() -> None:
    meta = TensorMeta("bfloat16", (8, 4096), "cuda:0")
    fields = {
        "kind": "op",
        "name": "aten.addmm.default",
        "phase": "forward",
        "file": "/x/model.py",
        "line": 12,
        "stack": (Frame("/x/model.py", 12, "forward"),),
        "outputs": (meta,),
        "inputs": (meta, meta),
        "flops": 1024,
        "node": None,
        "module": 3,
        "bytes_allocated": 65536,
        "bytes_moved": 196608,
        "estimate_seconds": 4e-06,
    }
    made = _event(fields)
    expected = Event(**fields)  # type: ignore[arg-type]
    assert made == expected
    assert hash(made) == hash(expected)
    assert dataclasses.asdict(made) == dataclasses.asdict(expected)
    assert list(vars(made)) == [f.name for f in dataclasses.fields(Event)]  # the JSON's key order
    assert (made.group_size, made.group, made.link, made.bytes) == (None, None, None, 0)
    assert dataclasses.replace(made, line=13).line == 13


def test_a_call_event_gets_the_defaults_of_every_field_it_does_not_give() -> None:
    made = _event(
        {"kind": "call", "name": "torch.nn.functional.linear", "phase": "forward", "file": None, "line": None}
    )
    assert made == Event(kind="call", name="torch.nn.functional.linear", phase="forward", file=None, line=None)
    assert (made.stack, made.outputs, made.flops, made.estimate_seconds) == ((), (), None, 0.0)


def test_the_recorders_device_answer_is_fake_tensor_modes() -> None:
    with FakeTensorMode() as mode:
        t = torch.empty(3, 4)
        assert tc.fake_device_answer((t,)) == torch.ops.prim.device.default(t) == torch.device("cpu")
        with in_kernel_invocation_manager(mode):  # inside a fake kernel, FakeTensorMode says meta
            assert tc.fake_device_answer((t,)) == torch.device("meta")
    assert tc.fake_device_answer((torch.empty(2),)) is None  # a real tensor: not answered, dispatched
    assert tc.fake_device_answer(()) is None
