"""AL301 unsynced-timing: wall-clock timing of CUDA work with no synchronize before the second clock read.

What it does:
    Finds the intervals timed with a wall clock in each function (or the module's top level):
    a subtraction of two reads of `time.time()`, `time.perf_counter()`, `time.monotonic()` or
    their `_ns` forms (also imported bare: `perf_counter()`), written directly or through names
    bound to them — `time.perf_counter() - start`, `end - start` with `start = time.time()`.
    A read that is never subtracted from a later one starts no interval, so an interval's end
    is never paired with the next interval's start. It flags the end read of an interval when
    1. the function's text mentions CUDA — the word `cuda` or `device` — anywhere, and
    2. there is a call between the two reads that can be the work being timed: not a clock
       read, not `print`, a logging call (`logging.*`, `logger.*`, `log.*`, `torchrl_logger.*`,
       `self.logger.*`) or a progress bar's (`pbar.update(n)`), not a builtin
       that never touches a tensor (`range`, `len`, `enumerate`, `zip`, `list`, `dict`,
       `tuple`, `set`, `str`, `int`, `float`, `bool`, `isinstance`, `sorted`, `repr`,
       `format`) and not a list or dict method (`append`, `extend`, `items`, `keys`,
       `values`, `get`, and `numel`, `size`, `dim`), and
    3. the work is not loading, saving or building a model, a collective barrier or text
       generation, exporting (`torch.onnx.export(...)` writes every weight to a file), or a pipeline that returns images or text (`pipe(prompt)` with diffusers'
       default `output_type="pil"`: it copies its result to the host; not `output_type="pt"` or
       `"latent"`), or `ray.get(refs)` (a call spelled with `load`, `save`, `checkpoint`, `state_dict`,
       `from_pretrained`, `instantiate`, `init_module`, `setup`, `prepare`, `download`,
       `barrier`, `generate`, `rollout`, an environment's `env.step(...)` / `env.reset()`, or a
       call handed an environment, `evaluate(actor, test_env)`: host work that waits on its own), and the interval is not compared with a
       budget (`if now - start > max_time:` is a deadline, not a measurement), nor recorded as
       the wait for data (`data_time.update(time.time() - end)`, `data_elapsed_time = ...`: the input pipeline's time is
       host time by design), nor spans a `yield` (a generator that times each batch it hands
       out times its caller's step, which this file does not show), and
    4. the interval runs GPU work: a call spelled as a model (`model(x)`, `self.net(x)`,
       `criterion(...)`), a training step (`loss.backward()`, `optimizer.step()`,
       `torch.autograd.backward(...)`) or a torch op (`torch.matmul`, `F.conv2d`; not
       `torch.compile`, which only wraps the model, loading, saving or settings): timing host work
       (building or sharding a model, pinning memory, reading files) is not flagged, in a loop
       or not, and
    5. no call between the two reads waits for the GPU: a `synchronize` call
       (`torch.cuda.synchronize()`, `event.synchronize()`, `stream.synchronize()`, a name
       bound to `torch.cuda.synchronize`), a call of `.item()`, `.tolist()` or a blocking
       `.cpu()` / `.to("cpu")` (each waits for the queued work), a process-group barrier
       (`dist.barrier()`, `accelerator.wait_for_everyone()`), or a call of a function of the
       same file whose body does one of these, directly or through up to two more such calls
       (`sync_all()`, `self._wait()`), or of a function spelled as a synchronize
       (`synchronize_outside_capture(device)`, `self._sync(x)`: its body may be in another
       module), and no host read of a CUDA tensor lies between them (`float(t)`, `int(t)`,
       `bool(t)`, `str(t)`, `print(t)`, `"{:.0f}".format(t)`, `format(t, spec)`, an f-string
       `f"{t}"` or a `%` format of it, with `t` likely on the device as AL100 judges it): in the
       second read's own statement only when evaluated before the clock call, as an earlier
       operand or argument (torchattacks' FAB:
       `print("{:.0f}".format(n.float().sum()) + " in {:.1f} s".format(time.time() - t0))`;
       not `print(t, time.time() - t0)` or
       `"{} {}".format(t, time.time() - t0)`, which format after the clock read, nor an
       assignment's target, evaluated after its value), and
    6. the second read is not in the branch taken off CUDA (the `else` of `if x.is_cuda:` or of
       `if self.device.type == "cuda":`, whose `if` branch times with CUDA events).
    In a unit test (`test_*`) the finding is information: a figure the test prints, not a
    benchmark. So is a running total: an end read in a loop whose start was read before the loop,
    or in it only under a throttle, and is not read again on every iteration
    (`approx_training_time = training_time + (time.perf_counter() - t0)` with `t0` restarted after
    each validation): the host runs ahead of the GPU by the work still queued, about one
    iteration, so the total is off by that much, not by the whole interval.

Why it matters:
    CUDA kernels are launched asynchronously. Without a synchronize before the second clock
    read, the interval measures how long the host took to queue the work, not how long the GPU
    took to run it. Lint only: the engine does not report it.

Example:
    start = time.perf_counter()
    out = model(x.cuda())
    elapsed = time.perf_counter() - start

Fix:
    Call `torch.cuda.synchronize()` before the second read, or time with CUDA events:
    `start = torch.cuda.Event(enable_timing=True)`, `end = ...`, `start.record()`, work,
    `end.record()`, `end.synchronize()`, `start.elapsed_time(end)` (milliseconds).
"""

