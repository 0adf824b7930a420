"""Is this tensor provably in pinned (page-locked) host memory? And is this copy device-to-host?

Provably pinned, following bindings within the function (depth-limited):
- `t.pin_memory()`; any call with `pin_memory=True` (`torch.empty(..., pin_memory=True)`);
- a view of something pinned (`x[0]`, `x.view(...)`, `x.narrow(...)`, `batch["input"]`, `batch.x`);
- a name bound to one of those (`x = y.pin_memory()`, `a = b = ...`, `(x := ...)`);
- a loop variable over `DataLoader(..., pin_memory=True)`, directly or through a name bound to the
  loader, including unpacked batches (`for x, y in loader:`) and `enumerate(loader)`.
Anything else (parameters, globals, other calls) is not provably pinned.
"""
from __future__ import annotations

from typing import Optional

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.dataflow import Binding
from atenlens.lint.syntax import arguments, callee, dotted_name, is_true, method_name, receiver, text

VIEW_METHODS = frozenset({"view", "view_as", "narrow", "select", "unsqueeze", "squeeze", "expand", "expand_as",
                          "transpose", "permute", "t", "T", "mT", "as_strided", "unflatten", "detach",
                          "unbind", "split", "chunk", "movedim"})
MAX_DEPTH = 12
TORCH_FACTORIES = frozenset({"randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange",
                             "linspace", "logspace", "eye", "tensor", "as_tensor", "empty_strided"})

DTYPE_NAMES = frozenset({"float", "float16", "float32", "float64", "half", "bfloat16", "double", "int", "int8",
                         "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
                         "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2"})


def strip_parens(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def is_cpu_device(node: Optional[Node]) -> bool:
    """`"cpu"`, `'cpu:0'`, `torch.device("cpu")`."""
    if node is None:
        return False
    node = strip_parens(node)
    if node.type == "string":
        return string_value(node).startswith("cpu")
    if node.type == "call" and dotted_name(callee(node)) in ("torch.device", "device"):
        positional, keywords = arguments(node)
        first = keywords.get("type") or (positional[0] if positional else None)
        return first is not None and is_cpu_device(first)
    return False


def string_value(node: Node) -> str:
    """The characters of a plain string literal (no interpolation), "" for anything else."""
    return "".join(text(c) for c in node.named_children if c.type == "string_content")


def is_dtype(node: Optional[Node]) -> bool:
    """`torch.float16` and friends (a `.to(dtype)` is a cast, not a device copy)."""
    if node is None:
        return False
    name = dotted_name(node)
    return name is not None and name.startswith("torch.") and name.split(".")[-1] in DTYPE_NAMES


def to_device_argument(call: Node) -> Optional[Node]:
    """The device a `.to(...)` call moves to (positional or `device=`), None when only a dtype."""
    positional, keywords = arguments(call)
    if "device" in keywords:
        return keywords["device"]
    if positional and not is_dtype(positional[0]):
        return positional[0]
    return None


def is_device_to_host(call: Node) -> bool:
    """`.cpu(...)` or `.to("cpu", ...)`."""
    method = method_name(call)
    if method == "cpu":
        return True
    if method == "to":
        return is_cpu_device(to_device_argument(call))
    return False


def is_pinned(ctx: LintContext, node: Optional[Node], depth: int = 0) -> bool:
    if node is None or depth > MAX_DEPTH:
        return False
    node = strip_parens(node)
    kind = node.type
    if kind == "call":
        if method_name(node) == "pin_memory" or is_true(arguments(node)[1].get("pin_memory")):
            return True
        if method_name(node) in VIEW_METHODS:
            return is_pinned(ctx, receiver(node), depth + 1)
        return False
    if kind == "named_expression":
        return is_pinned(ctx, node.child_by_field_name("value"), depth + 1)
    if kind == "subscript":
        return is_pinned(ctx, node.child_by_field_name("value"), depth + 1)
    if kind == "attribute":
        # `x.T`, `x.mT` (views) and `batch.inputs` (a field of a pinned batch) share the pinning.
        return is_pinned(ctx, node.child_by_field_name("object"), depth + 1)
    if kind == "identifier":
        binding = ctx.bindings(node).at(text(node), node.start_byte)
        return binding is not None and _binding_pinned(ctx, binding, depth + 1)
    return False


def _resolve(ctx: LintContext, node: Optional[Node], depth: int) -> Optional[Node]:
    """The expression behind `node`: through parentheses and names bound by plain assignment."""
    while node is not None and depth <= MAX_DEPTH:
        node = strip_parens(node)
        if node.type != "identifier":
            return node
        binding = ctx.bindings(node).at(text(node), node.start_byte)
        if binding is None or binding.loop is not None:
            return None
        node, depth = binding.value, depth + 1
    return None


def _is_factory(call: Node) -> bool:
    name = dotted_name(callee(call)) or ""
    parts = name.split(".")
    return len(parts) == 2 and parts[0] == "torch" and parts[1] in TORCH_FACTORIES


def is_on_device(ctx: LintContext, node: Optional[Node], depth: int = 0) -> bool:
    """Provably not in host memory: made with a `device=` that is not the CPU, or the result of
    `.cuda(...)` or of `.to(<device that is not the CPU>)`."""
    value = _resolve(ctx, node, depth)
    if value is None or value.type != "call":
        return False
    method = method_name(value)
    if method == "cuda":
        return True
    if method == "to":
        device = to_device_argument(value)
        return device is not None and not is_cpu_device(device) and device.type != "none"
    device = arguments(value)[1].get("device")
    return _is_factory(value) and device is not None and device.type != "none" and not is_cpu_device(device)


def is_host_tensor(ctx: LintContext, node: Optional[Node], depth: int = 0) -> bool:
    """Provably in host memory: a torch factory without `device=` (or with the CPU), or the
    result of `.cpu(...)` / `.to("cpu")`."""
    value = _resolve(ctx, node, depth)
    if value is None or value.type != "call":
        return False
    if is_device_to_host(value):
        return True
    device = arguments(value)[1].get("device")
    return _is_factory(value) and (device is None or is_cpu_device(device))


def _binding_pinned(ctx: LintContext, binding: Binding, depth: int) -> bool:
    if binding.loop is not None:
        return _loop_element_pinned(ctx, binding.loop.child_by_field_name("right"), binding.path, depth)
    return is_pinned(ctx, binding.value, depth)


def _loop_element_pinned(ctx: LintContext, iterable: Optional[Node], path: tuple[int, ...], depth: int) -> bool:
    """Is the part at `path` of each element of `iterable` pinned?"""
    if iterable is None or depth > MAX_DEPTH:
        return False
    iterable = strip_parens(iterable)
    if iterable.type == "call":
        name = dotted_name(callee(iterable)) or ""
        positional, keywords = arguments(iterable)
        if name.split(".")[-1] == "DataLoader":
            # A pinned loader pins every tensor of the batch, however the batch is unpacked.
            return is_true(keywords.get("pin_memory"))
        if name == "enumerate" and positional:
            if not path:
                return False
            return path[0] == 1 and _loop_element_pinned(ctx, positional[0], path[1:], depth + 1)
        return False
    if iterable.type == "identifier":
        binding = ctx.bindings(iterable).at(text(iterable), iterable.start_byte)
        if binding is None or binding.loop is not None:
            return False
        return _loop_element_pinned(ctx, binding.value, path, depth + 1)
    return False
