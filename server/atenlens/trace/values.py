"""Values in a trace: the one place that decides every data-dependent value the traced program sees.

Fake tensors have no data, but the program branches, slices and sizes on values. Two sources:

- **Known values.** A small tensor whose value follows from data the trace has — Python and numpy
  data (`torch.tensor(...)`, `torch.from_numpy`), small factories (`arange`, `full`, `zeros`,
  `randint`, `randperm`, `randn`, `normal_` ...; random ones draw from torch's CPU generator, so
  `torch.manual_seed` makes them reproducible), and any aten op whose inputs are all known — carries a
  real CPU "shadow": the same op run for real next to the fake one. Only while every output has at
  most `SHADOW_LIMIT` elements: a shadow costs microseconds, never the time or memory of the model.
  The fake run still decides what is recorded; a shadow only decides values (`.item()`, `int(t)`,
  `if t:`, `.tolist()`, data-dependent sizes).
- **Assumed values.** Where no shadow exists (activations, gradients, anything large), the value is
  assumed on the path a healthy training step takes, and each assumption is a diagnostic
  (`Code.ASSUMED_VALUE`, kind "assumption", information) at the user line that consumed it, naming
  the library frame when the read is inside a library:
  - non-finite tests are false: `isinf`, `isnan`, `isposinf`, `isneginf` give all-False, `isfinite`
    all-True, and `_amp_foreach_non_finite_check_and_unscale_` finds nothing (so `GradScaler.step`
    runs the optimizer); values derived from these carry the assumption along ("uniform" shadows:
    one value standing for every element, so they cost nothing for a gradient of any size);
  - a truth value that decides whether a `while` loop ends ends it (rejection loops such as
    `nn.init.trunc_normal_` terminate);
  - a data-dependent size (`nonzero`, `torch.where(mask)`, `x[mask]`, `masked_select`, `unique`)
    takes half of its largest possible size (at least 1), not 0 and not always the maximum; of a
    mask from `one_hot(..., C)` (and views of it: top-k routing) 1/C of it, each class its share;
  - a one-element comparison `==` of an unknown value is false and `!=` true: an unknown value is
    taken not to equal one particular value (`if expert_idx == num_experts: continue` runs the
    expert, as in a real MoE layer);
  - the max of counts of booleans (`mask.sum(1).max()`: a longest length), and it plus a known
    number, is the most it can be (every element counted): `x[:, :lengths.max()]` crops nothing, and
    beam search's output keeps every generated token;
  - any other scalar read gives `1` / `1.0` / `True` (`placeholders.placeholder_scalar`).

A shadow is kept valid through in-place ops: the op runs on the shadows too when all its inputs
are known, and otherwise the mutated tensors lose their shadow. Views share their base's version
counter, so a shadow is trusted only while its storage's version is the one the last mirrored write
left (`_coherent`; torch bumps the counter after the op returns, or not at all for some ops, so one
more is accepted): a write the trace did not see makes the value unknown, not stale.
"""

from __future__ import annotations

import dis
import linecache
import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any, Optional

import torch

from atenlens.report import Code
from atenlens.trace import torch_compat as tc
from atenlens.trace.attribution import first_frame_outside, library_cause
from atenlens.trace.diagnostics import DiagnosticSink
from atenlens.trace.placeholders import placeholder_scalar

# Largest tensor (elements) that gets a real shadow: index tensors, batches of token ids, small
# masks and counters fit; activations and weights of a real model do not.
SHADOW_LIMIT = 4096

UNKNOWN = "value unknown on fake tensors"
FINITE = "values assumed finite (no inf/nan)"
GRADS_FINITE = "gradients assumed finite: GradScaler found no inf/nan"

_ATTR = "_atenlens_shadow"
_EQUALS = "_atenlens_equals"  # the truth value assumed for a one-element `==` / `!=` of unknowns
_DENSITY = "_atenlens_density"  # (fraction of nonzero elements, why) assumed for an unknown mask
# (largest possible value, whether it is a longest length) of an unknown integer count: a sum of
# booleans, the max of such sums, and either plus a known number
_AT_MOST = "_atenlens_at_most"
_FakeTensor = tc.FakeTensor
_Tensor = torch.Tensor
aten = torch.ops.aten

