"""AL302 create-then-move: a tensor created on the CPU and then moved (`torch.randn(...).to(device)`).

What it does:
    Flags a move (`.to(...)`, `.cuda()`, `.type_as(other)`) of a tensor that a torch factory —
    `torch.randn`, `rand`, `randint`, `randperm`, `zeros`, `ones`, `empty`, `full`, `arange`,
    `linspace`, `logspace`, `eye` — or a legacy typed constructor given sizes
    (`torch.FloatTensor(n, d)`, `torch.Tensor(self.beam_size)`: one argument counts as a size
    when it is a number, `x.size()`, `len(x)`, `x.shape[0]`, a name spelled as a size (not the
    extent of a cell of space, `voxel_size`, `grid_size`: vectors of values) or arithmetic of
    those: not `1 - done`, an array of data) made on the CPU, with no `device=` argument of its own. The move
    may be called on the factory's call (`torch.zeros(n).to(device)`) or after shape, cast, fill
    and arithmetic steps that stay on the CPU (`(torch.arange(b) * k).unsqueeze(1).to(device)`,
    `(1 - torch.eye(n)[None]).to(x.device)`, `(torch.arange(n) <= i).to(device)`,
    `torch.triu(torch.ones(n, n)).to(device)`, `torch.FloatTensor(n, d).uniform_(0, 1).cuda()`); not on a name bound to the factory's
    result on an earlier line (`order = torch.arange(b)`, then `order = order.to(device)`).

    The target must be a device: a string, `torch.device(...)`, a call of a function spelled as
    returning one (`get_model_device(model)`, `get_device()`, `current_device()`), a name or
    attribute spelled `device`, `dev` or `*_device` (`x.device`, `self.device`), or another
    tensor (`.to(scores)`, `.type_as(tokens)`: its device and dtype) that the function uses as a
    tensor (`scores.size(0)`, `scores.device`, ...) and does not know to be on the CPU (`inv_freq =
    1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))` is: a CUDA operand would raise). Not
    flagged: `.to(dtype)`, `.to(x.dtype)`, a target that may not be a device or a tensor,
    `.to("cpu")`, `.to("meta")` (no data is copied), a factory with a size of 0 (nothing to
    copy), `*_like` factories (they inherit the device of their input), a factory with
    `generator=` (a generator lives on one device: a CPU generator needs the CPU tensor) or
    `pin_memory=`, a move to a parameter that defaults to `None` when the file calls the
    function and no call hands it a device (`def __init__(self, dim, device=None)` built as `RotaryEmbedding(dim)`:
    `.to(None)` copies nothing), a move in the branch taken off CUDA (the `else` of `if x.is_cuda:`, of
    `if x.device.type == "cuda":`, of `if torch.cuda.is_available():`), a move to a device that is not written as CUDA (`.to(x.device)`) in a file
    that runs eager-mode quantized kernels (`torch.nn.quantized`, `torch.ops.quantized`: CPU
    only, so `x` is on the CPU), a move inside a lambda handed to `torch.jit.trace` (traced once to read a
    device constant off the graph, as CLIP's loader does), `torch.tensor(data)` / `torch.as_tensor(data)` and a typed constructor given
    data (`torch.LongTensor(ids)`: the data comes from the host either way: `device=` does the
    same host fill and copy).

    The finding is on the factory's line when the move is written on another line. It is a
    warning where the copy is paid per step: in a loop, in `forward`, in a function called from
    anywhere. Where it is paid once it is information, and the message says how often: a test's
    set-up (a `test_*` function, a pytest fixture, a module-level function the file uses only in
    its tests, such as a worker a test hands to `mp.Process`), the `__init__` of a class with a
    base (a module, an optimizer, a dataset: not a plain object that code may build per item, a
    beam, a hypothesis, a mask such as `class TriangularCausalMask():` built in each forward),
    `main()` or the function a command runs (`fire.Fire(sample)`, `typer.run(name)`), another
    set-up function (`_init_weights`, `setup`, `load_*`, `save`, `export`,
    `plot`, `populate_*`), a hook a trainer runs once per epoch or run (`on_train_start`,
    `on_validation_epoch_end`), module-level code, a loop's iteration that only some pass (`if len(state) == 0:`
    creates an optimizer's state on its first step, also in a per-parameter step function with no loop;
    `if key not in self.cache:` fills a cache once per key), a call that a modulus lets through (`if
    batch_idx % self.frequency == 0:`, or an early `if (step - 1) % every != 0: return`), a
    debugging or logging flag (`if self.log_loss_info:`), the `compute`, `reset` or `results` of a
    metric (a class that also has an `update`: once per evaluation), the `forward` of an
    `autograd.Function` that also defines `symbolic` (an ONNX export stub: once per export), the
    fallback of a NaN or inf check (`if torch.isnan(self.K).any(): self.K = torch.eye(n).to(...)`),
    a helper spelled as a forward that only `__init__` calls (`self.width = self._dummy_forward(n)`:
    a shape probe), a function whose result is cached (`@lru_cache`, `@functools.cache`: once per
    distinct call), the code outside the loops of an evaluation (`evaluation(model, data_loader)`,
    `validate`, `eval_one_epoch`: once per evaluation), a module-level function of a file that
    serves a web app (it imports Gradio, FastAPI, Flask or Streamlit) outside its loops: once per
    user request, or the
    code of a function before its own loop that takes training steps (a fit's labels, made once
    and reused in every step; not before a loop that only counts iterations, as Sinkhorn's, which
    runs inside its caller's step).

    Quick fix, offered only in the simple, safe cases: the move is called on the factory's call,
    the factory has no `device=` and no `**kwargs`, it is not a random draw (`randn`, `rand`,
    `randint`, `randperm`) after its function (or a function it is nested in, or the module's own
    code above that function: a test file's `torch.manual_seed(3)`) seeds the default
    generators (`torch.manual_seed(...)`, `seed_everything(...)`, `set_seed(...)`, a project's
    helper spelled so, `set_random_seed(42)`, `init_seeds(...)`, `fix_seed(...)`, or a call of a
    module-level function of the file that does, `_init_env(rank)`, or a caller in the file seeds
    before it calls the function, `torch.manual_seed(seed)` then `generate(...)`: the GPU's generator gives other numbers for the
    same seed; in a unit test, which compares with numbers drawn before, such a draw is
    information), and the move is `.cuda()` with no arguments,
    or `.to(X)` / `.to(device=X)` with nothing else (no dtype, no `non_blocking`, no `copy`). It
    rewrites `torch.randn(2, 3).to(device)` to `torch.randn(2, 3, device=device)` and
    `torch.zeros(4).cuda()` to `torch.zeros(4, device="cuda")`, keeping the factory's arguments
    and comments as written. A move to another tensor (`torch.zeros(n).to(scores)`) becomes
    `torch.zeros(n, dtype=scores.dtype, device=scores.device)` only for `zeros`, `ones` and
    `empty` given their sizes alone (the others fill by dtype: `randn` has no integer form).

Why it matters:
    The tensor is first filled on the CPU, then copied to the GPU: two allocations, a
    host-to-device copy and CPU time for the fill, where creating it on the device costs one
    kernel. Lint only: the engine does not report it.

Example:
    noise = torch.randn(batch, dim).to(device)

Fix:
    Create it where it is used: `torch.randn(batch, dim, device=device)`. A legacy typed
    constructor rejects a CUDA `device=` ("legacy constructor expects device type: cpu"), so
    `torch.LongTensor(n, m).to(device)` becomes `torch.empty(n, m, dtype=torch.int64,
    device=device)`, the same uninitialized tensor (`torch.Tensor(n)`: `torch.empty(n,
    device=device)`, in the default dtype).
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.callers import built_per_item, metric_compute, rare_callers
from atenlens.lint.context import LintContext
from atenlens.lint.dataflow import scope_for
from atenlens.lint.findings import Finding, Fix, TextEdit
from atenlens.lint.frequency import (
    SET_UP_FUNCTION,
    data_pass,
    debug_option,
    early_exit_throttle,
    enclosing_test,
    epoch_hook,
    evaluation_pass,
    frequency,
    function_name,
    in_a_test,
    in_unit_test_class,
    lazily_initialized,
    memoized,
    on_nonfinite_path,
    periodic_throttle,
    sampling_loop,
    shown,
    step_loop,
    steps_or_runs_a_model,
)
from atenlens.lint.provenance import (
    DTYPE_NAMES,
    VIEW_METHODS,
    Device,
    class_text,
    device_of,
    is_clear_device,
    is_dtype,
    makes_an_empty_tensor,
    module_constant,
    names_the_cpu,
    on_host_branch,
    parameter_default,
    seeding_calls,
    seeding_functions,
    string_value,
    to_device_argument,
)
from atenlens.lint.registry import Rule
from atenlens.lint.source import ancestors
from atenlens.lint.syntax import (
    arguments,
    callee,
    definition_holder,
    dotted_name,
    has_splat,
    method_name,
    receiver,
    repeating_loop,
    strip_parens,
    text,
)

# Not `torch.tensor` / `torch.as_tensor`: their data comes from the host either way, and
# `device=` does the same host fill and copy, so there is nothing to gain.
FACTORIES = frozenset(
    {"randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye"}
)
# Factories that draw from a generator: the CPU's and a GPU's give different numbers for one seed.
RANDOM_FACTORIES = frozenset({"randn", "rand", "randint", "randperm"})


# Eager-mode int8 kernels (`torch.ops.quantized.*`, `torch.nn.quantized` / `torch.ao.nn.quantized`
# modules and functions): fbgemm / qnnpack / onednn, on the CPU only
_EAGER_QUANTIZED = re.compile(rb"\bops\.quantized\.|\bnn\.quantized\b|\bquantized\.functional\b")


def _eager_quantized_file(ctx: LintContext) -> bool:
    """Does the file run eager-mode quantized kernels, which exist only for the CPU? Then the
    tensors whose device it follows (`.to(x.device)`) are on the CPU, and such a move copies
    nothing."""
    return _EAGER_QUANTIZED.search(ctx.source.whole_data) is not None


def _names_cuda(device: Node) -> bool:
    """`"cuda"`, `"cuda:0"`, `torch.device("cuda", 0)`: a device written as a GPU."""
    return b"cuda" in (device.text or b"")


def _none_unless_given(ctx: LintContext, device: Node) -> bool:
    """`def __init__(self, dim, device=None): ... torch.arange(0, dim, 2).to(device)`, where no call
    in the file hands the function a device (`RotaryEmbedding(head_dim, base=theta)`): `.to(None)`
    copies nothing, and the tensor stays on the CPU, where the module's `.to(...)` moves it later
    with the rest."""
    device = strip_parens(device)
    if device.type != "identifier" or ctx.bindings(device).at(text(device), device.start_byte) is not None:
        return False
    function = next((a for a in ancestors(device) if a.type == "function_definition"), None)
    default = parameter_default(function, text(device)) if function is not None else None
    if function is None or default is None or default.type != "none":
        return False
    title = function.child_by_field_name("name")
    called = text(title) if title is not None else ""
    if called == "__init__":
        holder = next((a for a in ancestors(function) if a.type == "class_definition"), None)
        called = text(holder.child_by_field_name("name") or holder) if holder is not None else ""
    # the calls (not the `def` or `class` line): at least one, none handing a device (with no call
    # in the file, callers elsewhere decide)
    calls = re.compile(rb"(?<![\w])(?<!def )(?<!class )" + re.escape(called.encode()) + rb"\(([^)\n]*)")
    given = [re.search(rb"\bdev", m.group(1)) is not None for m in calls.finditer(ctx.source.whole_data)]
    return bool(given) and not any(given)


def _seeded_before(ctx: LintContext, move: Node) -> bool:
    """Are the default generators seeded before `move`, in its own function or in the module's
    own code above that function (in a script's module-level code: anywhere above it)? A seed set
    elsewhere (another test, a `__main__` block that runs the tests) says nothing of what this
    draw must give."""
    # (the outermost function: `run_model` seeds, then its nested `run_epochs` draws)
    function = next((a for a in reversed(list(ancestors(move))) if a.type == "function_definition"), None)
    data = ctx.source.whole_data
    if function is None:
        return bool(seeding_calls(data, 0, move.start_byte))
    if seeding_calls(data, function.start_byte, move.start_byte):
        return True
    # `torch.manual_seed(3)` in the module's own code above the function (a test file's seed, set
    # when the module is loaded, before any of its functions draws)
    if any(at == 0 or data[at - 1] == 0x0A for at in seeding_calls(data, 0, function.start_byte)):
        return True
    # `generate_image(...)`: `torch.manual_seed(seed)`, then `generate(...)` that draws: a caller in
    # this file seeds before it calls the function
    title = function.child_by_field_name("name")
    holder = definition_holder(function)
    if title is not None and holder is not None and holder.type == "module":
        for use in ctx.function_uses(text(title)):
            caller = next((a for a in ancestors(use) if a.type == "function_definition"), None)
            if use != title and caller is not None and seeding_calls(data, caller.start_byte, use.start_byte):
                return True
    # `_init_bagua_env(rank, env)` above the draw: a function of this file that seeds them
    seeding = seeding_functions(ctx)
    return bool(seeding) and any(
        m.group(1).decode() in seeding for m in _CALLED_NAME.finditer(data, function.start_byte, move.start_byte)
    )


_CALLED_NAME = re.compile(rb"(?<![\w.])([A-Za-z_]\w*)[ \t]*\(")


def _entry_point(ctx: LintContext, name: str) -> bool:
    """Is the module-level function `name` the script's command (`Fire(sample)`,
    `fire.Fire(main_fn)`, `typer.run(name)`): run once per invocation, as `main` is?"""
    if not name or not re.fullmatch(r"[A-Za-z_]\w*", name):
        return False
    handed = rb"\b(?:Fire|typer\.run)\(\s*" + re.escape(name.encode()) + rb"\s*[,)]"
    return re.search(handed, ctx.source.whole_data) is not None


# Legacy typed constructors: given sizes they allocate on the CPU like `torch.empty`; given data
# (`torch.LongTensor(ids)`) they copy it from the host, as `torch.tensor` does (left out).
TYPED_CONSTRUCTORS = frozenset(
    {"Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor"}
    | {"ByteTensor", "CharTensor", "BoolTensor"}
)
# What `torch.empty` needs to make the same tensor as a legacy typed constructor, which rejects a
# device other than the CPU ("legacy constructor expects device type: cpu"): `torch.Tensor` takes
# the default dtype, as `torch.empty` does.
_TYPED_DTYPES = {
    "Tensor": None,
    "FloatTensor": "torch.float32",
    "DoubleTensor": "torch.float64",
    "HalfTensor": "torch.float16",
    "BFloat16Tensor": "torch.bfloat16",
    "LongTensor": "torch.int64",
    "IntTensor": "torch.int32",
    "ShortTensor": "torch.int16",
    "ByteTensor": "torch.uint8",
    "CharTensor": "torch.int8",
    "BoolTensor": "torch.bool",
}
# Steps that leave a CPU tensor on the CPU: views, casts, in-place fills, copies, elementwise math.
_HOST_STEPS = VIEW_METHODS | (
    {"repeat", "clone", "float", "double", "half", "long", "int", "bool", "byte", "flip", "roll"}
    | {"uniform_", "normal_", "fill_", "zero_", "random_", "bernoulli_", "exponential_", "triu", "tril"}
    | {"triu_", "tril_", "mul", "mul_", "add", "add_", "sub", "sub_", "div", "div_", "neg", "exp", "cumsum", "cumprod"}
    | {"pow", "pow_", "sqrt", "rsqrt", "log", "abs", "square", "reciprocal", "clamp", "clamp_", "sin", "cos"}
)
# torch functions of CPU tensors that give a CPU tensor (`torch.triu(torch.ones(n, n))`): the same
# steps written as functions, and those of several tensors
_HOST_FUNCTIONS = _HOST_STEPS | {"outer", "cartesian_prod"}
# A move to another tensor is rewritten only for these: they make the same values in any dtype.
_DTYPE_FREE = frozenset({"zeros", "ones", "empty"})
# What a function does only with a tensor: `scores.size(0)`, `tokens.device`, `x = torch.cat(...)`.
_TENSOR_USE = (
    r"\s*\.\s*(?:size|shape|device|dtype|new_\w+|dim|ndim|numel|view|reshape|unsqueeze|squeeze|masked_fill_?"
    r"|eq|ne|gt|lt|ge|le|sum|mean|argmax|contiguous|transpose|permute|expand|repeat|index_select|gather"
    r"|scatter_?|float|long|half|clone|detach|type_as)\b|\s*=(?!=)\s*torch\.(?!(?:"
    # (`self.qtype = torch.float8_e4m3fn`: a dtype, so `.to(self.qtype)` is a cast)
    + "|".join(sorted(DTYPE_NAMES))
    + r")\b(?!\s*\())|\s*:\s*(?:torch\.)?Tensor\b"
)
# Trigger bytes (triggers.py), from the checks below: the factory is the attribute `<factory>` of
# the name `torch`; the move an attribute `to`, `cuda` or `type_as` of a call (maybe in brackets)
# or of a subscript of one, so right after a closing bracket; between the tokens only spaces, line breaks, backslashes and
# comments (a comment runs to its line's end: matched one way only, so a banner of `#`s cannot
# make the search backtrack exponentially). A definition whose only moves are of names
# (`x.to(device)`) is not kept for this rule: a factory bound to a name and moved on a later
# line (`order = torch.arange(b)`, then `order = order.to(device)`) is left out, as a trigger for
# it kept a tenth more of the tree's bytes for a few findings.
_GAP = rb"(?:\s|\\|#[^\n]*(?![^\n]))*"
FACTORY_CALL = re.compile(
    rb"torch"
    + _GAP
    + rb"\."
    + _GAP
    + rb"(?:(?:"
    + b"|".join(sorted(map(str.encode, FACTORIES)))
    + rb")\b|(?:"
    + b"|".join(sorted(map(str.encode, TYPED_CONSTRUCTORS)))
    + rb")\s*\()"  # (called: `x: torch.Tensor` annotates, it makes nothing)
)
MOVE = re.compile(rb"[)\]]" + _GAP + rb"\." + _GAP + rb"(?:to|cuda|type_as)\b")  # (`torch.randperm(n)[:k].to(d)`)


def _factory(node: Optional[Node]) -> Optional[Node]:
    """The factory call itself, or None."""
    if node is None:
        return None
    node = strip_parens(node)
    if node.type != "call":
        return None
    name = dotted_name(callee(node)) or ""
    parts = name.split(".")
    if len(parts) != 2 or parts[0] != "torch":
        return None
    if parts[1] in FACTORIES:
        return None if makes_an_empty_tensor(node) else node
    if parts[1] in TYPED_CONSTRUCTORS and _given_sizes(node):
        return node
    return None


def _given_sizes(call: Node) -> bool:
    """`torch.FloatTensor(n, d)`, `torch.FloatTensor(4)`, `torch.LongTensor(x.size())`: sizes, not
    data (a single name may be a list of values: `torch.LongTensor(ids)` is left out)."""
    positional, keywords = arguments(call)
    if keywords or not positional:
        return False
    if any(arg.type in ("list", "tuple", "list_comprehension", "generator_expression") for arg in positional):
        return False
    if len(positional) > 1:
        return True
    (only,) = positional
    return _a_size(only)


def _a_size(node: Node, depth: int = 0) -> bool:
    """Is `node` written as a size: a number, `x.size()`, `len(x)`, `x.shape[0]`, a name spelled as
    a size (`self.beam_size`, `num_rows`), or arithmetic of those (`n * k`, `x.size() + (n,)`)?
    `1 - done` is data: `done` (a NumPy array from `env.step`) is not spelled as a size, and
    `[0.0] * n` is a list of values."""
    node = strip_parens(node)
    if depth > 8:
        return False
    if node.type == "binary_operator":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        return left is not None and right is not None and _a_size(left, depth + 1) and _a_size(right, depth + 1)
    if node.type == "tuple":
        return all(_a_size(part, depth + 1) for part in node.named_children)
    if node.type == "integer" or (node.type == "call" and method_name(node) == "size"):
        return True
    if node.type == "call" and dotted_name(callee(node)) == "len":
        return True
    if node.type == "subscript":
        value = node.child_by_field_name("value")
        return value is not None and (dotted_name(value) or "").split(".")[-1] == "shape"
    name = dotted_name(node)  # `torch.Tensor(self.beam_size)`, `torch.LongTensor(num_rows)`: spelled as a size
    return (
        name is not None
        and _SIZE_NAME.search(name.split(".")[-1]) is not None
        and _SPATIAL_EXTENT.search(name.split(".")[-1]) is None
        and not _a_list(node, name)
        and not _data_parameter(node, name)
    )


def _data_parameter(node: Node, name: str) -> bool:
    """Is `name` a parameter of the function around `node` whose default is a list or tuple of
    values, or a float (`voxel_size: Tuple = (.05, .05, .1)`): data, whatever its spelling (the
    legacy constructor copies it; `torch.empty(voxel_size)` would raise)?"""
    function = next((a for a in ancestors(node) if a.type == "function_definition"), None)
    default = parameter_default(function, name) if function is not None else None
    if default is None:
        return False
    default = strip_parens(default)
    return default.type == "float" or (
        default.type in ("tuple", "list") and any(part.type != "integer" for part in default.named_children)
    )


def _a_list(node: Node, name: str) -> bool:
    """Is `name` a list in the function around `node` (`lens = []`, `lens.append(n)`): the lengths
    of a batch's items are data, whatever the spelling (`torch.LongTensor(reference_mel_len)`)?"""
    scope = next((a for a in ancestors(node) if a.type == "function_definition"), None)
    source = (scope.text if scope is not None else None) or b""
    word = re.escape(name.encode())
    return re.search(rb"(?<![\w.])" + word + rb"\s*(?:=\s*\[|\.(?:append|extend)\()", source) is not None


