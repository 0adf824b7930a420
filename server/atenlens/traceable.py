"""The functions of a source file that can be traced, and their example-call directives.

Torch-free and protocol-free: the engine uses it to pick inputs, the language server to place
code lenses. A directive is a comment directly above a `def` (or above its decorators):

    # atenlens: train_step(*setup())

whose text after `atenlens:` is a Python call expression evaluated in the module's namespace,
optionally followed by named dimensions (atenlens/dims.py): `# atenlens: f(*setup())  dims: B=8 T=1024`,
and by the word `compile` (before or after `dims:`): trace the function as `torch.compile(f)` would run
it, which reports its graph breaks (`# atenlens: f(*setup())  compile`, as `atenlens trace --compile`).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import re
import shlex
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from atenlens.dims import split_directive
from atenlens.lines import split_lines

DIRECTIVE = re.compile(r"^\s*#\s*atenlens:\s*(?P<expr>.*?)\s*$")
# The program's command-line arguments, a comment on a line of its own anywhere in the file:
#     # atenlens-argv: --epochs 1 --batch-size 8
ARGV_DIRECTIVE = re.compile(r"^\s*#\s*atenlens-argv:(?P<args>.*)$", re.M)
# the `compile` flag, a last word separated from the call (or from the `dims:` text) by whitespace
_COMPILE_FLAG = re.compile(r"^(?P<rest>.*?)\s+compile$")


@dataclass(frozen=True)
class FunctionInfo:
    qualname: str  # "train_step", "MLP.forward", "outer.<locals>.inner" is not listed
    name: str
    line: int  # 1-based line of the `def` keyword
    column: int  # 0-based column of the `def` (or `async def`) keyword
    first_line: int  # first decorator line, or `line`
    end_line: int  # last line of the body
    needs_args: bool  # has required parameters, or is an instance method (needs a receiver)
    is_method: bool
    directive: Optional[str]  # the example call, or None
    directive_line: Optional[int]
    calls_step: bool = False  # its body calls `.backward()` or `.step()`: a training step
    directive_missing: tuple[str, ...] = ()  # names the directive reads that the module does not define
    dims: Optional[str] = None  # the directive's `dims:` text ("B=8 T=1024"), not yet checked
    compile: bool = False  # the directive ends with `compile`: trace it as torch.compile would run it


def _required_params(node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> int:
    args = node.args
    positional = args.posonlyargs + args.args
    required = len(positional) - len(args.defaults)
    if is_method and positional and not _is_staticmethod(node):
        required -= 1  # self / cls is bound by the directive's receiver
    required += sum(1 for d in args.kw_defaults if d is None)
    return max(required, 0)


def _is_staticmethod(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


STEP_CALLS = frozenset({"backward", "step"})


def _calls_step(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the body calls `<something>.backward()` or `<something>.step()` (`loss.backward()`,
    `opt.step()`, `scheduler.step()`)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in STEP_CALLS
        for n in ast.walk(node)
    )


def _is_instance_method(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return not any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in node.decorator_list)


def split_example_call(text: str) -> tuple[str, Optional[str], bool]:
    """A directive's text -> its call, its `dims:` text and its `compile` flag:
    "step(*setup())  compile  dims: B=8" -> ("step(*setup())", "B=8", True). A call that is valid
    Python as a whole keeps its last word (`f(x) if fast else compile` is a call)."""
    call, dims = split_directive(text)
    call, compiled = _split_compile(call)
    if dims is not None:
        dims, after_dims = ("", True) if dims.strip() == "compile" else _split_compile(dims)  # a bare `dims:`
        compiled = compiled or after_dims
    return call, dims, compiled


def _split_compile(text: str) -> tuple[str, bool]:
    match = _COMPILE_FLAG.match(text.strip())
    if match is None:
        return text, False
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return match.group("rest").strip(), True
    return text, False


def directive_above(lines: list[str], first_line: int) -> tuple[Optional[str], Optional[int], Optional[str], bool]:
    """The directive on the line directly above `first_line` (1-based), if any: its call, its line,
    its `dims:` text and its `compile` flag."""
    index = first_line - 2
    if 0 <= index < len(lines):
        match = DIRECTIVE.match(lines[index])
        if match and match.group("expr"):
            call, dims, compiled = split_example_call(match.group("expr"))
            return call, index + 1, dims, compiled
    return None, None, None, False


def find_functions(
    source: str, tree: Optional[ast.Module] = None, check_directives: bool = False
) -> list[FunctionInfo]:
    """Module-level functions and methods of module-level classes (nested classes too), in
    source order; with `check_directives` (the editor's lenses), each directive's `directive_missing`.
    Raises SyntaxError when `source` does not parse."""
    tree = tree if tree is not None else ast.parse(source)
    parsed = tree
    return _with_directives(
        _definitions(tree.body), split_lines(source), lambda: module_names(parsed), check_directives
    )


@dataclass(frozen=True)
class _Definition:
    """What `ast` tells of one function, lines counted from the first line of its chunk."""

    qualname: str
    name: str
    line: int
    column: int
    first_line: int
    end_line: int
    needs_args: bool
    is_method: bool
    calls_step: bool


def _definitions(body: list[ast.stmt]) -> list[_Definition]:
    """The functions of `body` (module-level functions, methods of module-level classes)."""
    found: list[_Definition] = []

    def visit(statements: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                found.append(
                    _Definition(
                        qualname=prefix + node.name,
                        name=node.name,
                        line=node.lineno,
                        column=node.col_offset,
                        first_line=first,
                        end_line=node.end_lineno or node.lineno,
                        needs_args=_required_params(node, in_class) > 0 or (in_class and _is_instance_method(node)),
                        is_method=in_class,
                        calls_step=_calls_step(node),
                    )
                )
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".", True)

    visit(body, "", False)
    return found


def _with_directives(
    definitions: Iterable[_Definition], lines: list[str], defined_names: Callable[[], frozenset[str]], check: bool
) -> list[FunctionInfo]:
    """FunctionInfo of each definition, with the directive above it (and, with `check`, the names
    it reads that the module does not define: `defined_names()`, asked once and only if needed)."""
    found: list[FunctionInfo] = []
    defined: Optional[frozenset[str]] = None
    for d in definitions:
        directive, directive_line, dims, compiled = directive_above(lines, d.first_line)
        missing: tuple[str, ...] = ()
        if directive is not None and check:
            defined = defined if defined is not None else defined_names()
            missing = missing_names(directive, defined)
        found.append(
            FunctionInfo(
                qualname=d.qualname,
                name=d.name,
                line=d.line,
                column=d.column,
                first_line=d.first_line,
                end_line=d.end_line,
                needs_args=d.needs_args,
                is_method=d.is_method,
                directive=directive,
                directive_line=directive_line,
                calls_step=d.calls_step,
                directive_missing=missing,
                dims=dims,
                compile=compiled,
            )
        )
    return found


# -- the same, re-parsing only the top-level statements an edit changed --------------------------------
# The editor asks for code lenses after every edit; `ast.parse` of a 5,000-line file on the event loop
# took 100-750 ms each time. So the text is cut into chunks at the lines that start a top-level
# statement (a rule on the text: code at column 0 that does not continue the statement above), and
# each chunk is parsed on its own, once per text. When every chunk parses, the functions and the
# module's names are those of the whole file (a chunk begins at column 0 and ends where the next
# top-level statement begins; `find_functions` and `module_names` look at one top-level statement at
# a time). When one does not (a cut inside a bracket or a string, or a real syntax error), the whole
# text is parsed as `find_functions` does, which raises SyntaxError when it does not parse.

_CHUNKS: "OrderedDict[str, Optional[tuple[list[_Definition], frozenset[str]]]]" = OrderedDict()
_CHUNKS_KEPT = 4096


def top_level_chunks(source: str) -> list[str]:
    """`source` cut before each line that starts a top-level statement, as the lint cuts a text to
    mend its syntax errors (lint/source.py's `top_level_chunks`: one rule for both). Imported here,
    not at the top: only the server asks for lenses, and it has the lint loaded; the trace does not
    need it."""
    from atenlens.lint.source import top_level_chunks as cuts

    data = source.encode("utf-8", "surrogatepass")  # a lone surrogate comes back as it was
    return [data[start:end].decode("utf-8", "surrogatepass") for start, end in cuts(data)]


def _chunk(text: str) -> Optional[tuple[list[_Definition], frozenset[str]]]:
    """The functions and module-level names of one chunk parsed alone; None if it does not parse."""
    if text in _CHUNKS:
        _CHUNKS.move_to_end(text)
        return _CHUNKS[text]
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        result = None
    else:
        result = (_definitions(tree.body), module_names(tree))
    _CHUNKS[text] = result
    while len(_CHUNKS) > _CHUNKS_KEPT:
        _CHUNKS.popitem(last=False)
    return result


def find_functions_by_chunk(source: str, check_directives: bool = False) -> list[FunctionInfo]:
    """`find_functions(source, check_directives=...)`, parsing only the top-level chunks not seen
    before (the language server's code lenses after an edit). Raises as `find_functions` does."""
    if source.count("\r") != source.count("\r\n"):
        return find_functions(source, check_directives=check_directives)  # a lone "\r" ends a line too
    definitions: list[_Definition] = []
    names: list[frozenset[str]] = []
    row = 0
    for text in top_level_chunks(source):
        parsed = _chunk(text)
        if parsed is None:
            return find_functions(source, check_directives=check_directives)
        found, bound = parsed
        definitions.extend(
            d
            if row == 0
            else dataclasses.replace(d, line=d.line + row, first_line=d.first_line + row, end_line=d.end_line + row)
            for d in found
        )
        names.append(bound)
        row += text.count("\n")
    return _with_directives(definitions, split_lines(source), lambda: frozenset().union(*names), check_directives)


# -- what the module defines when imported, and the names a directive reads ---------------------------
# A directive is evaluated in the module's namespace as the trace imports it (not as `__main__`): it is
# complete when every name it reads is bound at the top level (outside `if __name__ == "__main__":`) or
# is a builtin. The names it reads that are not are its placeholders, to be filled in.

BUILTIN_NAMES = frozenset(dir(builtins))


def is_main_guard(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _bound_by(node: ast.AST) -> Iterable[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _bound_by(element)
    elif isinstance(node, ast.Starred):
        yield from _bound_by(node.value)


def module_names(tree: ast.Module) -> frozenset[str]:
    """Names bound at the top level when the module is imported: not those of `if __name__ == "__main__":`."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)  # `*`: any name
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    names.update(_bound_by(target))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                names.update(_bound_by(node.target))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                names.update(_bound_by(node.target))
                visit(node.body + node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        names.update(_bound_by(item.optional_vars))
                visit(node.body)
            elif isinstance(node, ast.If) and not is_main_guard(node):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])

    visit(tree.body)
    return frozenset(names)


def read_names(expression: ast.AST) -> list[str]:
    """Names `expression` reads that it does not bind itself (a walrus, a comprehension's target), in order."""
    bound = {n for node in ast.walk(expression) if isinstance(node, ast.NamedExpr) for n in _bound_by(node.target)}
    bound |= {n for node in ast.walk(expression) if isinstance(node, ast.comprehension) for n in _bound_by(node.target)}
    bound |= {
        a.arg
        for node in ast.walk(expression)
        if isinstance(node, ast.Lambda)
        for a in node.args.args + node.args.kwonlyargs
    }
    loads = [n for n in ast.walk(expression) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    found = [n.id for n in sorted(loads, key=lambda n: (n.lineno, n.col_offset))]
    return list(dict.fromkeys(n for n in found if n not in bound))


def missing_names(expression: str, defined: frozenset[str]) -> tuple[str, ...]:
    """The names `expression` reads that neither the module nor the builtins define (its placeholders);
    () when it does not parse (the trace then says what is wrong with it)."""
    if "*" in defined:
        return ()  # `from x import *`: what it binds is not known here
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return ()
    return tuple(n for n in read_names(tree) if n not in defined and n not in BUILTIN_NAMES)


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
