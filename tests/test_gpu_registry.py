"""The hazard handler registries: one handler per op, duplicates rejected, predicates as fallback."""

from __future__ import annotations

import pytest

from atenlens.trace.gpu.registry import DuplicateHandlerError, HandlerRegistry


def test_a_key_registered_twice_is_rejected():
    registry: HandlerRegistry[str] = HandlerRegistry("test")

    @registry.register("aten.nonzero.default")
    def first(call):
        return "first"

    with pytest.raises(DuplicateHandlerError, match="aten.nonzero.default already has handler first"):

        @registry.register("aten.nonzero.default")
        def second(call):
            return "second"

    assert registry.lookup("aten.nonzero.default") is first


def test_exact_keys_win_over_predicates_and_lookups_see_late_registrations():
    registry: HandlerRegistry[str] = HandlerRegistry("test")
    assert registry.lookup("aten.index.Tensor") is None  # cached miss ...

    @registry.register_predicate("any index op", lambda key: key.startswith("aten.index"))
    def by_predicate(call):
        return "predicate"

    assert registry.lookup("aten.index.Tensor") is by_predicate  # ... forgotten on registration

    @registry.register("aten.index.Tensor")
    def exact(call):
        return "exact"

    assert registry.lookup("aten.index.Tensor") is exact
    assert registry.lookup("aten.index_put_.default") is by_predicate
    with pytest.raises(DuplicateHandlerError):
        registry.register_predicate("any index op", lambda key: True)(by_predicate)


def test_the_engine_registers_the_sync_and_copy_ops():
    import torch

    from atenlens.trace.gpu import hooks  # noqa: F401  (registers the handlers)
    from atenlens.trace.gpu.registry import DISPATCH_HANDLERS

    aten = torch.ops.aten
    expected = {
        aten._local_scalar_dense.default,
        aten.nonzero.default,
        aten.index.Tensor,
        aten.masked_select.default,
        aten._unique2.default,
        aten.repeat_interleave.Tensor,
        aten._to_copy.default,
        aten.copy_.default,
        aten._pin_memory.default,
        aten.is_pinned.default,
    }
    assert expected <= set(DISPATCH_HANDLERS.keys())
