"""Trace diagnostics -> LSP: a finding caused inside a library links to the library's line."""

from __future__ import annotations

from pathlib import Path

from atenlens.lsp.convert import lsp_trace_diagnostic
from atenlens.report import Diagnostic, Frame

LIBRARY = "/venv/lib/python3.11/site-packages/transformers/masking_utils.py"


def diagnostic(cause):
    return Diagnostic(
        file="/w/train.py",
        line=2,
        column=4,
        severity="warning",
        code="AL100",
        kind="sync",
        message="`bool()` / `if tensor:` copies a value ..., inside transformers/masking_utils.py:292",
        count=3,
        cause=cause,
    )


def test_a_library_cause_becomes_related_information_at_its_line():
    lines = ["def step(model, x):", "    out = model(x)"]
    converted = lsp_trace_diagnostic(1, diagnostic(Frame(LIBRARY, 292, "_ignore_causal_mask_sdpa")), lines, "utf-16")
    assert converted.message.endswith("inside transformers/masking_utils.py:292 (×3 in this trace)")
    [related] = converted.related_information
    assert related.location.uri == Path(LIBRARY).as_uri()
    assert (related.location.range.start.line, related.location.range.start.character) == (291, 0)
    assert related.message == "in _ignore_causal_mask_sdpa, called from this line"
    assert (converted.range.start.line, converted.range.start.character) == (1, 4)


def test_a_finding_of_the_users_own_line_has_no_related_information():
    converted = lsp_trace_diagnostic(1, diagnostic(None), ["", "    out = model(x)"], "utf-16")
    assert converted.related_information is None


def test_each_code_links_to_a_section_that_exists():
    """codeDescription.href: a lint rule's section of docs/rules.md, else the trace code's section
    of docs/diagnostics.md, on the repository package.json names (GitHub's heading anchors)."""
    import json
    import re

    from atenlens.lint.rules import RULES
    from atenlens.lsp.convert import TRACE_ANCHORS, code_description
    from atenlens.report import Code

    root = Path(__file__).resolve().parent.parent
    repository = json.loads((root / "package.json").read_text())["repository"]["url"].removesuffix(".git")

    def anchors(doc: str) -> set[str]:
        headings = [
            line[3:].strip().lower()
            for line in (root / "docs" / doc).read_text().splitlines()
            if line.startswith("## ")
        ]
        return {re.sub(r"[^\w\- ]", "", h).replace(" ", "-") for h in headings}

    pages = {"rules.md": anchors("rules.md"), "diagnostics.md": anchors("diagnostics.md")}
    codes = {value for name, value in vars(Code).items() if name.isupper()}
    assert codes == {rule.code for rule in RULES} | set(TRACE_ANCHORS)  # every code has its page
    for code in sorted(codes):
        href = code_description(code).href
        page, anchor = href.removeprefix(f"{repository}/blob/main/docs/").split("#")
        assert page == ("rules.md" if code in {rule.code for rule in RULES} else "diagnostics.md"), href
        assert anchor in pages[page], href
