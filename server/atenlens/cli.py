"""`atenlens serve | trace | lint | rule`. Each subcommand imports its layer lazily so that `lint` and
`serve` never pay for (or need) torch."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atenlens",
        description="See what PyTorch code really runs: aten ops, backward ops, syncs and copy hazards per line.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{trace,check,lint,rule,serve}")

    trace = sub.add_parser("trace", help="trace one function on fake tensors and print an annotated listing")
    trace.add_argument("target", metavar="FILE::QUALNAME", help="e.g. examples/train_step.py::train_step")
    trace.add_argument("--json", action="store_true", help="print the report as JSON (docs/report-schema.md)")
    trace.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cuda",
        help="device to simulate (default: cuda, simulated where no GPU is present)",
    )
    trace.add_argument("--call", metavar="EXPR", help="example call, overrides the '# atenlens:' directive")
    trace.add_argument(
        "--argv",
        metavar="ARGS",
        help="the program's command-line arguments while it runs (sys.argv[1:], split like a shell); "
        "default: the file's '# atenlens-argv:' comment, else none",
    )
    trace.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="time budget for loading the module and running the function (default: 60)",
    )
    trace.add_argument(
        "--all-ops",
        action="store_true",
        help="also list bookkeeping ops (views, detach: they allocate and compute nothing)",
    )
    trace.add_argument(
        "--depth",
        metavar="N",
        type=int,
        # Absent unless given: the trace command then uses render.DEFAULT_DEPTH. Importing the
        # renderer here (with the cost tables and the report it imports) cost every `lint` run
        # about 45 ms before its first file; tests/test_render.py checks that the help says its value.
        default=argparse.SUPPRESS,
        help="module tree levels shown below a model called from your code (default: 2)",
    )
    trace.add_argument(
        "--gpu",
        metavar="NAME",
        default="h100-sxm",
        help="GPU to forecast memory and time for: h100-sxm (default), h100-pcie, h200, a100-80gb, "
        "a100-40gb, l4, l40s, rtx-4090, mi300x (any case; docs/cost.md)",
    )
    trace.add_argument(
        "--world-size",
        metavar="N",
        type=int,
        help="simulate N ranks: torch.distributed runs on torch's fake backend, collectives are "
        "recorded and priced (docs/distributed.md); default: the function's "
        "'# atenlens-ranks:' comment, else one process",
    )
    trace.add_argument("--rank", metavar="R", type=int, help="the rank traced (default: 0)")
    trace.add_argument(
        "--gpus-per-node",
        metavar="G",
        type=int,
        help="GPUs per node: ranks on one node talk over NVLink, others over the network (default: 8)",
    )
    trace.add_argument(
        "--compile",
        action="store_true",
        help="also run Dynamo on the function as if it were torch.compile'd: its graph breaks at their lines "
        "(AL600) and a summary (AL601)",
    )
    trace.add_argument(
        "--plot", metavar="FILE.svg", help="write the memory timeline and the per-line time share as an SVG picture"
    )
    trace.add_argument(
        "--memory-timeline",
        metavar="FILE.json",
        help="write the step's estimated ops and live memory as a Chrome trace-event file "
        "(open in https://ui.perfetto.dev or chrome://tracing)",
    )

    check = sub.add_parser(
        "check",
        help="trace the functions [tool.atenlens.check] names and fail when one "
        "breaks its budget or regresses against the baseline (docs/check.md)",
    )
    from atenlens.check.command import add_arguments as add_check_arguments

    add_check_arguments(check)

    lint = sub.add_parser("lint", help="static checks for host-device syncs and copy hazards (no torch needed)")
    from atenlens.lint.options import add_arguments

    add_arguments(lint)

    rule = sub.add_parser("rule", help="print the documentation of a lint rule (docs/rules.md)")
    rule.add_argument("code", nargs="?", metavar="CODE", help="e.g. AL100 (or its name, sync-in-loop)")
    rule.add_argument("--all", action="store_true", help="every rule")

    _add_serve_arguments(sub.add_parser("serve", help="run the language server (stdio by default)"))
    return parser


def _add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        help="listen on a loopback TCP port instead of stdio, for debugging: one client, which "
        "must send initializationOptions.tcpToken (printed at start, or $ATENLENS_TCP_TOKEN)",
    )


def _print_rule(args: argparse.Namespace) -> int:
    from atenlens.lint.docs import find_rule, rule_markdown
    from atenlens.lint.rules import RULES

    if args.all:
        sys.stdout.write("\n".join(rule_markdown(rule) for rule in RULES))
        return 0
    rule = find_rule(args.code or "")
    if rule is None:
        known = ", ".join(r.code for r in RULES)
        print(
            f"atenlens rule: unknown rule {args.code!r} (known: {known})"
            if args.code
            else f"atenlens rule: name a rule (known: {known}) or pass --all",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(rule_markdown(rule))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:
        # The editor waits for the server: parse only its own arguments, without importing what
        # the other subcommands' arguments need (their defaults come from the trace layer).
        parser = argparse.ArgumentParser(
            prog="atenlens serve", description="run the language server (stdio by default)"
        )
        _add_serve_arguments(parser)
        args = parser.parse_args(arguments[1:])
        args.command = "serve"
        early = None
        if not getattr(args, "tcp", None):
            # before the server (pygls) is imported: answer `initialize` and publish the first
            # document's diagnostics meanwhile (lsp/early.py)
            from atenlens.lsp.early import read_early

            early = read_early()
        from atenlens.lsp.server import serve

        return serve(args, early)
    args = build_parser().parse_args(arguments)
    try:
        return _run(args)
    except BrokenPipeError:
        # `atenlens lint . | head`: the reader closed the pipe; stop quietly, as a pipeline expects
        # (point stdout at /dev/null so the interpreter's final flush does not raise again)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _run(args: argparse.Namespace) -> int:
    """Run the subcommand `args` names (every one but `serve` over stdio)."""
    if args.command == "trace":
        from atenlens.trace_command import run_trace_command

        return run_trace_command(args)
    if args.command == "check":
        from atenlens.check.command import run_check_command

        return run_check_command(args)
    if args.command == "lint":
        from atenlens.lint.command import run_lint_command

        return run_lint_command(args)
    if args.command == "rule":
        return _print_rule(args)
    from atenlens.lsp.server import serve

    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
