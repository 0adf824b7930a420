"""How often a function runs, from its calls in the same file: `rare_callers` (every call runs
rarely: from `__init__` or set-up, from `main`, from tests, under a throttle or a first-use cache
(`if not hasattr(self, "weight"):`), at module level, or from such a function one level up), `call_sites` (the calls a rule may follow), `metric_compute`
(the `compute` of a metric, once per evaluation) and `built_per_item` (the `__init__` of a search
or a hypothesis, built per item: no set-up). Facts of one file only: a caller in another module is
not seen, so a function the file never calls, or hands on, is not called rare."""

from __future__ import annotations

import re
from typing import Optional

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.frequency import (
    SET_UP_FUNCTION,
    data_pass,
    enclosing_test,
    frequency,
    function_name,
    in_unit_test_class,
    lazily_initialized,
    on_rare_path,
    periodic_throttle,
    runs_a_few_times,
    sampling_loop,
    step_loop,
    steps_optimizer,
)
from atenlens.lint.provenance import class_text
from atenlens.lint.source import ancestors
from atenlens.lint.syntax import SCOPE_TYPES, decorators, definition_holder, method_name, repeating_loop, text


def metric_compute(ctx: LintContext, node: Node) -> Optional[str]:
    """The name of the method that holds `node` when it is the `compute` (or `_compute`, `reset`,
    `result`, `results`) of a class that also has an `update` (or `_update`): a metric
    (torchmetrics', ignite's, yolov9's `Semantic_Metrics`), whose `update` runs every step and
    whose `compute` and `reset` once per evaluation; None otherwise. Read from the class's whole
    text: the prefilter may leave `update` out of the parse."""
    function = next((a for a in ancestors(node) if a.type in SCOPE_TYPES), None)
    if function is None or function.type != "function_definition":
        return None
    name = function_name(node)
    holder = definition_holder(function)
    if name not in _METRIC_SUMMARIES or holder is None or holder.type != "class_definition":
        return None
    return name if _METRIC_UPDATE.search(class_text(ctx, holder)) else None


_METRIC_UPDATE = re.compile(rb"^[ \t]+def[ \t]+_?update[ \t]*\(", re.M)
_METRIC_SUMMARIES = frozenset({"compute", "_compute", "reset", "_reset", "result", "results"})


def call_sites(
    ctx: LintContext, function: Node, decorated: bool = False
) -> Optional[tuple[str, list[Node], set[int], bool]]:
    """The calls of `function` in its file: a module-level function's calls anywhere (`name(...)`,
    and `loss.register_hook(name)`, which backward calls), a method's as `self.name(...)` in its
    class; with the name, the ids of the hook registrations, and whether the name is also written
    where it is not called (handed on as a callback, called on another object in the class:
    callers this file does not show). None for a nested function, and for a decorated one unless
    `decorated` (then not a property or a static or class method, which are called otherwise)."""
    title = function.child_by_field_name("name")
    name = text(title) if title is not None else ""
    holder = definition_holder(function)
    if function.parent is not None and function.parent.type == "decorated_definition":
        written = decorators(function)
        if (
            decorated
            and holder is not None
            and holder.type == "class_definition"
            and written
            and all(_STATIC.fullmatch(d) for d in written)
        ):
            return _static_call_sites(ctx, holder, name)
        if not decorated or any(_CALLED_OTHERWISE.search(d) for d in written):
            return None
    calls: list[Node] = []
    hooks: set[int] = set()
    other_uses = False
    if holder is not None and holder.type == "module":
        for use in ctx.function_uses(name):
            call = use.parent
            if use == title:
                continue
            if call is not None and call.type == "call" and call.child_by_field_name("function") == use:
                calls.append(call)
            elif call is not None and call.type == "argument_list" and call.parent is not None:
                # `loss.register_hook(raise_if_nan)` in a training loop: backward calls it every step
                if method_name(call.parent) == "register_hook":
                    calls.append(call.parent)
                    hooks.add(call.parent.id)
                else:
                    other_uses = True
            else:
                other_uses = True
    elif holder is not None and holder.type == "class_definition":
        for use in ctx.identifiers((name,), holder.start_byte, holder.end_byte):
            attribute = use.parent
            if use == title:
                continue
            call = attribute.parent if attribute is not None else None
            owner = (
                attribute.child_by_field_name("object")
                if attribute is not None and attribute.type == "attribute"
                else None
            )
            if owner is not None and text(owner) == "self" and call is not None and call.type == "call":
                calls.append(call)
            else:
                other_uses = True
        if not calls and not other_uses:
            # an override (`_set_cos_sin_cache` of a rotary embedding's scaled variant): the base
            # class of this file calls it as `self.name(...)`
            calls, other_uses = _calls_in_bases(ctx, holder, name)
    else:
        return None
    return name, calls, hooks, other_uses


