"""Large documents are analysed in a process of their own.

Parsing holds the interpreter lock: tree-sitter's parse of a 10 MB document held it for ~13 s, and
`ast.parse` (to find the functions for code lenses) took over a minute and left ~0.9 GB of the
server's heap resident after the document was closed. On the event loop, or in a thread, either
stalled every other request (a hover waited behind them). So a document of more than
LARGE_DOCUMENT_CHARS characters is linted and its functions found by a short-lived child process
(`python -I`, the server's own sys.path, no current directory): the server reads the results a
line at a time, yielding to other requests as it goes, and the parse's memory goes with the child.
The child dies with the server (PR_SET_PDEATHSIG) and is killed when its lint is superseded.

Torch-free; runs no user code (lint and function discovery are static).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any, Collection, Optional

from atenlens.lint.findings import Finding, Fix, TextEdit
from atenlens.traceable import FunctionInfo

logger = logging.getLogger(__name__)

LARGE_DOCUMENT_CHARS = 512 * 1024  # ~0.5 s of parsing on a quiet machine: beyond it, a child parses
_YIELD_EVERY = 500  # results read between two yields to the event loop
_LINE_LIMIT = 64 * 1024 * 1024  # one result line (a finding's fix may hold a long text)

_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[1]); from atenlens.lsp.large import child_main; child_main()"
)


@dataclass
class Analysis:
    findings: list[Finding]
    functions: Optional[list[FunctionInfo]]  # None: the text does not parse
    failure: Optional[str] = None  # why the child gave no result


def _import_paths() -> list[str]:
    """The server's sys.path without the current directory (what `-I` would also leave out)."""
    cwd = os.getcwd()
    return [p for p in sys.path if p and os.path.abspath(p) != cwd]


async def analyze_elsewhere(
    source: str, path: Optional[str], select: Optional[Collection[str]], ignore: Optional[Collection[str]], lint: bool
) -> Analysis:
    import asyncio  # here: lsp/early.py reads this module's limit before the event loop exists

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        _BOOT,
        json.dumps(_import_paths()),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
    )
    try:
        request = {
            "source": source,
            "path": path,
            "lint": lint,
            "select": list(select) if select is not None else None,
            "ignore": list(ignore) if ignore is not None else None,
        }
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        process.stdin.write(json.dumps(request).encode("utf-8"))
        await process.stdin.drain()
        process.stdin.close()
        findings: list[Finding] = []
        functions: Optional[list[FunctionInfo]] = []
        done = False
        count = 0
        while line := await process.stdout.readline():
            item = json.loads(line)
            kind = item[0]
            if kind == "finding":
                findings.append(_finding(item[1]))
            elif kind == "function":
                assert functions is not None
                fields: list[Any] = [tuple(v) if isinstance(v, list) else v for v in item[1]]
                functions.append(FunctionInfo(*fields))
            elif kind == "syntax-error":
                functions = None
            elif kind == "done":
                done = True
            count += 1
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let other requests in
        stderr = (await process.stderr.read())[-2000:].decode("utf-8", "replace")
        code = await process.wait()
        if not done:
            return Analysis([], None, f"the analysis process ended with exit code {code}: {stderr.strip()}")
        return Analysis(findings, functions)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _finding(data: dict) -> Finding:
    fix = data.get("fix")
    if fix is not None:
        fix = Fix(title=fix["title"], edits=tuple(TextEdit(**edit) for edit in fix["edits"]))
    return Finding(**{**data, "fix": fix})


def release_memory() -> None:
    """After a large document is closed: collect, and hand the freed heap back to the system
    (glibc keeps freed memory otherwise)."""
    gc.collect()
    try:
        import ctypes  # here: the server's start-up does not need it

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def child_main() -> None:
    """The child: one request on stdin, one JSON array per line on stdout, then `["done"]`."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    from atenlens.lint import lint_source
    from atenlens.traceable import find_functions

    request = json.loads(sys.stdin.buffer.read())
    out = sys.stdout
    source = request["source"]
    if request["lint"]:
        for finding in lint_source(source, request["path"], request["select"], request["ignore"]):
            out.write(json.dumps(["finding", dataclasses.asdict(finding)]) + "\n")
    try:
        functions = find_functions(source, check_directives=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        out.write('["syntax-error"]\n')
    else:
        for info in functions:
            out.write(json.dumps(["function", dataclasses.astuple(info)]) + "\n")
    out.write('["done"]\n')
    out.flush()
