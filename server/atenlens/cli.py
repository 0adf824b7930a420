"""`atenlens serve | trace | lint`. Each subcommand imports its layer lazily so that `lint` and
`serve` never pay for (or need) torch."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atenlens",
        description="See what PyTorch code really runs: aten ops, backward ops, syncs and copy hazards per line.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{trace,lint,serve}")

    trace = sub.add_parser("trace", help="trace one function on fake tensors and print an annotated listing")
    trace.add_argument("target", metavar="FILE::QUALNAME", help="e.g. examples/train_step.py::train_step")
    trace.add_argument("--json", action="store_true", help="print the report as JSON (docs/report-schema.md)")
    trace.add_argument("--device", choices=("cpu", "cuda"), default="cuda",
                       help="device to simulate (default: cuda, simulated where no GPU is present)")
    trace.add_argument("--call", metavar="EXPR", help="example call, overrides the '# atenlens:' directive")
    trace.add_argument("--argv", metavar="ARGS",
                       help="the program's command-line arguments while it runs (sys.argv[1:], split like a shell); "
                            "default: the file's '# atenlens-argv:' comment, else none")
    trace.add_argument("--timeout", metavar="SECONDS", type=float, default=60.0,
                       help="time budget for loading the module and running the function (default: 60)")
    trace.add_argument("--all-ops", action="store_true",
                       help="also list bookkeeping ops (views, detach: they allocate and compute nothing)")
    from atenlens.render import DEFAULT_DEPTH     # torch-free, small

    trace.add_argument("--depth", metavar="N", type=int, default=DEFAULT_DEPTH,
                       help=f"module tree levels shown below a model called from your code (default: {DEFAULT_DEPTH})")

    lint = sub.add_parser("lint", help="static checks for host-device syncs and copy hazards (no torch needed)")
    lint.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    lint.add_argument("--format", choices=("text", "json"), default="text")
    lint.add_argument("--select", metavar="CODES", help="comma-separated codes to run (default: all)")
    lint.add_argument("--ignore", metavar="CODES", help="comma-separated codes to skip")

    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio (for debugging)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "trace":
        from atenlens.trace_command import run_trace_command

        return run_trace_command(args)
    if args.command == "lint":
        from atenlens.lint.command import run_lint_command

        return run_lint_command(args)
    from atenlens.lsp.server import serve

    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
