"""`[tool.atenlens.check]` in pyproject.toml: the functions `atenlens check` traces, and their budgets.

    [tool.atenlens.check]
    baseline = "atenlens-baseline.toml"        # optional; this is the default
    [tool.atenlens.check.functions]
    "train.py::train_step" = { syncs = 0, peak = "70 GiB", gpu = "h100", step_time = "400 ms" }
    "train.py::train" = { AL100 = 1, pageable_copies = 0, allow = ["AL100", "AL101"] }

A bad table (unknown key, wrong type, bad unit, unknown GPU) is a ConfigError naming the file and
the key; nothing is traced with half a configuration.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

from atenlens.check.units import parse_bytes, parse_seconds
from atenlens.gpus import find_gpu
from atenlens.lint.config import ConfigError, _tool_tables

DEFAULT_BASELINE = "atenlens-baseline.toml"
TABLE_KEYS = ("functions", "baseline", "peak_tolerance", "time_tolerance", "flops_tolerance")
# What a function's entry may say: budgets, then how to trace it (as `atenlens trace`'s options).
BUDGET_KEYS = ("syncs", "pageable_copies", "unsynced_reads", "peak", "step_time", "flops", "collective_bytes", "allow")
TRACE_KEYS = ("gpu", "call", "device", "timeout", "argv", "world_size", "rank", "gpus_per_node")
CODE = re.compile(r"^AL[0-9]{3}$")
TARGET = re.compile(r"^(?P<file>.+)::(?P<qualname>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")


@dataclass(frozen=True)
class Budget:
    """Upper bounds (None: not budgeted); flops has a lower bound too (a drop can be a bug)."""

    syncs: Optional[int] = None
    codes: tuple[tuple[str, int], ...] = ()  # ("AL100", 0): at most 0 diagnostics of that code
    pageable_copies: Optional[int] = None
    unsynced_reads: Optional[int] = None
    peak_bytes: Optional[int] = None
    step_seconds: Optional[float] = None
    flops_min: Optional[int] = None
    flops_max: Optional[int] = None
    collective_bytes: Optional[int] = None
    allow: Optional[tuple[str, ...]] = None  # when given: any other diagnostic code fails


@dataclass(frozen=True)
class CheckedFunction:
    target: str  # as written in the table: "train.py::train_step" (relative to the table's folder)
    file: str  # absolute
    qualname: str
    budget: Budget
    gpu: str = "h100-sxm"
    call: Optional[str] = None
    device: Literal["cpu", "cuda"] = "cuda"
    timeout: float = 60.0
    argv: Optional[tuple[str, ...]] = None
    world_size: Optional[int] = None
    rank: Optional[int] = None
    gpus_per_node: Optional[int] = None


@dataclass(frozen=True)
class CheckConfig:
    path: Optional[Path]  # None: no table, only `# atenlens-budget:` comments
    functions: tuple[CheckedFunction, ...]
    baseline: Path
    peak_tolerance: float = 0.05  # a baseline's peak may grow by 5% before it is a regression
    time_tolerance: float = 0.10
    flops_tolerance: float = 0.05  # either way


def find_check_pyproject(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml at or above `start` with a `[tool.atenlens.check]` table."""
    folder = Path(os.path.abspath(start))
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"atenlens" in data and isinstance(_tool_tables(path, data).get("atenlens", {}).get("check"), dict):
            return path
    return None


def load_check_config(pyproject: Path) -> CheckConfig:
    try:
        data = pyproject.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{pyproject}: cannot read ({exc.strerror or exc})") from None
    table = _tool_tables(pyproject, data).get("atenlens", {}).get("check")
    where = f"{pyproject}: [tool.atenlens.check]"
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: no [tool.atenlens.check] table")
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise ConfigError(f"{where} unknown key {unknown[0]!r} (known: {', '.join(TABLE_KEYS)})")
    root = pyproject.parent
    baseline = table.get("baseline", DEFAULT_BASELINE)
    if not isinstance(baseline, str) or not baseline:
        raise ConfigError(f"{where} baseline must be a file name, got {baseline!r}")
    tolerances = {}
    for key in ("peak_tolerance", "time_tolerance", "flops_tolerance"):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 10:
                raise ConfigError(f"{where} {key} must be a fraction such as 0.05, got {value!r}")
            tolerances[key] = float(value)
    functions = table.get("functions", {})
    if not isinstance(functions, dict) or not functions:
        raise ConfigError(f'{where} functions must be a table of "FILE::FUNCTION" = {{ budgets }}')
    checked = tuple(
        _function(f"{where}.functions {target!r}", root, target, entry) for target, entry in functions.items()
    )
    return CheckConfig(path=pyproject, functions=checked, baseline=root / baseline, **tolerances)


