"""`lint_source`: parse once, give every selected rule the shared context, collect findings."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Collection, Optional

from atenlens.lint.context import LintContext
from atenlens.lint.findings import Finding
from atenlens.lint.incremental import lint_document
from atenlens.lint.kernels import OTHER_DEVICE_CALL, kernel_rows
from atenlens.lint.noqa import file_exemption, is_suppressed, suppressed_codes
from atenlens.lint.registry import Rule
from atenlens.lint.rules import RULES
from atenlens.lint.shadowed import shadowed_rows
from atenlens.lint.source import SourceText, encode_source
from atenlens.lint.triggers import matches, skippable_definitions

log = logging.getLogger(__name__)


def select_rules(
    select: Optional[Collection[str]] = None, ignore: Optional[Collection[str]] = None
) -> tuple[Rule, ...]:
    """Rules whose code starts with one of `select` (all when None) and with none of `ignore`,
    so `AL1` selects AL100 and AL101 as in ruff."""
    return _select_rules(None if select is None else tuple(select), None if ignore is None else tuple(ignore))


@lru_cache(maxsize=64)  # a whole-tree run asks once per file, with the same few selections
def _select_rules(select: Optional[tuple[str, ...]], ignore: Optional[tuple[str, ...]]) -> tuple[Rule, ...]:
    chosen = []
    for rule in RULES:
        if select is not None and not any(rule.code.startswith(s.strip().upper()) for s in select if s.strip()):
            continue
        if ignore is not None and any(rule.code.startswith(s.strip().upper()) for s in ignore if s.strip()):
            continue
        chosen.append(rule)
    return tuple(chosen)


def lint_source(
    source: str,
    path: Optional[str] = None,
    select: Optional[Collection[str]] = None,
    ignore: Optional[Collection[str]] = None,
    prefilter: bool = True,
    incremental: bool = False,
) -> list[Finding]:
    """Findings for `source`, sorted by position. Never raises: a rule that fails on some input
    is logged and skipped, the other rules still report. `path` (a file path or document URI)
    names the document: its previous tree is kept and re-parsed incrementally.

    `prefilter`: run only the rules whose trigger bytes occur, parse nothing when none does, and
    (without `path`) blank the top-level definitions that no running rule needs (triggers.py).
    The findings are the same either way; False is for the test that proves it.

    `incremental` (with `path`): re-lint only the top-level definitions changed since the last
    versions of the same document and reuse the other findings (incremental.py), as the
    language server does; the findings are a full lint's (tests/lint/test_lint_incremental.py,
    tests/test_reliability_lint_fuzz.py). Off by default: a file linted once gains nothing."""
    try:
        return _lint(source, select, ignore, strict=False, document=path, prefilter=prefilter, incremental=incremental)
    except Exception:  # the parser or the text itself: nothing to report, nothing to crash
        log.exception("lint failed on %s", path or "<source>")
        return []


def lint_source_strict(
    source: str,
    path: Optional[str] = None,
    select: Optional[Collection[str]] = None,
    ignore: Optional[Collection[str]] = None,
    prefilter: bool = True,
    incremental: bool = False,
) -> list[Finding]:
    """`lint_source` that lets a rule's exception through (for tests: a bug must not hide)."""
    return _lint(source, select, ignore, strict=True, document=path, prefilter=prefilter, incremental=incremental)