from __future__ import annotations

import bisect
import re
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.context import LintContext
from atenlens.lint.dataflow import scope_for
from atenlens.lint.findings import Finding
from atenlens.lint.frequency import function_name, is_test_name, runs_rarely
from atenlens.lint.provenance import is_model_call, likely_device, on_host_branch
from atenlens.lint.registry import Rule
from atenlens.lint.source import ancestors
from atenlens.lint.syntax import (
    arguments,
    callee,
    dotted_name,
    method_name,
    receiver,
    repeating_loop,
    strip_parens,
    text,
)
from atenlens.lint.waits import (
    CLOCK_FUNCTIONS,
    WAIT_CALLS,
    alias_calls,
    calls_waiting_function,
    is_clock_read,
    is_wait,
    waiting_function_calls,
)

WAITING_METHODS = frozenset(WAIT_CALLS)
NOT_WORK = frozenset(
    {
        "print",
        "range",
        "len",
        "enumerate",
        "zip",
        "list",
        "dict",
        "tuple",
        "set",
        "str",
        "int",
        "float",
        "bool",
        "isinstance",
        "sorted",
        "repr",
        "format",
    }
)
NOT_WORK_METHODS = frozenset({"append", "extend", "items", "keys", "values", "get", "numel", "size", "dim"})
_MENTIONS_CUDA = re.compile(rb"\b(cuda|device)\b")


_LOGGER_OR_PROGRESS = re.compile(r"(?:^|_)(?:log|logger|logging|pbar|progress|tqdm)$", re.I)


def _is_logging(call: Node) -> bool:
    """Logging, a progress bar, bookkeeping: not the work being timed (`torchrl_logger.info(...)`,
    `self.logger.log(...)`, `pbar.update(n)`, `data.numel()`)."""
    name = dotted_name(callee(call)) or ""
    parts = name.split(".")
    owners = parts[:-1] if len(parts) > 1 else []
    return (
        name in NOT_WORK
        or parts[0] in ("logging", "logger", "log", "LOGGER")
        or any(_LOGGER_OR_PROGRESS.search(p) for p in owners)
        or method_name(call) in NOT_WORK_METHODS
    )