_SIZE_NAME = re.compile(r"size|^n_|^num_|_len$|^length$|_count$|^dim$", re.I)
# The extent of a cell of space in point-cloud and grid code (`voxel_size = [0.1, 0.1, 0.15]`,
# `grid_size = np.array([1408, 1600, 40])`): a vector of values, not the size of a new tensor
_SPATIAL_EXTENT = re.compile(r"voxel|grid|pixel", re.I)


def _host_made(node: Optional[Node], depth: int = 0) -> Optional[Node]:
    """The factory whose CPU tensor `node` is: the factory's call, or steps from it that stay on
    the CPU (`torch.arange(b).view(-1, 1)`, `torch.arange(b) * k`, `.uniform_(0, 1)`)."""
    if node is None or depth > 12:
        return None
    node = strip_parens(node)
    if node.type == "call":
        factory = _factory(node)
        if factory is not None:
            return factory
        name = dotted_name(callee(node)) or ""
        if name.startswith("torch.") and name[len("torch.") :] in _HOST_FUNCTIONS:
            # `torch.triu(torch.ones(n, n))`, `torch.cartesian_prod(torch.arange(a), torch.arange(b))`
            positional, _ = arguments(node)
            made = [_host_made(p, depth + 1) for p in positional]
            return made[0] if made and all(m is not None for m in made) else None
        return _host_made(receiver(node), depth + 1) if method_name(node) in _HOST_STEPS else None
    if node.type == "subscript" and all(
        i.type in ("slice", "integer", "ellipsis", "none") for i in node.children_by_field_name("subscript")
    ):
        # `torch.arange(0, d, 4)[: d // 4]`, `torch.eye(n)[None]`: a view
        return _host_made(node.child_by_field_name("value"), depth + 1)
    left: Optional[Node]
    right: Optional[Node]
    if node.type == "comparison_operator" and len(node.named_children) == 2:
        left, right = node.named_children  # `(torch.arange(n) <= i).to(device)`: a mask made on the CPU
    elif node.type == "binary_operator":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    else:
        return None
    for tensor, other in ((left, right), (right, left)):
        if other is not None and (other.type in ("integer", "float") or dotted_name(other) is not None):
            found = _host_made(tensor, depth + 1)
            if found is not None:
                return found
    return None