def _lint(
    source: str,
    select: Optional[Collection[str]],
    ignore: Optional[Collection[str]],
    strict: bool,
    document: Optional[str] = None,
    prefilter: bool = True,
    incremental: bool = False,
) -> list[Finding]:
    if not isinstance(source, str):
        raise TypeError("source must be str")
    if "\r\n" in source:
        # Windows line ends: the rules read lines ending in "\n" (`$`, `[^\n]*`); dropping the
        # "\r" before each "\n" keeps every line and column, so findings and fixes stay in place
        source = source.replace("\r\n", "\n")
    rules = select_rules(select, ignore)
    data = encode_source(source)
    if _other_framework_only(data):
        return []  # JAX / TensorFlow code with no torch in it: no PyTorch tensors to speak of
    skip: list[tuple[int, int]] = []
    if prefilter:
        rules = tuple(rule for rule in rules if matches(rule.triggers, data))
        local = [rule.definition_triggers for rule in rules]
        if document is None and rules and all(groups is not None for groups in local):
            skip = skippable_definitions(data, local)  # type: ignore[arg-type]
    if not rules:
        return []
    text = SourceText(source, document, skip=skip, original=data)

    def run(context: LintContext) -> list[Finding]:
        findings: list[Finding] = []
        for rule in rules:
            try:
                findings.extend(rule.check(context))
            except Exception:
                if strict:
                    raise
                log.exception("rule %s failed", rule.code)
        if findings:
            # device code: no host waits there (kernels.py); a `def` replaced before any use: never
            # runs (shadowed.py)
            kernels = kernel_rows(context.source.root, context.source.whole_data)
            kernels += shadowed_rows(context.source.whole_data)
            if kernels:
                findings = [f for f in findings if not any(a <= f.line - 1 <= b for a, b in kernels)]
        return findings

    if document is not None and incremental:
        findings = lint_document(text, rules, document, run)  # an edited document: incrementally
    else:
        names: frozenset[str] = frozenset().union(*(rule.calls for rule in rules))
        findings = run(LintContext(text, names))
    return _without_suppressed(sorted(set(findings), key=_position), text)


# A file of another array framework (`import jax`, `from tensorflow import ...`) that neither
# imports nor uses torch: the rules have nothing to say of its arrays
_OTHER_FRAMEWORK = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:jax|flax|tensorflow|keras|mlx)\b", re.M)
_TORCH_WORD = re.compile(rb"^[ \t]*(?:import|from)[ \t]+torch\b|\btorch\.\w", re.M)


def _other_framework_only(data: bytes) -> bool:
    if any(word in data for word in _OTHER_ACCELERATOR_WORDS):
        if _OTHER_ACCELERATOR_ONLY.search(data):
            return True  # `import habana_frameworks.torch.core as htcore` unconditionally: Gaudi-only code
        if b"cuda" not in data.lower():
            # Habana's HPU, Ascend's NPU, XLA: code for another accelerator that never speaks of CUDA
            # and calls that accelerator's API (`torch.ops.hpu.*`, `torch.npu.*`, `xm.xla_device()`;
            # not a pipeline that imports `torch_xla` when present and tests `device.type == "npu"`)
            return _OTHER_ACCELERATOR.search(data) is not None and OTHER_DEVICE_CALL.search(data) is not None
    if b"mps" in data and _APPLE_ONLY.search(data) is not None and _CUDA_OR_GPU.search(data) is None:
        # Apple's MPS backend (`torch.device("mps" if torch.backends.mps.is_available() else "cpu")`,
        # `torch.mps.synchronize()`) in a file that never speaks of CUDA or a GPU
        return True
    if b"jax" not in data and b"tensorflow" not in data and b"keras" not in data and b"mlx" not in data:
        return False  # (substring tests first: most files name none of them)
    return bool(_OTHER_FRAMEWORK.search(data)) and not _TORCH_WORD.search(data)


_APPLE_ONLY = re.compile(rb"\btorch\.(?:mps\.|backends\.mps\b)")
_CUDA_OR_GPU = re.compile(rb"cuda|gpu", re.I)
_OTHER_ACCELERATOR_WORDS = (b"habana_frameworks", b"torch_npu", b"torch_xla")
_OTHER_ACCELERATOR = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:habana_frameworks|torch_npu|torch_xla)\b", re.M)
# ... imported at column 0: not under a `try:` or an `if`, so the module runs nowhere else
_OTHER_ACCELERATOR_ONLY = re.compile(rb"^(?:import|from)[ \t]+(?:habana_frameworks|torch_npu)\b", re.M)


def _position(finding: Finding) -> tuple[int, int, str, int, int]:
    return (finding.line, finding.column, finding.code, finding.end_line, finding.end_column)


def _without_suppressed(findings: list[Finding], text: SourceText) -> list[Finding]:
    if findings:
        exempt = file_exemption(text.original)  # `# atenlens: noqa[: CODES]` on a line of its own
        if exempt is not None:
            findings = [f for f in findings if not is_suppressed(f.code, exempt)]
    kept = []
    cache: dict[int, Optional[frozenset[str]]] = {}
    for finding in findings:
        if finding.line not in cache:
            cache[finding.line] = suppressed_codes(text.line_bytes(finding.line - 1))
        if not is_suppressed(finding.code, cache[finding.line]):
            kept.append(finding)
    return kept