def _calls_in_bases(ctx: LintContext, holder: Node, name: str) -> tuple[list[Node], bool]:
    """The `self.name(...)` calls of the classes of this file that `holder` derives from, and
    whether they also use `.name` otherwise."""
    calls: list[Node] = []
    other_uses = False
    for definition in _bases_in_file(ctx, holder):
        found, other = _attribute_calls(ctx, name, {"self"}, definition.start_byte, definition.end_byte)
        calls += found
        other_uses = other_uses or other
    return calls, other_uses


def _attribute_calls(
    ctx: LintContext, name: str, owners: set[str], start: int = 0, end: Optional[int] = None
) -> tuple[list[Node], bool]:
    """The calls `owner.name(...)` in [start, end) with `owner` one of `owners`, and whether
    `.name` is also written otherwise there (another owner, not called: a caller not shown).
    A bare `name` (the `def` itself, a local of the same spelling) is neither."""
    calls: list[Node] = []
    other_uses = False
    for use in ctx.identifiers((name,), start, end):
        attribute = use.parent
        if attribute is None or attribute.type != "attribute" or attribute.child_by_field_name("attribute") != use:
            continue
        owner = attribute.child_by_field_name("object")
        call = attribute.parent
        if owner is not None and text(owner) in owners and call is not None and call.type == "call":
            calls.append(call)
        else:
            other_uses = True
    return calls, other_uses


_STATIC = re.compile(r"staticmethod|classmethod")


def _static_call_sites(ctx: LintContext, holder: Node, name: str) -> tuple[str, list[Node], set[int], bool]:
    """The calls in the file of a static or class method `name` of the class `holder`, as
    `self.name(...)`, `cls.name(...)` or `Class.name(...)` (`FlagDiT.precompute_freqs_cis(...)`
    in `__init__`); any other use of `.name` is a caller the file does not show."""
    title = holder.child_by_field_name("name")
    owners = {"self", "cls", text(title) if title is not None else "self"}
    calls, other_uses = _attribute_calls(ctx, name, owners)
    return name, calls, set(), other_uses


# Decorators after which a method is not called as `self.name(...)`: a property is read, a static
# or class method may be called on the class
_CALLED_OTHERWISE = re.compile(r"(?:^|\.)(?:property|cached_property|setter|getter|staticmethod|classmethod)\b")


def _called_outside(ctx: LintContext, holder: Node, name: str) -> bool:
    """Is the method `name` of the class `holder` written as `.name` anywhere else in the file
    (`self.generator.get_pdf()` in another class's `forward`): callers the class does not show.
    Read from the whole text (the prefilter may leave that code out of the parse); an edit
    elsewhere that writes `.name` makes the editor lint the whole file again."""
    word = "." + name
    ctx.attribute_queries.add(word)
    data = ctx.source.whole_data
    spans = [_class_span(ctx, holder)] + [_class_span(ctx, base) for base in _bases_in_file(ctx, holder)]
    spelled = re.compile(re.escape(word.encode()) + rb"\b")
    return any(not any(a <= match.start() < b for a, b in spans) for match in spelled.finditer(data))


def _class_span(ctx: LintContext, holder: Node) -> tuple[int, int]:
    data = ctx.source.whole_data
    start = data.rfind(b"\n", 0, holder.start_byte) + 1
    return start, start + len(class_text(ctx, holder))