def _tensor_target(ctx: LintContext, move: Node) -> Optional[Node]:
    """The tensor whose device and dtype the move takes: `.type_as(tokens)`, or `.to(scores)` when
    the function uses `scores` as a tensor; None when it is on the CPU or not known as a tensor."""
    positional, keywords = arguments(move)
    if len(positional) != 1 or "device" in keywords or "dtype" in keywords:
        return None
    (target,) = positional
    name = dotted_name(strip_parens(target))
    if name is None or is_dtype(target) or device_of(ctx, target) is Device.CPU:
        return None
    if method_name(move) == "type_as":
        return target
    scope = scope_for(move)
    used = re.compile(r"(?<![\w.])" + re.escape(name) + "(?:" + _TENSOR_USE + ")")
    return target if used.search(text(scope)) else None


def _fix(ctx: LintContext, move: Node, factory: Node, tensor: Optional[Node]) -> Optional[Fix]:
    positional, keywords = arguments(move)
    if tensor is not None:
        name = (dotted_name(callee(factory)) or "").split(".")[-1]
        if name not in _DTYPE_FREE or arguments(factory)[1] or has_splat(move) or keywords:
            return None
        new_keywords = f"dtype={text(tensor)}.dtype, device={text(tensor)}.device"
    elif method_name(move) == "cuda":
        if positional or keywords or has_splat(move):
            return None
        new_keywords = 'device="cuda"'
    else:
        device = to_device_argument(move)
        if device is None or has_splat(move) or len(positional) + len(keywords) != 1:
            return None
        new_keywords = f"device={text(device)}"
    args = factory.child_by_field_name("arguments")
    if args is None or args.type != "argument_list" or any(c.type == "ERROR" for c in args.children):
        return None
    if any(c.type == "dictionary_splat" for c in args.named_children):
        return None
    if strip_parens(receiver(move) or factory) != factory or receiver(move) != factory:
        return None  # `(torch.randn(3)).to(d)`: keep it simple, no rewrite
    if text(args.children[-1]) != ")":
        return None
    inner = ctx.source.data[args.start_byte + 1 : args.end_byte - 1].decode("utf-8", errors="surrogatepass")
    stripped = inner.rstrip()
    if not stripped:
        new_args = new_keywords
    elif stripped.endswith(","):
        new_args = f"{stripped} {new_keywords}"
    elif "#" in stripped.splitlines()[-1]:
        return None  # a trailing comment would swallow the new argument
    else:
        new_args = f"{stripped}, {new_keywords}"
    factory_head = ctx.source.data[factory.start_byte : args.start_byte].decode("utf-8", errors="surrogatepass")
    constructor = (dotted_name(callee(factory)) or "").split(".")[-1]
    if constructor in _TYPED_DTYPES:
        # `torch.LongTensor(n, m, device="cuda")` raises: the same tensor is `torch.empty(n, m,
        # dtype=torch.int64, device="cuda")`
        dtype = _TYPED_DTYPES[constructor]
        new_keywords = new_keywords if dtype is None else f"dtype={dtype}, {new_keywords}"
        new_args = f"{stripped.rstrip(',')}, {new_keywords}"
        factory_head = factory_head[: factory_head.rindex(constructor)] + "empty"
        new_keywords = f"torch.empty(..., {new_keywords})"
    line, col = ctx.source.position(move.start_point)
    end_line, end_col = ctx.source.position(move.end_point)
    return Fix(
        title=f"Create the tensor on the device (`{new_keywords}`)",
        edits=(TextEdit(line, col, end_line, end_col, f"{factory_head}({new_args})"),),
    )


