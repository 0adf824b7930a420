"""AL101 synchronize-in-loop: `torch.cuda.synchronize()` inside a loop.

What it does:
    Flags a synchronize that runs once per iteration of a loop or comprehension (same notion
    of "per iteration" as AL100): `torch.cuda.synchronize()` (also `cuda.synchronize()` after
    `from torch import cuda`, `synchronize()` after `from torch.cuda import synchronize`, and a
    name bound to it, `sync = torch.cuda.synchronize`), `torch.accelerator.synchronize()`,
    `torch.cuda.current_stream().synchronize()`, and `.synchronize()` of an event or stream the
    file makes (`done = torch.cuda.Event()`, `s = torch.cuda.Stream()`, `self.stream = ...`).
    Not flagged: the synchronize that ends or starts a timed region — a clock read
    (`time.perf_counter()` and friends, `start.elapsed_time(end)`, the `.record()` of an event
    spelled as one, `start_event.record()`) of the same top-level
    function or class (or, for module-level code, outside any) within 3 lines after it,
    right after a loop that a clock read within 3 lines before the loop started timing, or
    right before a loop whose first 3 lines read a clock (each run of it is timed).
    Under `if step % N == 0:` and the like, in an epoch loop or in a loop over a few literal
    values it is information, with a message that says how often (see AL100); so is a
    synchronize in the body of a `try` that has an `except`: it is there so that an
    asynchronous error (an out-of-memory, a failed collective) is raised inside the `try`. A
    synchronize after a `non_blocking=True` copy (or `non_blocking=flag`) earlier in the loop's body is information too:
    it is what makes the copy's result (device to host) or its pinned source (a staging buffer
    the next iteration refills) safe to use, as AL201 asks (not after an upload of the loop's own
    batch, or of a part unpacked from it, `videos, masks = batch`: nothing refills that memory); and so is one followed at once by
    `empty_cache()`, a pair that bounds the peak memory of a chunked loop (not in a loop that calls
    `backward()`: there the pair is a wait on every training step); and one that waits for
    the loop's own device in a loop over the GPUs (`for idx in range(torch.cuda.device_count()):
    torch.cuda.synchronize(idx)`, or under `with torch.cuda.device(dev):` for each device of a
    table: one barrier across the devices), or in a layer-by-layer pass (see AL100). So is one right
    after a blocking read of a CUDA tensor in the statement before it (or before the `if` it
    opens) with only host calls after that read (`np.savez(path, x=moments[i].cpu().numpy())`,
    then `torch.cuda.synchronize()`): the read already waited, so the synchronize waits for nothing
    new.
    A synchronize is written on purpose, so it is a warning only where the loop shows that it runs
    once per training or inference step: it (or a loop around it) walks batches (`for batch in
    loader:`, `for i in range(0, n, batch_size):`, a model run on each chunk of the input or on
    each input file, `for img_path in input_img_list: out = net(load(img_path))`), counts
    steps (`for step in ...`, `for _ in range(num_steps):`) or the tokens of a decoding loop that
    runs a model (`for _ in range(max_new_tokens): logits = model(idx)`), runs a whole generation
    on each iteration (`response = model.generate(...)`), takes a training step
    (`loss.backward()`, `optimizer.step()`), or is in `forward`, a `*_step` method or an
    optimizer's `step` (one wait per parameter per step). Elsewhere (a warm-up, a loop over
    models, layers or configurations) it is information, and so is one under an option that asks
    for it (`if self.sync_each_layer:`, `if args.profile:`).

Why it matters:
    A device synchronize makes the host wait until every kernel queued on the GPU has finished.
    Once per iteration, it removes the overlap between the host queueing the next step and the
    GPU running the current one. Same code as the engine's synchronize diagnostic.

Example:
    for step in range(steps):
        loss = train_step(batch)
        torch.cuda.synchronize()

Fix:
    Remove it, or synchronize once after the loop (for timing, use CUDA events:
    `start.record()`, `end.record()`, `end.synchronize()`, `start.elapsed_time(end)`).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.frequency import frequency, on_purpose_reason
from atenlens.lint.provenance import HOST_MODULES, maybe_device
from atenlens.lint.registry import Rule
from atenlens.lint.syntax import (
    arguments,
    callee,
    dotted_name,
    method_name,
    neighbour_statement,
    receiver,
    statement_of,
    text,
)
from atenlens.lint.triggers import LOOP
from atenlens.lint.waits import (
    CLOCK_FUNCTIONS,
    alias_calls,
    is_clock_read,
    is_device_synchronize,
    is_event_or_stream_synchronize,
)

TIMING_WINDOW = 3  # lines: a clock read this close to a synchronize makes it part of a measurement


def check(ctx: LintContext) -> Iterator[Finding]:
    clock_calls: Optional[list[tuple[int, Optional[Node]]]] = None  # (row, top-level definition)
    for call in [*ctx.calls("synchronize"), *alias_calls(ctx)]:
        if not (is_device_synchronize(ctx, call) or is_event_or_stream_synchronize(ctx, call)):
            continue
        how = frequency(call)
        if how.loop is None:
            continue
        if clock_calls is None:  # each clock's definition found once, not once per synchronize
            clock_calls = [
                (c.start_point[0], ctx.definition_of(c))
                for c in ctx.calls(*CLOCK_FUNCTIONS, "elapsed_time", "record")
                if is_clock_read(ctx, c) or method_name(c) == "elapsed_time" or _records_a_timing_event(c)
            ]
        # Only the clock reads of the same top-level definition (or of the module-level code)
        # time this synchronize: a clock in the next function is no part of the measurement.
        definition = ctx.definition_of(call)
        clocks = sorted(row for row, where in clock_calls if where == definition)
        if _ends_a_timed_region(call, clocks):
            continue
        name = text(callee(call))
        waited = "all GPU work" if is_device_synchronize(ctx, call) else "the GPU"
        purpose = _on_purpose(call, how.loop)
        if purpose is not None:
            where, reason = purpose
            yield ctx.finding(
                Code.SYNC_API,
                f"`{name}()` {where}: the host waits for {waited} {how.how_often}, on purpose: {reason}",
                call,
                severity="information",
            )
            continue
        often = how.how_often
        severity = "warning" if how.every_iteration else "information"
        because = on_purpose_reason(call, how.loop) if how.every_iteration else None
        if because is not None:
            said, is_option = because
            often, severity = (f"{often}, {said}" if is_option else f"{often}; {said}"), "information"
        drained = _drained_before(ctx, call) if severity == "warning" else None
        if drained is not None:
            row, read = drained
            often = f"{often}, but the `{read}` on line {row} just before already waited for it: no new wait"
            severity = "information"
        yield ctx.finding(
            Code.SYNC_API,
            f"`{name}()` inside a loop: the host waits for {waited} {often}",
            call,
            severity=severity,
        )


# Reads that bring a tensor to the host and wait for the work that made it
_BLOCKING_READS = frozenset({"cpu", "item", "tolist"})
# Calls that queue no GPU work after such a read: the host's own (`np.savez`, `os.makedirs`, `print`)
_HOST_CALLS = frozenset({"print", "len", "str", "int", "float", "append", "extend", "format", "numpy", "join"})


def _drained_before(ctx: LintContext, call: Node) -> Optional[tuple[int, str]]:
    """The line and the call of a blocking read of a CUDA tensor (`.cpu()`, `.item()`,
    `.tolist()`) in the statement right before the synchronize (or before the `if` whose body it
    opens), with only host calls after that read (`np.savez(path, x=moments[i].cpu().numpy())`,
    MAR's cached latents): the read waited for all the work queued before it, so the synchronize
    has nothing new to wait for."""
    statement = statement_of(call)
    previous = neighbour_statement(statement, forward=False)
    holder = statement.parent.parent if statement.parent is not None else None
    if previous is None and holder is not None and holder.type == "if_statement":
        previous = neighbour_statement(holder, forward=False)
    if previous is None:
        return None
    reads = [
        c
        for c in ctx.calls_within(previous.start_byte, previous.end_byte)
        if method_name(c) in _BLOCKING_READS and not arguments(c)[0] and maybe_device(ctx, receiver(c))
    ]
    if not reads:
        return None
    last = max(reads, key=lambda c: c.end_byte)
    for later in ctx.calls_within(last.end_byte, previous.end_byte):
        name = dotted_name(callee(later)) or ""
        if name.split(".")[0] not in HOST_MODULES and (method_name(later) or name) not in _HOST_CALLS:
            return None  # (work queued after the read: the synchronize waits for it)
    return last.start_point[0] + 1, f".{method_name(last)}()"


def _on_purpose(call: Node, loop: Node) -> Optional[tuple[str, str]]:
    """Where the synchronize is and why it is there on purpose (information), or None."""
    copy_row = _async_copy_before(call, loop)
    if copy_row is not None:
        return (
            "inside a loop",
            f"it completes the `non_blocking` copy of line {copy_row} before the host uses its buffers",
        )
    if _frees_memory_next(call) and b"backward(" not in (loop.text or b""):
        # (not in a training loop: a synchronize and `empty_cache()` after every training step
        # cost a wait per step, whatever memory they give back)
        return "inside a loop", (
            "`empty_cache()` right after it returns the memory of the finished work (a chunked loop that bounds "
            "its peak memory)"
        )
    if _guarded_by_try(call, loop):
        return "inside a `try` in a loop", "an asynchronous CUDA error is raised here, inside the `try`"
    if _one_device_each(call, loop):
        return "inside a loop over the devices", "each iteration waits for another device: one barrier across them"
    return None


def _one_device_each(call: Node, loop: Node) -> bool:
    """`for idx in range(torch.cuda.device_count()): torch.cuda.synchronize(idx)`, `dev =
    devices[key]` then `with torch.cuda.device(dev.index): torch.cuda.synchronize()`: the device
    waited for is named by the loop's variable (or a name the loop's body derives from it), so
    each iteration waits for another device, whose work was queued before the loop: together,
    one barrier per call."""
    target = loop.child_by_field_name("left")
    body = loop.child_by_field_name("body")
    iterable = loop.child_by_field_name("right")
    if loop.type != "for_statement" or target is None or body is None or iterable is None:
        return False
    if not _OVER_DEVICES.search(text(iterable)):
        return False  # (`for batch in loader: synchronize(batch.device)` waits for one device each time)
    derived = {text(n) for n in ([target] if target.type == "identifier" else target.named_children)}
    for statement in body.named_children:  # `device = torch.device(f"cuda:{device_id}")`
        if statement.start_byte >= call.start_byte:
            break
        assignment = statement.named_children[0] if statement.type == "expression_statement" else None
        left = (
            assignment.child_by_field_name("left")
            if assignment is not None and assignment.type == "assignment"
            else None
        )
        right = assignment.child_by_field_name("right") if assignment is not None else None
        if left is not None and left.type == "identifier" and right is not None and _mentions(right, derived):
            derived.add(text(left))
    positional, keywords = arguments(call)
    device = keywords.get("device") or (positional[0] if positional else _device_context(call, loop))
    return device is not None and not text(device).endswith(".device") and _mentions(device, derived)


# What a loop over devices iterates: `range(torch.cuda.device_count())`, `range(dev_count)`,
# `self.devices`, `gpu_ids`, the keys of a table of devices
_OVER_DEVICES = re.compile(r"dev|gpu|cuda|^range\(|_keys\b", re.I)


def _mentions(node: Node, names: set[str]) -> bool:
    return any(re.search(r"(?<![\w.])" + re.escape(name) + r"\b", text(node)) for name in names)


def _device_context(call: Node, loop: Node) -> Optional[Node]:
    """The device of a `with torch.cuda.device(d):` between `loop` and `call`, if any."""
    parent = call.parent
    while parent is not None and parent != loop:
        if parent.type == "with_statement":
            for item in parent.named_children[0].named_children if parent.named_children else []:
                value = item.child_by_field_name("value") or (item.named_children[0] if item.named_children else None)
                if value is not None and value.type == "call" and method_name(value) == "device":
                    positional, _ = arguments(value)
                    return positional[0] if positional else None
        parent = parent.parent
    return None


def _async_copy_before(call: Node, loop: Node) -> Optional[int]:
    """The line of the last `non_blocking=True` copy in `loop`'s body before `call`: a synchronize
    after one is what makes its result (a device-to-host copy) or its pinned source (a staging
    buffer the next iteration refills) safe to use, as AL201 asks."""
    body = loop.child_by_field_name("body")
    if body is None or body.text is None:
        return None
    before = body.text[: max(0, call.start_byte - body.start_byte)]
    batch = _loop_targets(loop)
    # (`videos, masks = batch`, `x = batch["x"]` in the body: parts of the loop's own batch)
    batch |= {
        name
        for match in _UNPACKED.finditer(before)
        if match.group(2) in batch
        for name in re.findall(rb"[A-Za-z_]\w*", match.group(1))
    }
    at = before.rfind(b"non_blocking")
    while at >= 0:
        line = before[before.rfind(b"\n", 0, at) + 1 : at]
        upload = _UPLOAD.match(line)
        uploaded = upload.group(1) if upload is not None else None
        each = re.search(rb"\bfor\s+(\w+)\s+in\s+(\w+)", line + before[at : before.find(b"\n", at)])
        if uploaded is not None and each is not None and each.group(1) == uploaded:
            uploaded = each.group(2)  # `images = [im.cuda(non_blocking=True) for im in images]` (DINO)
        if _NON_BLOCKING_TRUE.match(before, at) and (uploaded is None or uploaded not in batch):
            return body.start_point[0] + before.count(b"\n", 0, at) + 1
        # (`samples = samples.to(device, non_blocking=True)` of the loop's own batch: a fresh
        # tensor every iteration, uploaded from memory nothing refills; the host need not wait)
        at = before.rfind(b"non_blocking", 0, at)
    return None


# `x = x.to(device, non_blocking=True)`, `x.cuda(non_blocking=True)`: an upload of `x` (not `.to("cpu")`)
_UPLOAD = re.compile(rb"[ \t]*(?:[\w.]+[ \t]*=[ \t]*)?\[?[ \t]*([A-Za-z_]\w*)\.(?:to|cuda)\((?![ \t]*[\"']cpu)")


_UNPACKED = re.compile(rb"^[ \t]*(\w+(?:[ \t]*,[ \t]*\w+)*)[ \t]*,?[ \t]*=[ \t]*(\w+)(?:\[[^\]\n]*\])?[ \t]*$", re.M)


def _loop_targets(loop: Node) -> frozenset[bytes]:
    """The names a `for` loop binds on each iteration (`for i, (samples, targets) in ...`)."""
    target = loop.child_by_field_name("left") if loop.type == "for_statement" else None
    if target is None or target.text is None:
        return frozenset()
    return frozenset(re.findall(rb"[A-Za-z_]\w*", target.text))


# `non_blocking=True`, or a flag that may be (`non_blocking=is_cuda`): not `non_blocking=False`
_NON_BLOCKING_TRUE = re.compile(rb"non_blocking\s*=\s*(?!False\b)[\w.(]")


def _frees_memory_next(call: Node) -> bool:
    """Is the statement after the synchronize's `torch.cuda.empty_cache()` (or `torch.mps.`)? The
    cache can only give back blocks whose kernels have finished: the pair bounds peak memory."""
    after = neighbour_statement(statement_of(call))
    return after is not None and after.type == "expression_statement" and b"empty_cache(" in (after.text or b"")


def _guarded_by_try(call: Node, loop: Node) -> bool:
    """Is `call` in the body of a `try` with an `except` (inside `loop`)? A synchronize there makes
    an asynchronous error (an out-of-memory, a failed collective) surface where it is handled."""
    child = call
    parent = call.parent
    while parent is not None and parent != loop:
        if parent.type == "try_statement" and child == parent.child_by_field_name("body"):
            if any(c.type == "except_clause" for c in parent.named_children):
                return True
        child, parent = parent, parent.parent
    return False


# An event that marks one end of a timed region: `start_event`, `end.record()`, `self.tic`
_TIMING_EVENT = re.compile(r"event|evt|^(?:start|end|begin|stop|tic|toc)|_(?:start|end|begin|stop)$", re.I)


def _records_a_timing_event(call: Node) -> bool:
    """`start_event.record()`: a CUDA event marks where a timed region starts or ends, as a clock
    read does (`start_event.elapsed_time(end_event)` reads the interval later)."""
    owner = receiver(call)
    name = dotted_name(owner) if owner is not None else None
    return method_name(call) == "record" and name is not None and bool(_TIMING_EVENT.search(name.split(".")[-1]))


def _ends_a_timed_region(call: Node, clocks: list[int]) -> bool:
    row = call.start_point[0]
    after = bisect_right(clocks, row)
    if after < len(clocks) and clocks[after] - row <= TIMING_WINDOW:
        return True
    branches = _branches_around(statement_of(call))
    if branches is not None:
        # `if device == "mps": torch.mps.synchronize() elif device == "cuda": torch.cuda.synchronize()`,
        # then `t1 = time.time()` (llm.c): each branch ends the timed step the clock read after them closes
        end = branches.end_point[0]
        later = bisect_right(clocks, end)
        if later < len(clocks) and clocks[later] - end <= TIMING_WINDOW:
            return True
    if bisect_left(clocks, row) < after:
        return True  # a clock read on the same line
    statement = statement_of(call)
    previous = neighbour_statement(statement, forward=False)
    if previous is not None and previous.type in ("for_statement", "while_statement"):
        start = previous.start_point[0]
        before = bisect_left(clocks, start)
        return before > 0 and start - clocks[before - 1] <= TIMING_WINDOW
    following = neighbour_statement(statement)
    if following is not None and following.type in ("for_statement", "while_statement"):
        # `torch.cuda.synchronize()`, then `for _ in range(60): start.record(); ...`: the loop
        # right after it times each run from its first lines
        start = following.start_point[0]
        first = bisect_left(clocks, start)
        return first < len(clocks) and clocks[first] - start <= TIMING_WINDOW
    return False


def _branches_around(statement: Node) -> Optional[Node]:
    """The `if` statement whose branch (`if`, `elif` or `else` block) ends with `statement`."""
    block = statement.parent
    if block is None or block.type != "block" or block.named_children[-1] != statement:
        return None
    clause = block.parent
    if clause is not None and clause.type in ("elif_clause", "else_clause"):
        clause = clause.parent
    return clause if clause is not None and clause.type == "if_statement" else None


RULE = Rule(
    code=Code.SYNC_API,
    name="synchronize-in-loop",
    summary="`torch.cuda.synchronize()` (or an event's or stream's) inside a loop",
    calls=frozenset({"synchronize", "elapsed_time", "record", *CLOCK_FUNCTIONS}),
    check=check,
    doc=__doc__ or "",
    # Aliases are bound to `torch.cuda.synchronize`; the timed-region check reads clocks anywhere.
    triggers=((b"synchronize",), LOOP),
)
