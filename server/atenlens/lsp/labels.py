"""Compact text for hints, lenses and hovers, in the vocabulary of torch's logging tensor
(`f32[8, 32]`). Pure functions of report data."""

from __future__ import annotations

from typing import Optional, Sequence

from atenlens import vocabulary
from atenlens.lsp.settings import HintSettings
from atenlens.report import Event, Summary, TensorMeta
from atenlens.vocabulary import dtype_abbr, format_flops


def tensor_label(meta: TensorMeta) -> str:
    """`f32[8, 32]`; a DTensor's local shard with its placements: `f32[8, 32] Shard(1)`; a plain tensor
    that holds only such a shard (handed back by `to_local()`): `f32[8, 32] local Shard(1)`. With named
    dims (`dims: B=8 T=1024`): `bf16[B, T, 768]`."""
    label = vocabulary.tensor_label(meta.dtype, meta.dims or meta.shape)
    if not meta.placements:
        return label
    return f"{label} local {meta.placements}" if meta.local else f"{label} {meta.placements}"


def tensor_label_with_device(meta: TensorMeta) -> str:
    """`f32[8, 32] cuda:0`; a local shard also names the global tensor: `f32[8, 32] Shard(1) cuda:0 of
    f32[8, 128]`."""
    label = f"{tensor_label(meta)} {meta.device}"
    if meta.global_shape is not None:
        label += f" of {vocabulary.tensor_label(meta.dtype, meta.global_shape)}"
    return label


MAX_TENSORS_LISTED = 4


def tensors_label_with_device(metas: Sequence[TensorMeta]) -> str:
    """`f32[8, 32] cuda:0, f32[8] cuda:0`; past MAX_TENSORS_LISTED tensors (a `_foreach_*` op over
    161 parameters) their count: `161 f32 tensors cuda:0`."""
    if len(metas) <= MAX_TENSORS_LISTED:
        return ", ".join(tensor_label_with_device(m) for m in metas)
    dtypes = {m.dtype for m in metas}
    devices = {m.device for m in metas}
    kind = f"{dtype_abbr(next(iter(dtypes)))} " if len(dtypes) == 1 else ""
    where = f" {next(iter(devices))}" if len(devices) == 1 else ""
    return f"{len(metas)} {kind}tensors{where}"


# Ops an optimizer runs to create its state on its first step (AdamW's `zeros_like` per parameter):
# once per run, not per step, so a hint does not name them unless asked.
SETUP_OPS = frozenset(
    {
        "zeros_like",
        "zeros",
        "empty",
        "empty_like",
        "empty_strided",
        "full",
        "full_like",
        "ones",
        "ones_like",
        "scalar_tensor",
        "lift_fresh_copy",
        "new_zeros",
        "new_empty",
        "new_full",
    }
)


def is_setup_function(qualname: Optional[str]) -> bool:
    """`MLP.__init__`: building a model, whose ops (`empty`, `uniform_`) are initialisation."""
    return bool(qualname) and qualname.rsplit(".", 1)[-1] == "__init__"  # type: ignore[union-attr]


def visible(events: Sequence[Event], hidden: frozenset) -> list[Event]:
    return [e for e in events if e.name not in hidden]


def short_op(name: str) -> str:
    """`aten.addmm.default` -> `addmm`; `aten._foreach_mul_.Scalar` -> `_foreach_mul_`."""
    parts = name.split(".")
    if parts[0] in ("aten", "prims") and len(parts) > 1:
        return parts[1]
    return name


def counted_names(events: Sequence[Event]) -> list[str]:
    """Op names in order of first appearance, repeats folded: `mm×2`."""
    counts: dict[str, int] = {}
    for event in events:
        key = short_op(event.name)
        counts[key] = counts.get(key, 0) + 1
    return [name if count == 1 else f"{name}×{count}" for name, count in counts.items()]


def last_output(events: Sequence[Event]) -> Optional[TensorMeta]:
    """The main output (the first: `native_batch_norm`'s result, not its saved statistics) of the
    last op that returned a tensor."""
    for event in reversed(events):
        if event.outputs:
            return event.outputs[0]
    return None


class _Segment:
    """One part of a hint: a prefix, names (some of which may be cut) and a suffix."""

    def __init__(self, prefix: str, names: list[str], suffix: str = "") -> None:
        self.prefix = prefix
        self.names = names
        self.cut = 0
        self.suffix = suffix

    def render(self) -> str:
        text = self.prefix + ", ".join(self.names)
        if self.cut:
            text += f" +{self.cut}"
        return text + self.suffix


def _join(segments: list[_Segment]) -> str:
    return " · ".join(segment.render() for segment in segments)


