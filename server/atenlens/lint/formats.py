"""`atenlens lint --format`: how findings are written, each in the shape its consumers expect.

- `text` (the default): `path:line:col: CODE message`, a 1-based column, then
  `Found N problems in M files.`; nothing for a clean run.
- `concise`: ruff's concise shape: `path:line:col: CODE [*] message` (`[*]`: a fix is on
  offer), then `Found N problems.` and `[*] K fixable with \\`--fix\\`.`, or `All checks passed!`.
- `json`: ruff's JSON fields: `code`, `name`, `message`, `filename` (absolute), `location` and
  `end_location` (`row`, 1-based `column`), `fix` (`applicability`, `message`, `edits` with
  `content`, `location`, `end_location`) or null, `noqa_row`, `url`, `severity`, `cell` (null);
  keys sorted, as ruff writes them.
- `json-lines`: the same objects, one per line (ruff's `json-lines`).
- `grouped`: ruff's grouped shape: the file's path, then `  row:col CODE [*] message` per
  finding (rows right-aligned, columns left-aligned within the file), a blank line per file.
- `pylint`: `path:row: [CODE] message` (ruff's and pylint's parseable shape).
- `gitlab`: GitLab's code quality report (ruff's `gitlab`): a list of `{check_name,
  description ("CODE: message"), severity, fingerprint, location: {path, positions: {begin,
  end}}}`, paths relative to `$CI_PROJECT_DIR` (else the current folder); the fingerprint is a
  hash of the path, code, message (line numbers in it left out) and the finding's rank among
  equal ones: stable across runs and edits elsewhere in the file.
- `github`: one GitHub Actions workflow command per finding
  (`::warning title=atenlens (AL100),file=...,line=...,col=...,endLine=...,endColumn=...::...`),
  shown by GitHub as annotations on the pull request's lines.
- `sarif`: SARIF 2.1.0 (GitHub code scanning and other SARIF viewers), paths relative to the
  current folder under `%SRCROOT%`, columns in Unicode code points (`columnKind`).

Columns count Python str characters (code points) everywhere. A notebook's findings are placed
in their cells as ruff places them: `train.ipynb:cell 4:2:11:` (rows within the cell), `cell` in
JSON; GitHub annotations and pylint rows point at line 1 of the notebook file, as ruff's do.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, TextIO

from atenlens import __version__
from atenlens.lint.docs import rule_markdown
from atenlens.lint.findings import Finding
from atenlens.lint.registry import Rule
from atenlens.lint.rules import RULES

DOCS_URL = "https://github.com/atenlens/atenlens/blob/main/docs/rules.md"
TOOL_URL = "https://github.com/atenlens/atenlens"
TOOL_VERSION = __version__

_RULES = {rule.code: rule for rule in RULES}


def rule_url(rule: Rule) -> str:
    """The rule's section of docs/rules.md (GitHub's anchor of `## AL100 \\`sync-in-loop\\``)."""
    return f"{DOCS_URL}#{rule.code.lower()}-{rule.name}"


@dataclass(frozen=True)
class Located:
    """A finding with the file it is in: `path` as shown (as given on the command line)."""

    path: str
    finding: Finding
    cell: Optional[int] = None  # a notebook's cell (numbered from 1, every cell counted); rows are the cell's


def _where(r: Located) -> str:
    """`path:row:col` (1-based column), or `path:cell N:row:col` in a notebook."""
    cell = f"cell {r.cell}:" if r.cell is not None else ""
    return f"{r.path}:{cell}{r.finding.line}:{r.finding.column + 1}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def write_text(results: Sequence[Located], out: TextIO, summary: bool = True) -> None:
    for r in results:
        f = r.finding
        out.write(f"{_where(r)}: {f.code} {f.message}\n")
    if results and summary:
        files = len({r.path for r in results})
        out.write(f"Found {_plural(len(results), 'problem')} in {_plural(files, 'file')}.\n")


def write_concise(results: Sequence[Located], out: TextIO, summary: bool = True) -> None:
    for r in results:
        f = r.finding
        mark = "[*] " if f.fix is not None else ""
        out.write(f"{_where(r)}: {f.code} {mark}{f.message}\n")
    if summary:
        _summary(results, out)


def _location(line: int, column: int) -> dict:
    return {"column": column + 1, "row": line}


def json_finding(r: Located) -> dict:
    f = r.finding
    rule = _RULES.get(f.code)
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": "safe",
            "message": f.fix.title,
            "edits": [
                {
                    "content": e.new_text,
                    "location": _location(e.line, e.column),
                    "end_location": _location(e.end_line, e.end_column),
                }
                for e in f.fix.edits
            ],
        }
    return {
        "cell": r.cell,
        "code": f.code,
        "end_location": _location(f.end_line, f.end_column),
        "filename": os.path.abspath(r.path),
        "fix": fix,
        "location": _location(f.line, f.column),
        "message": f.message,
        "name": rule.name if rule else None,
        "noqa_row": f.line,
        "severity": f.severity,
        "url": rule_url(rule) if rule else None,
    }


def write_json(results: Sequence[Located], out: TextIO) -> None:
    json.dump([json_finding(r) for r in results], out, indent=2, ensure_ascii=False, sort_keys=True)
    out.write("\n")


def write_json_lines(results: Sequence[Located], out: TextIO) -> None:
    for r in results:
        out.write(json.dumps(json_finding(r), ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n")


def _summary(results: Sequence[Located], out: TextIO) -> None:
    """ruff's closing lines: `Found N problems.` and the fixable count, or `All checks passed!`."""
    if not results:
        out.write("All checks passed!\n")
        return
    out.write(f"Found {_plural(len(results), 'problem')}.\n")
    fixable = sum(1 for r in results if r.finding.fix is not None)
    if fixable:
        out.write(f"[*] {fixable} fixable with `--fix`.\n")


