"""What every benchmark shares: statistics, targets, tables, the machine and versions, the CLI.

A benchmark builds a `Result` (tables of rows, targets with met/missed, notes), prints it as a
table and, with `--json PATH`, writes it for `bench/all`, which renders docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, Iterable, Optional, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- statistics --------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def spread(values: Sequence[float]) -> str:
    """min-max of the rounds, the honest spread for a handful of rounds."""
    if not values:
        return "-"
    return f"{fmt(min(values))}-{fmt(max(values))}"


def fmt(value: Optional[float], digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:.{decimals}f}"


def ms(seconds: float) -> float:
    return seconds * 1000.0


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """Items in round-robin order starting at k: A B C, B C A, C A B... so no peer always goes first."""
    if not items:
        return []
    k %= len(items)
    return list(items[k:]) + list(items[:k])


# -- results -----------------------------------------------------------------------------------


@dataclass
class Target:
    what: str  # "atenlens p95 <= 2 x ruff p95"
    value: Optional[float]  # what was measured (None: could not be measured)
    limit: Optional[float]
    unit: str = ""

    @property
    def status(self) -> str:
        if self.value is None or self.limit is None or math.isnan(self.value) or math.isnan(self.limit):
            return "not measured"
        return "met" if self.value <= self.limit else "MISSED"


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([c if isinstance(c, str) else fmt(c) for c in cells])


@dataclass
class Result:
    benchmark: str  # "lint_latency"
    title: str
    command: str  # how to run it
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quick: bool = False
    raw: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = [dict(asdict(t), status=t.status) for t in self.targets]
        return data

    def render(self, heading: str = "##") -> str:
        out = [f"{heading} {self.title}", "", f"`{self.command}`" + ("  (quick mode)" if self.quick else ""), ""]
        for table in self.tables:
            out += [f"**{table.title}**", "", markdown_table(table.columns, table.rows), ""]
        if self.targets:
            out += [
                "**Targets**",
                "",
                markdown_table(
                    ["target", "measured", "limit", "status"],
                    [
                        [
                            t.what,
                            fmt(t.value) + (f" {t.unit}" if t.value is not None else ""),
                            fmt(t.limit) + (f" {t.unit}" if t.limit is not None else ""),
                            t.status,
                        ]
                        for t in self.targets
                    ],
                ),
                "",
            ]
        for note in self.notes:
            out.append(f"- {note}")
        if self.notes:
            out.append("")
        return "\n".join(out)


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [[str(c) for c in row] for row in rows]
    widths = [max([len(col)] + [len(r[i]) for r in rows]) for i, col in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


# -- the machine and versions ------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": str(os.cpu_count()), "ram": ram, "os": platform.platform()}


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def versions() -> dict[str, str]:
    ruff = ruff_binary()
    ruff_version = "absent"
    if ruff:
        ruff_version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.split()[-1]
    return {
        "python": platform.python_version(),
        "torch": _dist_version("torch"),
        "atenlens": _dist_version("atenlens"),
        "ruff": ruff_version,
        "pylsp": _dist_version("python-lsp-server"),
        "pyflakes": _dist_version("pyflakes"),
        "pygls": _dist_version("pygls"),
    }


def byte_compile_atenlens() -> None:
    """Write atenlens's bytecode, as installing its wheel does (and as ruff's and pygls's are
    installed): a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile every module from
    source at each start, and a benchmark would measure that instead."""
    spec = importlib.util.find_spec("atenlens")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


def ruff_binary() -> Optional[str]:
    """The ruff executable next to this Python first (the venv's), then on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "ruff")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("ruff")


# -- process memory (Linux /proc, no psutil) ---------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident set size of one process now (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def descendants(pid: int) -> list[int]:
    """All live descendants of `pid` (children, grandchildren...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_rss_bytes(pid: int, include_self: bool = True) -> int:
    pids = descendants(pid) + ([pid] if include_self else [])
    return sum(rss_bytes(p) for p in pids)


# -- command line ------------------------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="smoke mode: tiny inputs, one round (for CI)")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON (for bench/all)")
    return p


def finish(result: Result, args: argparse.Namespace) -> int:
    print(result.render())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result.to_json(), f, indent=2)
    return 0
