"""Quick fixes: applying a finding's edits gives the expected source, and only safe cases get one."""

from __future__ import annotations

from pathlib import Path

from atenlens.lint import Finding, TextEdit, lint_source

FIXTURES = Path(__file__).parent / "fixtures"


def apply_edits(source: str, edits: tuple[TextEdit, ...]) -> str:
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column

    for edit in sorted(edits, key=lambda e: (e.line, e.column), reverse=True):
        source = (
            source[: offset(edit.line, edit.column)] + edit.new_text + source[offset(edit.end_line, edit.end_column) :]
        )
    return source


def fixed(source: str) -> tuple[str, list[Finding]]:
    found = [f for f in lint_source(source) if f.code == "AL302"]
    for finding in reversed(found):
        if finding.fix is not None:
            source = apply_edits(source, finding.fix.edits)
    return source, found


def test_fixes_rewrite_the_simple_cases_to_create_on_the_device() -> None:
    source = (FIXTURES / "AL302_create_then_move.py").read_text()
    result, found = fixed(source)
    assert [f.fix is not None for f in found] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
        False,
        True,
        True,
        True,
        True,
        True,  # `torch.zeros(...).to(src_tokens)`: dtype and device of `src_tokens`
        False,  # a chain of CPU steps before `.type_as(tokens)`
        False,  # a legacy typed constructor
        False,  # `torch.randn(...).to(src_tokens)`: randn has no integer dtype
    ]
    assert (
        result.splitlines()[28]
        == "    scores = torch.zeros(bsz * beam, n, dtype=src_tokens.dtype, device=src_tokens.device)"
    )
    assert result.splitlines()[4:15] == [
        "    noise = torch.randn(batch, dim, device=device)",
        '    zeros = torch.zeros(4, device="cuda")',
        "    ones = torch.ones(2, 3, device=device)",
        '    empty = torch.empty((), device="cuda")',
        "    ar = torch.arange(10).to(device, torch.float16)",
        "    half = torch.rand(3).to(device, non_blocking=True)",
        "    cuda0 = torch.eye(3).cuda(0)",
        "    multi = torch.full(",
        "        (2, 2),",
        "        1.0,  # value",
        "    ).to(device)",
    ]
    assert result.splitlines()[22] == "    d = torch.eye(3, device=get_model_device(model))"
    assert [f.line for f in lint_source(result, select=["AL302"])] == [9, 10, 11, 12, 30, 31, 32]


def test_a_fixed_file_no_longer_has_the_fixed_findings() -> None:
    source = "import torch\nx = torch.randn(8).to(dev)\ny = torch.zeros(2, 2).cuda()\n"
    result, found = fixed(source)
    assert result == 'import torch\nx = torch.randn(8, device=dev)\ny = torch.zeros(2, 2, device="cuda")\n'
    assert len(found) == 2 and lint_source(result) == []


def test_a_multiline_factory_keeps_its_arguments_and_inner_comments() -> None:
    source = "x = torch.zeros(\n    3,  # rows\n    4,\n).to(device)\n"
    result, (finding,) = fixed(source)
    assert finding.fix is not None and finding.fix.title == "Create the tensor on the device (`device=device`)"
    assert result == "x = torch.zeros(\n    3,  # rows\n    4, device=device)\n"


def test_fixes_are_positioned_in_str_characters_after_wide_characters() -> None:
    source = 'label = "形状 🚀"; t = torch.ones(2).to(dev)\n'
    result, _ = fixed(source)
    assert result == 'label = "形状 🚀"; t = torch.ones(2, device=dev)\n'


def test_no_fix_where_the_rewrite_is_not_obviously_the_same() -> None:
    for source in [
        "x = torch.randn(3, **kw).to(dev)\n",
        "x = torch.randn(3).to(dev, dtype=torch.half)\n",
        "x = torch.randn(3).to(dev, copy=True)\n",
        "x = (torch.randn(3)).to(dev)\n",
        "x = torch.randn(3  # n\n).to(dev)\n",
    ]:
        (finding,) = lint_source(source)
        assert (finding.code, finding.fix) == ("AL302", None), source
    assert lint_source("x = torch.randn(3).to(*args)\n") == []  # where it goes is unknown


def test_no_finding_and_no_fix_where_the_target_is_not_written_as_a_device() -> None:
    # `device=<dtype>` or `device=<tensor>` would raise; a CPU generator needs a CPU tensor;
    # `torch.tensor(data)` fills on the host either way.
    for source in [
        "x = torch.randn(3).to(y.dtype)\n",
        "x = torch.randn(3).to(other)\n",
        "x = torch.randn(3).to(torch.float16)\n",
        "x = torch.randn(3, generator=g).to(device)\n",
        "x = torch.tensor(data).to(device)\n",
        "x = torch.tensor([1, 2]).cuda()\n",
    ]:
        assert lint_source(source, select=["AL302"]) == [], source
