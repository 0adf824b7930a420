"""`atenlens trace FILE::QUALNAME`: trace one function in a worker process and print the listing.

The user's code never runs in this process: the request goes to a trace worker (a subprocess),
which runs it in a disposable child and answers with a report. This module checks the target
before starting torch (so a typo costs milliseconds, not seconds), then prints the report.

Exit codes: 0 traced (status ok); 1 the traced code raised, timed out, or needs example inputs;
2 usage error (bad target syntax, missing file, unknown function, bad option).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tokenize
from typing import Optional, TextIO

from atenlens.gpus import find_gpu
from atenlens.report import TraceReport, TraceRequest
from atenlens.traceable import find_functions

EXIT_OK = 0
EXIT_TRACE_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A problem with the command line, reported in one line on stderr."""


def parse_target(target: str) -> tuple[str, str]:
    """`path/to/file.py::Class.method` -> (path, qualname)."""
    file, separator, qualname = target.rpartition("::")
    if not separator or not file or not qualname:
        raise UsageError(
            f"target must look like FILE::QUALNAME (e.g. examples/train_step.py::train_step), got {target!r}"
        )
    if not all(part.isidentifier() for part in qualname.split(".")):
        raise UsageError(f"{qualname!r} is not a function name (use Class.method for methods)")
    return file, qualname


def build_request(args: argparse.Namespace) -> TraceRequest:
    """The trace request for the parsed arguments, after checking what can be checked without
    running the user's code. Raises UsageError."""
    file, qualname = parse_target(args.target)
    if not os.path.isfile(file):
        raise UsageError(f"no such file: {file}")
    plot = getattr(args, "plot", None)
    if plot is not None and not plot.lower().endswith(".svg"):
        raise UsageError(f"--plot writes SVG: give a FILE.svg, got {plot!r}")
    for option, path in (("--plot", plot), ("--memory-timeline", getattr(args, "memory_timeline", None))):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder is not None and not os.path.isdir(folder):
            raise UsageError(f"{option}: no such folder: {folder}")
    if getattr(args, "depth", 0) < 0:
        raise UsageError(f"--depth must be 0 or more, got {args.depth}")
    gpu = getattr(args, "gpu", None)
    try:
        gpu_key = find_gpu(gpu).key
    except KeyError as error:
        raise UsageError(f"--gpu: {error.args[0]}") from None
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        with tokenize.open(file) as f:  # as Python reads it: a `# coding:` declaration, else UTF-8
            source = f.read()
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        raise UsageError(f"cannot read {file}: {error}") from None
    try:
        functions = find_functions(source)
    except SyntaxError:
        functions = None  # the trace reports the syntax error at its line, like any user error
    if functions is not None and qualname not in {info.qualname for info in functions}:
        available = ", ".join(info.qualname for info in functions) or "none"
        raise UsageError(f"{file} has no function {qualname} (functions: {available})")
    argv = None
    if getattr(args, "argv", None) is not None:
        try:
            argv = tuple(shlex.split(args.argv))
        except ValueError as error:
            raise UsageError(f"--argv: {error}") from None
    world_size, rank, gpus_per_node = (getattr(args, name, None) for name in ("world_size", "rank", "gpus_per_node"))
    if world_size is None and (rank is not None or gpus_per_node is not None):
        raise UsageError("--rank and --gpus-per-node need --world-size")
    if world_size is not None:
        from atenlens.trace.ranks import ranks_of  # torch-free

        try:
            ranks_of(world_size, rank, gpus_per_node)
        except ValueError as error:
            raise UsageError(f"--world-size/--rank/--gpus-per-node: {error}") from None
    return TraceRequest(
        compile=bool(getattr(args, "compile", False)),
        world_size=world_size,
        rank=rank,
        gpus_per_node=gpus_per_node,
        argv=argv,
        file=os.path.abspath(file),
        qualname=qualname,
        device=args.device,
        call=args.call,
        gpu=gpu_key,
        timeout_seconds=args.timeout if args.timeout is not None else TraceRequest.timeout_seconds,
    )


def exit_code_for(report: TraceReport) -> int:
    return EXIT_OK if report.status == "ok" else EXIT_TRACE_FAILED


def use_color(stream: TextIO) -> bool:
    """ANSI colour only for a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def print_report(
    report: TraceReport, as_json: bool, stream: TextIO, all_ops: bool = False, depth: Optional[int] = None
) -> None:
    if as_json:
        stream.write(report.to_json(indent=2) + "\n")
        return
    from atenlens.render import DEFAULT_DEPTH, render

    stream.write(
        render(
            report,
            color=use_color(stream),
            base=os.getcwd(),
            all_ops=all_ops,
            depth=DEFAULT_DEPTH if depth is None else depth,
        )
    )


def trace_through_worker(request: TraceRequest) -> TraceReport:
    from atenlens.worker.client import TraceWorker

    worker = TraceWorker()
    try:
        return worker.trace(request)
    finally:
        worker.close()


def run_trace_command(
    args: argparse.Namespace, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        request = build_request(args)
    except UsageError as error:
        stderr.write(f"atenlens trace: {error}\n")
        return EXIT_USAGE
    try:
        report = trace_through_worker(request)
    except KeyboardInterrupt:
        stderr.write("atenlens trace: interrupted\n")
        return 130
    print_report(report, args.json, stdout, all_ops=getattr(args, "all_ops", False), depth=getattr(args, "depth", None))
    try:
        write_cost_files(report, getattr(args, "plot", None), getattr(args, "memory_timeline", None))
    except (OSError, ValueError) as error:
        stderr.write(f"atenlens trace: {error}\n")
        return EXIT_USAGE
    return exit_code_for(report)


def write_cost_files(report: TraceReport, plot: Optional[str], timeline: Optional[str]) -> None:
    """--plot and --memory-timeline (atenlens/plot.py)."""
    if plot is None and timeline is None:
        return
    import json

    from atenlens.plot import chrome_trace, memory_and_time_svg

    if plot is not None:
        with open(plot, "w", encoding="utf-8") as f:
            f.write(memory_and_time_svg(report, base=os.getcwd()))
    if timeline is not None:
        with open(timeline, "w", encoding="utf-8") as f:
            json.dump(chrome_trace(report), f)