def _traced_for_a_constant(move: Node) -> bool:
    """`torch.jit.trace(lambda: torch.ones([]).to(torch.device(device)), example_inputs=[])`: a
    tensor traced once to read the device constant off the graph (CLIP's device patch); the
    traced program is never run for its values."""
    for node in ancestors(move):
        if node.type == "lambda":
            holder = node.parent
            call = holder.parent if holder is not None and holder.type == "argument_list" else None
            return call is not None and (dotted_name(callee(call)) or "").endswith("jit.trace")
        if node.type in ("function_definition", "class_definition"):
            return False
    return False


def check(ctx: LintContext) -> Iterator[Finding]:
    for move in ctx.calls("to", "cuda", "type_as"):
        method = method_name(move)
        if method not in ("to", "cuda", "type_as"):
            continue
        factory = _host_made(receiver(move))
        if factory is None or _traced_for_a_constant(move) or on_host_branch(move):
            continue  # (the `else` of `if weights.is_cuda:` runs where there is no GPU to copy to)
        factory_keywords = arguments(factory)[1]
        if "device" in factory_keywords or "generator" in factory_keywords or "pin_memory" in factory_keywords:
            continue  # a generator lives on one device: a CPU generator needs the CPU tensor
        tensor = None
        if method == "type_as":
            tensor = _tensor_target(ctx, move)
            if tensor is None:
                continue
        elif method == "to":
            device = to_device_argument(move)
            if device is not None and _eager_quantized_file(ctx) and not _names_cuda(device):
                continue  # `.to(x.device)` beside CPU-only quantized kernels: `x` is on the CPU
            if device is None or not is_clear_device(device):
                tensor = _tensor_target(ctx, move)
                if tensor is None:
                    continue  # `.to(dtype)`, `.to(x.dtype)`, a target not known as a device or a tensor
            elif (
                names_the_cpu(ctx, device)
                or _is_meta(device)
                or _none_unless_given(ctx, device)
                or _other_accelerator(ctx, device)
            ):
                continue  # `.to("cpu")`; `.to("meta")` copies nothing: a shape for tracing; `.to("hpu")`
        name = dotted_name(callee(factory))
        where = "the device" if tensor is None else f"the device of `{text(tensor)}`"
        fn = callee(move)
        attr = fn.child_by_field_name("attribute") if fn is not None else None
        at = attr or move
        if at.start_point[0] != factory.start_point[0]:
            at = factory  # the factory is what to change: its line, not the move's
        seeded = (name or "").split(".")[-1] in RANDOM_FACTORIES and _seeded_before(ctx, move)
        note = " (the generators are seeded above: drawn there, the numbers differ from the CPU's)" if seeded else ""
        once = _paid_once(ctx, move)
        if once is not None:
            note += f"; it runs {once}: a small cost, not paid every step"
        typed = (name or "").split(".")[-1]
        if typed in _TYPED_DTYPES:
            dtype = _TYPED_DTYPES[typed]
            how = f"`torch.empty(...{'' if dtype is None else f', dtype={dtype}'}, device=...)` (a legacy constructor takes no CUDA `device=`)"
        else:
            how = "`device=`"
        yield ctx.finding(
            Code.CREATE_THEN_MOVE,
            f"`{name}(...)` is created on the CPU and then copied to {where}: create it there with {how}{note}",
            at,
            # (no rewrite of a seeded draw: the device's generator gives other numbers, and the
            # CPU generator's later draws shift, so the program would not be the same)
            fix=None if seeded else _fix(ctx, move, factory, tensor),
            end=move,
            # (a test seeded to compare with stored numbers draws on the CPU on purpose)
            severity="information" if (seeded and in_a_test(move)) or once is not None else "warning",
        )


