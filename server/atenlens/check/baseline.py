"""The baseline file: what each function does now, written by `atenlens check --update-baseline`.

It is made to be reviewed in a pull request: TOML, one block per function in sorted order, keys
sorted, no timestamps or machine names, and figures rounded to 3 significant digits (sizes and
times in units) so that noise in the forecast does not churn it:

    ["examples/train_step.py::train"]
    codes = { AL100 = 3 }
    collective_bytes = 0
    flops = 4610
    peak = "19.5 KiB"
    step_time = "31.2 us"
    syncs = 3
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from atenlens.check.measure import Measurement
from atenlens.check.units import format_bytes, format_seconds, parse_bytes, parse_seconds, round_count
from atenlens.lint.config import ConfigError

HEADER = (
    "# What each function does now, as `atenlens check` measures it (docs/check.md).\n"
    "# Rewritten by `atenlens check --update-baseline`; review its changes like code.\n"
)


@dataclass(frozen=True)
class BaselineEntry:
    syncs: int
    codes: dict[str, int]
    peak_bytes: Optional[int]
    step_seconds: Optional[float]
    flops: int
    collective_bytes: int


def entry_of(m: Measurement) -> BaselineEntry:
    """The measurement as the file keeps it (rounded), so that a fresh write compares equal."""
    return BaselineEntry(
        syncs=m.syncs,
        codes=dict(m.codes),
        peak_bytes=parse_bytes(format_bytes(m.peak_bytes)) if m.peak_bytes is not None else None,
        step_seconds=parse_seconds(format_seconds(m.step_seconds)) if m.step_seconds is not None else None,
        flops=round_count(m.flops),
        collective_bytes=round_count(m.collective_bytes),
    )


def _block(target: str, e: BaselineEntry) -> str:
    codes = ", ".join(f"{code} = {count}" for code, count in sorted(e.codes.items()))
    lines = [
        f"[{json.dumps(target)}]",
        f"codes = {{ {codes} }}" if codes else "codes = {}",
        f"collective_bytes = {e.collective_bytes}",
        f"flops = {e.flops}",
    ]
    if e.peak_bytes is not None:
        lines.append(f'peak = "{format_bytes(e.peak_bytes)}"')
    if e.step_seconds is not None:
        lines.append(f'step_time = "{format_seconds(e.step_seconds)}"')
    lines.append(f"syncs = {e.syncs}")
    return "\n".join(lines) + "\n"


def baseline_text(entries: dict[str, BaselineEntry]) -> str:
    return HEADER + "".join("\n" + _block(target, entries[target]) for target in sorted(entries))


def write_baseline(path: Path, entries: dict[str, BaselineEntry]) -> None:
    path.write_text(baseline_text(entries), encoding="utf-8")


def read_baseline(path: Path) -> dict[str, BaselineEntry]:
    """The file's entries; raises ConfigError (naming the file and the function) for a bad one."""
    import tomllib

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    entries = {}
    for target, block in document.items():
        where = f"{path}: [{json.dumps(target)}]"
        try:
            codes = block.get("codes", {})
            if not isinstance(codes, dict) or not all(isinstance(v, int) for v in codes.values()):
                raise ValueError("codes must be a table of counts")
            entries[target] = BaselineEntry(
                syncs=int(block["syncs"]),
                codes=dict(codes),
                peak_bytes=parse_bytes(block["peak"]) if "peak" in block else None,
                step_seconds=parse_seconds(block["step_time"]) if "step_time" in block else None,
                flops=int(block.get("flops", 0)),
                collective_bytes=int(block.get("collective_bytes", 0)),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{where} is not a baseline entry ({error}); rewrite it with --update-baseline") from None
    return entries
