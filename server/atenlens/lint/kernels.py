"""Device kernels written in Python: code that runs on the GPU, where host rules do not apply.

A function decorated with `@triton.jit` (also `@triton.autotune(...)` / `@triton.heuristics(...)`
above it) or numba's `@cuda.jit` is compiled to a GPU kernel: its `if LOSS_TYPE == 0:` tests a
compile-time constant, its loops run per program on the device, and nothing in it makes the host
wait. So is a shape function registered for the meta device or for fake tensors
(`@register_meta(aten.index.Tensor)`, `@torch.library.register_fake("lib::op")`,
`@impl_abstract(...)`): its tensors hold no data, and reading one waits for no GPU. Findings inside
such a function are dropped (engine.py), whichever rule made them.
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


def kernel_rows(root: Node, data: bytes) -> list[tuple[int, int]]:
    """(first row, last row), 0-based, of each device kernel among the top-level definitions and
    the methods of top-level classes, also under module-level `if`/`try`/`with` blocks (`if
    version.parse(torch.__version__) >= ...:` around a table of meta functions)."""
    if not any(word in data for word in KERNEL_BYTES):
        return []
    rows: list[tuple[int, int]] = []
    stack = list(root.named_children)
    while stack:
        node = stack.pop()
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


# Module-level statements whose blocks may define kernels (and the parts of those statements)
_BLOCKS = frozenset(
    {"if_statement", "elif_clause", "else_clause", "try_statement", "except_clause", "finally_clause"}
    | {"with_statement", "block"}
)