def _bases_in_file(ctx: LintContext, holder: Node) -> list[Node]:
    """The top-level classes of this file that `holder` names as its bases."""
    bases = holder.child_by_field_name("superclasses")
    named = {text(b) for b in bases.named_children} if bases is not None else set()
    found = []
    for statement in ctx.source.root.named_children if named else []:
        definition = statement
        if definition.type == "decorated_definition":
            definition = definition.child_by_field_name("definition") or definition
        title = definition.child_by_field_name("name") if definition.type == "class_definition" else None
        if title is not None and text(title) in named:
            found.append(definition)
    return found


def rare_callers(
    ctx: LintContext, node: Node, depth: int = 0, once: bool = False, per_call: bool = False
) -> Optional[str]:
    """For `node` (a loop, a call) in a function: the function and why it runs rarely, when each
    of its calls in the file does (`self.get_pdf()` in `__init__`: once per object; a helper that
    only `test_*` functions call; one called under `if step % 100 == 0:`),
    as words for the message; None when a call may run per step, or the file shows no call or
    also hands the function on (a caller elsewhere decides). `once`: only calls that run once per
    run, object or test count (not those under a throttle or once per epoch: for a function that
    takes a training step, an epoch loop that calls it once is its training loop)."""
    function = next((a for a in ancestors(node) if a.type in SCOPE_TYPES), None)
    if function is None or function.type != "function_definition":
        return None
    memo = ctx.memo.setdefault("rare-callers", {})
    assert isinstance(memo, dict)
    key = (function.id, depth, once, per_call)  # (several reads or moves of one function ask the same)
    if key not in memo:
        memo[key] = _rare_callers(ctx, function, depth, once, per_call)
    return memo[key]


def _rare_callers(ctx: LintContext, function: Node, depth: int, once: bool, per_call: bool) -> Optional[str]:
    body = function.child_by_field_name("body")
    if body is not None and steps_optimizer(body):
        return None  # (it steps the optimizer: a call under `if should_step:` is gradient accumulation)
    sites = call_sites(ctx, function, decorated=True)
    if sites is None:
        return None
    name, calls, hooks, other_uses = sites
    if not calls or hooks or other_uses:
        return None
    reasons, tests = [], []
    for call in calls:
        test = enclosing_test(call) or (function_name(call) if in_unit_test_class(call) else None)
        reason = None if test is not None else _runs_rarely_at(ctx, call, depth, once, per_call)
        if test is not None:
            tests.append(f"`{test}`")
        elif reason is None:
            return None
        else:
            reasons.append(reason)
    holder = definition_holder(function)
    if holder is not None and holder.type == "class_definition" and _called_outside(ctx, holder, name):
        return None  # (asked last: only a verdict of "rare" depends on the rest of the file)
    if tests:
        named = ", ".join(dict.fromkeys(tests[:3])) + (" and others" if len(set(tests)) > 3 else "")
        reasons.append(f"from tests ({named})")
    unique = list(dict.fromkeys(reasons))
    others = len(unique) - 1
    said = unique[0] if not others else f"{unique[0]} and {others} more such place{'s' if others > 1 else ''}"
    return f"`{name}`, which this file calls only {said}"


# A throttle or a callee that is the training itself (`if self._should_train(): self._train()`)
_TRAINS = re.compile(r"should_(?:train|learn|update|optimi[sz]e)|\b_?(?:train|learn|train_step|optimi[sz]e)\(", re.I)