def check(ctx: LintContext) -> Iterator[Finding]:
    waiting = [c for c in [*ctx.calls(*WAITING_METHODS), *alias_calls(ctx)] if is_wait(ctx, c)]
    waiting += waiting_function_calls(ctx)
    waiting.sort(key=lambda c: c.start_byte)
    waiting_starts = [c.start_byte for c in waiting]
    reported: set[int] = set()
    for first, second in _intervals(ctx):
        scope = scope_for(second)
        if second.id in reported or scope_for(first) != scope:
            continue
        if not _MENTIONS_CUDA.search(ctx.source.data, scope.start_byte, scope.end_byte):
            continue
        start, end = first.end_byte, second.start_byte
        lo, hi = bisect.bisect_left(waiting_starts, start), bisect.bisect_left(waiting_starts, end)
        if any(c.end_byte <= end and scope_for(c) == scope for c in waiting[lo:hi]):
            continue
        within = [c for c in ctx.calls_within(start, end) if scope_for(c) == scope]
        if any(_spelled_as_a_wait(c) for c in within):
            continue
        work = [
            c for c in within if not is_clock_read(ctx, c) and not _is_logging(c) and not calls_waiting_function(ctx, c)
        ]
        if (
            not work
            or _yields_between(ctx, start, end)
            or any(_is_setup_or_io(c) or _returns_host_output(c) for c in work)
            or _is_budget_check(ctx, first, second)
            or _is_data_time(ctx, second)
        ):
            continue
        if not any(_gpu_work(ctx, c) for c in work):
            continue  # no model, training step or tensor op timed: host work (building, pinning, I/O)
        if on_host_branch(second):
            continue  # the `else` of `if x.device.type == "cuda":`: timed where there is no GPU
        if _reads_device_tensor(ctx, within, start, second, scope):
            continue  # `float(t)`, `print(t)`, `"{}".format(t)` of a CUDA tensor waits for it
        if _waits_after_restart(ctx, first, second, waiting, scope):
            continue  # an ETA's `prev_time = time.time()`, then the step's `loss.item()` logs
        reported.add(second.id)
        name = dotted_name(callee(second))
        line = ctx.source.position(first.start_point)[0]
        function = function_name(second)
        test = function if is_test_name(function) else None
        running = _running_total(ctx, first, second)
        if running:
            message = (
                f"`{name}()` read with no synchronize since the clock read on line {line}, a running total over "
                "the iterations since then: CUDA work is asynchronous, so it leaves out the work still queued "
                "(about the last iteration's)"
            )
        else:
            message = (
                f"`{name}()` read with no synchronize since the clock read on line {line}: CUDA work is "
                "asynchronous, so the interval measures its launch, not its run time"
                + (f" (in the test `{test}`: a figure it prints, not a benchmark)" if test else "")
            )
        yield ctx.finding(
            Code.UNSYNCED_TIMING,
            message,
            second,
            severity="information" if test or running else "warning",
        )


def _running_total(ctx: LintContext, first: Node, second: Node) -> bool:
    """Does the interval run over many iterations of the loop around `second`: its start read
    before the loop, or in it only under a throttle (modded-nanogpt's `t0 = time.perf_counter()`
    after each validation, then `approx_training_time = training_time + (time.perf_counter() -
    t0)` every step), and never set again on every iteration? The host runs ahead of the GPU by
    at most the work still queued, so such a total is off by about one iteration, not by the
    whole interval."""
    loop = repeating_loop(second)
    binding = first.parent
    target = binding.child_by_field_name("left") if binding is not None and binding.type == "assignment" else None
    if loop is None or target is None or target.type != "identifier":
        return False
    inside = loop.start_byte <= first.start_byte < loop.end_byte
    if inside and not runs_rarely(first, loop):
        return False
    name = text(target)
    for call in ctx.calls_within(loop.start_byte, loop.end_byte):
        assignment = call.parent
        if (
            is_clock_read(ctx, call)
            and assignment is not None
            and assignment.type == "assignment"
            and text(assignment.child_by_field_name("left") or call) == name
            and not runs_rarely(call, loop)
        ):
            return False  # (restarted on every iteration: a per-iteration interval)
    return True


_CONVERSIONS = frozenset({"float", "int", "bool", "str"})
_FSTRING_START = re.compile(rb"(?<![\w])[rR]?[fF][rR]?[\"']")
# where the operands are evaluated in the order they are written (not an assignment, whose target
# is evaluated after its value, a conditional expression, a comprehension or a lambda)
_IN_ORDER = frozenset(
    {
        "binary_operator",
        "boolean_operator",
        "comparison_operator",
        "argument_list",
        "tuple",
        "list",
        "set",
        "dictionary",
        "pair",
        "expression_list",
        "string",
        "concatenated_string",
        "call",
        "subscript",
        "attribute",
        "parenthesized_expression",
        "keyword_argument",
        "unary_operator",
        "not_operator",
        "interpolation",
    }
)


def _reads_device_tensor(ctx: LintContext, within: list[Node], start: int, second: Node, scope: Node) -> bool:
    """Is a CUDA tensor read on the host between the two clock reads: `float(t)`, `int(t)`,
    `bool(t)`, `str(t)`, `print(t)`, `"{:.0f}".format(t)`, `format(t, spec)`, an f-string
    `f"{t}"` or a `%` format of one (each waits for the queued work)? Only the calls already
    listed for the interval and the formats written in it are looked at; one in the second
    read's own statement counts when it is evaluated before the clock call (torchattacks' FAB:
    `print("{:.0f}".format(ind_succ.float().sum()) + " in {:.1f} s".format(time.time() - t0))`)."""
    reads = _device_reads(ctx, within, start, second.start_byte, scope)
    return any(_evaluated_before(read, second) for read in reads)


