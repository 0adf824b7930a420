"""How often a piece of code runs: once, on every iteration of a loop, or only on some.

A finding that claims "every iteration" must be true: a `.item()` under `if step % 250 == 0:`,
in an epoch loop, on the first iteration only or in a loop over three literal values is
deliberate or cheap, and rules report it at information level with a message that says how
often (`Frequency.how_often`).

- Every iteration: the innermost loop that repeats the node (syntax.repeating_loop) with none of
  the below between them.
- Throttled: the node is in the body of an `if` (or `elif`) whose condition tests a modulo
  (`step % N == 0`, `not step % N`), compares a counter with a number or the loop's end
  (`i == 0`, `step == max_steps - 1`, `batch_idx == len(loader) - 1`) or calls a value spelled
  like `should_log` / `is_last`, or tests a verbose or debug flag (`verbose`, `args.debug`); an
  `else` of such an `if` runs on the other iterations and is not throttled. Not a throttle: such an `if` whose body takes the optimizer step
  (`if step % accum_steps == 0: optimizer.step()`), which gates gradient accumulation: what is
  in it runs on every optimizer step, every training step. A loop inside a throttle that runs a
  model (`if epoch % k == 0: for x in eval_loader: self._eval_step(x)`) repeats on every batch.
- Once: the path taken when a value is not finite (the body of `if torch.isnan(x):` or
  `if not torch.isfinite(x):`, the `else` of `if torch.isfinite(x):`): it runs when the check
  fails, a warning or a skipped step, after the check itself waited.
- Once per epoch: the repeating loop's variable or iterable is spelled with `epoch` (or the
  name it iterates was bound to such an iterable: `epoch_iterator = tqdm(range(epochs))`).
- Once per environment step: the loop's body steps an environment (`env.step(actions)`,
  `self.env.step(...)`): the host environment needs the actions, so each step waits anyway.
- Few: `for ... in range(K)` / over a literal list or tuple of K items with K <= 10 (K <= 1 is once),
  written in the loop or bound once to a name of the function outside any branch (`masks = [...]`,
  `range(len(masks))`, a comprehension over such a list; a dict literal the function only
  walks, indexes at its keys and returns); in a test (a function named `test_*` or `_test_*`, a
  method of a `unittest.TestCase`) a loop over any literal `range(K)`.
- Once per layer: the loop's own body loads, quantizes or offloads a model's layer
  (`module.load()`, `module.quantize(x)`, `gptq.fasterquant(...)`, `layer.cpu()`,
  `block.to("cpu")`, `move_to_device(layer, CPU)`, `layer_compressor.compress()`): a quantizer's,
  a compressor's or an offloader's
  layer-by-layer pass, minutes per iteration.
- Once: an `assert`'s message and a `raise` statement run only when a check fails.
- Once per chunk (AL100 only, `chunked_walk`): `for start in range(0, len(x), batch_size):` whose
  body runs no model and takes no training step: tensor work over an existing tensor in chunks (a
  search, a metric), which reads once per chunk of rows.
- Throttled by an early exit: an `if` before the node, with no other branch, whose body ends in
  `return` or `continue` and whose test is the negation of a throttle (`if not should_log:
  return`, `if step % N != 0: continue`): the code after it runs on the few iterations that pass.
- On an error path: the node is in an `except` clause (an out-of-memory fallback, a retry).
- Once per checkpoint: the loop is in a function spelled as saving, loading or converting
  (`save_checkpoint`, `load_state_dict`, `export_*`, `_merge_*`): it runs when a checkpoint is
  written or read, not per training step, and copying to the host is its job; so is a loop in a
  function that plots or records summaries (`plot_prediction`, `_record_summaries`), or that
  builds or initializes (`__init__`, `_init_buffers`, `initialize_model_parallel`): once per call;
  and a loop over a state dict (`for k, v in model.state_dict().items():`).
- In a test: any loop of a function named `test_*` or of a method of a `unittest.TestCase` (a
  test's speed is not a training step's).
- Once per object: a loop in a function whose result is cached (`@cached_property`,
  `@functools.cache`, `@lru_cache`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from tree_sitter import Node

from atenlens.lint.source import ancestors, definition_text, indented_block
from atenlens.lint.syntax import (
    COMPREHENSION_TYPES,
    SCOPE_TYPES,
    arguments,
    callee,
    decorators,
    definition_holder,
    dotted_name,
    method_name,
    module_code,
    receiver,
    repeating_loop,
    strip_parens,
    text,
    within,
)

FEW_ITERATIONS = 10
# (`is_last` of a step or batch; not of a pipeline stage or rank, `pp_is_last_stage`: fixed per process)
_THROTTLE_NAME = re.compile(
    r"should_|every_n_|is_last(?!_(?:stage|rank|layer|block|device|node|gpu))|last_step|log_now|do_log|is_log|_due$|^is_.*_step$|^verbose$|^debug$|^debug_|_debug$",
    re.I,
)
# The optimizer state of a parameter is created on its first step: `if "exp_avg" not in state:`,
# `if len(state) == 0:` run once per parameter.
_STATE = re.compile(r"(?:^|[._])state$")
_PER_PROCESS = re.compile(r"rank|process_index|is_main|local_process|world", re.I)
_EPOCH = re.compile(r"epoch", re.I)
# a step of an epoch, not an epoch: `for step_in_epoch, batch in enumerate(loader):`
# (`range(start_it, total_it_each_epoch)`: the iterations of each epoch)
_WITHIN_EPOCH = re.compile(r"_in_epoch|_of_epoch|per_epoch|each_epoch|epoch_(?:step|iter|batch)", re.I)
_COLLECTOR = re.compile(r"(?:^|[^\w])(?:\w*_)?collector\b", re.I)
# (also the bare count of a loop's iterations: minimind's `step == iters`, `i == num_batches`)
_BOUND_NAME = re.compile(
    r"^(?:num|max|total|n)_.*(?:step|iter|batch|epoch)|_per_epoch$|^(?:max|total)_?(?:steps|iters)$"
    r"|^(?:iters|iterations|steps|num_batches|n_batches|total)$",
    re.I,
)
# Functions that run once per object or per run: initializers, set-up, loading, saving, export, plots
SET_UP_FUNCTION = re.compile(
    # (`log_images`: a module's, which an image-logging callback calls every N steps)
    # (`populate_modules`: nerfstudio's models build their fields and buffers there, from `__init__`;
    # `log_tensorboard_graph`: the model's graph, traced once; `capture_model`: CUDA graphs captured once)
    r"^_*init(?:_|$)|^(?:dist|distributed)_init$|initiali[sz]e|^_*set_?up(?:_|$)|warm_?up|^_?load|_load_|save|export|plot|^__(?:str|repr)__$"
    r"|^_*populate_|^log_\w*graph$|^_*capture(?:_model|_graphs?)?$"
    r"|^log_images$",
    re.I,
)
# ... and those that walk their items once per call, not per training step: checkpoints,
# conversion, merging, pruning, summaries
_RARE_FUNCTION = re.compile(
    SET_UP_FUNCTION.pattern
    + r"|checkpoint|convert|merge(?!d_)|state_dict|consolidate|summar|prune|input_example|^__format__$|^extra_repr$",
    re.I,
)


@dataclass(frozen=True)
class Frequency:
    loop: Optional[Node]  # the loop that repeats the node; None when it runs once per call
    every_iteration: bool  # on every iteration of `loop`
    how_often: str  # for messages: "on every iteration", "only when `step % 10 == 0`", ...


ONCE = Frequency(None, False, "once")


def frequency(node: Node) -> Frequency:
    loop = repeating_loop(node)
    if loop is None or on_failure_only(node, loop) or on_nonfinite_path(node, loop):
        return ONCE
    throttle = _throttle_between(node, loop)
    if throttle is not None:
        return Frequency(loop, False, f"only on iterations where `{shown(throttle)}`")
    if _leaves_the_loop(node, loop):
        return Frequency(
            loop, False, "once, on the iteration that leaves the loop (its block ends in `break` or `return`)"
        )
    skip = early_exit_throttle(node, loop)
    if skip is not None:
        return Frequency(loop, False, f"only on iterations that pass `if {shown(skip)}:` above it")
    if in_error_handler(node, loop) or (loop.type in COMPREHENSION_TYPES and in_error_handler(loop)):
        return Frequency(loop, False, "only when the `try` above it raises: an error path")
    accumulation = _accumulation_between(node, loop)
    if accumulation is not None:
        return Frequency(
            loop, True, f"on every optimizer step (`{shown(accumulation)}` gates the step of gradient accumulation)"
        )
    count = _literal_iterations(loop)
    if count is not None and loop.type in COMPREHENSION_TYPES and repeating_loop(loop) is not None:
        # `if any(torch.isnan(l) for l in (g_loss, d_loss)):` in a batch loop: a few reads on each
        # iteration of the loop around it
        around = frequency(loop)
        return Frequency(around.loop, around.every_iteration, f"{around.how_often} ({count} times each)")
    if count is not None and count <= 1:
        return Frequency(None, False, "once (the loop runs once)")
    ending = _ends_every_pass(loop)
    if ending is not None:
        return Frequency(None, False, f"once (the loop's body ends in `{ending}`: it runs one pass)")
    if _is_epoch_loop(loop):
        return Frequency(loop, False, "once per epoch")
    inner = _inner_training_loop(loop)
    if inner is not None:
        return Frequency(
            loop,
            False,
            f"once per pass of the training loop on line {inner.start_point[0] + 1} "
            "(each iteration of this loop runs that loop's training steps, then this)",
        )
    timed = _inner_timed_loop(loop)
    if timed is not None:
        return Frequency(
            loop,
            False,
            f"once per configuration of a benchmark (each iteration times the loop on line {timed.start_point[0] + 1})",
        )
    if _is_retry_loop(loop):
        if repeating_loop(loop) is not None:
            # (`for x in batches: while True: try: ...; break`: one attempt per batch, usually)
            return frequency(loop)
        return Frequency(loop, False, "once per attempt of a retry loop (it stops at the first success)")
    if _is_collector_loop(loop):
        return Frequency(
            loop, False, "once per collected batch (collecting it already waited for the environment steps)"
        )
    if _steps_environment(loop):
        return Frequency(
            loop, False, "once per environment step (the environment runs on the host and waits for its inputs)"
        )
    queue = _takes_requests(loop)
    if queue is not None:
        return Frequency(loop, False, f"once per request (each iteration takes one from `{queue}`)")
    loaded = _loads_each_iteration(loop)
    if loaded is not None:
        return Frequency(loop, False, f"once per `{loaded}(...)`, as each iteration loads a model or a file")
    layer = _processes_each_layer(loop)
    if layer is not None:
        return Frequency(
            loop, False, f"once per layer of a layer-by-layer pass (`{layer}(...)` loads, quantizes or offloads each)"
        )
    function = function_name(loop)
    if memoized(loop):
        return Frequency(loop, False, "once per object (the function's result is cached)")
    in_test = in_a_test(loop)
    outer_loop = repeating_loop(loop) if count is not None and count <= FEW_ITERATIONS and not in_test else None
    if outer_loop is not None and (_walks_a_tensor_dimension(outer_loop) or _walks_batches(outer_loop)):
        around = frequency(loop)
        if around.every_iteration:
            # `for part in parts: for mask in (a, b): ...`, `for data, target in test_loader: for k
            # in (1, 2, 8): ...`: a few times on every iteration of the loop around it
            return Frequency(around.loop, True, f"{around.how_often} ({count} times each)")
    if count is not None and (count <= FEW_ITERATIONS or in_test):
        return Frequency(loop, False, f"{count} times (the loop runs {count} times)")
    if in_test:
        return Frequency(
            loop,
            False,
            f"on every iteration of a loop in the test `{enclosing_test(loop) or function}` (a test, not a training step)",
        )
    if _CHECK_FUNCTION.match(function):
        # `debug_check_classes()`, `sanity_check(...)`: a check run by hand, in a test or under a
        # debug flag (not `check_*`: `_check_for_inf_or_nan(grads)` runs every optimizer step)
        return Frequency(loop, False, f"on every iteration of a loop in the check `{function}` (not a training step)")
    if _RARE_FUNCTION.search(function) and not _takes_a_step(loop):
        # (not a set-up's own training loop: `initialize_shape` fitting an SDF for 1000 steps)
        return Frequency(loop, False, f"per item in `{function}` (once per call, not per training step)")
    after = _after_the_training_loop(loop)
    if after is not None:
        return Frequency(
            loop, False, f"per item, once per call of `{function}` (after its training loop on line {after})"
        )
    if (
        (loop.type in COMPREHENSION_TYPES or (_walks_a_mapping(loop) and not _hot_items(loop)))
        and function in ("", "main")
        and repeating_loop(loop) is None
    ):
        # `metrics.update({n: v.mean().item() for n, v in summaries})`, `for k, a in
        # outputs.items(): print(k, torch.sum(a))` in `main()` or a script's top level, in no
        # loop: once per run, one read per entry
        where = "`main`" if function else "module-level code"
        return Frequency(loop, False, f"per item, once per run ({where} runs once)")
    if _EPOCH_HOOK.search(function):
        return Frequency(loop, False, f"per item in `{function}` (once per epoch, not per training step)")
    if _logging_hook(loop, function):
        return Frequency(loop, False, f"per item in `{function}` (once per logging interval, not per training step)")
    sampling = _beside_sampling_loop(loop)
    if sampling is not None:
        return Frequency(
            loop,
            False,
            f"per item, once per generation (outside `{function}`'s sampling loop on line {sampling.start_point[0] + 1})",
        )
    if _FIT.match(function) and _fits_per_class(loop):
        return Frequency(loop, False, f"per item in `{function}` (once per fit, not per training step)")
    if _iterates_state_dict(loop):
        return Frequency(loop, False, "per tensor of a state dict (a checkpoint's copy, not per training step)")
    repeating = repeating_loop(loop)
    if repeating is None:
        # `def on_step_end(...): if step % self.log_interval != 0: return`, then the loop: it runs
        # on the calls that pass the early return only
        definition = next((a for a in ancestors(loop) if a.type == "function_definition"), None)
        early = early_exit_throttle(loop, definition) if definition is not None else None
        if early is not None:
            return Frequency(loop, False, f"only on calls that pass `if {shown(early)}:` above it")
    # (with no loop around it, the throttle may be in the function: `def batch_end(...): if
    # batch % interval == 0: for k, v in metrics.items(): v.tolist()`, a callback run per batch)
    outer = _throttle_between(loop, repeating if repeating is not None else loop)
    if outer is not None and not (repeating is not None and runs_a_model(loop)):
        # `if step % 100 == 0: for name, v in losses.items(): v.item()`: the inner loop runs on
        # the logging iterations only (but `if epoch % validate_every == 0: for x, y in loader:
        # self._eval_step(x, y)`: a validation pass every N epochs runs a model on each batch)
        return Frequency(loop, False, f"only on iterations where `{shown(outer)}`")
    if repeating is not None and _is_epoch_loop(repeating) and not _hot_items(loop):
        # `for epoch in range(n): ... {k: v.mean().item() for k, v in summaries}`: a few items
        # once per epoch, not a walk over the epoch's batches
        return Frequency(loop, False, "per item, once per epoch (the loop around it runs the epochs)")
    gate = _throttle_around_loop(loop)
    if gate is not None:
        # (loops nested inside the throttled block: `if step % k == 0: for i in ...: for j in ...:`)
        return Frequency(loop, False, f"only on iterations where `{shown(gate)}`")
    return Frequency(loop, True, "on every iteration")


# Lightning's and similar hooks that run once per epoch or once per run: `on_validation_epoch_end`,
# `validation_epoch_end`, `on_train_start`
_EPOCH_HOOK = re.compile(
    r"epoch_(?:end|start)$|^_*on_(?:\w+_)?(?:fit|train|validation|test|predict)_(?:end|start)$", re.I
)


def _logging_hook(node: Node, function: str) -> bool:
    """Is `node` in a trainer's logging hook: a method `log` or `on_log` of a class with a base
    (the `log(self, logs)` override of a Hugging Face `Trainer`, a callback's `on_log`), which the
    trainer calls every `logging_steps` steps?"""
    if function not in ("log", "on_log"):
        return False
    method = next((a for a in ancestors(node) if a.type == "function_definition"), None)
    holder = definition_holder(method) if method is not None else None
    return (
        holder is not None
        and holder.type == "class_definition"
        and holder.child_by_field_name("superclasses") is not None
    )


def epoch_hook(name: str) -> bool:
    """Is `name` a hook that a framework runs once per epoch or once per run (`on_train_start`,
    `on_validation_epoch_end`)?"""
    return _EPOCH_HOOK.search(name) is not None


def _hot_items(loop: Node) -> bool:
    """Does each iteration of `loop` do a step's work: walk a batch, take a training step, run a
    model, or walk the rows of a tensor?"""
    if _takes_a_step(loop) or runs_a_model(loop) or _walks_a_tensor_dimension(loop):
        return True
    header = _loop_header(loop)
    # (a `while` inside an epoch loop: its own step loop)
    return header is None or bool(_WALKS_BATCHES.search(header))


_FIT = re.compile(r"_*fit(?:_|$)")
_STEP_WORDS = re.compile(r"batch|step|iter|epoch|update", re.I)
_PER_CLASS = re.compile(r"class|label|categor|\.unique\(\)$", re.I)  # `for c in y.unique():`, `for c in classes:`
_CHECK_FUNCTION = re.compile(r"_*(?:debug|sanity)_", re.I)
_MEMOIZING = re.compile(r"(?:^|\.)(?:cached_property|cache|lru_cache)\b")


def memoized(node: Node) -> bool:
    """Is `node` in a function whose result is cached (`@cached_property`, `@functools.cache`,
    `@lru_cache(...)`): its loops run once per object or argument, not per step?"""
    function = next((a for a in ancestors(node) if a.type == "function_definition"), None)
    return function is not None and any(_MEMOIZING.search(d) for d in decorators(function))


# A framework's evaluation hook spelled with `test`, run on every batch of a test set
# (Lightning's `test_step`, NeMo's `test_batch`), not a unit test
_EVALUATION_HOOK = re.compile(r"^_*test_(?:step|batch|epoch|dataloader|loop)", re.I)


def is_test_name(function: str) -> bool:
    """Is `function` spelled as a unit test (`test_*`, `_test_*`, `testSomething`), not an
    evaluation hook? The bare word `test` is not: `def test(model, device, test_loader)` is the
    evaluation pass of a training script (PyTorch's examples), and a test suite names its tests
    after what they test."""
    bare = function.lstrip("_")
    return bare.startswith("test") and bare != "test" and not _EVALUATION_HOOK.match(function)


def in_a_test(node: Node) -> bool:
    """Is `node` in a unit test: a function spelled as one (`test_*`, or a function nested in one:
    `def test_x(): def train_model(...): ...`) or a method of a `unittest.TestCase`?"""
    return in_unit_test_class(node) or enclosing_test(node) is not None


def enclosing_test(node: Node) -> Optional[str]:
    """The name of the `test_*` function (or pytest fixture: `@pytest.fixture def image(device):`)
    that holds `node`, maybe through nested functions."""
    for parent in ancestors(node):
        if parent.type == "function_definition":
            name = parent.child_by_field_name("name")
            if name is not None and (
                (is_test_name(text(name)) and not _method_of_a_plain_class(parent)) or _is_fixture(parent)
            ):
                return text(name)
    return None


def _method_of_a_plain_class(function: Node) -> bool:
    """A method of a class that is neither a `unittest.TestCase` nor spelled with `test` (pytest
    collects `Test*` classes, and their bases are spelled `BaseModelTests`, `ModelTestMixin`):
    `def test_on_all_clients(self, ...)` of a federated trainer evaluates the model, it is no
    unit test."""
    holder = definition_holder(function)
    if holder is None or holder.type != "class_definition":
        return False
    title = holder.child_by_field_name("name")
    return not is_test_case(holder) and not (title is not None and "test" in text(title).lower())


def _is_fixture(function: Node) -> bool:
    return any(_FIXTURE.match(d) for d in decorators(function))


_FIXTURE = re.compile(r"(?:pytest\.)?fixture\b")


def function_name(node: Node) -> str:
    for parent in ancestors(node):
        if parent.type == "function_definition":
            name = parent.child_by_field_name("name")
            return text(name) if name is not None else ""
    return ""


def in_unit_test_class(node: Node) -> bool:
    """Is `node` in a method of a `unittest.TestCase` (its helpers too: `check_model_trainable`,
    which a `test_*` method calls, is part of a test)?"""
    function = next((a for a in ancestors(node) if a.type == "function_definition"), None)
    holder = definition_holder(function) if function is not None else None
    return holder is not None and holder.type == "class_definition" and is_test_case(holder)


def is_test_case(holder: Node) -> bool:
    """`class CompareTest(unittest.TestCase)`: a class of unit tests."""
    bases = holder.child_by_field_name("superclasses")
    return bases is not None and any(
        (dotted_name(b) or "").split(".")[-1] in ("TestCase", "IsolatedAsyncioTestCase") for b in bases.named_children
    )


def in_error_handler(node: Node, stop: Optional[Node] = None) -> bool:
    """Is `node` in an `except` clause inside `stop` (by default, inside its function): run only
    when the `try` raised (recovering from an out-of-memory error, a retry; a comprehension there
    runs once)?"""
    for parent in ancestors(node):
        if parent == stop or parent.type in SCOPE_TYPES:
            return False
        if parent.type == "except_clause":
            return True
    return False


# `range(x.shape[1])`, `range(logits.size(0))`, `range(len(targets))`: a walk over a tensor's rows
_TENSOR_DIMENSION = re.compile(rb"\.shape\b|\.size\(|\blen\(")


def _walks_a_tensor_dimension(loop: Node) -> bool:
    """Does `loop` walk the rows or parts of a tensor (not a sweep of settings)? A few iterations
    of a loop inside it then run on each of those rows."""
    iterable = loop.child_by_field_name("right") if loop.type == "for_statement" else None
    return iterable is not None and _TENSOR_DIMENSION.search(iterable.text or b"") is not None


def on_failure_only(node: Node, loop: Node) -> bool:
    """Is `node` in an `assert`'s message or a `raise` statement, or in a statement of a block
    that ends in `raise` (`msg = f"... {t.min()}"`, then `raise ValueError(msg)`) or in a failed
    check (`torch._assert(False, msg)`, `assert False`): evaluated only when the check fails,
    once, on the way out?"""
    child = node
    for parent in ancestors(node):
        if parent == loop:
            return False
        if parent.type == "raise_statement":
            return True
        if parent.type == "assert_statement":
            parts = [c for c in parent.named_children if c.type != "comment"]
            return len(parts) > 1 and child != parts[0]
        if parent.type == "block" and parent.parent is not None:
            statements = [c for c in parent.named_children if c.type != "comment"]
            if statements and _fails(statements[-1]) and child != statements[-1]:
                if parent.parent.type == "function_definition":
                    # `if torch.isfinite(t).all(): return`, then `lo = t.min().item()` ... `raise`:
                    # past an early return, the rest of the function is the failure path
                    return any(_returns_early(s) for s in statements if s.end_byte <= child.start_byte)
                return parent.parent.type in ("if_statement", "elif_clause", "else_clause")
        child = parent
    return False


def _returns_early(statement: Node) -> bool:
    """`if torch.isfinite(t).all(): return` (a finite check whose body only returns; not a dispatch,
    `if task == "binary": return ...`, whose later statements serve the other tasks)."""
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return False
    condition = statement.child_by_field_name("condition")
    said = text(condition) if condition is not None else ""
    if not (_FINITE_TEST.search(said) and not said.lstrip().startswith("not")):
        return False
    body = statement.child_by_field_name("consequence")
    parts = [c for c in body.named_children if c.type != "comment"] if body is not None else []
    return len(parts) == 1 and parts[0].type == "return_statement"


def _fails(statement: Node) -> bool:
    """`raise ...`, `assert False, msg` or torchvision's `torch._assert(False, msg)`: the check failed."""
    if statement.type == "raise_statement":
        return True
    if statement.type == "assert_statement":
        first = next((c for c in statement.named_children if c.type != "comment"), None)
        return first is not None and first.type == "false"
    call = (
        statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
    )
    if call is None or call.type != "call" or text(call.child_by_field_name("function") or call) != "torch._assert":
        return False
    args = call.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    return first is not None and first.type == "false"


def _leaves_the_loop(node: Node, loop: Node) -> bool:
    """`if loss.item() < tol: final = x.cpu(); break`: `node` is in a block (of an `if`, `elif`,
    `else`, `try`) between it and `loop` whose last statement is `break` or `return`, so the
    block runs at most once per run of the loop. (The test of that `if` runs every iteration.)"""
    child = node
    for parent in ancestors(node):
        if parent == loop or parent.type in SCOPE_TYPES:
            return False
        if parent.type == "block" and child.type != "block":
            statements = [c for c in parent.named_children if c.type != "comment"]
            owner = parent.parent
            if (
                statements
                and statements[-1].type in ("break_statement", "return_statement")
                and owner is not None
                and owner.type in ("if_statement", "elif_clause", "else_clause")
                and child != statements[-1]
            ):
                return True
        child = parent
    return False


def shown(node: Node) -> str:
    """`node`'s code for a message, on one line and at most 60 characters."""
    value = " ".join(text(node).split())
    value = re.sub(r"([(\[{]) | (?=[)\]}])", r"\1", value)  # (a call written over lines: `f(a, b)`, not `f( a, b )`)
    return value if len(value) <= 60 else value[:57] + "..."


def runs_rarely(node: Node, stop: Node) -> bool:
    """Does `node` run on only a few of the runs of `stop` (a function's calls): on a rare path
    (`on_rare_path`) or under a throttle? The same tests `frequency` makes between a node and its
    loop."""
    return on_rare_path(node, stop) or _throttle_between(node, stop) is not None


def on_rare_path(node: Node, stop: Node) -> bool:
    """Is `node`, below `stop`, on the way out (`raise`, an `assert`'s message), on the path taken
    when a value is not finite, in an `except` clause, or after an early exit that only a throttle
    passes?"""
    return (
        on_failure_only(node, stop)
        or on_nonfinite_path(node, stop)
        or in_error_handler(node, stop)
        or early_exit_throttle(node, stop) is not None
    )


def periodic_throttle(node: Node, stop: Node) -> Optional[Node]:
    """A throttle between `node` and `stop` that speaks of steps or logging (`step % 100 == 0`,
    `should_log`, `self.global_step % self.per_steps == 0`): outside any loop, a bare `x == 3`
    tests a setting (`if self.spatial_dims == 3:`), not a counter."""
    throttle = _throttle_between(node, stop)
    return throttle if throttle is not None and _PERIODIC.search(text(throttle)) else None


_PERIODIC = re.compile(r"%|step|iter|epoch|batch|count|every|interval|freq|should_|log|verbose|debug|profil", re.I)


def _throttle_around_loop(loop: Node) -> Optional[Node]:
    """The throttle around `loop` itself, in the loop or function around it (`if step % N == 0:
    for name, val_loader in val_loaders.items(): ... print(metrics.compute())`), when the loop's
    own body runs no model: a loop of reports or of debugging output on the throttled steps, not a
    validation pass, whose batches each cost a wait (its reads stay per iteration)."""
    current: Optional[Node] = loop
    while current is not None and current.type in ("for_statement", "while_statement"):
        if _runs_a_model_itself(current):
            return None
        outer = repeating_loop(current)
        stop = outer if outer is not None else next((a for a in ancestors(current) if a.type in SCOPE_TYPES), None)
        if stop is None:
            return None
        found = _throttle_between(current, stop)
        if found is not None and ("%" in text(found) or _DEBUG_WORDS.search(text(found))):
            # (a modulus or a debugging flag: not `if self.beam_size == 1:`, a choice of decoding)
            return found
        current = outer  # (nested loops of debugging output: `for i in ...: for j in ...:` under the throttle)
    return None


def _runs_a_model_itself(loop: Node) -> bool:
    """Does a statement of the loop's own body (not of a nested loop) call a model or take a step?"""
    return _own_call(loop, _RUNS_A_MODEL) is not None


def _throttle_between(node: Node, loop: Node) -> Optional[Node]:
    """The throttle (`if step % 100 == 0:`) whose body holds `node`, inside `loop`; not one that
    takes the optimizer step (gradient accumulation, `_accumulation_between`)."""
    return _throttling_if(node, loop, with_step=False)


def _throttling_if(node: Node, loop: Node, with_step: bool) -> Optional[Node]:
    """The condition of the innermost `if` between `node` and `loop` whose body holds `node`,
    whose test is a throttle and whose body does (or does not) take an optimizer step."""
    child = node
    for parent in ancestors(node):
        if parent == loop or parent.type in SCOPE_TYPES:
            return None
        if parent.type == "boolean_operator" and not with_step and child == parent.child_by_field_name("right"):
            # `if i == 0 and finish.any():`: `and` evaluates its right side only when the left holds
            left = parent.child_by_field_name("left")
            if left is not None and text(parent.child_by_field_name("operator")) == "and" and is_throttle(left):
                return left
        if parent.type == "conditional_expression" and not with_step:
            # `ema = loss.item() if self.ema is None else ...`: the first value, on the first pass only
            # (not `a if t.ndim == 2 else b`, a choice by shape on every pass)
            parts = [c for c in parent.named_children if c.type != "comment"]
            if len(parts) == 3 and child == parts[0] and _is_none_test(parts[1]):
                return parts[1]
        if parent.type in ("if_statement", "elif_clause"):
            condition = parent.child_by_field_name("condition")
            body = parent.child_by_field_name("consequence")
            if (
                body is not None
                and child == body
                and condition is not None
                and is_throttle(condition)
                and _gates_accumulation(body, loop) == with_step
            ):
                return condition
        child = parent
    return None


# Time elapsed since the last time something ran, compared with an interval
_CLOCK_INTERVAL = re.compile(r"\b\w*(?:time|now)\w*\s*-\s*(?:self\.)?\w*last\w*\s*>=?\s*[\w.]+", re.I)


def _is_none_test(condition: Node) -> bool:
    """`self.info.ema_loss is None`: a value not made yet, made on the first pass."""
    condition = strip_parens(condition)
    operators = [text(c) for c in condition.children if not c.is_named]
    sides = [c for c in condition.named_children if c.type != "comment"]
    return (
        condition.type == "comparison_operator"
        and operators == ["is"]
        and len(sides) == 2
        and sides[1].type == "none"
        and sides[0].type in ("identifier", "attribute")
    )


def _gates_accumulation(body: Node, stop: Node) -> bool:
    """Does the throttled `body` take the training step itself (`if step % accum_steps == 0:
    optimizer.step()`: gradient accumulation, every step)? Not when `stop` (the loop or function
    around it) also steps an optimizer outside `body`: then the throttle delays one update while
    the other runs every step (TD3's `policy_delay`, REDQ's `actor_delay`: the critic steps every
    time, itself or in a helper handed its optimizer, the actor every N), and what the body reads
    is read every N steps."""
    if not steps_optimizer(body):
        return False
    data = stop.text or b""
    rest = data[: body.start_byte - stop.start_byte] + data[body.end_byte - stop.start_byte :]
    rest = _COMMENT.sub(b"", rest)
    if _OPTIMIZER_STEP.search(rest) is not None:
        return False
    return not any(_UPDATE_HELPER.search(m.group(1)) for m in _OPTIMIZER_HANDED.finditer(rest))


# An optimizer handed to a helper that steps it (`self._minimize_critic_loss(batch, self.critic,
# self.critic_optim)`): the helper's name, then the optimizer among its arguments
_OPTIMIZER_HANDED = re.compile(
    rb"(\w+)\s*\((?:[^()]*,)?\s*(?:self\s*\.\s*)?\w*(?:optim|optimizer|optimiser)s?\s*[,)]", re.I
)
# ... spelled as a helper that updates with it (not `checkpoint.save(model, optimizer, ...)`)
_UPDATE_HELPER = re.compile(rb"minimi[sz]e|optimi[sz]e|update|step|learn|backward|apply_grad", re.I)


# An optimizer's (or a GradScaler's) step: `optimizer.step()`, `self.optim.step()`, `scaler.step(opt)`
_OPTIMIZER_STEP = re.compile(rb"\b(\w*optim\w*|opt|\w*_opt|\w*scaler)\s*\.\s*step\s*\(", re.I)


def steps_optimizer(body: Node) -> bool:
    """Does this block take an optimizer step? Then `if step % accum_steps == 0:` around it gates
    gradient accumulation (the training step itself), not a log or an evaluation. A step in a
    comment (`# self.optimizer.step()`) is none."""
    match = _OPTIMIZER_STEP.search(body.text or b"")
    if match is None:
        return False
    data = body.text or b""
    line_start = data.rfind(b"\n", 0, match.start()) + 1
    if b"#" not in data[line_start : match.start()]:
        return True
    return bool(_OPTIMIZER_STEP.search(_COMMENT.sub(b"", data)))


_COMMENT = re.compile(rb"#[^\n]*")


def _accumulation_between(node: Node, loop: Node) -> Optional[Node]:
    """The condition of `if iiter % accum_grad == 0:` between `node` and its loop when that `if`
    takes the optimizer step: `node` runs once per optimizer step, every training step."""
    return _throttling_if(node, loop, with_step=True)


_NONFINITE_TEST = re.compile(r"\b(?:isnan|isinf)\s*\(|^\s*not\b[^\n]*\bisfinite\s*\(")
_FINITE_TEST = re.compile(r"\bisfinite\s*\(")
_NAN_OR_INF = re.compile(r"\b(?:isnan|isinf)\s*\(")


def on_nonfinite_path(node: Node, loop: Node) -> bool:
    """Is `node` on the path taken when a value is not finite: the body of `if torch.isnan(x):` /
    `if not torch.isfinite(x):`, or the `else` of `if torch.isfinite(x):`? It runs only when the
    check fails (a warning, a skipped step), after the check has already waited."""
    child = node
    for parent in ancestors(node):
        if parent == loop or parent.type in SCOPE_TYPES:
            return False
        if parent.type == "if_statement":
            condition = parent.child_by_field_name("condition")
            said = text(condition) if condition is not None else ""
            negated = said.lstrip().startswith("not")
            # (`if not np.isnan(loss.item()):` guards the finite path: its `else` is the other one)
            nan_test = bool(_NAN_OR_INF.search(said))
            if child == parent.child_by_field_name("consequence") and (
                (nan_test and not negated)
                or _NONFINITE_TEST.search(said)
                and not nan_test
                or _names_a_nonfinite_mask(said, loop)
            ):
                return True
            if child.type == "else_clause" and ((_FINITE_TEST.search(said) and not negated) or (nan_test and negated)):
                return True
        child = parent
    return False


def _names_a_nonfinite_mask(condition: str, loop: Node) -> bool:
    """`nan_mask = torch.isnan(emb)`, then `if nan_mask.any():` in the same loop: the test of a
    mask of non-finite values, under its name."""
    name = re.match(r"\s*([A-Za-z_]\w*)\s*(?:\.\s*(?:any|sum)\s*\(|$)", condition)
    if name is None:
        return False  # (`not nan_mask.any()`: the path where all is finite)
    bound = (
        rb"\b"
        + re.escape(name.group(1).encode())
        + rb"\s*=\s*(?:[\w.]*\b(?:isnan|isinf)\s*\(|~\s*torch\.isfinite\s*\()"
    )
    return re.search(bound, loop.text or b"") is not None


# `random.random() < 0.01`, `np.random.rand() < 0.05`: a chance of at most a fifth per iteration
_RANDOM_DRAW = re.compile(r"^(?:random\.random|np\.random\.rand|numpy\.random\.rand)\(\)\s*<\s*0?\.(?:0\d*|1\d*|2)$")


def is_throttle(condition: Node) -> bool:
    """Does this condition hold on a few iterations only (`step % N == 0`, `i == 0`, `should_log`)?"""
    if _one_shot(condition) or _lazy_initialization(condition):
        return True
    while condition.type == "parenthesized_expression" and condition.named_child_count == 1:
        condition = condition.named_children[0]
    kind = condition.type
    said = text(condition)
    # (a substring test first: most conditions read no environment variable)
    if kind in ("comparison_operator", "call", "subscript") and ("environ" in said or "getenv" in said):
        if _DEBUG_ENVIRONMENT.search(said):
            return True  # `if os.getenv("LTX2_PIPELINE_DEBUG_LOG", "0") == "1":` a debugging switch
    if kind == "boolean_operator":
        left = condition.child_by_field_name("left")
        right = condition.child_by_field_name("right")
        operator = text(condition.child_by_field_name("operator"))
        parts = [p for p in (left, right) if p is not None]
        if operator == "and":
            return any(is_throttle(p) for p in parts)
        return bool(parts) and all(is_throttle(p) for p in parts)
    if kind == "not_operator":
        argument = condition.child_by_field_name("argument")
        if argument is not None and argument.type in ("identifier", "attribute") and _STATE.search(text(argument)):
            return True  # `if not state:` (`state = self.state[p]`): a parameter's first step
        return argument is not None and _is_modulo(argument)
    if kind == "comparison_operator":
        if any(_is_modulo(c) for c in condition.named_children):
            return True
        if "rand" in said and _RANDOM_DRAW.match(said):
            return True  # `if random.random() < 0.01:`: one iteration in a hundred, on purpose
        if _opt_in_logging(condition):
            return True
        if "last" in said and _CLOCK_INTERVAL.search(said):
            return True  # `current_time - last_logging > args.log_freq_time`: once per interval of wall time
        if _creates_state(condition):
            return True
        operators = [text(c) for c in condition.children if not c.is_named]
        compared = condition.named_children[0] if condition.named_children else None
        if (
            len(operators) == 1
            and operators[0] in (">", ">=")
            and compared is not None
            and compared.type in ("identifier", "attribute")
            and _VERBOSITY.search(text(compared).split(".")[-1])
        ):
            return True  # `if verbose > 1:`, `if self.verbosity >= 2:`: a verbosity level
        if len(operators) == 1 and operators[0] in ("==", ">=", ">", "<", "<=") and _counter_reset_in_body(condition):
            return True
        if len(operators) == 1 and operators[0] in ("<", "<=") and _first_iterations(condition):
            return True  # `if num_total < 10:` (llm.c's HellaSwag eval): a debug print of the first few
        if operators == [">="] and _at_the_last_item(condition):
            return True  # `if i_batch >= len(train_loader) - 1:`: the epoch's last batch
        return bool(operators) and all(op == "==" for op in operators) and _counter_at_bound(condition)
    if kind in ("identifier", "attribute", "call"):
        name = dotted_name(callee(condition) if kind == "call" else condition) or ""
        if _THROTTLE_NAME.search(name.split(".")[-1]):
            return True
        owner, _, last = name.rpartition(".")
        if kind == "attribute" and _OPT_IN_RECORD.match(last) and _SETTINGS_OWNER.search(owner):
            return True  # `if args.log_logit_mean:`, `if train_config.save_metrics:`: records the user asks for
        if kind == "identifier":
            # `apply_path_penalty = self.steps > 5000 and self.steps % 32 == 0`, then `if apply_path_penalty:`
            value = _bound_value(condition)
            return value is not None and value.type != "identifier" and is_throttle(value)
    return False


def _grows_a_cache(comparison: Node) -> bool:
    """`seq_len > self.max_seq_len_cached`, `self._seq_len_cached < seq_len`: a size compared
    with the size of an object's cache, which is rebuilt only when a longer input than any before
    arrives (a rotary embedding's cos/sin tables): a few times per run."""
    operators = [text(c) for c in comparison.children if not c.is_named]
    if len(operators) != 1 or operators[0] not in (">", ">=", "<", "<=", "!="):
        return False
    return any(
        side.type == "attribute" and text(side).startswith("self.") and _CACHED_SIZE.search(text(side).split(".")[-1])
        for side in comparison.named_children
    )


_CACHED_SIZE = re.compile(r"cached|cache_(?:len|size)", re.I)


# A settings object (`args`, `self.cfg`, `train_config`): its `log_*` and `save_metrics` fields are
# opt-in logging
_OPT_IN_RECORD = re.compile(
    r"log_|save_metrics$|track_|save_(?:images?|samples?|outputs?|preds?|predictions?|visuals?|vis|figures?|plots?)$"
)
_SETTINGS_OWNER = re.compile(r"(?:^|\.|_)(?:cfg|config|conf|args|opts?|options|settings|hparams)$", re.I)
_VERBOSITY = re.compile(r"^_*(?:verbose|verbosity|debug|log_level|debug_level)$", re.I)


def _bound_value(name: Node) -> Optional[Node]:
    """The value of `_bound_once(name)`: for a tuple assignment (`n, chunks = x.shape[0], 100`),
    the part that goes to `name`."""
    assignment = _bound_once(name)
    if assignment is None:
        return None
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    if left is None or right is None or left.type == "identifier":
        return right
    targets = [c for c in left.named_children if c.type != "comment"]
    values = [c for c in right.named_children if c.type != "comment"] if right.type == "expression_list" else []
    if len(targets) != len(values) or any(t.type != "identifier" for t in targets):
        return None
    return next((v for t, v in zip(targets, values) if text(t) == text(name)), None)


def _bound_once(name: Node) -> Optional[Node]:
    """The assignment `name = value` by which the function around `name` binds it, when it binds
    it once, with `=`, before `name` is read, and `name` is no parameter; None otherwise."""
    function = next((a for a in ancestors(name) if a.type == "function_definition"), None)
    body = function.child_by_field_name("body") if function is not None else None
    if function is None or body is None or text(name) in _parameter_names(function):
        return None
    word = text(name)
    # where the word is written in the body: a statement without it binds nothing of that name, so
    # its subtree is not walked (a function's body is long; the name is in few of its statements)
    data, at, starts = body.text or b"", 0, []
    while (at := data.find(word.encode(), at)) != -1:
        starts.append(body.start_byte + at)
        at += 1
    found: list[Node] = []
    stack = list(body.named_children)
    while stack:
        node = stack.pop()
        if node.type in SCOPE_TYPES:
            continue
        first = bisect_left(starts, node.start_byte)
        if first == len(starts) or starts[first] >= node.end_byte:
            continue
        if node.type in ("assignment", "augmented_assignment", "for_statement", "named_expression"):
            left = node.child_by_field_name("left") or node.child_by_field_name("name")
            if left is not None and word in text(left).replace("(", " ").replace(",", " ").split():
                found.append(node)
        stack.extend(node.named_children)
    if len(found) != 1 or found[0].type != "assignment" or found[0].end_byte > name.start_byte:
        return None
    left = found[0].child_by_field_name("left")
    # (`name = value`, or `a, name = x, value`: `_bound_value` takes its part)
    return found[0] if left is not None and left.type in ("identifier", "pattern_list") else None


# An optional writer of logs (`self.summary_writer`, `tb_writer`, `self.wandb_run`), None unless
# the user asks for it
_OPT_IN_LOGGER = re.compile(r"(?:^|_)writer$|^tb_|tensorboard|wandb", re.I)


def _opt_in_logging(comparison: Node) -> bool:
    """`if self.summary_writer is not None:`: logging the user turned on, off by default (as
    `if verbose:`)."""
    operators = " ".join(text(c) for c in comparison.children if not c.is_named)
    sides = comparison.named_children
    if operators != "is not" or len(sides) != 2 or sides[1].type != "none":
        return False
    name = dotted_name(sides[0]) or ""
    if not _OPT_IN_LOGGER.search(name.split(".")[-1]):
        return False
    # (not a logger the function itself makes, `tb_logger = SummaryWriter(...)` on rank 0: on by
    # default there, so that rank reads on every step)
    function = next((a for a in ancestors(comparison) if a.type == "function_definition"), None)
    made = re.compile(rb"(?<![\w.])" + re.escape(name.encode()) + rb"[ \t]*=[ \t]*(?!None\b)[A-Za-z_][\w.]*\(")
    return function is None or made.search(function.text or b"") is None


def _counter_reset_in_body(comparison: Node) -> bool:
    """`counter += 1` ... `if counter == k: ...; counter = 0`: the left side is a counter that the
    `if` it tests sets back to zero, so the body runs once every k iterations."""
    left = comparison.named_children[0] if comparison.named_children else None
    statement = comparison.parent
    if left is None or left.type not in ("identifier", "attribute", "binary_operator") or statement is None:
        return False
    if statement.type not in ("if_statement", "elif_clause"):
        return False
    body = statement.child_by_field_name("consequence")
    if body is not None and _moves_up_last_time(comparison, body):
        return True
    if left.type == "binary_operator":
        return False
    reset = re.compile(rb"^[ \t]*" + re.escape(text(left).encode()) + rb"[ \t]*=[ \t]*0[ \t]*(?:#.*)?$", re.M)
    return body is not None and bool(reset.search(body.text or b""))


def _names_in(node: Node) -> set[str]:
    """The names and attribute chains written in `node` (`t_env`, `self.log_stats_t`, `self`)."""
    names = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in ("identifier", "attribute"):
            names.add(text(current))
        stack.extend(current.named_children)
    return names


def _one_shot(condition: Node) -> bool:
    """`if self.log_images and self.log_train_images: self.log_train_images = False; ...`: the
    body turns off a flag its test needs, so it runs once (until something sets it again)."""
    statement = condition.parent
    if statement is None or statement.type not in ("if_statement", "elif_clause"):
        return False
    body = statement.child_by_field_name("consequence")
    latched = [m.group(1).decode() for m in _LATCH.finditer(body.text or b"")] if body is not None else []
    loop = repeating_loop(statement)
    if loop is None:
        # a local name turned off outside any loop is set again by the next call (`if
        # image_grid_thw is not None: ... image_grid_thw = None`): only an attribute stays off
        latched = [name for name in latched if "." in name]
    elif loop.type == "for_statement":
        # `for param in params: if param.grad is not None: ... param.grad = None`: each
        # iteration tests another object
        target = loop.child_by_field_name("left")
        fresh = _names_in(target) if target is not None else set()
        latched = [name for name in latched if name.split(".")[0] not in fresh]
    return bool(latched) and not _names_in(condition).isdisjoint(latched)


_LATCH = re.compile(rb"^[ \t]*([A-Za-z_][\w.]*)[ \t]*=[ \t]*(?:False|None)[ \t]*(?:#.*)?$", re.M)


def _moves_up_last_time(comparison: Node, body: Node) -> bool:
    """`if t_env - self.log_stats_t >= interval: ...; self.log_stats_t = t_env`, `if last + gap <
    step: last = step`: the body sets one name of the test to another (the time of the last log
    moved up to now), so it runs once per interval."""
    names = _names_in(comparison)
    for match in _NAME_SET_TO_NAME.finditer(body.text or b""):
        target, value = match.group(1).decode(), match.group(2).decode()
        if target != value and target in names and value in names:
            return True
    return False


_NAME_SET_TO_NAME = re.compile(rb"^[ \t]*([A-Za-z_][\w.]*)[ \t]*=[ \t]*([A-Za-z_][\w.]*)[ \t]*(?:#.*)?$", re.M)


def _first_iterations(comparison: Node) -> bool:
    """`num_total < 10`, `i <= 3`: a counter below a small number, true on the first iterations only."""
    sides = [strip_parens(c) for c in comparison.named_children]
    if len(sides) != 2 or sides[0].type not in ("identifier", "attribute") or sides[1].type != "integer":
        return False
    if int(text(sides[1]), 0) > FEW_FIRST_ITERATIONS:
        return False
    if _COUNTER.search(text(sides[0]).split(".")[-1]) is not None:
        return True
    # `if mistakes_printed_already < 5: ...; mistakes_printed_already += 1` (minGPT): a cap it counts itself
    statement = comparison.parent
    while statement is not None and statement.type in ("boolean_operator", "parenthesized_expression"):
        statement = statement.parent  # (`if not correct[i] and printed < 5:`)
    body = statement.child_by_field_name("consequence") if statement is not None else None
    counted = re.escape(text(sides[0])) + r"\s*\+=\s*1\b"
    return body is not None and re.search(counted, text(body)) is not None


FEW_FIRST_ITERATIONS = 100  # `if step < 10:` is a few first iterations; `if step < warmup_steps:` may be thousands
_COUNTER = re.compile(
    r"^(?:num|n)_|_(?:count|total|idx|index|step|iter)$|^(?:i|j|k|it|idx|step|steps|iter|count|total)$"
)


def _counter_at_bound(comparison: Node) -> bool:
    """Do the sides of `comparison` compare a counter with a number or the loop's end (`i == 0`,
    `step == max_steps - 1`), not a per-process value (`rank == 0`)?"""
    # (`it + 1 == max_iterations`: the counter one on; `step == max_steps - 1`: the bound one back)
    sides = [_without_offset(s) for s in comparison.named_children]
    names = [s for s in sides if s.type in ("identifier", "attribute")]
    if any(_PER_PROCESS.search(text(n)) for n in names):
        return False
    bounds = [s for s in sides if s not in names or len(names) > 1]
    return bool(names) and (any(is_counter_bound(s) for s in bounds) or _compares_with_range_end(comparison))


def _without_offset(side: Node) -> Node:
    """`it + 1` -> `it`: a name plus or minus a number, read as the name."""
    side = strip_parens(side)
    if side.type == "binary_operator" and text(side.child_by_field_name("operator")) in ("+", "-"):
        left, right = side.child_by_field_name("left"), side.child_by_field_name("right")
        if (
            left is not None
            and right is not None
            and right.type == "integer"
            and left.type in ("identifier", "attribute")
        ):
            return left
    return side


def _compares_with_range_end(comparison: Node) -> bool:
    """`step == config.steps` in `for step in range(1, config.steps + 1):`: the loop's variable
    against what its `range` is written with, its last (or first) iteration."""
    loop = next((a for a in ancestors(comparison) if a.type == "for_statement"), None)
    target = loop.child_by_field_name("left") if loop is not None else None
    iterable = loop.child_by_field_name("right") if loop is not None else None
    if target is None or iterable is None or target.type != "identifier" or iterable.type != "call":
        return False
    if (dotted_name(callee(iterable)) or "").split(".")[-1] not in ("range", "trange"):
        return False
    sides = [strip_parens(s) for s in comparison.named_children]
    if len(sides) != 2 or text(target) not in (text(sides[0]), text(sides[1])):
        return False
    other = sides[1] if text(sides[0]) == text(target) else sides[0]
    positional, _ = arguments(iterable)
    written = [text(p) for p in positional]
    return other.type in ("identifier", "attribute") and any(
        re.search(r"(?<![\w.])" + re.escape(text(other)) + r"(?!\w)", w) for w in written
    )


def _skips_unless_throttled(condition: Node) -> bool:
    """Is `condition` the test of an early exit (`if not should_log: return`, `if step % N != 0:
    continue`) that lets the code after it run only on a few iterations: is its negation a
    throttle?"""
    while condition.type == "parenthesized_expression" and condition.named_child_count == 1:
        condition = condition.named_children[0]
    if condition.type == "boolean_operator" and text(condition.child_by_field_name("operator")) == "or":
        # `if (step - 1) % every != 0 or already_done: return`: what follows needs every part false
        parts = (condition.child_by_field_name("left"), condition.child_by_field_name("right"))
        return any(part is not None and _skips_unless_throttled(part) for part in parts)
    if condition.type == "not_operator":
        argument = condition.child_by_field_name("argument")
        return argument is not None and not _is_modulo(argument) and is_throttle(argument)
    if _is_modulo(condition):
        return True  # `if step % N: continue`
    if condition.type == "comparison_operator":
        operators = [text(c) for c in condition.children if not c.is_named]
        if operators in (["=="], ["is"]) and _option_off(condition):
            return True  # `if self.args.include_num_input_tokens_seen == "no": return`: an opt-in option
        if not operators or any(op != "!=" for op in operators):
            return False
        # (not `if x.ndim != 4: continue`: only a modulo says "a few iterations")
        return any(_is_modulo(c) for c in condition.named_children)
    return False


def _option_off(comparison: Node) -> bool:
    """`self.args.include_num_input_tokens_seen == "no"`, `cfg.track_grad_norm is False`: a
    setting compared with its "off" value (the exit skips what the user did not ask for)."""
    sides = [c for c in comparison.named_children if c.type != "comment"]
    if len(sides) != 2:
        return False
    setting, value = sides
    off = value.type == "false" or (
        value.type == "string" and text(value).strip("\"'").lower() in ("no", "none", "off", "disabled")
    )
    parts = (dotted_name(setting) or "").split(".")
    return off and len(parts) >= 2 and any(_SETTINGS_OWNER.search(part) for part in parts[:-1])


_EXIT_STATEMENTS = ("return_statement", "continue_statement")


def early_exit_throttle(node: Node, stop: Node) -> Optional[Node]:
    """The condition of an early exit before `node`, inside `stop` (a loop or a function), that
    lets `node` run only on a few iterations: `if not should_log: return` ... `loss.item()`."""
    child = node
    for parent in ancestors(node):
        if parent == stop or parent.type in SCOPE_TYPES:
            return None
        if parent.type in ("block", "module"):
            sibling = child.prev_named_sibling
            while sibling is not None:
                if sibling.type == "if_statement" and _exits(sibling):
                    condition = sibling.child_by_field_name("condition")
                    if (
                        condition is not None
                        and _skips_unless_throttled(condition)
                        # (`if step % accum != 0: continue` then `optimizer.step()`: accumulation)
                        and not _OPTIMIZER_STEP.search(parent.text or b"", sibling.end_byte - parent.start_byte)
                    ):
                        return condition
                sibling = sibling.prev_named_sibling
        child = parent
    return None


def _exits(statement: Node) -> bool:
    """An `if` with no other branch whose body ends in `return` or `continue`."""
    if statement.child_by_field_name("alternative") is not None:
        return False
    body = statement.child_by_field_name("consequence")
    last = body.named_children[-1] if body is not None and body.named_children else None
    return last is not None and last.type in _EXIT_STATEMENTS


def _lazy_initialization(condition: Node) -> bool:
    """`if self.cache[key] is None: self.cache[key] = torch.zeros(n).to(device)`: the body sets
    what its test found unset, and the value outlives the call (an attribute, or an item of one),
    so it runs once per value (a cache filled on first use). Not a local (`if attn is None: attn =
    torch.empty(...)` in a decoding loop runs once per call, as often as the function)."""
    statement = condition.parent
    if statement is None or statement.type not in ("if_statement", "elif_clause"):
        return False
    tested = strip_parens(condition)
    if tested.type == "comparison_operator" and _grows_a_cache(tested):
        return True  # `if seq_len > self.max_seq_len_cached:`: a rotary cache rebuilt when it grows
    if tested.type == "comparison_operator" and _creates_state(tested):
        return True  # `if len(state) == 0:` in an optimizer's per-parameter step: its state, made once
    body = statement.child_by_field_name("consequence")
    missing = _hasattr_missing(tested)
    if missing is not None:
        # `if not hasattr(self, "weight"): weight = self.recover()`, and the function keeps it
        # (`self.weight = weight`, maybe under another test): computed on first use
        function = next((a for a in ancestors(statement) if a.type in SCOPE_TYPES), None)
        kept = function.text if function is not None else None
        # (or registers it: `self.register_buffer("colorize", torch.randn(...).to(x))`)
        registered = rb"register_(?:buffer|parameter)\(\s*[\"']" + missing.encode() + rb"[\"']"
        return (
            re.search(rb"^\s*self\." + missing.encode() + rb"\s*=(?!=)", kept or b"", re.M) is not None
            or re.search(registered, kept or b"") is not None
        )
    sides = tested.named_children if tested.type == "comparison_operator" else []
    operators = [text(c) for c in tested.children if not c.is_named] if sides else []
    if operators in (["not", "in"], ["not in"]) and len(sides) == 2 and text(sides[1]).startswith("self."):
        # `if (D, seq_len, device) not in self.cache: ... self.cache[key] = ...`: filled once per key
        cache = re.escape(text(sides[1]).encode())
        filled = statement.child_by_field_name("consequence")
        return filled is not None and re.search(cache + rb"\[[^\]\n]*\][ \t]*=(?!=)", filled.text or b"") is not None
    if operators != ["is"] or len(sides) != 2 or sides[1].type != "none" or not text(sides[0]).startswith("self."):
        return False
    body = statement.child_by_field_name("consequence")
    unset = re.escape(text(sides[0]))
    return body is not None and re.search(rf"^\s*{unset}\s*=(?!=)", text(body), re.M) is not None


def _hasattr_missing(tested: Node) -> Optional[str]:
    """`not hasattr(self, "weight")`: the attribute's name; None for anything else."""
    if tested.type != "not_operator":
        return None
    call = tested.child_by_field_name("argument")
    call = strip_parens(call) if call is not None else None
    if call is None or call.type != "call" or dotted_name(callee(call)) != "hasattr":
        return None
    positional, _ = arguments(call)
    if len(positional) != 2 or text(positional[0]) != "self" or positional[1].type != "string":
        return None
    name = text(positional[1]).strip("'\"")
    return name if re.fullmatch(r"\w+", name) else None


def lazily_initialized(node: Node, stop: Node) -> Optional[Node]:
    """The condition of an `if` between `node` and `stop` whose body fills, on first use, what
    outlives the call (`if not hasattr(self, "weight"):`, `if self.cache is None:`) and holds
    `node`; None when there is none."""
    child = node
    for parent in ancestors(node):
        if parent == stop or parent.type in SCOPE_TYPES:
            return None
        if parent.type in ("if_statement", "elif_clause") and child == parent.child_by_field_name("consequence"):
            condition = parent.child_by_field_name("condition")
            if condition is not None and _lazy_initialization(condition):
                return condition
        child = parent
    return None


def _creates_state(condition: Node) -> bool:
    """`"exp_avg" not in state` / `len(state) == 0`: the test of a parameter's first step."""
    sides = condition.named_children
    operators = [text(c) for c in condition.children if not c.is_named]
    if len(sides) != 2:
        return False
    left, right = sides
    if operators in (["not", "in"], ["not in"]):
        return left.type == "string" and right.type in ("identifier", "attribute") and bool(_STATE.search(text(right)))
    if operators == ["=="] and left.type == "call" and dotted_name(callee(left)) == "len" and text(right) == "0":
        measured, _ = arguments(left)
        return len(measured) == 1 and bool(_STATE.search(text(measured[0])))
    return False


def _is_modulo(node: Node) -> bool:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type != "binary_operator" or text(node.child_by_field_name("operator")) != "%":
        return False
    return not _every_one(node.child_by_field_name("right"))


def _every_one(divisor: Optional[Node]) -> bool:
    """`step % 1`, or `step % log_interval` with `log_interval = 1` at the top of the module
    (lit-llama's fine-tuning scripts): true on every iteration, no throttle."""
    if divisor is None:
        return False
    divisor = strip_parens(divisor)
    if divisor.type == "integer":
        return text(divisor) == "1"
    if divisor.type == "attribute" and _SETTINGS_OWNER.search(text(divisor.child_by_field_name("object"))):
        return _argument_default_one(divisor, text(divisor.child_by_field_name("attribute")))
    if divisor.type != "identifier":
        return False
    # (the module's own statements, not its text: this runs for every throttle the rules test)
    name = text(divisor)
    for statement in module_code(divisor):
        assignment = statement.named_children[0] if statement.type == "expression_statement" else None
        if assignment is not None and assignment.type == "assignment":
            left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
            if left is not None and right is not None and text(left) == name:
                return right.type == "integer" and text(right) == "1"
    return False


def _at_the_last_item(comparison: Node) -> bool:
    """`i_batch >= len(train_loader) - 1`: a name against one less than a length, which only the
    last index reaches (not `step >= warmup_steps`, true on every step after it)."""
    sides = [strip_parens(c) for c in comparison.named_children if c.type != "comment"]
    if len(sides) != 2 or sides[0].type != "identifier":
        return False
    bound = sides[1]
    if bound.type != "binary_operator" or text(bound.child_by_field_name("operator")) != "-":
        return False
    left, right = bound.child_by_field_name("left"), bound.child_by_field_name("right")
    return (
        left is not None
        and right is not None
        and text(right) == "1"
        and left.type == "call"
        and dotted_name(callee(left)) == "len"
    )


def _argument_default_one(node: Node, option: str) -> bool:
    """Does the module's own code (a `__main__` block, not a definition the prefilter may leave
    out) declare `parser.add_argument("--log_interval", type=int, default=1)`? Then `step %
    args.log_interval == 0` holds on every step unless the user asks otherwise."""
    spelled = rb"(?:" + re.escape(option.encode()) + rb"|" + re.escape(option.replace("_", "-").encode()) + rb")"
    declared = re.compile(rb"add_argument\(\s*[\"']--" + spelled + rb"[\"'][^()]*?\bdefault\s*=\s*1\s*[,)]")
    return any(
        b"add_argument" in (statement.text or b"") and declared.search(statement.text or b"")
        for statement in module_code(node)
    )


def is_counter_bound(node: Node) -> bool:
    """A number, or the end of a range (`len(loader) - 1`, `max_steps - 1`, `n_steps`)."""
    if node.type == "integer":
        return True
    if node.type == "binary_operator" and text(node.child_by_field_name("operator")) == "-":
        return True
    if node.type in ("identifier", "attribute"):
        # `batch_count == num_batches_per_epoch`, `step == self.max_steps`: the last iteration
        name = text(node).split(".")[-1]
        return bool(_BOUND_NAME.search(name))
    return node.type == "call" and dotted_name(callee(node)) == "len"


def _ends_every_pass(loop: Node) -> Optional[str]:
    """The statement that ends a `for`/`while` loop's body unconditionally and leaves the loop
    (`break`, `return`, `raise`, `exit()`, `sys.exit()`), when no `continue` can skip it: the loop
    runs one pass (a visualisation dump of the first batch, then `exit()`)."""
    if loop.type not in ("for_statement", "while_statement"):
        return None
    body = loop.child_by_field_name("body")
    if body is None:
        return None
    last = next((c for c in reversed(body.named_children) if c.type != "comment"), None)
    if last is None:
        return None
    if last.type in ("break_statement", "return_statement", "raise_statement"):
        ending = text(last).split()[0]
    else:
        call = last.named_children[0] if last.type == "expression_statement" and last.named_children else None
        name = dotted_name(callee(call)) if call is not None and call.type == "call" else None
        if name not in ("exit", "sys.exit", "quit", "os._exit"):
            return None
        ending = f"{name}()"
    # (the body's bytes are read only for a loop that ends so: `frequency` asks of every loop)
    return None if b"continue" in (body.text or b"") else ending


def runs_a_few_times(loop: Node) -> bool:
    """Does `loop` run a few times, as written (`for i in range(3):`, `for x in (a, b):`)?"""
    count = _literal_iterations(loop)
    return count is not None and count <= FEW_ITERATIONS


def _literal_iterations(loop: Node) -> Optional[int]:
    if loop.type in ("list_comprehension", "generator_expression"):
        # `text, cond, audio = [f(x) for x in streams]`: as many elements as names it unpacks into
        parent = loop.parent
        left = parent.child_by_field_name("left") if parent is not None and parent.type == "assignment" else None
        if left is not None and left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
            names = [c for c in left.named_children if c.type != "comment"]
            if all(c.type == "identifier" for c in names):
                return len(names)
    if loop.type in COMPREHENSION_TYPES:
        # `tuple(f(x[:, axis]) for axis in range(3))`: as often as its one iterable has items
        clauses = [c for c in loop.named_children if c.type == "for_in_clause"]
        iterable = clauses[0].child_by_field_name("right") if len(clauses) == 1 else None
        return literal_length(iterable) if iterable is not None else None
    if loop.type != "for_statement":
        return None
    iterable = loop.child_by_field_name("right")
    return literal_length(iterable) if iterable is not None else None


_GROWS = rb"(?:\.(?:append|extend|insert)\(|[ \t]*(?:\+=|\*=))"


def _bound_literal(name: Node) -> Optional[Node]:
    """The list or tuple display that the function around `name` binds it to, once, before it is
    read and never grown (`masks = ["train_mask", "val_mask", "test_mask"]`, `scale_search =
    [0.5]`); None otherwise."""
    assignment = _bound_once(name)
    value = _bound_value(name) if assignment is not None else None
    statement = assignment.parent if assignment is not None else None
    body = statement.parent if statement is not None else None
    if value is None or body is None or body.parent is None or body.parent.type != "function_definition":
        return None  # (not in a branch: `if not isinstance(xs, list): xs = [xs]`)
    if value.type not in ("list", "tuple", "list_comprehension", "dictionary"):
        return None
    word = re.escape(text(name).encode())
    if re.search(rb"\b" + word + _GROWS, body.text or b""):
        return None  # grown later: `masks.append(...)`
    if value.type == "dictionary":
        # a dict keeps its keys when it is only written at the keys it is walked by (`for offset
        # in errors: errors[offset] = ...`), not `errors[new_key] = ...` or `errors.update(...)`
        data = body.text or b""
        # only walked, indexed and returned: handed to a call (`accum_log(logs, {...})`) it may grow
        for use in re.finditer(rb"(?<![\w.])" + word + rb"\b", data):
            iterated = re.search(rb"\b(?:in|return)[ \t]+$", data[max(0, use.start() - 8) : use.start()])
            if not (iterated or re.match(rb"[ \t]*(?:\[|\.(?:items|keys|values|get)\(|=[^=])", data[use.end() :])):
                return None
        for key in re.finditer(rb"\b" + word + rb"\[([^\]\n]*)\][ \t]*=(?!=)", data):
            walked = rb"\bfor[ \t]+" + re.escape(key.group(1).strip()) + rb"[ \t]+in[ \t]+" + word + rb"\b"
            if not re.fullmatch(rb"\w+", key.group(1).strip()) or re.search(walked, data) is None:
                return None
    return value


def _parameter_names(function: Node) -> set[str]:
    parameters = function.child_by_field_name("parameters")
    names = set()
    for parameter in parameters.named_children if parameters is not None else []:
        named = parameter if parameter.type == "identifier" else parameter.child_by_field_name("name")
        if named is None and parameter.named_children:
            named = parameter.named_children[0]
        if named is not None and named.type == "identifier":
            names.add(text(named))
    return names


# Iterate their argument once, element by element: `enumerate((33, 44, 55))` runs 3 times
_SAME_LENGTH = ("enumerate", "reversed", "sorted", "list", "tuple")
# Iterate at most as many times as their last argument has elements: `filter(None, [model, draft])`
_AT_MOST_LENGTH = ("filter", "itertools.filterfalse", "filterfalse")


def literal_length(iterable: Node) -> Optional[int]:
    """How many elements a literal iterable has: a list or tuple display, `range` of integer
    literals, and those through `enumerate`/`reversed`/`sorted` or `zip` (the shortest)."""
    if iterable.type == "parenthesized_expression" and iterable.named_child_count == 1:
        return literal_length(iterable.named_children[0])
    if iterable.type in ("list", "tuple"):
        elements = [c for c in iterable.named_children if c.type != "comment"]
        return None if any(c.type == "list_splat" for c in elements) else len(elements)
    if iterable.type == "dictionary":
        pairs = [c for c in iterable.named_children if c.type != "comment"]
        return None if any(c.type != "pair" for c in pairs) else len(pairs)
    if iterable.type == "identifier":
        literal = _bound_literal(iterable)  # `masks = [...]` ... `for mask in masks:`
        return literal_length(literal) if literal is not None else None
    if iterable.type == "call" and method_name(iterable) in ("items", "keys", "values") and not arguments(iterable)[0]:
        owner = receiver(iterable)  # `for k, v in errors.items():` of `errors = {0.0: 0.0, 1.0: 0.0}`
        literal = _bound_literal(owner) if owner is not None and owner.type == "identifier" else None
        return literal_length(literal) if literal is not None and literal.type == "dictionary" else None
    if iterable.type == "list_comprehension":
        # `[x * 368 / h for x in scale_search]`: one element per element of a literal
        clauses = [c for c in iterable.named_children if c.type in ("for_in_clause", "if_clause")]
        right = (
            clauses[0].child_by_field_name("right")
            if len(clauses) == 1 and clauses[0].type == "for_in_clause"
            else None
        )
        return literal_length(right) if right is not None else None
    name = dotted_name(callee(iterable)) if iterable.type == "call" else None
    if name in _AT_MOST_LENGTH:
        positional, _ = arguments(iterable)
        return literal_length(positional[-1]) if len(positional) == 2 else None
    if name in _SAME_LENGTH or name == "zip":
        positional, _ = arguments(iterable)
        if name == "enumerate":
            positional = positional[:1]  # its second argument is where the count starts
        if not positional or (name != "zip" and len(positional) != 1):
            return None
        lengths = [literal_length(p) for p in positional]
        known = [n for n in lengths if n is not None]
        # zip stops at its shortest argument: one literal bounds it, whatever the others hold
        return min(known) if known and (name == "zip" or len(known) == len(lengths)) else None
    if name == "range":
        positional, _ = arguments(iterable)
        if len(positional) == 1 and positional[0].type == "identifier":
            bound = _bound_integer(positional[0])  # `steps = 10` ... `for step in range(steps):`
            return max(bound, 0) if bound is not None else None
        if len(positional) == 1 and positional[0].type == "call" and dotted_name(callee(positional[0])) == "len":
            measured, _ = arguments(positional[0])  # `range(len(multiplier))` of a literal list
            return literal_length(measured[0]) if len(measured) == 1 else None
        if len(positional) > 1 and not all(p.type == "integer" for p in positional):
            return _range_length(positional)  # `range(0, max_len, chunk_size)` of numbers bound above
        if not positional or not all(p.type == "integer" for p in positional):
            return None
        try:
            values = [int(text(p), 0) for p in positional]
        except ValueError:
            return None
        if len(values) == 1:
            return max(values[0], 0)
        step = values[2] if len(values) > 2 else 1
        return len(range(values[0], values[1], step)) if step else None
    return None


def _bound_integer(name: Node) -> Optional[int]:
    """The integer that `name` is bound to by the one assignment of it in its scope (`steps = 10`
    above `for step in range(steps):` in a `__main__` smoke test); None otherwise."""
    value = _bound_expression(name)
    if value is None or value.type != "integer":
        return None
    try:
        return int(text(value), 0)
    except ValueError:
        return None


def _bound_expression(name: Node) -> Optional[Node]:
    """The value that `name` is bound to by the one assignment of it in its scope: in a function,
    `_bound_value`; in the module's code, an assignment written as a statement of a block that
    holds the read, before it (`n = 10`, or its part of `max_len, chunk_size = 300, 30`, in a
    `__main__` smoke test); None otherwise."""
    scope = next((a for a in ancestors(name) if a.type in ("function_definition", "module")), None)
    if scope is None:
        return None
    if scope.type == "function_definition":
        return _bound_value(name)  # (bound once in the function, before the read)
    # the module's own code, not its definitions (other scopes, and left out of some parses)
    word = re.escape(text(name).encode())
    data = b"\n".join(c.text or b"" for c in module_code(scope))
    # (a statement's target of its own, or one of a row of names: `a, n = 3, 10`; not a keyword
    # argument, `f(1, n, device=d)`)
    assigned = rb"^[ \t]*(?:[\w.]+[ \t]*,[ \t]*)*" + word + rb"(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*(?:[-+*/%]|//)?=(?!=)"
    if len(re.findall(assigned, data, re.M)) != 1:
        return None
    for block in ancestors(name):
        if block == scope:
            break
        if block.type not in ("block", "module"):
            continue
        for statement in block.named_children:
            if statement.start_byte >= name.start_byte:
                break
            inner = (
                statement.named_children[0]
                if statement.type == "expression_statement" and statement.named_children
                else None
            )
            if inner is None or inner.type != "assignment":
                continue
            left, right = inner.child_by_field_name("left"), inner.child_by_field_name("right")
            if left is None or right is None:
                continue
            if text(left) == text(name):
                return right
            if left.type == "pattern_list" and right.type == "expression_list":
                targets = [c for c in left.named_children if c.type != "comment"]
                values = [c for c in right.named_children if c.type != "comment"]
                if len(targets) == len(values):
                    found = next((v for t, v in zip(targets, values) if text(t) == text(name)), None)
                    if found is not None:
                        return found
    return None


def _multiple(node: Node, depth: int = 0) -> Optional[tuple[int, str]]:
    """`node` as a whole multiple of one quantity, (factor, the quantity as written; "" for 1),
    following names bound once: `300` is (300, ""); `max_len` after `max_len = 10 *
    model.chunk` is (10, "model.chunk"); `chunk` after `chunk = model.chunk` is (1, "model.chunk")."""
    node = strip_parens(node)
    if depth > 3:
        return None
    if node.type == "integer":
        try:
            return int(text(node), 0), ""
        except ValueError:
            return None
    if node.type == "identifier":
        value = _bound_expression(node)
        found = _multiple(value, depth + 1) if value is not None else None
        return found if found is not None else (1, text(node))
    if node.type == "binary_operator" and text(node.child_by_field_name("operator")) == "*":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        one = _multiple(left, depth + 1) if left is not None else None
        other = _multiple(right, depth + 1) if right is not None else None
        if one is not None and other is not None and (not one[1] or not other[1]):
            return one[0] * other[0], one[1] or other[1]
        return None
    if node.type == "attribute":
        return 1, " ".join(text(node).split())
    return None


def _range_length(positional: list[Node]) -> Optional[int]:
    """How many times `range(start, stop, step)` runs when its bounds are multiples of one quantity
    (`range(0, max_len, chunk_size)` after `max_len = 10 * m.chunk` and `chunk_size = m.chunk`: 10
    times; `range(0, n, k)` after `n, k = 300, 30`: 10 times)."""
    if not 2 <= len(positional) <= 3:
        return None
    parts = [_multiple(p) for p in positional] + ([(1, "")] if len(positional) == 2 else [])
    start, stop, step = parts
    if start is None or stop is None or step is None or step[0] <= 0:
        return None
    # (the start may be 0 of any quantity; otherwise all three count the same one)
    if stop[1] != step[1] or (start[0] != 0 and start[1] != stop[1]):
        return None
    first, last, stride = start[0], stop[0], step[0]
    return max(0, -(-(last - first) // stride))


_RETRIES = re.compile(r"trial|tries|retr|attempt", re.I)
_EXITS = re.compile(rb"\b(?:return|break)\b")


def _ends_in_break(block: Optional[Node]) -> bool:
    """`try: ...; break` (the attempt's last statement leaves the loop when it succeeds)."""
    statements = [c for c in block.named_children if c.type != "comment"] if block is not None else []
    return bool(statements) and statements[-1].type == "break_statement"


def _is_retry_loop(loop: Node) -> bool:
    """`for _ in range(max_trials): ... if ok: return` (then `raise`), or `while True: try: ...
    except ...: continue else: break` (or `try: ...; break`): it repeats only until an attempt
    succeeds, usually once."""
    if loop.type == "while_statement":
        condition = loop.child_by_field_name("condition")
        body = loop.child_by_field_name("body")
        if condition is not None and body is not None and _RETRIES.search(text(condition)):
            # `while count < self.max_resample_times: ... if enough: break`
            return bool(_EXITS.search(body.text or b""))
        statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
        if condition is not None and condition.type == "not_operator" and _sets_flag_on_success(condition, statements):
            return True
        return (
            condition is not None
            and text(condition) == "True"
            and any(
                statement.type == "try_statement"
                and (
                    any(
                        c.type == "else_clause" and re.search(rb"^\s*break\b", c.text or b"", re.M) is not None
                        for c in statement.named_children
                    )
                    or _ends_in_break(statement.child_by_field_name("body"))
                )
                for statement in statements
            )
        )
    if loop.type != "for_statement":
        return False
    iterable = loop.child_by_field_name("right")
    body = loop.child_by_field_name("body")
    if iterable is None or body is None or iterable.type != "call" or dotted_name(callee(iterable)) != "range":
        return False
    return bool(_RETRIES.search(text(iterable))) and bool(_EXITS.search(body.text or b""))


def _sets_flag_on_success(condition: Node, statements: list[Node]) -> bool:
    """`while not done: try: ...; done = True except OutOfMemoryError: ...`: the loop's flag is set
    in the `try` block of a statement of its body that handles a failure, so the loop repeats only
    while attempts fail."""
    flag = condition.child_by_field_name("argument")
    if flag is None or flag.type not in ("identifier", "attribute"):
        return False
    setting = re.compile(rb"^[ \t]*" + re.escape(text(flag).encode()) + rb"[ \t]*=[ \t]*True\b", re.M)
    for statement in statements:
        if statement.type != "try_statement" or not any(c.type == "except_clause" for c in statement.named_children):
            continue
        tried = statement.child_by_field_name("body")
        if tried is not None and setting.search(tried.text or b"") is not None:
            return True
    return False


def _is_collector_loop(loop: Node) -> bool:
    """`for i, data in enumerate(collector):` in reinforcement learning (or a loop whose body calls
    `collect_rollouts(...)`, stable-baselines3's): each iteration steps the environments (host
    work, the policy's actions read on the host) before the rest of the body runs."""
    if _COLLECTS.search(_body_bytes(loop)):
        # `while self.num_timesteps < total: self.collect_rollouts(env, ...); self.train()`
        return True
    if loop.type != "for_statement":
        return False
    iterable = loop.child_by_field_name("right")
    return iterable is not None and bool(_COLLECTOR.search(text(iterable)))


_COLLECTS = re.compile(rb"\bcollect_rollouts?\s*\(")


# `env.step(a)`, `self.vec_env.step(a)`, or the agent's own wrapper `self.env_step(a)`
_ENV_STEP = re.compile(rb"\b\w*envs?\.(?:step|send|recv)\(|\benv_step\(")  # (pufferlib: `vecenv.send(a)`)


def _steps_environment(loop: Node) -> bool:
    """`while n < n_steps: ... actions = actions.cpu().numpy(); env.step(actions)`: a rollout.
    Each iteration hands the host environment the policy's actions; reading them on the host is
    the price of stepping it, not a stall that could be avoided."""
    body = loop.child_by_field_name("body")
    return body is not None and bool(_ENV_STEP.search(body.text or b""))


_STATE_DICT = re.compile(r"state_dict")


def _iterates_state_dict(loop: Node) -> bool:
    """`for k, v in model.state_dict().items():` / `{k: v.cpu() for k, v in sd.items()}` over a
    `state_dict`: copying a checkpoint's tensors, once per save or load."""
    if loop.type == "for_statement":
        iterable = loop.child_by_field_name("right")
    else:
        clause = next((c for c in loop.named_children if c.type == "for_in_clause"), None)
        iterable = clause.child_by_field_name("right") if clause is not None else None
    return iterable is not None and bool(_STATE_DICT.search(text(iterable)))


# A call that runs a whole epoch: `trainer.train_epoch(...)`, `run_one_epoch(...)`, `self._train_epoch(...)`
_RUNS_AN_EPOCH = re.compile(
    rb"^(?:[\w.\[\], ]+=\s*)?[\w.]*?\b_?(?:train|run|fit|eval|evaluate|validate|valid|val)_(?:one_|an_)?epoch\s*\("
)


def _is_epoch_loop(loop: Node) -> bool:
    """`for epoch in range(n)`, `for _ in trange(num_epochs)`: the loop's variable or what it
    iterates speaks of epochs (not a keyword argument of a progress bar: `tqdm(loader,
    initial=epoch * steps_per_epoch)` iterates batches)."""
    if _runs_an_epoch(loop):
        return True
    if loop.type == "while_statement":
        return _counts_epochs(loop)
    if loop.type != "for_statement":
        return False
    target = loop.child_by_field_name("left")
    iterable = loop.child_by_field_name("right")
    # (`epoch_iterator = tqdm(range(epochs))` ... `for i in epoch_iterator:`: what the name was
    # bound to speaks; the name alone may be a transformers Trainer's batches of one epoch)
    named = _iterated(iterable)
    bound = None
    if named is not None and named.type == "identifier":
        bound = _with_value(named, loop) or _bound_value(named)

    def says_epoch(part: Optional[Node]) -> bool:
        return part is not None and bool(_EPOCH.search(text(part))) and not _WITHIN_EPOCH.search(text(part))

    # (`with tqdm(train_loader, desc=f"epoch {e}") as tepoch: for i, batch in enumerate(tepoch):`
    # walks batches: when the name's value is known, the value speaks, not the name)
    if says_epoch(_iterated(bound) if bound is not None else named):
        return True
    # `for epoch in range(self.discriminator_n_iter): ... optimizer.step()`: a name alone does not
    # make an epoch loop of one whose own body takes the optimizer step (an epoch's body walks batches)
    return says_epoch(target) and _own_call(loop, _OPTIMIZER_STEP) is None


def _with_value(name: Node, loop: Node) -> Optional[Node]:
    """The value that a `with value as name:` around `loop` binds to `name` (the nearest one)."""
    for holder in ancestors(loop):
        if holder.type in SCOPE_TYPES:
            return None
        if holder.type != "with_statement":
            continue
        clause = next((c for c in holder.named_children if c.type == "with_clause"), None)
        for item in clause.named_children if clause is not None else []:
            pattern = item.child_by_field_name("value")
            if pattern is None or pattern.type != "as_pattern":
                continue
            alias = pattern.child_by_field_name("alias")
            if alias is not None and text(alias) == text(name) and pattern.named_children:
                return pattern.named_children[0]
    return None


def _inner_training_loop(loop: Node) -> Optional[Node]:
    """The loop inside `loop` that takes the training steps when `loop` itself takes none: `for
    update in range(num_updates): for epoch in range(k): for mb in minibatches: loss.backward();
    optimizer.step()`, then `writer.add_scalar("loss", loss.item())` once per update. Not a loop
    of backward passes only, when another loop in `loop` steps the optimizers (gradient
    accumulation, then `for opt in optimizers: opt.step()`)."""
    body = loop.child_by_field_name("body")
    if body is None or not _counts_passes(loop):
        return None
    inner = _first_inner_loop(body, TRAINING_STEP, (TRAINING_STEP,))
    if inner is not None and _OPTIMIZER_STEP.search(inner.text or b"") is None:
        # `for i in range(accumulation_steps): loss.backward()`, then `for opt in optimizers:
        # opt.step()`: the inner loop accumulates gradients, each pass of `loop` is one step
        if any(_OPTIMIZER_STEP.search(n.text or b"") for n in _loops_in(body) if n != inner):
            return None
    return inner


# A clock read or a timing event: `time.perf_counter()`, `time.time()`, `start.record()`, `elapsed_time(`
_TIMES = re.compile(rb"\bperf_counter(?:_ns)?\(|\btime\.time\(|\bmonotonic\(|\.record\(|\belapsed_time\(")


def _inner_timed_loop(loop: Node) -> Optional[Node]:
    """The loop inside `loop` that a benchmark times (`for n in seqlens: inp = ...;
    torch.cuda.empty_cache(); for _ in range(60): start.record(); model(inp); end.record()`), when
    `loop`'s own code reads no clock and takes no training step: each iteration of `loop` is one
    configuration's whole timed run, and its set-up (a synchronize, `empty_cache()`) runs once per
    configuration."""
    body = loop.child_by_field_name("body")
    return _first_inner_loop(body, _TIMES, (_TIMES, TRAINING_STEP)) if body is not None else None


def _first_inner_loop(
    body: Node, wanted: "re.Pattern[bytes]", not_outside: tuple["re.Pattern[bytes]", ...]
) -> Optional[Node]:
    """The first loop inside `body` whose text matches `wanted`, when the code of `body` outside its
    loops matches none of `not_outside`; None otherwise."""
    inner = _loops_in(body)
    found = [n for n in inner if wanted.search(n.text or b"")]
    if not found:
        return None
    own = _without(body, inner)
    return None if any(p.search(own) for p in not_outside) else min(found, key=lambda n: n.start_byte)


def _without(body: Node, inner: list[Node]) -> bytes:
    """The bytes of `body` less those of the `inner` loops: a loop's own code."""
    own = body.text or b""
    for n in sorted(inner, key=lambda n: n.start_byte, reverse=True):
        own = own[: n.start_byte - body.start_byte] + own[n.end_byte - body.start_byte :]
    return own


def _loops_in(body: Node) -> list[Node]:
    """The outermost loops inside `body`, not inside a nested definition."""
    found: list[Node] = []
    stack = list(body.named_children)
    while stack:
        node = stack.pop()
        if node.type in ("for_statement", "while_statement"):
            found.append(node)
        elif node.type not in SCOPE_TYPES:
            stack.extend(node.named_children)
    return found


def data_pass(function: Node) -> Optional[Node]:
    """The loop of `function` (outside nested definitions) that walks a data loader or a data set
    (`for samples in data_loader:`, `for i, (x, y) in enumerate(tqdm(val_dl)):`): a function that
    runs a whole pass over the data itself, so its code outside that loop runs once per pass
    (an evaluation, an epoch), not once per step; None when it has none. Not a loop over a batch
    (`for x in batch:`), which runs inside one step."""
    body = function.child_by_field_name("body")
    if body is None:
        return None
    for loop in _loops_in(body):
        iterable = loop.child_by_field_name("right") if loop.type == "for_statement" else None
        if iterable is not None and _DATA_PASS.search(text(iterable)):
            return loop
    return None


def evaluation_pass(function: Node) -> Optional[Node]:
    """The first loop of a function spelled as a whole evaluation (`evaluation(model, data_loader,
    ...)`, `validate`, `eval_one_epoch`) that walks something: what the function does outside
    its loops runs once per evaluation, not once per step; None otherwise."""
    title = function.child_by_field_name("name")
    body = function.child_by_field_name("body")
    if title is None or body is None or not _EVALUATION_PASS.search(text(title)):
        return None
    return next((loop for loop in _loops_in(body) if loop.type == "for_statement"), None)


# (the whole name: `evaluate_action_sequences` is a planner's inner step)
_EVALUATION_PASS = re.compile(
    r"^_?(?:evaluation|evaluate|validate|validation)(?:_model|_loop|_epoch)?$|_one_epoch$|^(?:eval|val|test)_epoch$",
    re.I,
)


def step_loop(function: Node) -> Optional[Node]:
    """The loop of `function` (outside nested definitions) that takes training steps itself
    (`loss.backward()`, `optimizer.step()` in its body), so what the function does before that
    loop runs once per run of the steps (a fit, a per-batch attack's set-up), not once per step;
    None when it has none, and in a function a framework calls per step (`forward`,
    `training_step`). A loop that only counts iterations (`for it in range(self.num_iters):`) is
    not enough: Sinkhorn's or a planner's iterations run inside every step."""
    body = function.child_by_field_name("body")
    title = function.child_by_field_name("name")
    if body is None or title is None or _PER_STEP_FUNCTION.match(text(title)):
        return None
    return next((loop for loop in _loops_in(body) if _takes_a_step(loop)), None)


def sampling_loop(function: Node) -> Optional[Node]:
    """The loop of `function` (outside nested definitions) that runs a sampler's steps: over the
    timesteps or noise levels (`for i, t in enumerate(timesteps):`, `for t in
    self.scheduler.timesteps:`), or stepping a scheduler (`self.scheduler.step(noise_pred, t,
    latents)`), as a diffusion pipeline's `__call__` does; what the function does outside it
    (encoding the prompt, preparing latents, decoding the result) runs once per generation.
    None in a function a framework calls per step (`step`, `training_step`); a `forward` may be a
    pipeline stage's, which runs the whole denoising loop once per request (`def forward(self,
    batch, args): ... for i, t in enumerate(timesteps):`)."""
    body = function.child_by_field_name("body")
    title = function.child_by_field_name("name")
    if body is None or title is None or (_PER_STEP_FUNCTION.match(text(title)) and text(title) != "forward"):
        return None
    if _SAMPLER_WORDS.search(body.text or b"") is None:
        return None  # (most functions: no loop of theirs is walked)
    for loop in _loops_in(body):
        if loop.type != "for_statement":
            continue
        iterable = loop.child_by_field_name("right")
        inner = loop.child_by_field_name("body")
        # (not `for t in range(total_timesteps):`, a reinforcement-learning run's steps)
        walked = text(iterable) if iterable is not None else ""
        if (_SAMPLER_STEPS.search(walked) and "range(" not in walked) or (
            inner is not None and _SAMPLER_STEP_CALL.search(inner.text or b"")
        ):
            return loop
    return None


def _beside_sampling_loop(loop: Node) -> Optional[Node]:
    """The sampling loop of the function `loop` is in (`sampling_loop`), when `loop` is outside it
    and runs no model: a loop over the prompts before the denoising loop, or over the rows of
    the result after it (`[out[i][~mask[i]] for i in range(n)]`), runs once per generation."""
    if runs_a_model(loop) or loop.type == "while_statement":
        return None
    function = next((a for a in ancestors(loop) if a.type in SCOPE_TYPES), None)
    if function is None or function.type != "function_definition":
        return None
    sampling = sampling_loop(function)
    if sampling is None or sampling.start_byte <= loop.start_byte < sampling.end_byte:
        return None
    return sampling


_SAMPLER_STEPS = re.compile(r"\b\w*(?:timesteps|sigmas)\b")
_SAMPLER_STEP_CALL = re.compile(rb"\bscheduler\.step\(")
_SAMPLER_WORDS = re.compile(rb"timesteps|sigmas|scheduler\.step\(")


# A loader or a data set walked (`data_loader`, `val_dl`, `self.train_loader`, `dataset`), maybe
# through enumerate/tqdm; not `loaders` (one pass per data set)
_DATA_PASS = re.compile(r"(?:^|[^A-Za-z])(?:\w*loader|dl|\w*dataset)\b(?!s)", re.I)


def _fits_per_class(loop: Node) -> bool:
    """`for c in range(n_classes):` / `for c in y.unique():` of a `fit_*` function: a detector's
    one-time fit over features already computed, no model run and no step taken in it (a `fit`
    whose loop goes over batches trains, maybe through a client: `self.training_client.train_batch
    (data)`)."""
    if loop.type != "for_statement":
        return False
    target, iterable = text(loop.child_by_field_name("left") or loop), text(loop.child_by_field_name("right") or loop)
    return (
        (_counts_passes(loop) or _PER_CLASS.search(iterable) is not None)
        and not _STEP_WORDS.search(target + iterable)
        and not runs_a_model(loop)
        and not TRAINING_STEP.search(loop.text or b"")
    )


def _counts_passes(loop: Node) -> bool:
    """`for update in range(num_updates)`, `while step < total:`: a loop that counts, not one over
    data (`for k, batch in enumerate(true_batches):` with a truncated-BPTT loop inside takes one
    training step per batch)."""
    if loop.type == "while_statement":
        return True
    iterated = _iterated(loop.child_by_field_name("right"))
    return iterated is not None and iterated.type == "call" and dotted_name(callee(iterated)) in ("range", "trange")


def _counts_epochs(loop: Node) -> bool:
    """`while True: epoch_num = self.update_epoch(); self.train_epoch(); ...` or `while ...:
    ...; epoch += 1`: a statement of the loop's own body (not of a nested block) sets an epoch
    counter, so each iteration is an epoch. Not a text for display (nanochat's `epoch =
    f"{state['epoch']} ..."`), nor in a loop whose own body takes the optimizer step: each of
    its iterations is a step."""
    if _own_call(loop, _OPTIMIZER_STEP) is not None:
        return False
    body = loop.child_by_field_name("body")
    for statement in body.named_children if body is not None else []:
        inner = (
            statement.named_children[0]
            if statement.type == "expression_statement" and statement.named_children
            else None
        )
        if inner is None or inner.type not in ("assignment", "augmented_assignment"):
            continue
        target = inner.child_by_field_name("left")
        value = inner.child_by_field_name("right")
        if (
            target is not None
            and target.type in ("identifier", "attribute")
            and _EPOCH.search(text(target).split(".")[-1])
            and not (value is not None and value.type in ("string", "concatenated_string"))
        ):
            return True
    return False


def _runs_an_epoch(loop: Node) -> bool:
    """`for split in range(n): trainer.train_epoch(model, loader)`: a statement of the loop's own
    body runs a whole epoch, so each iteration is (a part of) an epoch."""
    body = loop.child_by_field_name("body")
    return any(
        statement.type == "expression_statement" and _RUNS_AN_EPOCH.search(statement.text or b"") is not None
        for statement in (body.named_children if body is not None else [])
    )


def _iterated(iterable: Optional[Node]) -> Optional[Node]:
    """What a wrapper call iterates: the first positional argument of `tqdm(...)`, `enumerate(...)`
    (its keyword arguments are settings); the iterable itself otherwise."""
    if iterable is not None and iterable.type == "call":
        name = (dotted_name(callee(iterable)) or "").split(".")[-1]
        positional, _ = arguments(iterable)
        if name in ("tqdm", "enumerate") and positional:
            return _iterated(positional[0])
    return iterable


_RUNS_A_MODEL = re.compile(
    rb"backward\(|\b\w*(?:model|net|network|module|encoder|decoder|forward|generate\w*|step)\s*\(", re.I
)


def runs_a_model(loop: Node) -> bool:
    """Does the loop's body call something spelled as a model, a forward or a step?"""
    body = loop.child_by_field_name("body")
    return body is not None and bool(_RUNS_A_MODEL.search(body.text or b""))


def chunked_walk(loop: Optional[Node]) -> Optional[tuple[str, str]]:
    """(`embeddings`, `batch_size`) for `for start in range(0, len(embeddings), batch_size):` (or
    `trange(...)`, `tqdm(range(...))`) whose body runs no model, takes no training step and moves
    nothing to the device: tensor
    work over an existing tensor in chunks, usually a search or a metric whose result is wanted on
    the host, which reads once per chunk of rows rather than once per item; None otherwise."""
    positional = _range_in_steps(loop)
    body = loop.child_by_field_name("body") if loop is not None else None
    if positional is None or body is None or positional[2].type not in ("identifier", "attribute"):
        return None
    measured = _rows_of(positional[1])
    if measured is None or _RUNS_A_MODEL.search(body.text or b"") or _MOVES_TO_DEVICE.search(body.text or b""):
        return None
    return measured, text(positional[2])


def _range_in_steps(loop: Optional[Node]) -> Optional[list[Node]]:
    """The three arguments of `for start in range(0, n, step):` (or `trange(...)`,
    `tqdm(range(...))`); None for another loop."""
    if loop is None or loop.type != "for_statement":
        return None
    iterable = loop.child_by_field_name("right")
    if iterable is None or iterable.type != "call":
        return None
    name = dotted_name(callee(iterable)) or ""
    if name.split(".")[-1] == "tqdm":
        positional, _ = arguments(iterable)
        iterable = positional[0] if positional and positional[0].type == "call" else iterable
        name = dotted_name(callee(iterable)) or ""
    if name.split(".")[-1] not in ("range", "trange"):
        return None
    positional, _ = arguments(iterable)
    return positional if len(positional) == 3 else None


def infers_in_chunks(loop: Node) -> bool:
    """Does `loop` run a model on each chunk of an input (`for f in range(0, video_length,
    neighbor_stride): pred = model(frames[:, f : f + n])`)? Each iteration is one inference's
    worth of the input, so what it brings home is that inference's result."""
    positional = _range_in_steps(loop)
    return positional is not None and positional[2].type != "integer" and runs_a_model(loop)


# A chunk moved to the device in the loop (`z[i : i + bs].to(device)`): batches streamed through
# the GPU, an inference loop rather than work over a tensor already there
_MOVES_TO_DEVICE = re.compile(rb"\.(?:to|cuda)\(")
# How many rows a tensor has: `len(x)`, `x.size(0)`, `x.shape[0]`, `x.size()[0]` (or elements: `x.numel()`)
_ROW_COUNT = re.compile(r"len\((?P<a>[\w.]+)\)|(?P<b>[\w.]+?)\.(?:size\(0\)|shape\[0\]|size\(\)\[0\]|numel\(\))")


def _rows_of(stop: Node) -> Optional[str]:
    """The tensor whose rows `stop` counts (`len(x)`, `x.size(0)`, `x.shape[0]`, or a name the
    function set to one of them before the loop: `n_test = test_targets.size(0)`); None otherwise."""
    if stop.type == "identifier":
        bound = _bound_value(stop)
        if bound is None:
            return None
        stop = bound
    match = _ROW_COUNT.fullmatch(" ".join(text(stop).split()))
    return None if match is None else match.group("a") or match.group("b")


# `for i in range(self.steps):`, `for it in trange(n_iter):`, `while it < self.steps:`: a loop over
# the steps of a run
_STEP_LOOP = re.compile(
    rb"^[ \t]*(?:for\b[^\n]*\bin[ \t]+(?:\w+\.)?(?:t?range|tqdm)\(|while\b)[^\n]*?\b(?:\w+_)?(?:steps|iters?|iterations|queries)\b",
    re.M | re.I,
)
_CALLED = re.compile(rb"(?<![\w.])(?:self\.)?([A-Za-z_]\w*)[ \t]*\(")
# A step of gradient descent on the weights or on an input: `loss.backward()`, `optimizer.step()`,
# `torch.autograd.grad(loss, [x])`
TRAINING_STEP = re.compile(rb"backward\(|\.step\(|autograd\.grad\(")
# a query of the model's logits (`self.get_logits(x)`, `self.get_diff_logits_grads_batch(x, y)`)
_LOGITS_QUERY = re.compile(rb"\w*logits\w*\s*\(")


def whole_run_per_iteration(loop: Node, data: bytes) -> Optional[str]:
    """`for counter in range(self.n_restarts): best = self.attack_single_run(x, y)`: the name of
    the function of this file (`data`: the whole file) that the loop's body calls and that runs
    its own loop over steps of a model or of gradient descent (`for i in range(self.steps):
    logits = self.model(x)`, `grad = torch.autograd.grad(loss, [x])`), so
    that each iteration of `loop` is a whole run and a read there is once per run; None when the
    loop iterates anything but a `range`, or its body runs a model or a training step itself."""
    if loop.type != "for_statement":
        return None
    iterable = loop.child_by_field_name("right")
    body = loop.child_by_field_name("body")
    if iterable is None or body is None or iterable.type != "call":
        return None
    if (dotted_name(callee(iterable)) or "").split(".")[-1] not in ("range", "trange"):
        return None
    own = body.text or b""
    if _RUNS_A_MODEL.search(own) or TRAINING_STEP.search(own):
        return None
    for name in dict.fromkeys(m.group(1).decode() for m in _CALLED.finditer(own)):
        definition = definition_text(data, name)
        for step_loop in _STEP_LOOP.finditer(definition or b""):
            steps = indented_block(definition or b"", step_loop.start())
            if _RUNS_A_MODEL.search(steps) or TRAINING_STEP.search(steps) or _LOGITS_QUERY.search(steps):
                return name
    return None


# `AutoModel.from_pretrained(name)`, `load_model(path)`, `torch.load(f)`: loading a model or a file
_LOADS = re.compile(rb"\b(from_pretrained|load_model\w*|load_checkpoint|torch\.load|build_model)\s*\(")


# A module loaded, quantized or moved off the device by the loop's own body: `module.load()`,
# `module.quantize(states)`, `gptq.fasterquant(...)`, `layer.cpu()`, `block.to("cpu")`
_LAYER_PASS = re.compile(
    rb"\b((?:\w*(?:module|layer|block)|gptq|quantizer|\w*compressor)\.(?:load|unload|quantize\w*|fasterquant|offload\w*|compress\w*|cpu)"
    rb"|\w*(?:module|layer|block)\.to)\s*\((?:\s*[\"']cpu[\"']\s*\)|(?<!\.to\())"
    # a helper handed the layer: `layer = move_to_device(layers[i], dev)`, `move_to_device(layer, CPU)`
    rb"|\b((?:move_)?to_device|move_to|offload\w*)\s*\(\s*\w*(?:module|layer|block)s?\b",
    re.I,
)


def _processes_each_layer(loop: Node) -> Optional[str]:
    """`while True: module = model.modules[i]; module.load(); module.quantize(x); ...
    module.unload()`: the call by which the loop's own body loads, quantizes or offloads a model's
    layer, so each iteration is a whole layer's work (minutes, in a quantizer) and a wait or an
    `empty_cache()` there is paid once per layer, on purpose; None otherwise."""
    return _own_call(loop, _LAYER_PASS)


def _loads_each_iteration(loop: Node) -> Optional[str]:
    """`for model_id in model_ids: model = AutoModel.from_pretrained(model_id)...`: the name of the
    loader the loop's own body calls (not a nested loop's), so that each iteration loads a model
    or a file and a wait there is small beside it. Not a load under an `if` (`if global_step %
    args.logging_steps == 0: pipe = Pipeline.from_pretrained(...)`): not every iteration's."""
    return _own_call(loop, _LOADS, unconditional=True)


def _own_call(loop: Node, pattern: "re.Pattern[bytes]", unconditional: bool = False) -> Optional[str]:
    """The first group that matched (the whole match for a pattern without groups), of the first
    match of `pattern` in the loop's own body (not a nested loop's; `unconditional`: nor under an
    `if` in the body)."""
    body = loop.child_by_field_name("body")
    if body is None:
        return None
    for match in pattern.finditer(body.text or b""):
        at = body.start_byte + match.start()
        node = body.descendant_for_byte_range(at, at)
        if node is None or repeating_loop(node) != loop:
            continue
        if unconditional and any(a.type == "if_statement" for a in _ancestors_within(node, body)):
            continue
        return next((group for group in match.groups() if group is not None), match.group(0)).decode()
    return None


def _ancestors_within(node: Node, stop: Node) -> Iterator[Node]:
    """The ancestors of `node` below `stop`."""
    for parent in ancestors(node):
        if parent == stop:
            return
        yield parent


# What shows that a loop runs once per training or inference step, for the rules whose call is
# written on purpose (AL101's synchronize, AL300's `empty_cache()`): of 54 such warnings in the first
# runs of eight whole-tree reviews, 47 were deliberate (a warm-up, a layer-by-layer pass, a
# benchmark's configurations, a barrier over the devices), one false and six real; the real ones
# walked batches, took a training step or ran in an optimizer's per-parameter step.
UNKNOWN_STEP = (
    "reported as information: nothing shows that the loop runs once per training or inference step (it walks no "
    "batches and takes no training step), and a set-up, warm-up or per-layer loop pays this only a few times"
)
_WALKS_BATCHES = re.compile(r"batch|loader(?!s)|(?<![A-Za-z])dl\b", re.I)  # not `loaders`: one pass per dataset
_STEP_COUNTER = re.compile(r"^_*(?:\w+_)?(?:step|it|iter|iteration|itr)$", re.I)
# `range(steps)`, `range(self.max_iters)`, `trange(num_train_steps)`, `range(start_step, total_steps)`
_STEP_RANGE = re.compile(r"^t?range\((?:[^()]*,\s*)?[\w.]*(?:steps?|iters|iterations)\)$", re.I)
# A whole generation in the loop's own body (`model.generate(...)`, `model.chat(...)`)
_GENERATES = re.compile(rb"\.(?:generate|chat)\(")
# `range(max_new_tokens)`, `range(self.max_len)`: a decoding loop's tokens
_DECODE_RANGE = re.compile(
    r"^t?range\((?:[^()]*,\s*)?[\w.]*(?:new_tokens|max_len|max_length|gen_len|num_tokens)\)$", re.I
)
_PER_STEP_FUNCTION = re.compile(r"^(?:forward|step|\w+_step)$")  # `training_step`; an optimizer's `step`


def runs_per_step(loop: Node) -> bool:
    """Does `loop` (or a loop around it in its function) show that it runs once per training or
    inference step? It walks batches (`for batch in loader:`, `for i in range(0, n,
    batch_size):`), counts steps (`for step in range(steps):`) or tokens of a decoding loop that
    runs a model (`for _ in range(max_new_tokens):`), runs a whole generation per iteration
    (`model.generate(...)`), runs a model on each chunk of the input,
    takes a training step (`loss.backward()`, `optimizer.step()`), or is in a function
    that a framework calls per step (`forward`, `training_step`, an optimizer's `step`)."""
    if _PER_STEP_FUNCTION.match(function_name(loop)):
        return True
    for current in loops_around(loop):
        if _takes_a_step(current):
            return True
        header = _loop_header(current) or ""
        if _WALKS_BATCHES.search(header):
            return True
        if current.type != "for_statement":
            continue
        target, iterable = current.child_by_field_name("left"), current.child_by_field_name("right")
        if "chunk" in header and (runs_a_model(current) or _INFERS.search(_body_bytes(current))):
            return True
        if infers_per_input(current) or infers_in_chunks(current):
            return True  # `for img_path in input_img_list: out = net(img)`: one inference per input
        if iterable is not None and _DECODE_RANGE.match(text(iterable)) and runs_a_model(current):
            return True  # `for _ in range(max_new_tokens): logits = model(idx)`: one decoding step each
        if _own_call(current, _GENERATES) is not None:
            return True  # `for i in tqdm(range(n)): response = model.generate(...)`: one generation each
        if (target is not None and target.type == "identifier" and _STEP_COUNTER.match(text(target))) or (
            iterable is not None and _STEP_RANGE.match(text(iterable))
        ):
            return True
    return False


def infers_per_input(loop: Node) -> bool:
    """Does `loop` walk the inputs of an inference one by one and run a model on each (`for
    filename in filenames: pred = model(load(filename))`)?"""
    return loop.type == "for_statement" and _walks_inputs(loop) and runs_a_model(loop)


def _walks_inputs(loop: Node) -> bool:
    """Does the `for` loop walk the inputs of an inference, one by one: files, images, frames,
    faces (`for i, img_path in enumerate(input_img_list):`, `for path in glob(...)`, `for idx,
    cropped_face in enumerate(helper.cropped_faces):`)?"""
    target, iterable = loop.child_by_field_name("left"), loop.child_by_field_name("right")
    names = [target] if target is not None and target.type == "identifier" else []
    if target is not None and target.type in ("pattern_list", "tuple_pattern"):
        names = [c for c in target.named_children if c.type == "identifier"]
    if any(_INPUT_NAME.search(text(n)) for n in names):
        return True
    return iterable is not None and _LISTS_FILES.search(text(iterable)) is not None


_INPUT_NAME = re.compile(r"(?:^|_)(?:img|image|file|path|frame|face|video|wav|audio|photo)(?:_?path|_?name)?$", re.I)
_LISTS_FILES = re.compile(r"\bglob\(|\blistdir\(|\bscandir\(|\biterdir\(")


def steps_or_runs_a_model(loop: Node) -> bool:
    """Does `loop` run once per step (`runs_per_step`), or does it or a loop around it run a model
    (a validation pass, a generation loop)? Then what it does per iteration is paid per batch,
    however rarely its function runs."""
    return runs_per_step(loop) or any(runs_a_model(current) for current in loops_around(loop))


def walks_batches(loop: Node) -> bool:
    """Does `loop`, or a loop around it in its function, walk batches (`for batch in loader:`,
    `for x, y in tqdm(test_dl):`)?"""
    return any(_WALKS_BATCHES.search(_loop_header(current) or "") for current in loops_around(loop))


def loops_around(loop: Node) -> Iterator[Node]:
    """`loop`, then each loop around it in its function that repeats it."""
    current: Optional[Node] = loop
    while current is not None:
        yield current
        current = repeating_loop(current)


def _takes_requests(loop: Node) -> Optional[str]:
    """The queue of requests a serving loop takes one from per iteration, as its own statement
    (`cap, steps, seed = request_queue.get()` in a demo's worker): each iteration answers a
    person's request, at their pace, not a training or decoding step."""
    body = loop.child_by_field_name("body")
    if loop.type != "while_statement" or body is None or b".get(" not in (body.text or b""):
        return None
    for statement in body.named_children:
        found = _REQUEST_TAKEN.search(statement.text or b"") if statement.type == "expression_statement" else None
        if found is not None:
            return found.group(1).decode()
    return None


_REQUEST_TAKEN = re.compile(rb"^[\w\s,()\[\]]*=\s*((?:self\.)?\w*(?:request|queue)\w*)\.get\(\s*\)", re.I)


def _after_the_training_loop(loop: Node) -> Optional[int]:
    """The line of the training loop of the function around `loop` when `loop` comes after it, in
    no loop itself, and walks no batches and runs no model (litgpt's `fit` all-reduces its token
    counts once its steps are done: `for key in token_counts: total.item()`); None otherwise."""
    if repeating_loop(loop) is not None or _hot_items(loop):
        return None
    function = next((a for a in ancestors(loop) if a.type == "function_definition"), None)
    stepping = step_loop(function) if function is not None else None
    return stepping.start_point[0] + 1 if stepping is not None and stepping.end_byte <= loop.start_byte else None


def _walks_a_mapping(loop: Node) -> bool:
    """Is `loop` a `for` over the entries of a dict (`for k, v in outputs.items():`)?"""
    iterable = loop.child_by_field_name("right") if loop.type == "for_statement" else None
    return (
        iterable is not None
        and iterable.type == "call"
        and method_name(iterable) in ("items", "keys", "values")
        and not arguments(iterable)[0]
    )


def _walks_batches(loop: Node) -> bool:
    """Does `loop` walk the batches of a loader (`for data, target in test_loader:`)?"""
    header = _loop_header(loop)
    return header is not None and loop.type == "for_statement" and bool(_WALKS_BATCHES.search(header))


def _loop_header(loop: Node) -> Optional[str]:
    """What a loop walks, as written: `for batch in loader` (a comprehension's first `for`
    clause); None for a `while` loop."""
    if loop.type == "for_statement":
        target, iterable = loop.child_by_field_name("left"), loop.child_by_field_name("right")
        return f"for {text(target) if target is not None else ''} in {text(iterable) if iterable is not None else ''}"
    clause = next((c for c in loop.named_children if c.type == "for_in_clause"), None)
    return text(clause) if clause is not None else None


def on_purpose_reason(call: Node, loop: Node) -> Optional[tuple[str, bool]]:
    """For a call written on purpose (a synchronize, an `empty_cache()`) that runs on every
    iteration of `loop`: why it is information (and whether the reason is an option the user
    turned on: `if self.cpu_cache:`), or None when the loop shows a training or inference step."""
    option = opt_in_option(call)
    if option is not None:
        return f"only when `{option}` is set, an option that asks for it", True
    if not runs_per_step(loop):
        return UNKNOWN_STEP, False
    return None


def _takes_a_step(loop: Node) -> bool:
    """Does the loop's body take an optimizer step or call `backward()` (not `torch.autograd.grad`,
    a calibration's Hessian-vector product, or any `.step(`, as `in_training_loop` counts)?"""
    body = loop.child_by_field_name("body")
    return body is not None and (steps_optimizer(body) or b"backward(" in (body.text or b""))


def in_training_loop(loop: Node) -> bool:
    """Does this loop, or a loop around it in the same function, call `backward()` or `.step()`?
    (`for key, value in masks.items():` inside the batch loop of a training step.) In a loop
    around it, a step taken in another loop does not count: the validation loop beside the
    training loop inside `for epoch in ...:` takes no step."""
    inside = loop
    for current in loops_around(loop):
        body = current.child_by_field_name("body")  # (a comprehension has none: it takes no step)
        if body is not None and TRAINING_STEP.search(body.text or b""):
            others = [] if current is loop else [inner for inner in _loops_in(body) if not within(inside, inner)]
            if TRAINING_STEP.search(_SCHEDULER_STEP.sub(b"", _without(body, others))):
                return True
        inside = current
    return False


# A learning-rate scheduler's step (`scheduler.step()`, `lr_sched.step(val_loss)`): once per epoch
# or per step, but no training step of its own (not a diffusion scheduler's sampling step,
# `self.scheduler.step(noise_pred, t, latents)`: that is the step of an inference loop)
_SCHEDULER_STEP = re.compile(rb"\w*sched\w*\s*\.\s*step\s*\([^,()]*\)", re.I)


_INFERS = re.compile(rb"\.(?:infer|predict)\w*\(")  # `self.infer(speaker, chunk)`: a model's inference


def _body_bytes(loop: Node) -> bytes:
    body = loop.child_by_field_name("body")
    return (body.text or b"") if body is not None else b""


# `if self.cpu_cache:`, `if args.empty_cache_after_prefix and torch.cuda.is_available():`: an option
# that asks for the memory to be freed (or the device waited for) on each iteration
_OPTION_WORDS = re.compile(r"cache|mem|offload|sync|profil|debug|verbose|low_?vram", re.I)
_OPTION_PART = re.compile(r"^(?:not\s+)?[A-Za-z_][\w.]*(?:\(\))?$")
_KV_CACHE_SWITCH = re.compile(r"(?:^|[\s.])(?:use_(?:kv_)?cache|kv_cache)\b", re.I)


def debug_option(node: Node) -> Optional[str]:
    """The condition of an `if` around `node` in its function that is a flag for debugging or
    logging (`if self.log_loss_info:`, `if debug:`, `if not self.verbose:` is not one): work done
    only when the user asks for those logs; None otherwise."""
    return _option_around(node, lambda words: bool(_FLAG.match(words) and _DEBUG_WORDS.search(words)))


_FLAG = re.compile(r"^[A-Za-z_][\w.]*$")  # (a bare flag: `self.log_loss_info`, `debug`)
# An environment variable that turns on debugging output, read in the condition
_DEBUG_ENVIRONMENT = re.compile(
    r"\b(?:os\.)?(?:getenv|environ\.get|environ\s*\[)\s*\(?\s*[\"'][A-Z0-9_]*(?:DEBUG|_LOG\b|LOGGING|PROFIL|PROBE|TRACE|VERBOSE)"
)
_DEBUG_WORDS = re.compile(r"debug|verbose|profil|(?:^|[._])log(?:_|$)", re.I)


def opt_in_option(node: Node) -> Optional[str]:
    """The condition of an `if` around `node` in its function that is an option asking for this
    work (`if self.cpu_cache:`, around the call or its loop): the call runs only when the user
    turned it on; None otherwise."""

    def asks(words: str) -> bool:
        parts = [part.strip() for part in re.split(r"\band\b", words)]
        if _KV_CACHE_SWITCH.search(words):
            return False  # (`if use_cache:` switches a decoder's key-value cache: no option for a wait)
        return all(_OPTION_PART.match(part) for part in parts) and bool(_OPTION_WORDS.search(words))

    return _option_around(node, asks)


def _option_around(node: Node, accepted: Callable[[str], bool]) -> Optional[str]:
    """The condition, on one line, of the innermost `if` around `node` in its function whose body
    holds `node` and whose condition `accepted` takes; None when there is none."""
    child = node
    for parent in ancestors(node):
        if parent.type in SCOPE_TYPES:
            return None
        if parent.type == "if_statement" and parent.child_by_field_name("consequence") == child:
            condition = parent.child_by_field_name("condition")
            words = " ".join(text(condition).strip("()").split()) if condition is not None else ""
            if accepted(words):
                return words
        child = parent
    return None