# Factories whose result is uninitialized memory: no value to know.
_GARBAGE = frozenset(
    {
        aten.empty.memory_format,
        aten.empty_like.default,
        aten.empty_strided.default,
        aten.new_empty.default,
        aten.new_empty_strided.default,
        aten.empty_permuted.default,
    }
)
# In-place ops that overwrite every element of `self` regardless of its value.
_OVERWRITES = frozenset(
    {
        aten.copy_.default,
        aten.fill_.Scalar,
        aten.zero_.default,
        aten.normal_.default,
        aten.uniform_.default,
        aten.random_.default,
        getattr(aten.random_, "from"),
        aten.random_.to,
        aten.exponential_.default,
        aten.bernoulli_.float,
        aten.geometric_.default,
        aten.log_normal_.default,
        aten.cauchy_.default,
    }
)
# Non-finite tests of unknown values: assumed to find nothing.
_FINITE_TESTS = {
    aten.isinf.default: False,
    aten.isnan.default: False,
    aten.isposinf.default: False,
    aten.isneginf.default: False,
    aten.isfinite.default: True,
}
# Ops through which a uniform (one value for every element) assumption passes unchanged or is
# recomputed on the single value: views and copies, pointwise ops, and these reductions.
_COPIES = frozenset(
    {
        aten._to_copy.default,
        aten.clone.default,
        aten.detach.default,
        aten.alias.default,
        aten.lift_fresh.default,
        aten.contiguous.default,
        aten.expand.default,
        aten._pin_memory.default,
    }
)
_REDUCTIONS_SAME = frozenset(
    {
        aten.any.default,
        aten.any.dim,
        aten.any.dims,
        aten.all.default,
        aten.all.dim,
        aten.all.dims,
        aten.amax.default,
        aten.amin.default,
        aten.max.default,
        aten.min.default,
        aten.mean.default,
        aten.mean.dim,
    }
)
_SUMS = frozenset({aten.sum.default, aten.sum.dim_IntList})
# Comparisons whose one-element unknown result is assumed: an unknown value rarely equals a given one.
_COUNTS = frozenset({aten.sum.default, aten.sum.dim_IntList})
_LONGEST = frozenset({aten.max.default, aten.amax.default, aten.max.dim})
_SHIFTS = frozenset({aten.add.Tensor, aten.add.Scalar})
_BOUNDED = _COUNTS | _LONGEST | _SHIFTS

_EQUALITY = {aten.eq.Scalar: False, aten.eq.Tensor: False, aten.ne.Scalar: True, aten.ne.Tensor: True}
_AMP_CHECK = aten._amp_foreach_non_finite_check_and_unscale_.default
# Logical ops that one known operand decides whatever the other holds: `x | True` is True and
# `x & False` is False. generate()'s stopping criteria rely on it: `unfinished & ~(length_done |
# eos_done)` stops every sequence once the length criterion holds, though the end-of-sequence test
# reads generated tokens, which are unknown. (True: `or`, absorbed by nonzero; False: `and`, by zero.)
_ABSORBING = {
    aten.bitwise_or.Tensor: True,
    aten.bitwise_or.Scalar: True,
    aten.bitwise_or_.Tensor: True,
    aten.bitwise_or_.Scalar: True,
    aten.logical_or.default: True,
    aten.logical_or_.default: True,
    aten.bitwise_and.Tensor: False,
    aten.bitwise_and.Scalar: False,
    aten.bitwise_and_.Tensor: False,
    aten.bitwise_and_.Scalar: False,
    aten.logical_and.default: False,
    aten.logical_and_.default: False,
}
_LOGICAL = frozenset({aten.logical_or.default, aten.logical_or_.default})  # nonzero absorbs whatever the dtype
_SIZED_BY_VALUES = frozenset({aten.repeat_interleave.Tensor, aten.bincount.default})
_SIZED_BY_VALUES_LIMIT = 1 << 24
FINITE_CALLS = frozenset({torch.isfinite, torch.Tensor.isfinite})
_FINITE_CALLS = FINITE_CALLS