# Ops that only re-view or re-label a tensor: the first to go when a hint must be cut, so that
# `t, addmm, relu, detach` becomes `addmm, relu +2` rather than `t, addmm +2`.
MINOR_OPS = frozenset(
    {
        "t",
        "detach",
        "view",
        "_unsafe_view",
        "alias",
        "expand",
        "reshape",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "as_strided",
        "lift_fresh",
        "clone",
        "_to_copy",
        "slice",
        "select",
    }
)


def _is_minor(name: str) -> bool:
    return name.split("×", 1)[0] in MINOR_OPS


def fit(segments: list[_Segment], max_length: int) -> str:
    """Drop names until the label fits (each segment keeps at least one name): view-like ops
    first, then from the end of the segment with the most names; dropped names are counted as
    `+N`."""
    text = _join(segments)
    while len(text) > max_length:
        candidates = [s for s in segments if len(s.names) > 1]
        if not candidates:
            break
        minor = [s for s in candidates if any(_is_minor(n) for n in s.names)]
        if minor:
            segment = max(minor, key=lambda s: len(s.names))
            index = max(i for i, n in enumerate(segment.names) if _is_minor(n))
        else:
            segment = max(candidates, key=lambda s: len(s.names))
            index = len(segment.names) - 1
        name = segment.names.pop(index)
        segment.cut += int(name.split("×", 1)[1]) if "×" in name else 1
        text = _join(segments)
    return text


def _ops(count: int) -> str:
    return f"{count} op{'s' if count != 1 else ''}"


def sync_label(count: int) -> str:
    return "sync" if count == 1 else f"sync×{count}"


def line_hint(
    forward: Sequence[Event],
    backward: Sequence[Event],
    optimizer: Sequence[Event],
    settings: HintSettings,
    hidden: frozenset = frozenset(),
    syncs: int = 0,
) -> Optional[str]:
    """`addmm f32[8, 32] · ∇ mm, sum · sync` for a line's own ops. Ops named in `hidden`
    (bookkeeping: views, detach) are not named, but a view still gives the line its shape;
    the optimizer's state setup (`zeros_like` per parameter) is not named unless asked."""
    segments: list[_Segment] = []
    if not settings.show_bookkeeping:
        optimizer = [e for e in optimizer if short_op(e.name) not in SETUP_OPS]
    named_forward = visible(forward, hidden)
    output = last_output(forward) if settings.shapes else None
    shape = tensor_label(output) if output else ""
    if named_forward and settings.ops:
        segments.append(_Segment("", counted_names(named_forward), f" {shape}" if shape else ""))
    elif named_forward:
        segments.append(_Segment(_ops(len(named_forward)) + (f" {shape}" if shape else ""), []))
    elif shape:
        segments.append(_Segment(shape, []))
    named_backward = visible(backward, hidden)
    if named_backward and settings.backward:
        segments.append(
            _Segment("∇ ", counted_names(named_backward))
            if settings.ops
            else _Segment(f"∇ {_ops(len(named_backward))}", [])
        )
    named_optimizer = visible(optimizer, hidden)
    if named_optimizer:
        segments.append(
            _Segment("opt ", counted_names(named_optimizer))
            if settings.ops
            else _Segment(f"opt {_ops(len(named_optimizer))}", [])
        )
    if syncs and settings.syncs:
        segments.append(_Segment(sync_label(syncs), []))
    if not segments:
        return None
    return fit(segments, settings.max_length)


def rollup_hint(
    nested: Sequence[Event],
    backward: Sequence[Event],
    output: Optional[TensorMeta],
    settings: HintSettings,
    syncs: int = 0,
    head: str = "",
) -> str:
    """`14 ops -> f32[8, 4] · ∇ 16 ops` for a line that calls into code whose ops happen deeper
    (user functions, a model's modules). `output` is what the call returned (a module's forward
    output), None when it is not known: the last op's output is not what the line returns."""
    text = head + _ops(len(nested))
    if output is not None and settings.shapes:
        text += f" -> {tensor_label(output)}"
    if backward and settings.backward:
        text += f" · ∇ {_ops(len(backward))}"
    if syncs and settings.syncs:
        text += f" · {sync_label(syncs)}"
    return text


def summary_label(summary: Summary) -> str:
    """`fwd 12 · bwd 17 · opt 4 · 1 sync · 2.1 MFLOP`."""
    parts = [f"fwd {summary.ops.get('forward', 0)}"]
    if summary.ops.get("backward"):
        parts.append(f"bwd {summary.ops['backward']}")
    if summary.ops.get("optimizer"):
        parts.append(f"opt {summary.ops['optimizer']}")
    parts.append(f"{summary.syncs} sync{'s' if summary.syncs != 1 else ''}")
    if summary.flops:
        parts.append(format_flops(summary.flops))
    return " · ".join(parts)