def write_grouped(results: Sequence[Located], out: TextIO, summary: bool = True) -> None:
    by_path: dict[str, list[Located]] = {}
    for r in results:
        by_path.setdefault(r.path, []).append(r)
    for path, located in by_path.items():
        rows = max(len(str(r.finding.line)) for r in located)
        columns = max(len(str(r.finding.column + 1)) for r in located)
        out.write(f"{path}:\n")
        for r in located:
            f = r.finding
            mark = "[*] " if f.fix is not None else ""
            cell = f"cell {r.cell}:" if r.cell is not None else ""
            out.write(f"  {cell}{f.line:>{rows}}:{f.column + 1:<{columns}} {f.code} {mark}{f.message}\n")
        out.write("\n")
    if summary:
        _summary(results, out)


def write_pylint(results: Sequence[Located], out: TextIO) -> None:
    for r in results:
        row = 1 if r.cell is not None else r.finding.line
        out.write(f"{r.path}:{row}: [{r.finding.code}] {r.finding.message}\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_GITHUB_LEVEL = {"error": "error", "warning": "warning", "information": "notice", "info": "notice", "hint": "notice"}


def write_github(results: Sequence[Located], out: TextIO) -> None:
    """GitHub Actions workflow commands (docs.github.com, "Workflow commands": `::warning
    file=...::message`); `file` is absolute as in ruff's, the message repeats the short form."""
    for r in results:
        f = r.finding
        level = _GITHUB_LEVEL.get(f.severity, "warning")
        notebook = r.cell is not None  # the notebook file's lines are JSON: line 1, as ruff
        props = ",".join(
            [
                f"title={_escape_property(f'atenlens ({f.code})')}",
                f"file={_escape_property(os.path.abspath(r.path))}",
                f"line={1 if notebook else f.line}",
                f"col={1 if notebook else f.column + 1}",
                f"endLine={1 if notebook else f.end_line}",
                f"endColumn={1 if notebook else f.end_column + 1}",
            ]
        )
        out.write(f"::{level} {props}::{_escape_data(f'{_where(r)}: {f.code} {f.message}')}\n")


_SARIF_LEVEL = {"error": "error", "warning": "warning", "information": "note", "info": "note", "hint": "note"}


def _sarif_artifact(path: str) -> dict:
    full = os.path.abspath(path)
    rel = os.path.relpath(full)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return {"uri": Path(full).as_uri()}
    return {"uri": Path(rel).as_posix(), "uriBaseId": "%SRCROOT%"}


def _sarif_region(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"startLine": line, "startColumn": column + 1, "endLine": end_line, "endColumn": end_column + 1}


def sarif_log(results: Sequence[Located]) -> dict:
    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule_markdown(rule)},
            "helpUri": rule_url(rule),
            "defaultConfiguration": {"level": "warning"},
        }
        for rule in RULES
    ]
    index = {rule.code: i for i, rule in enumerate(RULES)}
    out_results = []
    for r in results:
        f = r.finding
        result: dict = {
            "ruleId": f.code,
            "level": _SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _sarif_artifact(r.path),
                        "region": _sarif_region(f.line, f.column, f.end_line, f.end_column),
                    }
                }
            ],
        }
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        if r.cell is not None:
            result["properties"] = {"cell": r.cell}  # the region's rows are the cell's
        if f.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": f.fix.title},
                    "artifactChanges": [
                        {
                            "artifactLocation": _sarif_artifact(r.path),
                            "replacements": [
                                {
                                    "deletedRegion": _sarif_region(e.line, e.column, e.end_line, e.end_column),
                                    "insertedContent": {"text": e.new_text},
                                }
                                for e in f.fix.edits
                            ],
                        }
                    ],
                }
            ]
        out_results.append(result)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {"name": "atenlens", "informationUri": TOOL_URL, "version": TOOL_VERSION, "rules": rules}
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(os.getcwd()).as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": out_results,
            }
        ],
    }


