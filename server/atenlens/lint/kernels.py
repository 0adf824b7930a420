"""Device kernels written in Python: code that runs on the GPU, where host rules do not apply.

A function decorated with `@triton.jit` (also `@triton.autotune(...)` / `@triton.heuristics(...)`
above it) or numba's `@cuda.jit` is compiled to a GPU kernel: its `if LOSS_TYPE == 0:` tests a
compile-time constant, its loops run per program on the device, and nothing in it makes the host
wait. So is a shape function registered for the meta device or for fake tensors
(`@register_meta(aten.index.Tensor)`, `@torch.library.register_fake("lib::op")`,
`@impl_abstract(...)`): its tensors hold no data, and reading one waits for no GPU. Findings inside
such a function are dropped (engine.py), whichever rule made them. So are those in a top-level
function or class named for another accelerator that drives it (`class HPUWeightOnlyLinear` calling
`torch.ops.hpu.*`; `htcore.mark_step()`, `torch.npu.*`, `xm.mark_step()`) and never speaks of CUDA,
in a file that also does: its tensors are on that device, and what it waits for is not a CUDA
stream.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from atenlens.lint.syntax import text

KERNEL_DECORATOR = re.compile(
    r"^@\s*(?:triton\s*\.\s*(?:jit|autotune|heuristics)|(?:numba\s*\.\s*)?cuda\s*\.\s*jit)\b"
    r"|^@\s*(?:[\w.]+\.)?(?:register_meta|register_fake|impl_abstract)\b"
)
# Bytes a file must hold to define such a kernel: most files hold none, and are not walked.
KERNEL_BYTES = (b"triton", b"jit", b"register_meta", b"register_fake", b"impl_abstract")


def kernel_rows(root: Node, data: bytes) -> list[tuple[int, int]]:  # `data`: the text unblanked
    """(first row, last row), 0-based, of each device kernel among the top-level definitions and
    the methods of top-level classes, also under module-level `if`/`try`/`with` blocks (`if
    version.parse(torch.__version__) >= ...:` around a table of meta functions), and of each
    top-level function or class that drives another accelerator."""
    other = OTHER_ACCELERATOR_CALL.search(data) is not None
    if not other and not any(word in data for word in KERNEL_BYTES):
        return []
    rows: list[tuple[int, int]] = []
    stack = list(root.named_children)
    while stack:
        node = stack.pop()
        if other and _other_accelerator_definition(node, data):
            rows.append((node.start_point[0], node.end_point[0]))
            continue
        if node.type == "decorated_definition":
            if any(KERNEL_DECORATOR.match(text(d)) for d in node.named_children if d.type == "decorator"):
                rows.append((node.start_point[0], node.end_point[0]))
                continue
            node = node.child_by_field_name("definition") or node
        if node.type == "class_definition":
            body = node.child_by_field_name("body")
            stack.extend(body.named_children if body is not None else [])
        elif node.type in _BLOCKS:
            stack.extend(node.named_children)
    return rows


def _other_accelerator_definition(node: Node, data: bytes) -> bool:
    """A top-level function or class named for another accelerator (`HPUWeightOnlyLinear`,
    `npu_forward`) that calls that accelerator's API and never speaks of CUDA: Gaudi's or
    Ascend's code path, whatever the rest of the file does (not a class that only guards one call
    with `if is_torch_npu_available():`)."""
    definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
    if definition is None or definition.type not in ("function_definition", "class_definition"):
        return False
    title = definition.child_by_field_name("name")
    # (up to the next statement in the whole text: the prefilter may have blanked the methods
    # after the last it kept, and the class ends before them in its tree)
    following = node.next_named_sibling
    body = data[node.start_byte : following.start_byte if following is not None else len(data)]
    return (
        title is not None
        and _ACCELERATOR_NAME.search(text(title)) is not None
        and OTHER_ACCELERATOR_CALL.search(body) is not None
        and b"cuda" not in body.lower()
    )


_ACCELERATOR_NAME = re.compile(r"hpu|npu|xla|gaudi|habana", re.I)


# Another accelerator's own API: Gaudi's `torch.ops.hpu`, Ascend's `torch.npu` / `torch_npu`, XLA's
# `xla_device()` (engine.py: with it, a file that never says `cuda` is that accelerator's code)
_OTHER_DEVICE_API = rb"\btorch\.(?:ops\.)?(?:hpu|npu)\.\w|\btorch_npu\.\w|\bxla_device\("
OTHER_DEVICE_CALL = re.compile(_OTHER_DEVICE_API)
# ... and the step calls of its code (`htcore.mark_step()`, `xm.mark_step()`), which a pipeline that
# only supports it makes too (`if is_torch_xla_available(): xm.mark_step()`): evidence in a
# definition named for that accelerator, not in a file
OTHER_ACCELERATOR_CALL = re.compile(_OTHER_DEVICE_API + rb"|\bhtcore\.\w+\(|\bxm\.mark_step\(")


# Module-level statements whose blocks may define kernels (and the parts of those statements)
_BLOCKS = frozenset(
    {"if_statement", "elif_clause", "else_clause", "try_statement", "except_clause", "finally_clause"}
    | {"with_statement", "block"}
)