def _waits_after_restart(ctx: LintContext, first: Node, second: Node, waiting: list[Node], scope: Node) -> bool:
    """Is the start's name set again to a clock read later in the loop around `second` (an ETA's
    `time_left = ... (time.time() - prev_time)`, then `prev_time = time.time()`, PyTorch-GAN), with
    a wait or a host read of a CUDA tensor after it in the loop's body (the `loss.item()` of the log
    line)? From the second iteration on the interval runs from that restart around the loop to
    `second`, and that read ends the step it times. Likewise for a start read once before the
    loop and never set again (an average over all the steps so far)."""
    loop = repeating_loop(second)
    body = loop.child_by_field_name("body") if loop is not None else None
    binding = first.parent
    target = binding.child_by_field_name("left") if binding is not None and binding.type == "assignment" else None
    if body is None or target is None:
        return False
    name = text(target)
    restart = next(
        (
            c
            for c in ctx.calls_within(second.end_byte, body.end_byte)
            if is_clock_read(ctx, c)
            and c.parent is not None
            and c.parent.type == "assignment"
            and text(c.parent.child_by_field_name("left") or c) == name
        ),
        None,
    )
    if restart is None and loop is not None and first.start_byte < loop.start_byte:
        # (`start_time` read once before the loop: the interval holds every earlier iteration, each
        # ended by the reads of its log line after `second`: only the current step is unwaited)
        start, end = second.end_byte, body.end_byte
    elif restart is None:
        return False
    else:
        start, end = restart.end_byte, body.end_byte
    if any(start <= c.start_byte and c.end_byte <= end and scope_for(c) == scope for c in waiting):
        return True
    within = [c for c in ctx.calls_within(start, end) if scope_for(c) == scope]
    return bool(_device_reads(ctx, within, start, end, scope))


def _device_reads(ctx: LintContext, within: list[Node], start: int, end: int, scope: Node) -> list[Node]:
    """The calls of `within` and the formats in [start, end) that read a CUDA tensor on the host."""
    reads: list[Node] = []
    for call in within:
        name = dotted_name(callee(call)) or ""
        positional, keywords = arguments(call)
        if name in _CONVERSIONS or name == "format":
            shown = positional[:1] if (len(positional) == 1 and not keywords) or name == "format" else []
        elif name == "print":
            shown = [a for a in positional if strip_parens(a).type not in ("string", "concatenated_string")]
        elif method_name(call) == "format" and strip_parens(receiver(call) or call).type in (
            "string",
            "concatenated_string",
        ):
            shown = [*positional, *keywords.values()]
        else:
            continue
        if any(likely_device(ctx, a) for a in shown):
            reads.append(call)
    reads += _formats_of_device_tensors(ctx, start, end, scope)
    return reads


def _formats_of_device_tensors(ctx: LintContext, start: int, end: int, scope: Node) -> Iterator[Node]:
    """f-string interpolations `{t}` and `"..." % t` formats of a CUDA tensor in [start, end)."""
    data, root = ctx.source.data, ctx.source.root
    for match in _FSTRING_START.finditer(data, start, end):
        opening = root.descendant_for_byte_range(match.start(), match.end() - 1)
        string = opening.parent if opening is not None and opening.type == "string_start" else None
        if string is None or string.type != "string" or scope_for(string) != scope:
            continue
        for part in string.named_children:
            expression = part.named_children[0] if part.type == "interpolation" and part.named_children else None
            if expression is not None and part.end_byte <= end and likely_device(ctx, expression):
                yield part
    at = data.find(b"%", start, end)
    while at != -1:
        operator = root.descendant_for_byte_range(at, at + 1)
        node = operator.parent if operator is not None else None
        if (
            node is not None
            and node.type == "binary_operator"
            and node.child_by_field_name("operator") == operator
            and node.end_byte <= end
            and scope_for(node) == scope
        ):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and strip_parens(left).type == "string":
                values = strip_parens(right).named_children if strip_parens(right).type == "tuple" else [right]
                if any(v.type not in ("string", "integer", "float") and likely_device(ctx, v) for v in values):
                    yield node
        at = data.find(b"%", at + 1, end)