def _count(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} {key} must be a count (0 or more), got {value!r}")
    return value


def _function(where: str, root: Path, target: str, entry: Any) -> CheckedFunction:
    match = TARGET.match(target)
    if match is None:
        raise ConfigError(f'{where}: the key must look like FILE::FUNCTION (e.g. "train.py::train_step")')
    file = os.path.normpath(os.path.join(root, match["file"]))
    if not os.path.isfile(file):
        raise ConfigError(f"{where}: no such file: {match['file']}")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table of budgets such as {{ syncs = 0 }}, got {entry!r}")
    codes: list[tuple[str, int]] = []
    budget: dict[str, Any] = {}
    trace: dict[str, Any] = {}
    for key, value in entry.items():
        if CODE.match(key):
            codes.append((key, _count(where, key, value)))
        elif key in ("syncs", "pageable_copies", "unsynced_reads"):
            budget[key] = _count(where, key, value)
        elif key in ("peak", "collective_bytes"):
            try:
                budget["peak_bytes" if key == "peak" else key] = parse_bytes(value)
            except ValueError as error:
                raise ConfigError(f"{where} {key}: {error}") from None
        elif key == "step_time":
            try:
                budget["step_seconds"] = parse_seconds(value)
            except ValueError as error:
                raise ConfigError(f"{where} {key}: {error}") from None
        elif key == "flops":
            bounds = value if isinstance(value, dict) else {"max": value}
            extra = sorted(set(bounds) - {"min", "max"})
            if extra or not bounds:
                raise ConfigError(f"{where} flops must be a count or {{ min = N, max = N }}, got {value!r}")
            for side in ("min", "max"):
                if side in bounds:
                    raw = bounds[side]
                    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw < 1e30:
                        raise ConfigError(f"{where} flops.{side} must be a count, got {raw!r}")
                    budget[f"flops_{side}"] = round(raw)
        elif key == "allow":
            if not isinstance(value, list) or not all(isinstance(v, str) and CODE.match(v) for v in value):
                raise ConfigError(f'{where} allow must be a list of diagnostic codes such as ["AL100"], got {value!r}')
            budget["allow"] = tuple(sorted(set(value)))
        elif key == "gpu":
            try:
                trace["gpu"] = find_gpu(value if isinstance(value, str) else repr(value)).key
            except KeyError as error:
                raise ConfigError(f"{where} gpu: {error.args[0]}") from None
        elif key in ("call",):
            if not isinstance(value, str):
                raise ConfigError(f"{where} call must be a Python expression in a string, got {value!r}")
            trace["call"] = value
        elif key == "device":
            if value not in ("cpu", "cuda"):
                raise ConfigError(f'{where} device must be "cuda" or "cpu", got {value!r}')
            trace["device"] = value
        elif key == "timeout":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
                raise ConfigError(f"{where} timeout must be seconds between 0 and 3600, got {value!r}")
            trace["timeout"] = float(value)
        elif key == "argv":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where} argv must be a list of strings, got {value!r}")
            trace["argv"] = tuple(value)
        elif key in ("world_size", "rank", "gpus_per_node"):
            trace[key] = _count(where, key, value)
        else:
            known = ", ".join(BUDGET_KEYS + TRACE_KEYS) + ", or a code such as AL100"
            raise ConfigError(f"{where} unknown key {key!r} (known: {known})")
    if "world_size" in trace:
        from atenlens.trace.ranks import ranks_of  # torch-free

        try:
            ranks_of(trace["world_size"], trace.get("rank"), trace.get("gpus_per_node"))
        except ValueError as error:
            raise ConfigError(f"{where} world_size/rank/gpus_per_node: {error}") from None
    elif "rank" in trace or "gpus_per_node" in trace:
        raise ConfigError(f"{where} rank and gpus_per_node need world_size")
    return CheckedFunction(
        target=target,
        file=file,
        qualname=match["qualname"],
        budget=Budget(codes=tuple(sorted(codes)), **budget),
        **trace,
    )
