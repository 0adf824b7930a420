"""Sizes and durations as people write them in a budget: `70 GiB`, `1.5e9`, `400 ms`.

Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB) powers of
1000, as nvidia-smi and torch.cuda.memory_summary print them. A bare number is bytes or seconds.
"""

from __future__ import annotations

import math
import re
from typing import Union

BYTE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Zµ]*)\s*$")


def _split(text: str) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a number with a unit: {text!r}")
    return float(match.group(1)), match.group(2).lower()


def _parse(value: Union[int, float, str], units: dict, base: str, what: str, kind: str, names: str) -> float:
    """A number in `base` units: a bare int or float, or a string with one of `units`."""
    if isinstance(value, bool):
        raise ValueError(f"not a {what}: {value!r}")
    if isinstance(value, (int, float)):
        number, unit = float(value), base
    elif isinstance(value, str):
        number, unit = _split(value)
        unit = unit or base
    else:
        raise ValueError(f"not a {what}: {value!r}")
    if unit not in units:
        raise ValueError(f"unknown {kind} unit {unit!r} in {value!r} (use {names})")
    if number < 0 or not math.isfinite(number):
        raise ValueError(f"a {what} must be 0 or more, got {value!r}")
    return number * units[unit]


def parse_bytes(value: Union[int, float, str]) -> int:
    """`"70 GiB"` -> 75161927680; an int or float is bytes. Raises ValueError."""
    return round(_parse(value, BYTE_UNITS, "b", "size", "size", "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB"))


def parse_seconds(value: Union[int, float, str]) -> float:
    """`"400 ms"` -> 0.4; an int or float is seconds. Raises ValueError."""
    return _parse(value, TIME_UNITS, "s", "duration", "time", "s, ms, us, ns")


def _three_digits(number: float) -> str:
    """3 significant digits, trailing zeros dropped: 1.2345 -> "1.23", 120.0 -> "120"."""
    text = f"{number:.3g}"
    if "e" in text:  # .3g goes to exponents at 1000 and up; units keep it below
        text = f"{number:.0f}"
    return text


def format_bytes(count: int) -> str:
    """3 significant digits in the largest binary unit under the value: 1288490 -> "1.23 MiB"."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        size = BYTE_UNITS[unit.lower()]
        if count >= size:
            return f"{_three_digits(count / size)} {unit}"
    return f"{count} B"


def format_seconds(seconds: float) -> str:
    """3 significant digits: 0.01234 -> "12.3 ms"."""
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= size:
            return f"{_three_digits(seconds / size)} {unit}"
    return f"{_three_digits(seconds / 1e-9)} ns" if seconds > 0 else "0 s"


def round_count(count: int) -> int:
    """3 significant digits, so that a baseline does not churn on noise: 123456 -> 123000."""
    if count < 1000:
        return count
    digits = len(str(count)) - 3
    return round(count, -digits)