def _paid_once(ctx: LintContext, move: Node) -> Optional[str]:
    """How often a move runs where that is clearly not per step, for the message; None otherwise.
    Once: in a test (its set-up, a fixture, a function only the tests use), in module-level code
    outside loops, in `main()`, in an initializer or another function that runs once per object or per run
    (`__init__`, not of a search or hypothesis built per item, `_init_weights`, `setup`, `load_*`, `export`), or in a
    loop only on some iterations (`if len(state) == 0:` creates an optimizer's state on its first
    step; not in a model's `forward`, which runs every step). A move once per call of any other
    function stays a warning: `noise(n, dim)` or a beam search's buffers run on every step or
    batch; but not one in a function that every call in the file runs rarely (`rare_callers`:
    from `__init__`, tests, under a throttle), nor in the `compute`, `reset` or `results` of a
    metric (once per evaluation), nor outside the loops of a function that walks a data loader itself (once per
    pass over the data), nor before a loop of its function that takes training steps (once per
    fit). Decided from the function the move is in (and the uses of a module-level one, looked
    up through `function_uses`): what the command line leaves out of the parse must not change it."""
    function = next((a for a in ancestors(move) if a.type == "function_definition"), None)
    name = function_name(move)
    test = enclosing_test(move)
    if test is not None or in_unit_test_class(move):
        return f"once per test (`{test or name}`)"
    if function is not None and _used_only_in_tests(ctx, function):
        return f"once per test (`{name}` is used only by the file's tests)"
    loop = repeating_loop(move)
    if function is not None:
        throttle = periodic_throttle(move, function) if loop is None else None
        if throttle is not None and "%" in text(throttle):
            # `if batch_idx % self.frequency == 0:` in a collate function or a `forward`
            return f"only on calls where `{' '.join(text(throttle).split())}`"
        if on_nonfinite_path(move, loop if loop is not None else function):
            # `if torch.isnan(self.K).any(): self.K = torch.eye(n).to(self.K.device)`: a fallback
            return "only when a value is not finite (the fallback of a NaN or inf check)"
        flag = debug_option(move)
        if flag is not None:
            return f"only when `{flag}` asks for debugging logs"
        early = early_exit_throttle(move, function) if loop is None else None
        if early is not None:
            # `if (step - 1) % self.demo_every != 0: return` at the top of a per-batch hook
            return f"only on calls that pass `if {shown(early)}:` above it"
        first_use = lazily_initialized(move, function) if loop is None else None
        if first_use is not None and not built_per_item(function):
            # (not in a beam or a hypothesis, built per example: parlai's `if self.scores is None:`)
            # `if not hasattr(self, "colorize"): self.register_buffer("colorize", torch.randn(...).to(x))`
            return f"once per object, on first use (`if {shown(first_use)}:`)"
    if function is not None and memoized(move):
        return f"once per distinct call of `{name}` (its result is cached)"
    if name == "forward" and _export_stub(ctx, function):
        return "once per export (the `forward` of an `autograd.Function` with a `symbolic`: an ONNX export stub)"
    sampling = sampling_loop(function) if function is not None and name == "forward" else None
    if sampling is not None and not sampling.start_byte <= move.start_byte < sampling.end_byte:
        # a pipeline stage's `forward(self, batch, args)` that runs the denoising loop itself
        line = sampling.start_point[0] + 1
        return f"once per call of `forward`, outside the sampling loop it runs on line {line} (once per generation)"
    if _FORWARD.search(name):
        # (`if t == 0: h = torch.zeros(...).to(x.device)` in `forward`: once per call, and a
        # model's forward runs on every step; a helper spelled so that only `__init__` calls,
        # `self.input_w_dim = self._dummy_forward(n)`, measures shapes once per model)
        rare = rare_callers(ctx, move, per_call=True) if name not in ("forward", "__call__") else None
        return f"in {rare}" if rare is not None else None
    if loop is not None:
        how = frequency(move)
        if not how.every_iteration:
            return how.how_often
    elif function is None:
        return "once (module-level code)"
    elif name == "main":
        return "once per run (`main`)"
    elif _entry_point(ctx, name):
        return f"once per run (`{name}` is the command's entry point)"
    elif name == "__init__" and built_per_item(function):
        return None  # `class TreeSearch(object):` built per example of a batch: not set-up
    # (not `merge` or `convert`, which a model may run on every forward)
    elif SET_UP_FUNCTION.search(name):
        return f"once per call of `{name}` (set-up, not a step)"
    elif epoch_hook(name):
        return f"once per epoch or run (`{name}` is a hook a trainer calls that often)"
    holder = definition_holder(function) if function is not None else None
    served = _serves_requests(ctx) if holder is not None and holder.type == "module" and loop is None else None
    if served is not None:
        return f"once per request (this file serves a {served} app; `{name}` runs per request, outside its loops)"
    passing = data_pass(function) if function is not None and loop is None else None
    if passing is not None:
        walked = " ".join(text(passing.child_by_field_name("right") or passing).split())
        return f"once per pass over the data (`{name}` walks `{walked}` itself, in its loop on line {passing.start_point[0] + 1})"
    evaluating = evaluation_pass(function) if function is not None and loop is None else None
    if evaluating is not None:
        return f"once per call of `{name}`, an evaluation, outside its loops"
    stepping = step_loop(function) if function is not None and loop is None else None
    if stepping is not None and stepping.start_byte > move.end_byte:
        return f"once per call of `{name}`, before its loop of steps on line {stepping.start_point[0] + 1}"
    compute = metric_compute(ctx, move)
    if compute is not None:
        return f"once per evaluation (in `{compute}` of a metric, whose `update` is what runs every step)"
    if loop is not None and steps_or_runs_a_model(loop):
        return None  # (a pass over batches that runs a model: per batch, however rarely the pass runs)
    rare = rare_callers(ctx, move, per_call=True) if function is not None else None
    return f"in {rare}" if rare is not None else None