# Python frames that are the trace's own plumbing between a user's read and the decision.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TORCH_PLUMBING = tuple(
    os.path.join(os.path.dirname(torch.__file__), p)
    for p in (
        "overrides.py",
        "utils/_python_dispatch.py",
        "_subclasses/",
        "_tensor.py",
        "_ops.py",
        "_dynamo/",
        "_compile.py",
        "utils/_stats.py",
    )
)


@dataclass(slots=True)
class Shadow:
    value: torch.Tensor  # real CPU tensor; for a uniform shadow a 0-d tensor standing for every element
    uniform: bool = False
    reason: Optional[str] = None  # None: known exactly; else the assumption the value derives from


@dataclass(frozen=True, slots=True)
class _OpInfo:
    mutated: tuple[int, ...]  # positional arguments the op writes
    namespace_ok: bool  # aten ops only are run on shadows
    overwrites: bool
    garbage: bool
    pointwise: bool
    plain: bool  # writes nothing and assumes nothing: unknown in, unknown out
    equality: Optional[bool]  # `==` / `!=`: the truth value assumed for an unknown one-element result


def _op_info(func: Any) -> _OpInfo:
    schema = tc.op_schema(func)
    mutated = tuple(
        i
        for i, a in enumerate(schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only
    )
    overwrites = func in _OVERWRITES
    return _OpInfo(
        mutated,
        func.namespace == "aten",
        overwrites,
        func in _GARBAGE,
        torch.Tag.pointwise in func.tags,
        plain=not mutated
        and not overwrites
        and func not in _FINITE_TESTS
        and func is not _AMP_CHECK
        and func not in _ABSORBING,
        equality=_EQUALITY.get(func),
    )


def _tensors(args: tuple, kwargs: dict) -> list:
    found = []
    for a in args:
        if isinstance(a, _Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(w for w in a if isinstance(w, _Tensor))
    for a in kwargs.values():
        if isinstance(a, _Tensor):
            found.append(a)
    return found


def _outputs(out: Any) -> list:
    if isinstance(out, _Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [o for o in out if isinstance(o, _Tensor)]
    return []


def _version(t: torch.Tensor) -> Optional[int]:
    try:
        return t._version
    except RuntimeError:  # inference tensors keep no version counter
        return None


def _view_base(func: Any, inputs: Any) -> Optional[torch.Tensor]:
    """The tensor a view op's outputs view (its first tensor argument); None for other ops."""
    if not func.is_view:
        return None
    return next((t for t in inputs if isinstance(t, _Tensor)), None)


def _small(outputs: list) -> bool:
    return all(o.numel() <= SHADOW_LIMIT for o in outputs)


def _readable(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    return repr(value)


class Values:
    """The values of one trace. The recorder calls `after_op` for every aten op the program runs;
    the sync handlers ask `scalar`, `tolist`, `true_count`... for every value the host reads."""

    def __init__(self, sink: DiagnosticSink) -> None:
        self.sink = sink
        self._info: dict[Any, _OpInfo] = {}
        self._coherent: dict[int, Optional[int]] = {}  # storage -> version its shadows are valid at

    # -- shadows -------------------------------------------------------------------------------
    def shadow(self, t: Any) -> Optional[Shadow]:
        """The shadow of `t` if it is still valid; a real (non-fake) tensor is its own."""
        if not isinstance(t, _FakeTensor):
            return Shadow(t) if isinstance(t, _Tensor) and t.numel() <= SHADOW_LIMIT else None
        s = t.__dict__.get(_ATTR)
        if s is None:
            return None
        key = tc.storage_key(t)
        version = _version(t)
        expected = self._coherent.get(key, -1) if key is not None else -1
        if version != expected and (expected is None or version != expected + 1):
            del t.__dict__[_ATTR]
            return None
        return s

    def _attach(self, t: torch.Tensor, s: Shadow, base: Optional[torch.Tensor] = None) -> None:
        """Give `t` the shadow `s`. `base` is the input a view op's output `t` views: the output of
        a view op does not share its base's version counter yet when the op returns (autograd's
        view tracking sets it after), so the storage stays valid at the base's version; taking the
        view's fresh counter instead dropped the base's shadow at its next in-place op's read
        (`alive &= iou` twice, with `alive[i]` read in between, made `alive` unknown)."""
        key = tc.storage_key(t)
        if key is None:
            return
        t.__dict__[_ATTR] = s
        self._coherent[key] = _version(base if base is not None else t)

    def _forget(self, t: Any) -> None:
        if isinstance(t, _Tensor) and t.__dict__.pop(_ATTR, None) is not None:
            key = tc.storage_key(t)
            if key is not None:
                self._coherent.pop(key, None)

    def known(self, t: Any) -> Optional[torch.Tensor]:
        """The real value of `t` when it is known exactly and fully (no assumption, not uniform)."""
        s = self.shadow(t)
        return s.value if s is not None and not s.uniform and s.reason is None else None

    def after_op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """Mirror an op that just ran on fakes onto the shadows of its inputs (see the module doc).
        Runs for every op of the trace: the common case (an op on an activation) returns after a
        dict lookup and one attribute test."""
        info = self._info.get(func)
        if info is None:
            info = self._info[func] = _op_info(func)
        if info.equality is not None and type(out) is _FakeTensor and out.numel() == 1:
            out.__dict__[_EQUALS] = info.equality  # used only if the value stays unknown
        if func in _BOUNDED:
            self._bound(func, args, kwargs, out)  # used only if the value stays unknown
        if info.plain and args:
            first = args[0]
            if type(first) is _FakeTensor:
                known = first.__dict__
                if _ATTR not in known and _DENSITY not in known:
                    return  # its result is unknown too
        if info.garbage or not info.namespace_ok:
            return
        inputs = _tensors(args, kwargs)
        try:
            with tc.real_tensors():  # shadows are real tensors: no fake mode, no recording
                self._mirror(func, info, args, kwargs, inputs, out)
        except Exception:  # a shadow is an extra: never let it break the program
            for i in info.mutated:
                if i < len(args):
                    for t in args[i] if isinstance(args[i], (list, tuple)) else (args[i],):
                        self._forget(t)

    def _bound(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """The largest value an integer count can have: a sum of n booleans is at most n, the max of
        such sums is a longest length (`lengths.max()`; beam search's generated length), and adding a
        known number shifts the bound."""
        first = args[0] if args else None
        result = out[0] if func is aten.max.dim else out
        if type(first) is not _FakeTensor or type(result) is not _FakeTensor or result.is_floating_point():
            return
        bound = (1, False) if first.dtype == torch.bool else first.__dict__.get(_AT_MOST)
        if bound is None:
            return
        if func in _COUNTS:
            if result.numel():
                result.__dict__[_AT_MOST] = (bound[0] * (first.numel() // result.numel()), False)
        elif func in _LONGEST:
            result.__dict__[_AT_MOST] = (bound[0], True)
        elif len(args) > 1 and kwargs.get("alpha", 1) == 1:
            other = args[1]
            if isinstance(other, torch.Tensor):
                known = self.known(other)
                other = (
                    int(known.item())
                    if known is not None and known.numel() == 1 and not known.is_floating_point()
                    else None
                )
            if isinstance(other, int) and not isinstance(other, bool):
                result.__dict__[_AT_MOST] = (bound[0] + other, bound[1])

    def _mirror(self, func: Any, info: _OpInfo, args: tuple, kwargs: dict, inputs: list, out: Any) -> None:
        outputs = _outputs(out)
        input_ids = {id(t) for t in inputs}
        if any(o.__dict__.get(_ATTR) is not None for o in outputs if id(o) not in input_ids):
            return  # a handler already attached the real result (nonzero & co.)
        mutated = [
            t
            for i in info.mutated
            if i < len(args)
            for t in (args[i] if isinstance(args[i], (list, tuple)) else (args[i],))
            if isinstance(t, _Tensor)
        ]
        if func is _AMP_CHECK:
            self._amp_check(args)
            return
        density = inputs[0].__dict__.get(_DENSITY) if inputs and isinstance(inputs[0], _FakeTensor) else None
        if density is not None and len(outputs) == 1 and not mutated and (func.is_view or func in _COPIES):
            outputs[0].__dict__[_DENSITY] = density  # a view or copy selects as much as its source
            return
        shadows: list[Any] = []  # Shadow or None; past the check below, none is None
        for t in inputs:
            if info.overwrites and t is args[0]:
                continue
            shadows.append(self.shadow(t))
        if any(s is None for s in shadows):
            if func in _FINITE_TESTS and len(outputs) == 1:
                self._assume_uniform(outputs[0], torch.tensor(_FINITE_TESTS[func]), FINITE)
                return
            if func in _ABSORBING and len(outputs) == 1 and self._absorb(func, args, shadows, outputs[0]):
                return
            for t in mutated:
                self._forget(t)
            return
        if any(s.uniform for s in shadows):
            self._mirror_uniform(func, info, args, kwargs, shadows, outputs, mutated)
            return
        if not _small(outputs) or not _small(mutated):
            for t in mutated:
                self._forget(t)
            return
        reason = next((s.reason for s in shadows if s.reason is not None), None)
        replaced = {
            id(t): s.value for t, s in zip((t for t in inputs if not (info.overwrites and t is args[0])), shadows)
        }
        if info.overwrites:
            target = args[0]
            own = self.shadow(target)
            replaced[id(target)] = (
                own.value if own is not None else torch.empty(tuple(target.shape), dtype=target.dtype)
            )
        real_args = tuple(_replace(a, replaced) for a in args)
        real_kwargs = {k: _replace(v, replaced) for k, v in kwargs.items()}
        if real_kwargs.get("device") is not None:
            real_kwargs["device"] = torch.device("cpu")
        if real_kwargs.get("pin_memory"):
            real_kwargs["pin_memory"] = False
        real_out = func(*real_args, **real_kwargs)
        for t in mutated:
            self._attach(t, Shadow(replaced[id(t)], reason=reason))
        mutated_ids = {id(t) for t in mutated}
        base = _view_base(func, inputs)
        for fake, real in zip(outputs, _outputs(real_out)):
            if id(fake) in mutated_ids:
                continue
            if tuple(real.shape) == tuple(fake.shape) and real.dtype == fake.dtype:
                self._attach(fake, Shadow(real, reason=reason), base)

    def _absorb(self, func: Any, args: tuple, shadows: list, out: torch.Tensor) -> bool:
        """An `|` / `&` with an unknown operand whose known operand decides every element of `out`
        (see `_ABSORBING`): `out` (the result, or the first argument written in place) gets that value."""
        is_or = _ABSORBING[func]
        known = [(s.value, s.reason) for s in shadows if s is not None]
        known += [(torch.tensor(a), None) for a in args[1:2] if isinstance(a, (bool, int))]
        for value, reason in known:
            if is_or and (func in _LOGICAL or out.dtype == torch.bool) and bool(value.all()):
                self._assume_uniform(out, torch.tensor(True), reason)
                return True
            if not is_or and not bool(value.any()):
                self._assume_uniform(out, torch.tensor(False), reason)
                return True
        return False

    def _mirror_uniform(
        self, func: Any, info: _OpInfo, args: tuple, kwargs: dict, shadows: list, outputs: list, mutated: list
    ) -> None:
        for t in mutated:
            self._forget(t)
        if len(outputs) != 1 or mutated:
            return
        source = next(s for s in shadows if s.uniform)
        if not all(s.uniform or s.value.numel() == 1 for s in shadows):
            return
        out = outputs[0]
        if func in _COPIES or func.is_view or func in _REDUCTIONS_SAME:
            value = source.value.to(out.dtype)
        elif func in _SUMS:
            count = max(args[0].numel(), 1) // max(out.numel(), 1)
            value = (source.value.to(out.dtype) * count).to(out.dtype)
        elif info.pointwise:
            real_args = [(s.value.reshape(()) if s.value.numel() == 1 else s.value) for s in shadows]
            it = iter(real_args)
            rebuilt = tuple(next(it) if isinstance(a, _Tensor) else a for a in args)
            value = func(*rebuilt, **{k: v for k, v in kwargs.items() if not isinstance(v, _Tensor)})
            if not isinstance(value, _Tensor) or value.numel() != 1:
                return
            value = value.reshape(())
        else:
            return
        self._assume_uniform(out, value, source.reason, _view_base(func, args))

    def _assume_uniform(
        self, out: torch.Tensor, value: torch.Tensor, reason: Optional[str], base: Optional[torch.Tensor] = None
    ) -> None:
        if out.numel() <= SHADOW_LIMIT:
            self._attach(out, Shadow(value.to(out.dtype).expand(tuple(out.shape)).clone(), reason=reason), base)
        else:
            self._attach(out, Shadow(value.to(out.dtype).reshape(()), uniform=True, reason=reason), base)

    def after_call(self, func: Any, out: Any) -> None:
        """API calls whose ops alone do not show the assumption: `isfinite` decomposes into
        `abs`, `ne`, `eq`, `mul`, so its unknown result is taken as all-True here."""
        if func in _FINITE_CALLS and isinstance(out, _FakeTensor) and self.shadow(out) is None:
            with tc.real_tensors():
                self._assume_uniform(out, torch.tensor(True), FINITE)

    def assume_density(self, out: Any, density: float, reason: str) -> None:
        """`out` (unknown) has about `density` of its elements nonzero (`one_hot`: 1/classes)."""
        if isinstance(out, _FakeTensor) and self.shadow(out) is None:
            out.__dict__[_DENSITY] = (density, reason)

    def _amp_check(self, args: tuple) -> None:
        """GradScaler's unscale: the gradients are unknown, so "found inf" is assumed to stay 0."""
        for grad in args[0]:
            self._forget(grad)
        found_inf = args[1]
        own = self.shadow(found_inf)
        value = own.value if own is not None else torch.zeros((), dtype=found_inf.dtype)
        self._attach(
            found_inf,
            Shadow(value, uniform=own.uniform if own is not None else found_inf.numel() > 1, reason=GRADS_FINITE),
        )

    def attach_result(self, fake: torch.Tensor, real: torch.Tensor) -> None:
        """A handler built `fake` from the real result `real` of a data-dependent op."""
        self._attach(fake, Shadow(real))

    def run_known(self, func: Any, args: tuple, kwargs: dict) -> Optional[Any]:
        """The real result of `func` when every tensor argument is known exactly, else None."""
        inputs = _tensors(args, kwargs)
        if not inputs:
            return None
        replaced = {}
        for t in inputs:
            value = self.known(t)
            if value is None:
                return None
            replaced[id(t)] = value
        with tc.real_tensors():
            return func(*(_replace(a, replaced) for a in args), **{k: _replace(v, replaced) for k, v in kwargs.items()})

    def known_fakes(self, func: Any, args: tuple, kwargs: dict, device: torch.device) -> Optional[Any]:
        """The result of a data-dependent op (`nonzero`, `x[mask]`, `unique`...) as fakes on `device`
        of the real sizes, carrying their real values, when every input is known; else None.
        Called from inside the recorder's dispatch mode, where the fake mode is active."""
        if func in _SIZED_BY_VALUES:
            # the output size is a value (sum of repeats, largest bin), not bounded by the input's:
            # computed for real only when it is reasonable (a hostile 10**12 must not take the worker)
            source = self.known(args[0]) if args else None
            if source is None or source.numel() == 0:
                return None
            with tc.real_tensors():
                size = int(source.sum()) if func is aten.repeat_interleave.Tensor else int(source.max()) + 1
            if size > _SIZED_BY_VALUES_LIMIT:
                return None
        real = self.run_known(func, args, kwargs)
        if real is None:
            return None

        def fake_of(r: Any) -> Any:
            if not isinstance(r, _Tensor):
                return r
            fake = torch.empty_strided(tuple(r.shape), r.stride(), dtype=r.dtype, device=device)
            self.attach_result(fake, r)
            return fake

        return type(real)(fake_of(r) for r in real) if isinstance(real, (tuple, list)) else fake_of(real)

    # -- decisions the host reads ----------------------------------------------------------------
    def scalar(self, t: torch.Tensor, reader: Optional[str] = None) -> tuple[bool, Any]:
        """(True, value) when the value of the one-element tensor `t` follows from its shadow (an
        assumption it derives from is noted), else (False, None)."""
        s = self.shadow(t)
        if s is None:
            return False, None
        with tc.real_tensors():
            value = s.value.reshape(-1)[0].item() if s.value.numel() else None
        if value is None:
            return False, None
        if s.reason is not None:
            self.note(f"took `{_readable(value)}`{_for(reader, t)} ({s.reason})")
        return True, value

    def assume_scalar(self, t: torch.Tensor, reader: Optional[str] = None) -> Any:
        """A value for a scalar read of unknown `t`, noted where it is consumed."""
        if t.dtype == torch.bool or reader in ("`bool()` / `if tensor:`",):
            ends = _loop_exit_value()
            if ends is not None:
                self.note(f"took `{ends}`{_for(reader, t)}: a `while` loop that depends on it is assumed to end")
                return ends
        equals = t.__dict__.get(_EQUALS) if type(t) is _FakeTensor else None
        if equals is not None:
            self.note(f"took `{equals}`{_for(reader, t)}: an unknown value is assumed not to equal a given one")
            return equals
        at_most = t.__dict__.get(_AT_MOST) if type(t) is _FakeTensor else None
        if at_most is not None and at_most[1] and t.dtype != torch.bool:
            self.note(
                f"took `{at_most[0]}`{_for(reader, t)}: the longest of unknown lengths is assumed to be the most it "
                f"can be (nothing shorter)"
            )
            return at_most[0]
        value = placeholder_scalar(t.dtype)
        self.note(f"took `{_readable(value)}`{_for(reader, t)}")
        return value

    def tolist(self, t: torch.Tensor) -> Any:
        s = self.shadow(t)
        if s is not None and not s.uniform:
            with tc.real_tensors():
                value = s.value.tolist()
            if s.reason is not None:
                self.note(f"took `{_readable(value)}` for `.tolist()` of {_label(t)} ({s.reason})")
            return value
        with tc.real_tensors():
            fill = s.value.item() if s is not None else placeholder_scalar(t.dtype)

        def build(shape: tuple) -> Any:
            return [build(shape[1:]) for _ in range(shape[0])] if shape else fill

        value = build(tuple(t.shape))
        self.note(
            f"took `{_readable(value)}` for `.tolist()` of {_label(t)}"
            + (f" ({s.reason})" if s is not None and s.reason else "")
        )
        return value

    def true_count(self, mask: torch.Tensor, numel: int, what: str) -> int:
        """How many elements of `mask` are nonzero (out of `numel`, the size after broadcasting):
        known from its shadow, else assumed (half, at least 1) and noted."""
        s = self.shadow(mask)
        if s is not None:
            with tc.real_tensors():
                if s.uniform:
                    count = numel if bool(s.value) else 0
                else:
                    count = int(torch.count_nonzero(s.value)) * (numel // max(s.value.numel(), 1))
            if s.reason is not None:
                self.note(f"took size {count} of at most {numel} for {what} ({s.reason})")
            return count
        density = mask.__dict__.get(_DENSITY) if isinstance(mask, _FakeTensor) else None
        if density is not None:
            count = max(1, round(numel * density[0])) if numel else 0
            self.note(f"took size {count} of at most {numel} for {what} ({density[1]})")
            return count
        count = (numel + 1) // 2
        self.note(f"took size {count} of at most {numel} for {what} (half of the elements assumed selected)")
        return count

    def assume_size(self, largest: int, what: str) -> int:
        size = (largest + 1) // 2
        self.note(f"took size {size} of at most {largest} for {what} (half assumed)")
        return size

    def note(self, text: str) -> None:
        """Record an assumption at the user line that consumes it (`text` says what was taken); a read
        inside a library names the library line too (message and `cause`, as the sync reports do)."""
        found = library_cause(sys._getframe(1))
        cause, where = None, ""
        if found is not None:
            cause, relative = found
            source = linecache.getline(cause.file, cause.line).strip()
            source = source if len(source) <= 80 else source[:77] + "..."
            where = f", inside {relative}:{cause.line}" + (f" `{source}`" if source else "") + ", called from this line"
        self.sink.add(
            "assumption", Code.ASSUMED_VALUE, f"{UNKNOWN}: {text}{where}", severity="information", cause=cause
        )


def _replace(value: Any, replaced: dict) -> Any:
    if isinstance(value, _Tensor):
        return replaced.get(id(value), value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, _Tensor) for v in value):
        return type(value)(replaced.get(id(v), v) if isinstance(v, _Tensor) else v for v in value)
    return value


def _label(t: torch.Tensor) -> str:
    from atenlens.trace.gpu.tracker import tensor_label  # torch-only helper; no import cycle at load

    return tensor_label(t)


def _for(reader: Optional[str], t: torch.Tensor) -> str:
    return f" for {reader} of {_label(t)}" if reader else f" for {_label(t)}"


# -- where the value is consumed ------------------------------------------------------------------


def _consumer_frame() -> Optional[FrameType]:
    """The innermost frame outside the trace's own machinery: the code that reads the value."""
    return first_frame_outside(sys._getframe(1), (_PACKAGE_DIR, *_TORCH_PLUMBING))


_JUMPS_IF_TRUE = frozenset(n for n in dis.opmap if n.startswith("POP_JUMP") and n.endswith("IF_TRUE"))
_JUMPS_IF_FALSE = frozenset(n for n in dis.opmap if n.startswith("POP_JUMP") and n.endswith("IF_FALSE"))
_UNCONDITIONAL = frozenset({"JUMP_FORWARD", "JUMP", "JUMP_NO_INTERRUPT", "NOP"})
_instructions: dict[Any, dict[int, dis.Instruction]] = {}


def _by_offset(code: Any) -> dict[int, dis.Instruction]:
    found = _instructions.get(code)
    if found is None:
        found = _instructions[code] = {ins.offset: ins for ins in dis.get_instructions(code)}
    return found


def _loop_exit_value() -> Optional[bool]:
    """When the truth value being read decides whether a `while` loop goes on, the value that ends
    the loop; else None. Read from the consuming frame's bytecode: the conditional jump that
    consumes the value has one successor inside a loop whose header is not a `for` and one past it."""
    frame = _consumer_frame()
    if frame is None:
        return None
    code = frame.f_code
    instructions = _by_offset(code)
    ins = instructions.get(frame.f_lasti)
    if ins is not None and ins.opname == "TO_BOOL":  # 3.13+: the conversion precedes the jump
        ins = instructions.get(ins.offset + 2 * (1 + _cache_entries(ins)))
    if ins is None or (ins.opname not in _JUMPS_IF_TRUE and ins.opname not in _JUMPS_IF_FALSE):
        return None
    fall = _next_offset(instructions, ins)
    jump = ins.argval
    loops = [
        (target, end)
        for ins2 in instructions.values()
        if "BACKWARD" in ins2.opname and "NO_INTERRUPT" not in ins2.opname and isinstance(ins2.argval, int)
        for target, end in ((ins2.argval, ins2.offset),)
        if instructions.get(target) is None or instructions[target].opname != "FOR_ITER"
    ]
    fall, jump = _resolve(instructions, fall), _resolve(instructions, jump)
    for start, end in loops:
        if ins.offset > end:
            continue
        inside = [start <= s <= end for s in (fall, jump)]
        if inside == [True, False]:  # jumping leaves the loop
            return ins.opname in _JUMPS_IF_TRUE
        if inside == [False, True]:  # falling through leaves it
            return ins.opname in _JUMPS_IF_FALSE
    return None


def _cache_entries(ins: dis.Instruction) -> int:
    return getattr(dis, "_inline_cache_entries", {}).get(ins.opcode, 0) if hasattr(dis, "_inline_cache_entries") else 0


def _next_offset(instructions: dict[int, dis.Instruction], ins: dis.Instruction) -> int:
    later = [o for o in instructions if o > ins.offset]
    return min(later) if later else ins.offset + 2


def _resolve(instructions: dict[int, dis.Instruction], offset: int) -> int:
    """Follow unconditional forward jumps (a `break` is one) to where control really goes."""
    for _ in range(8):
        ins = instructions.get(offset)
        if ins is None:
            return offset
        if ins.opname in ("RETURN_VALUE", "RETURN_CONST"):
            return sys.maxsize  # leaves every loop
        if ins.opname in _UNCONDITIONAL:
            offset = ins.argval if ins.opname != "NOP" else _next_offset(instructions, ins)
            continue
        return offset
    return offset
