"""The functions of a source file that can be traced, and their example-call directives.

Torch-free and protocol-free: the engine uses it to pick inputs, the language server to place
code lenses. A directive is a comment directly above a `def` (or above its decorators):

    # atenlens: train_step(*setup())

whose text after `atenlens:` is a Python call expression evaluated in the module's namespace.
"""
from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from typing import Optional

from atenlens.lines import split_lines

DIRECTIVE = re.compile(r"^\s*#\s*atenlens:\s*(?P<expr>.*?)\s*$")
# The program's command-line arguments, a comment on a line of its own anywhere in the file:
#     # atenlens-argv: --epochs 1 --batch-size 8
ARGV_DIRECTIVE = re.compile(r"^\s*#\s*atenlens-argv:(?P<args>.*)$", re.M)


@dataclass(frozen=True)
class FunctionInfo:
    qualname: str              # "train_step", "MLP.forward", "outer.<locals>.inner" is not listed
    name: str
    line: int                  # 1-based line of the `def` keyword
    column: int                # 0-based column of the `def` (or `async def`) keyword
    first_line: int            # first decorator line, or `line`
    end_line: int              # last line of the body
    needs_args: bool           # has required parameters, or is an instance method (needs a receiver)
    is_method: bool
    directive: Optional[str]   # the example call, or None
    directive_line: Optional[int]
    calls_step: bool = False   # its body calls `.backward()` or `.step()`: a training step


def _required_params(node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> int:
    args = node.args
    positional = args.posonlyargs + args.args
    required = len(positional) - len(args.defaults)
    if is_method and positional and not _is_staticmethod(node):
        required -= 1          # self / cls is bound by the directive's receiver
    required += sum(1 for d in args.kw_defaults if d is None)
    return max(required, 0)


def _is_staticmethod(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


STEP_CALLS = frozenset({"backward", "step"})


def _calls_step(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the body calls `<something>.backward()` or `<something>.step()` (`loss.backward()`,
    `opt.step()`, `scheduler.step()`)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in STEP_CALLS
               for n in ast.walk(node))


def _is_instance_method(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return not any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in node.decorator_list)


def directive_above(lines: list[str], first_line: int) -> tuple[Optional[str], Optional[int]]:
    """The directive on the line directly above `first_line` (1-based), if any."""
    index = first_line - 2
    if 0 <= index < len(lines):
        match = DIRECTIVE.match(lines[index])
        if match and match.group("expr"):
            return match.group("expr"), index + 1
    return None, None


def find_functions(source: str, tree: Optional[ast.Module] = None) -> list[FunctionInfo]:
    """Module-level functions and methods of module-level classes (nested classes too), in
    source order. Raises SyntaxError when `source` does not parse."""
    tree = tree if tree is not None else ast.parse(source)
    lines = split_lines(source)        # as ast counts lines (not str.splitlines())
    found: list[FunctionInfo] = []

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                directive, directive_line = directive_above(lines, first)
                found.append(FunctionInfo(
                    qualname=prefix + node.name,
                    name=node.name,
                    line=node.lineno,
                    column=node.col_offset,
                    first_line=first,
                    end_line=node.end_lineno or node.lineno,
                    needs_args=_required_params(node, in_class) > 0 or (in_class and _is_instance_method(node)),
                    is_method=in_class,
                    directive=directive,
                    directive_line=directive_line,
                    calls_step=_calls_step(node),
                ))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".", True)

    visit(tree.body, "", False)
    return found


def function_at(functions: list[FunctionInfo], line: int) -> Optional[FunctionInfo]:
    """The innermost listed function whose span (decorators and directive included) holds `line`."""
    best: Optional[FunctionInfo] = None
    for info in functions:
        start = info.directive_line or info.first_line
        if start <= line <= info.end_line and (best is None or start >= (best.directive_line or best.first_line)):
            best = info
    return best


def directive_template(info: FunctionInfo) -> str:
    """A directive to insert above a function that needs inputs, for the user to complete."""
    if info.is_method:
        owner = info.qualname.rsplit(".", 1)[0]
        return f"# atenlens: {owner}(...).{info.name}(...)"
    return f"# atenlens: {info.name}(...)"


def argv_directive(source: str) -> Optional[tuple[str, ...]]:
    """The arguments of the file's first `# atenlens-argv:` comment, split like a shell; None when
    there is none. Raises ValueError for unbalanced quotes."""
    match = ARGV_DIRECTIVE.search(source)
    return tuple(shlex.split(match.group("args"))) if match else None


# Simulated ranks for one function, a comment directly above its `# atenlens:` directive (or above the
# `def` when it has none), with the flags of `atenlens trace`:
#     # atenlens-ranks: --world-size 8 --gpus-per-node 8
#     # atenlens: train_step(*setup())
RANKS_DIRECTIVE = re.compile(r"^\s*#\s*atenlens-ranks:(?P<args>.*)$")
_RANKS_FLAGS = {"--world-size": "world_size", "--rank": "rank", "--gpus-per-node": "gpus_per_node"}


def parse_ranks_flags(text: str) -> dict[str, int]:
    """`--world-size 8 --rank 3` -> {"world_size": 8, "rank": 3}; raises ValueError naming what is wrong."""
    words = shlex.split(text)
    found: dict[str, int] = {}
    index = 0
    while index < len(words):
        word = words[index]
        flag, equals, value = word.partition("=")
        if flag not in _RANKS_FLAGS:
            raise ValueError(f"unknown flag {word!r} (known: {', '.join(_RANKS_FLAGS)})")
        if not equals:
            index += 1
            if index == len(words):
                raise ValueError(f"{flag} needs a number")
            value = words[index]
        try:
            found[_RANKS_FLAGS[flag]] = int(value)
        except ValueError:
            raise ValueError(f"{flag} needs a whole number, got {value!r}") from None
        index += 1
    return found


def ranks_directive(source: str, info: Optional[FunctionInfo]) -> dict[str, int]:
    """The simulated ranks the function's `# atenlens-ranks:` comment asks for ({} when none).
    Raises ValueError for a comment that does not parse."""
    if info is None:
        return {}
    lines = split_lines(source)
    index = (info.directive_line or info.first_line) - 2
    if 0 <= index < len(lines):
        match = RANKS_DIRECTIVE.match(lines[index])
        if match:
            try:
                return parse_ranks_flags(match.group("args"))
            except ValueError as error:
                raise ValueError(f"the `# atenlens-ranks:` comment on line {index + 1}: {error}") from None
    return {}