def _evaluated_before(read: Node, clock: Node) -> bool:
    """Does `read`, written before the clock read `clock`, run before it? Always when it is in an
    earlier statement; in the same expression only as an earlier operand or argument (not in an
    assignment's target, evaluated after its value, nor in a conditional expression, a
    comprehension or a lambda)."""
    if read.end_byte > clock.start_byte:
        return False
    above = {a.id for a in ancestors(clock)}
    node: Optional[Node] = read
    while node is not None and node.id not in above:
        if node.type in ("lambda", "list_comprehension", "generator_expression", "set_comprehension"):
            return False
        node = node.parent
    if node is None:
        return False
    if node.type in _IN_ORDER:
        return True
    return node.type not in (
        "assignment",
        "augmented_assignment",
        "conditional_expression",
        "expression_statement",
        "lambda",
        "list_comprehension",
        "generator_expression",
        "set_comprehension",
        "dictionary_comprehension",
        "for_in_clause",
    )


# A helper of another module spelled as a synchronize (`synchronize_outside_capture(device)`,
# `self._sync(x)`, `cuda_sync()`); not DDP's `no_sync()` context or `convert_sync_batchnorm`.
_WAIT_NAME = re.compile(r"synchronize|^_*(?:\w+_)?sync(?:_all)?$", re.I)


def _spelled_as_a_wait(call: Node) -> bool:
    name = (dotted_name(callee(call)) or method_name(call) or "").split(".")[-1]
    return bool(_WAIT_NAME.search(name)) and not name.endswith("no_sync")


_SETUP_OR_IO = re.compile(
    r"save|load|checkpoint|state_dict|from_pretrained|instantiate|init_module|setup|"
    r"download|barrier|wait_for_everyone|generate|prepare|rollout|export|onnx",
    re.I,
)


_ENVIRONMENT = re.compile(r"(?:^|_)p?envs?$", re.I)


def _is_setup_or_io(call: Node) -> bool:
    """Loading, saving, building a model, generating text, stepping an environment: host work
    (file I/O, host copies, collectives, token-by-token reads, `env.step(action)`) that waits for
    the device on its own, not GPU compute timed by mistake."""
    name = dotted_name(callee(call)) or method_name(call) or ""
    parts = name.split(".")
    if len(parts) > 1 and parts[-1] in ("step", "reset") and _ENVIRONMENT.search(parts[-2]):
        return True
    return bool(_SETUP_OR_IO.search(parts[-1])) or _handed_an_environment(call)


# `pipe(prompt)`, `self.pipeline(...)`, `sd_pipe(...)`: a diffusers or transformers pipeline
_PIPELINE = re.compile(r"(?:^|_)pipe(?:line)?$", re.I)
_DEVICE_OUTPUT = frozenset({'"pt"', "'pt'", '"latent"', "'latent'"})


def _returns_host_output(call: Node) -> bool:
    """A pipeline called for images or text (diffusers' default `output_type="pil"`, a
    transformers `pipeline(...)`): it copies its result to the host before it returns, so that
    copy waited for the GPU; not with `output_type="pt"` or `"latent"`, which return CUDA tensors.
    And `ray.get(refs)`: the driver waits for the workers' results."""
    name = dotted_name(callee(call)) or ""
    if name == "ray.get":
        return True
    if not _PIPELINE.search(name.split(".")[-1]):
        return False
    output_type = arguments(call)[1].get("output_type")
    return output_type is None or text(output_type) not in _DEVICE_OUTPUT


def _handed_an_environment(call: Node) -> bool:
    """`eval_model(actor, test_env, num_episodes=5)`: a function given an environment steps it,
    and each step hands the actions to the host."""
    positional, keywords = arguments(call)
    for value in [*positional, *keywords.values()]:
        spelled = dotted_name(value) if value.type in ("identifier", "attribute") else None
        if spelled is not None and _ENVIRONMENT.search(spelled.split(".")[-1]):
            return True
    return False


_STEP_METHODS = frozenset({"backward", "step", "forward"})


def _gpu_work(ctx: LintContext, call: Node) -> bool:
    """Work that runs on the GPU when timed: a call spelled as a model (`model(x)`,
    `self.net(x)`), a training step (`loss.backward()`, `optimizer.step()`), or a torch op."""
    if is_model_call(call) or method_name(call) in _STEP_METHODS:
        return True
    name = dotted_name(callee(call)) or ""
    return name.startswith(("torch.", "F.")) and not _TORCH_HOST_CALL.match(name)


