"""AL200 pageable-copy: `non_blocking=True` host-to-device copy from memory not known to be pinned.

What it does:
    Flags `non_blocking=True` on `.to(...)`, `.cuda(...)` and `dst.copy_(src, ...)` when the
    source tensor is not provably in pinned memory. Provably pinned, following assignments within
    the function: `.pin_memory()`, a factory called with `pin_memory=True`, a view or item of a
    pinned tensor (`x[0]`, `x.view(...)`, `batch["x"]`), a loop variable over
    `DataLoader(..., pin_memory=True)` (also through a variable holding the loader, unpacked
    batches `for x, y in loader:` and `enumerate(loader)`). Not AL200: device-to-host copies
    (`.to("cpu", non_blocking=True)`, `.cpu(non_blocking=True)`, `dst.copy_(src, ...)` into a
    pinned buffer or into a provably host tensor: a torch factory without `device=` or with the
    CPU, a `.cpu()` / `.to("cpu")` result), copies whose source is provably on the device
    (made with a `device=` that is not the CPU, or by `.cuda()` / `.to(<not the CPU>)`), and
    dtype-only casts (`.to(torch.float16, non_blocking=True)`). A file that pins host memory
    itself (`DataLoader(..., pin_memory=True)`, a buffer allocated with `pin_memory=` anything
    but False, a `.pin_memory()` call) is trusted with the tensors that reach its copies from
    parameters, attributes and containers; so is a file that makes no batch that may be pageable
    (no `DataLoader(...)` without `pin_memory=True`, no `pin_memory` parameter or keyword that
    is False): a batch handed in from a loader built elsewhere is almost always pinned, and the
    lint does not guess (so is `torch.stack(batches)` of tensors gathered from elsewhere, and an
    item taken out of a container or iterator: `batches.pop()`, `queue.get()`, `next(it)`, and
    the result of a function of elsewhere, `_resize_cache(workspace, shape)`, or of torch ops and
    tensor methods on such a tensor, `c3.sum(1)`, `torch.cumsum(counts, 0)`, `w.to(dtype)`). A
    tensor made on the CPU in the file (`torch.randn(8)`, `torch.tensor(data)`, `torch.load(f)`)
    is reported either way. Pinned where pinning is possible: a factory with `pin_memory=` a flag
    (`pin_memory=PIN_MEMORY`), `x.pin_memory() if PIN_MEMORY else x`, a helper spelled so
    (`np_to_pinned_tensor(ids)`). A source spelled as host memory's destination or as the device
    (`host_buf.copy_(x)`, `slot["host"].copy_(x)`, `buf.copy_(self.device_out)`) is a download,
    not an upload. Pinned whichever branch runs: `t if t.is_pinned() else t.pin_memory()`; the
    values of a dict built pinned (`for t, pinned in host.items():` of `host = {t: t.pin_memory()
    for t in ts}`). An empty tensor (`torch.zeros(0, dtype=torch.int64)`, `torch.tensor([])`) copies nothing. A file
    that page-locks memory in place with `cudaHostRegister` (through `torch.cuda.cudart()`) is
    trusted with all its copies.
    A copy that runs once per run or per object (outside any loop, in module-level code, in
    `main`, in `__init__`, outside the loops of an evaluation such as `evaluation(model,
    data_loader)`, or in a function that the file calls only from there)
    is reported at information level: the wait is real but paid once.

Why it matters:
    A host-to-device copy can run asynchronously only from page-locked memory. From ordinary
    (pageable) memory the driver first stages the data through a pinned buffer while the host
    waits, so `non_blocking=True` silently does nothing. Same code as the engine's
    `pageable-copy` diagnostic.

Example:
    loader = DataLoader(dataset, batch_size=64)
    for x, y in loader:
        x = x.to(device, non_blocking=True)

Fix:
    Pin the source: `DataLoader(..., pin_memory=True)` or `batch.pin_memory()` (once, where the
    batch is made), or drop `non_blocking=True`.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.codes import Code
from atenlens.lint.callers import built_per_item, rare_callers
from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.frequency import evaluation_pass, function_name
from atenlens.lint.provenance import (
    TORCH_FACTORIES,
    VIEW_METHODS,
    Device,
    device_of,
    is_device_to_host,
    is_pinned,
    makes_an_empty_tensor,
    module_may_page,
    module_pins,
    spelled_device,
    spelled_host,
    to_device_argument,
)
from atenlens.lint.registry import Rule
from atenlens.lint.source import ancestors, definition_text
from atenlens.lint.syntax import (
    arguments,
    callee,
    dotted_name,
    is_true,
    method_name,
    receiver,
    repeating_loop,
    strip_parens,
    text,
)

COPY_METHODS = ("to", "cuda", "copy_")
# Methods that take an item out of a container (a list, a deque, a queue) or make a contiguous view.
CONTAINER_TAKES = frozenset({"contiguous", "pop", "popleft", "get", "get_nowait"})


def host_to_device_source(call: Node) -> tuple[bool, Optional[Node]]:
    """(is a candidate non_blocking H2D copy, its source tensor)."""
    method = method_name(call)
    positional, keywords = arguments(call)
    if method not in COPY_METHODS or not is_true(keywords.get("non_blocking")):
        return False, None
    if method == "to":
        if is_device_to_host(call) or to_device_argument(call) is None:
            return False, None
        return True, receiver(call)
    if method == "cuda":
        return True, receiver(call)
    source = keywords.get("src") or (positional[0] if positional else None)
    return True, source


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.source.data.find(b"cudaHostRegister") != -1:
        return  # the file page-locks its buffers in place (`cudart().cudaHostRegister(x.data_ptr(), ...)`)
    for call in ctx.calls(*COPY_METHODS):
        if not ctx.writes_in_arguments(call, b"non_blocking"):
            continue
        candidate, source = host_to_device_source(call)
        if not candidate or source is None:
            continue
        if method_name(call) == "copy_":
            destination = receiver(call)
            if (
                is_pinned(ctx, destination)
                or device_of(ctx, destination) in (Device.CPU, Device.HOST)
                or spelled_host(destination)
                or spelled_device(source)
                # (a slot taken from a container of this file's pinned buffers: `should_stop, tokens_cpu,
                # done = self.slots[0]` of slots allocated with `pin_memory=`)
                or (
                    _of_unknown_origin(ctx, destination)
                    and module_pins(ctx)
                    and device_of(ctx, source) not in (Device.CPU, Device.HOST)
                )
            ):
                continue  # a copy into host memory: device-to-host (AL201's concern), not an upload
        if is_pinned(ctx, source) or device_of(ctx, source) is Device.CUDA:
            continue  # from pinned memory the copy is asynchronous; from the device it is no upload
        if makes_an_empty_tensor(source):
            continue  # `torch.zeros(0).to(device, non_blocking=True)`: nothing is copied
        if _of_unknown_origin(ctx, source) and (module_pins(ctx) or not module_may_page(ctx)):
            # handed in from elsewhere: trusted where this file pins host memory itself (its pinned
            # tensors are handed in, kept, taken out) or makes no batch that may be pageable
            continue
        keyword = arguments(call)[1]["non_blocking"].parent or call
        message = (
            "`non_blocking=True` copy from memory not known to be pinned: from pageable memory the host "
            "waits for the copy; pin the source (`.pin_memory()`, `DataLoader(pin_memory=True)`)"
        )
        once = _runs_once(ctx, call)
        if once is None:
            yield ctx.finding(Code.PAGEABLE_COPY, message, keyword)
        else:
            yield ctx.finding(
                Code.PAGEABLE_COPY,
                f"{message}; it runs {once}: a small cost, not paid every step",
                keyword,
                severity="information",
            )


def _runs_once(ctx: LintContext, call: Node) -> Optional[str]:
    """How often a copy outside any loop runs, where that is once per run or per object: in
    module-level code, in `main`, in `__init__`, or in a function that every call in the file
    makes so (`rare_callers`: only `__init__` calls it); None otherwise."""
    if repeating_loop(call) is not None:
        return None
    function = next((a for a in ancestors(call) if a.type == "function_definition"), None)
    if function is None:
        return "once (module-level code)"
    name = function_name(call)
    if name == "main":
        return "once per run (`main`)"
    # (only `__init__` by its name: a `load_tensor` spelled as set-up may run per layer per step)
    if name == "__init__" and not built_per_item(function):
        return "once per object (`__init__`)"
    if evaluation_pass(function) is not None:
        return f"once per call of `{name}`, an evaluation, outside its loops"
    rare = rare_callers(ctx, call, once=True)
    return f"in {rare}" if rare is not None else None


# torch calls that make a tensor on the host from Python or numpy data, or from a file
_MADE_ON_THE_HOST = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.frombuffer", "torch.load"})


_HOST_FACTORY = re.compile(
    rb"\btorch\.(?:" + "|".join(sorted(TORCH_FACTORIES)).encode() + rb"|tensor|as_tensor|from_numpy)\("
)


def _makes_host_tensors(ctx: LintContext, call: Node) -> bool:
    """Is `call` (`helper(...)`, `self.helper(...)`) a function of this file whose body makes tensors
    with torch factories and never says `device=`: its results are host memory made here?"""
    name = (dotted_name(callee(call)) or "").split(".")
    if len(name) > 2 or (len(name) == 2 and name[0] != "self"):
        return False
    body = definition_text(ctx.source.whole_data, name[-1])
    return body is not None and _HOST_FACTORY.search(body) is not None and b"device" not in body


def _of_unknown_origin(ctx: LintContext, node: Optional[Node]) -> bool:
    """Does `node` come from somewhere the linter cannot see into (a parameter, a loop
    variable, an attribute, an item of a container), rather than from a tensor made here?"""
    for _ in range(8):
        if node is None:
            return False
        node = strip_parens(node)
        if node.type in ("subscript", "attribute"):
            return True
        if node.type == "call" and method_name(node) in VIEW_METHODS | CONTAINER_TAKES:
            node = receiver(node)  # `batches.pop()`, `queue.get()`: from wherever the container's come
            continue
        if node.type == "call" and dotted_name(callee(node)) == "next":
            parts = arguments(node)[0]
            node = parts[0] if parts else None  # `next(iterator)`
            continue
        if node.type == "call" and dotted_name(callee(node)) in ("torch.stack", "torch.cat", "torch.concat"):
            # `torch.stack(batches)`: as pinned as the tensors gathered, which come from elsewhere
            parts = arguments(node)[0]
            node = parts[0] if parts else None
            if node is not None and strip_parens(node).type in ("list", "tuple"):
                items = [c for c in strip_parens(node).named_children if c.type != "comment"]
                node = items[0] if items else None
            continue
        if node.type == "list" and node.named_child_count == 0:
            return True  # `parts = []`, filled by appends: from wherever those come
        if node.type == "call" and device_of(ctx, node) not in (Device.CPU, Device.HOST):
            name = dotted_name(callee(node)) or ""
            if name.split(".")[-1] in TORCH_FACTORIES or name in _MADE_ON_THE_HOST:
                return False  # made here, on the host
            if name.startswith(("torch.", "F.")):
                parts = arguments(node)[0]
                node = parts[0] if parts else None  # `torch.cumsum(counts, 0)`: where its input is
                continue
            if _makes_host_tensors(ctx, node):
                return False  # `self.get_pos_ids(grid)` of this file, which builds with `torch.arange(...)`
            if method_name(node) is not None and receiver(node) is not None:
                node = receiver(node)  # `c3.view(m, k).sum(1)`, `w.to(dtype)`: where the tensor is
                continue
            return True  # a function of elsewhere (`_resize_cache(workspace, shape)`): its result too
        if node.type != "identifier":
            return False
        binding = ctx.bindings(node).at(text(node), node.start_byte)
        if binding is None or binding.loop is not None or binding.value is None:
            return True
        node = binding.value
    return False


RULE = Rule(
    code=Code.PAGEABLE_COPY,
    name="pageable-copy",
    summary="`non_blocking=True` host-to-device copy whose source is not provably pinned",
    calls=frozenset(COPY_METHODS) | {"DataLoader", "pin_memory", "empty_like", "zeros_like", *TORCH_FACTORIES},
    check=check,
    doc=__doc__ or "",
    # Pinned sources are followed through attributes set anywhere in the file: the whole file.
    triggers=((b"non_blocking",),),
)