def write_sarif(results: Sequence[Located], out: TextIO) -> None:
    json.dump(sarif_log(results), out, indent=2, ensure_ascii=False)
    out.write("\n")


_GITLAB_SEVERITY = {"error": "critical", "warning": "major", "information": "info", "info": "info", "hint": "info"}


def gitlab_report(results: Sequence[Located]) -> list[dict]:
    import hashlib

    base = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    seen: Counter[tuple[str, str, str]] = Counter()
    report = []
    for r in results:
        f = r.finding
        path = Path(os.path.relpath(os.path.abspath(r.path), base)).as_posix()
        key = (path, f.code, re.sub(r"\blines? \d+", "line", f.message))  # "read on line 12" moves with edits
        seen[key] += 1
        digest = hashlib.sha256("\0".join((*key, str(seen[key]))).encode("utf-8")).hexdigest()[:16]
        notebook = r.cell is not None  # rows of a cell, not of the file: line 1, as the other formats
        report.append(
            {
                "check_name": f.code,
                "description": f"{f.code}: {f.message}",
                "severity": _GITLAB_SEVERITY.get(f.severity, "major"),
                "fingerprint": digest,
                "location": {
                    "path": path,
                    "positions": {
                        "begin": {"line": 1 if notebook else f.line, "column": 1 if notebook else f.column + 1},
                        "end": {"line": 1 if notebook else f.end_line, "column": 1 if notebook else f.end_column + 1},
                    },
                },
            }
        )
    return report


def write_gitlab(results: Sequence[Located], out: TextIO) -> None:
    json.dump(gitlab_report(results), out, indent=2, ensure_ascii=False)
    out.write("\n")


SUMMARIZED = ("text", "concise", "grouped")  # the writers that end with a summary (`--quiet` drops it)

WRITERS = {
    "text": write_text,
    "concise": write_concise,
    "json": write_json,
    "json-lines": write_json_lines,
    "grouped": write_grouped,
    "pylint": write_pylint,
    "github": write_github,
    "gitlab": write_gitlab,
    "sarif": write_sarif,
}


def write_statistics(results: Sequence[Located], fmt: str, out: TextIO) -> None:
    """`--statistics`: one row per code, most frequent first, as ruff's (`count\\tcode\\t[*] name`;
    as JSON a list of `{code, name, count, fixable, fixable_count}`)."""
    counts = Counter(r.finding.code for r in results)
    fixable = Counter(r.finding.code for r in results if r.finding.fix is not None)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        json.dump(
            [
                {
                    "code": code,
                    "name": _name(code),
                    "count": count,
                    "fixable": fixable[code] > 0,
                    "fixable_count": fixable[code],
                }
                for code, count in rows
            ],
            out,
            indent=2,
        )
        out.write("\n")
        return
    width = max((len(str(count)) for _, count in rows), default=1)
    for code, count in rows:
        mark = "[*]" if fixable[code] else "[ ]"
        out.write(f"{count:>{width}}\t{code}\t{mark} {_name(code)}\n")
    if rows:
        out.write(f"Found {_plural(sum(counts.values()), 'problem')}.\n")
        if fixable:
            out.write(f"[*] {sum(fixable.values())} fixable with `--fix`.\n")


def _name(code: str) -> Optional[str]:
    rule = _RULES.get(code)
    return rule.name if rule else None