# torch calls that run on the host: `torch.compile(model)` only wraps it (compiling happens at the
# first call), loading, saving, settings, the CUDA and process-group APIs
_TORCH_HOST_CALL = re.compile(
    r"torch\.(?:cuda|distributed|backends|jit|compile|load|save|device|manual_seed|set_|get_|is_|no_grad|"
    r"inference_mode|autocast|utils\.data)"
)


_YIELD = re.compile(rb"\byield\b")


def _yields_between(ctx: LintContext, start: int, end: int) -> bool:
    """A `yield` between the reads: the interval holds the caller's work on what the generator
    handed out (a logger's `for batch in log_every(loader): step(batch)`), which this file does
    not show and which may well wait for the GPU (its logging `.item()`)."""
    return bool(_YIELD.search(ctx.source.data, start, end))


def _is_budget_check(ctx: LintContext, first: Node, second: Node) -> bool:
    """`if now - start > max_time:` compares the elapsed time with a budget: a deadline, not a
    measurement of GPU work."""
    for minus in _subtractions_using(ctx, second):
        parent = minus.parent
        while parent is not None and parent.type == "parenthesized_expression":
            parent = parent.parent
        if parent is not None and parent.type == "comparison_operator":
            return True
    return False


_DATA_TIME = re.compile(r"data_?(?:elapsed_?)?(?:time|wait|load)|load_?time|fetch_?time", re.I)


def _is_data_time(ctx: LintContext, second: Node) -> bool:
    """`data_time.update(time.time() - end)`: the interval is recorded as the wait for the input
    pipeline (the batch and its copies), which is host time by design, not GPU work timed by
    mistake."""
    for minus in _subtractions_using(ctx, second):
        statement = minus
        while statement.parent is not None and statement.type not in (
            "expression_statement",
            "assignment",
            "augmented_assignment",
        ):
            statement = statement.parent
        if _DATA_TIME.search(text(statement)):
            return True
    return False


def _intervals(ctx: LintContext) -> Iterator[tuple[Node, Node]]:
    """(start read, end read) for each `end - start` of two clock reads, the start before the end."""
    for call in ctx.calls(*CLOCK_FUNCTIONS):
        if not is_clock_read(ctx, call):
            continue
        for minus in _subtractions_using(ctx, call):
            left = _clock_read_behind(ctx, minus.child_by_field_name("left"))
            right = _clock_read_behind(ctx, minus.child_by_field_name("right"))
            if left is not None and right is not None and right.end_byte <= left.start_byte:
                yield right, left


def _subtractions_using(ctx: LintContext, read: Node) -> Iterator[Node]:
    """The `a - b` expressions where this clock read is `a` or `b`, directly or through the name
    it is assigned to (`start = time.time()`; `... - start`)."""
    parent = read.parent
    if parent is not None and parent.type == "binary_operator" and _is_minus(parent):
        yield parent
    if parent is not None and parent.type == "assignment" and parent.child_by_field_name("right") == read:
        left = parent.child_by_field_name("left")
        if left is not None and left.type == "identifier":
            scope = scope_for(read)
            for ident in ctx.identifiers((text(left),), parent.end_byte, scope.end_byte):
                outer = ident.parent
                if outer is not None and outer.type == "binary_operator" and _is_minus(outer):
                    yield outer


def _is_minus(node: Node) -> bool:
    operator = node.child_by_field_name("operator")
    return operator is not None and text(operator) == "-"


def _clock_read_behind(ctx: LintContext, node: Optional[Node]) -> Optional[Node]:
    if node is None:
        return None
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type == "call":
        return node if is_clock_read(ctx, node) else None
    if node.type == "identifier":
        binding = ctx.bindings(node).at(text(node), node.start_byte)
        value = binding.value if binding is not None else None
        if value is not None and value.type == "call" and is_clock_read(ctx, value):
            return value
    return None


RULE = Rule(
    code=Code.UNSYNCED_TIMING,
    name="unsynced-timing",
    summary="wall-clock timing of CUDA work with no synchronize before the second clock read",
    calls=frozenset(CLOCK_FUNCTIONS) | WAITING_METHODS,
    check=check,
    doc=__doc__ or "",
    # A clock read (`time.time()`, `perf_counter()`, ...) in a file that mentions the device;
    # waits in helper functions anywhere in the file count: the whole file.
    triggers=(
        (b"perf_counter", b"monotonic", b"time_ns", re.compile(rb"time[\s\\]*\.[\s\\]*time")),
        (b"cuda", b"device"),
    ),
)
