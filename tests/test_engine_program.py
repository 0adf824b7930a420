"""The program runs as it would be run: its own command line, and closures passed to an optimizer's
step() are forward and backward work. (Traced in this process, so the program's prints reach capsys.)"""

from __future__ import annotations

from collections import Counter

from atenlens.report import TraceRequest
from atenlens.trace.runner import run_trace
from engine_helpers import ops, trace, write
from source_lines import line_of

ARGPARSE_SCRIPT = """
    # atenlens-argv: --steps 3 --name "two words"
    import argparse
    import sys

    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--name", default="none")
    args = parser.parse_args()          # at module level, as scripts do


    def main():
        print(sys.argv[1:], args.steps, args.name)
        for _ in range(args.steps):
            torch.ones(2) * 2
"""


def test_module_level_parse_args_sees_the_files_argv_comment(tmp_path, capsys):
    path = write(tmp_path, "train.py", ARGPARSE_SCRIPT)
    report = trace(path, "main")
    assert report.status == "ok", report.message
    assert capsys.readouterr().out == "['--steps', '3', '--name', 'two words'] 3 two words\n"
    assert len(ops(report, line=line_of(path, "torch.ones(2) * 2"))) == 6  # ones and mul, 3 steps


def test_requested_argv_replaces_the_comment_and_argv0_is_the_file(tmp_path, capsys):
    path = write(tmp_path, "train.py", ARGPARSE_SCRIPT.replace("print(sys.argv[1:]", "print(sys.argv"))
    report = run_trace(TraceRequest(file=str(path), qualname="main", device="cpu", argv=("--steps", "1")))
    assert report.status == "ok", report.message
    assert capsys.readouterr().out == f"[{str(path)!r}, '--steps', '1'] 1 none\n"


def test_without_argv_the_program_gets_no_arguments_not_the_workers(tmp_path, capsys):
    path = write(tmp_path, "train.py", ARGPARSE_SCRIPT.replace("# atenlens-argv:", "# no argv:"))
    report = trace(path, "main")
    assert report.status == "ok", report.message
    assert capsys.readouterr().out == "[] 1 none\n"


def test_unbalanced_quotes_in_the_argv_comment_are_a_clear_error(tmp_path):
    path = write(tmp_path, "train.py", '# atenlens-argv: --name "open\nimport torch\ndef main():\n    pass\n')
    report = trace(path, "main")
    assert report.status == "error"
    assert report.message == "the `# atenlens-argv:` comment cannot be split into arguments: No closing quotation"


def test_ops_of_a_closure_passed_to_step_are_forward_and_backward(tmp_path):
    path = write(
        tmp_path,
        "closure.py",
        """
        import torch


        def step():
            model = torch.nn.Linear(4, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            x = torch.ones(8, 4)

            def closure():
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()
                return loss

            opt.step(closure)
    """,
    )
    report = trace(path, "step")
    assert report.status == "ok", report.message
    forward_line = line_of(path, "loss = model(x).pow(2).mean()")
    assert Counter(e.phase for e in ops(report, line=forward_line)) == {"forward": 4, "backward": 11}
    assert {e.phase for e in ops(report, line=line_of(path, "loss.backward()"))} == {"backward"}
    step_ops = ops(report, line=line_of(path, "opt.step(closure)"))
    assert [(e.name, e.phase) for e in step_ops] == [  # CPU parameters: the per-parameter loop
        ("aten.detach.default", "optimizer"),
        ("aten.clone.default", "optimizer"),
        ("aten.add_.Tensor", "optimizer"),
        ("aten.detach.default", "optimizer"),
        ("aten.clone.default", "optimizer"),
        ("aten.add_.Tensor", "optimizer"),
    ]