def _serves_requests(ctx: LintContext) -> Optional[str]:
    """The web framework a file builds an app with (`import gradio as gr`, `from fastapi import
    FastAPI`, Flask, Streamlit): its module-level functions run once per user request, at a
    person's pace, not once per step; None for other files."""
    data = ctx.source.whole_data
    if b"gradio" not in data and b"fastapi" not in data and b"flask" not in data and b"streamlit" not in data:
        return None
    found = _WEB_APP.search(data)
    return _WEB_FRAMEWORKS[found.group(1).decode()] if found is not None else None


_WEB_FRAMEWORKS = {"gradio": "Gradio", "fastapi": "FastAPI", "flask": "Flask", "streamlit": "Streamlit"}
_WEB_APP = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(gradio|fastapi|flask|streamlit)\b", re.M)


def _used_only_in_tests(ctx: LintContext, function: Node) -> bool:
    """Is `function` a module-level function that the file uses, and only in its tests: a helper
    they call (`_prepare_module(...)`) or a worker a test starts (`mp.Process(target=run_allreduce)`)?
    (Its uses are looked up through `function_uses`, so an edit that adds one elsewhere lints
    this function again.)"""
    holder = definition_holder(function)
    title = function.child_by_field_name("name")
    if holder is None or holder.type != "module" or title is None:
        return False
    uses = [use for use in ctx.function_uses(text(title)) if use != title]
    return bool(uses) and all(in_a_test(use) for use in uses)