def _runs_rarely_at(ctx: LintContext, call: Node, depth: int, once: bool, per_call: bool = False) -> Optional[str]:
    """Where `call` (not in a test) runs rarely: on an error path, under a throttle that speaks of
    steps or logging, in `main` or set-up (`__init__`, `setup`, a loader) outside any loop, in
    module-level code outside any loop or in a loop of a few iterations there, or (one level up) in a function that this file calls only
    so; None otherwise."""
    caller = next((a for a in ancestors(call) if a.type in SCOPE_TYPES), None)
    if caller is None or caller.type == "module":
        loop = repeating_loop(call)
        if loop is None:
            return "from module-level code"
        # (`for channels in [30, 32, 64]: check_gradient_numerical(channels)` in a test script)
        return (
            "from a short loop of module-level code"
            if (runs_a_few_times(loop) or _walks_a_display(ctx, loop)) and repeating_loop(loop) is None
            else None
        )
    if caller.type != "function_definition":
        return None
    caller_name = function_name(call)
    if on_rare_path(call, caller):
        return f"on an error path of `{caller_name}`"
    first_use = lazily_initialized(call, caller)
    if first_use is not None:
        return f"from `{caller_name}` on first use (`if {' '.join(text(first_use).split())}:`)"
    throttle = None if once else periodic_throttle(call, caller)
    if throttle is not None and not _TRAINS.search(
        text(throttle) + " " + text(call.child_by_field_name("function") or call) + "("
    ):
        # (`if self._should_train(): self._train()`: what such a throttle lets through is the training)
        return f"from `{caller_name}` under `if {' '.join(text(throttle).split())}:`"
    how = frequency(call)
    if how.loop is not None and (how.every_iteration or once):
        return None
    if how.loop is not None and not runs_a_few_times(how.loop):
        return f"from `{caller_name}`, {how.how_often.removeprefix('only ')}"
    # (outside a loop, or in a loop of a few iterations: as often as `caller` itself)
    if caller_name == "main":
        return "from `main` (once per run)"
    if SET_UP_FUNCTION.search(caller_name) and not (caller_name == "__init__" and built_per_item(caller)):
        # (not the `__init__` of a search or a hypothesis: code builds such objects per item)
        return f"from `{caller_name}` (once per object or run)"
    sampling = sampling_loop(caller) if how.loop is None else None
    if sampling is not None and not sampling.start_byte <= call.start_byte < sampling.end_byte:
        # a diffusion pipeline's `self.encode_prompt(...)` before its denoising loop
        line = sampling.start_point[0] + 1
        return f"from `{caller_name}` outside its sampling loop on line {line}, once per generation"
    if per_call and how.loop is None:
        # after (or before) the loop in which `caller` walks its data or takes its steps: once
        # per pass over the data, per run of the steps (for a cost paid once per call, as a
        # create-then-move: a loop of reads in the function may still run long per pass)
        passing = data_pass(caller) or step_loop(caller)
        if passing is not None and not passing.start_byte <= call.start_byte < passing.end_byte:
            line = passing.start_point[0] + 1
            return f"from `{caller_name}` outside its loop on line {line}, once per pass of that loop"
    if depth == 0:
        above = rare_callers(ctx, call, depth + 1, once, per_call)
        if above is not None:
            return f"from {above}"
    return None


def _walks_a_display(ctx: LintContext, loop: Node) -> bool:
    """Does `loop` walk a list or tuple written out in the file (`for args in _BENCHMARKS:` of
    `_BENCHMARKS = ((1024, 8), (2048, 8), ...)`, bound once at module level)? A script's sweep
    of configurations written by hand: each runs once per run, however many there are."""
    iterable = loop.child_by_field_name("right") if loop.type == "for_statement" else None
    if iterable is not None and iterable.type == "identifier":
        bindings = ctx.bindings(ctx.source.root).of(text(iterable))
        if len(bindings) != 1 or bindings[0].loop is not None or bindings[0].path:
            return False
        iterable = bindings[0].value
    return iterable is not None and iterable.type in ("list", "tuple")


def built_per_item(method: Node) -> bool:
    """Is `method` the `__init__` of a class that code may build once per item of a batch: a plain
    class (no base but `object`) spelled as a search, a beam, a hypothesis, a node or a candidate
    (parlai's `class TreeSearch(object)`, one per example of each generation batch), or a mask
    (`class TriangularCausalMask():`, built in an attention's `forward` for each batch)? Other
    classes (modules, optimizers, data sets, a plain `class DistributedGraph:` or `class
    BaseScore(object):`) are built once per run."""
    holder = definition_holder(method)
    if holder is None or holder.type != "class_definition":
        return False
    bases = holder.child_by_field_name("superclasses")
    if bases is not None and any(text(base) != "object" for base in bases.named_children):
        return False
    title = holder.child_by_field_name("name")
    return title is not None and _PER_ITEM_CLASS.search(text(title)) is not None


_PER_ITEM_CLASS = re.compile(
    r"Search|Beam|Hypothes|Node|Candidate|Item|Sample|Particle|Trajector|Episode|Path|Mask", re.I
)