# A model's forward: it runs on every step
_FORWARD = re.compile(r"forward|^__call__$")
_SYMBOLIC = re.compile(rb"^[ \t]+def[ \t]+symbolic[ \t]*\(", re.M)


def _export_stub(ctx: LintContext, function: Optional[Node]) -> bool:
    """Is `function` the `forward` of a class that also defines `symbolic` (yolov9's `ORT_NMS`,
    `TRT_NMS`: an `autograd.Function` whose `forward` makes dummy outputs while `torch.onnx.export`
    traces it, and whose `symbolic` emits the real operator)? Read from the class's whole text."""
    holder = definition_holder(function) if function is not None else None
    return holder is not None and holder.type == "class_definition" and bool(_SYMBOLIC.search(class_text(ctx, holder)))


RULE = Rule(
    code=Code.CREATE_THEN_MOVE,
    name="create-then-move",
    summary="a tensor created on the CPU then moved (`torch.randn(...).to(device)`) instead of created on the device",
    calls=frozenset({"to", "cuda", "type_as"}),
    check=check,
    doc=__doc__ or "",
    fixable=True,
    # `torch.<factory>(...).to(...)` / `.cuda()`: the factory's name, `torch`, the move.
    # Cheapest first: `torch` (a substring search), the factory (a pattern that starts with
    # `torch`), then the move (a pattern that starts with a dot: many candidates).
    triggers=((b"torch",), (FACTORY_CALL,), (MOVE,)),
    definition_triggers=((b"torch",), (FACTORY_CALL,), (MOVE,)),
)


def _other_accelerator(ctx: LintContext, device: Node) -> bool:
    """A device written as another accelerator's (`"hpu"`, `torch.device("xpu")`, `"mps"`), also
    through a module constant (`DEV = "hpu"`, then `.to(device=DEV)`): no CUDA copy to speak of."""
    node = strip_parens(device)
    if node.type == "identifier":
        node = module_constant(ctx, node) or node
    return _device_string(node).split(":")[0] in _OTHER_ACCELERATORS


_OTHER_ACCELERATORS = frozenset({"hpu", "xpu", "npu", "mps", "xla", "tpu", "mtia"})


def _is_meta(device: Node) -> bool:
    """`"meta"`, `torch.device("meta")`."""
    return _device_string(device) == "meta"


def _device_string(device: Node) -> str:
    """The string a device is written as: `"meta"`, or the type of `torch.device("xpu", 0)`; "" for
    anything else."""
    node = strip_parens(device)
    if node.type == "call" and (dotted_name(callee(node)) or "").split(".")[-1] == "device":
        positional, keywords = arguments(node)
        node = keywords.get("type") or (positional[0] if positional else node)
    return string_value(node) if node.type == "string" else ""
