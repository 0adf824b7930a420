"""Budget and baseline comparisons: a measurement in, the problems (with their lines) out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from atenlens.check.baseline import BaselineEntry, entry_of
from atenlens.check.budgets import Budget, CheckConfig
from atenlens.check.measure import PAGEABLE_COPY, SYNC_CODES, UNSYNCED_READ, Measurement, Site
from atenlens.check.units import format_bytes, format_seconds


@dataclass(frozen=True)
class Problem:
    """One budget (or baseline figure) a function broke."""

    key: str  # "syncs", "AL100", "peak", "step_time", "flops", "collective_bytes", "allow", "trace"
    against: str  # "budget" or "baseline"
    limit: str  # as shown: "0", "70 GiB", "at most 0"
    measured: str
    sites: tuple[Site, ...]  # the lines responsible; empty: the function's own line is shown

    @property
    def summary(self) -> str:
        if self.key == "trace":
            return f"not traced ({self.measured})"
        return f"{self.key} {self.measured} ({self.against} {self.limit})"


@dataclass(frozen=True)
class Improvement:
    key: str
    before: str
    after: str


def _code_sites(m: Measurement, codes: tuple[str, ...]) -> tuple[Site, ...]:
    return tuple(site for code in codes for site in m.sites.get(code, ()))


def _sync_sites(m: Measurement) -> tuple[Site, ...]:
    return _code_sites(m, SYNC_CODES)


def check_budget(m: Measurement, budget: Budget) -> list[Problem]:
    problems = []

    def over(key: str, value: int, limit: Optional[int], sites: tuple[Site, ...]) -> None:
        if limit is not None and value > limit:
            problems.append(Problem(key, "budget", str(limit), str(value), sites))

    over("syncs", m.syncs, budget.syncs, _sync_sites(m))
    for code, limit in budget.codes:
        over(code, m.count(code), limit, _code_sites(m, (code,)))
    over("pageable_copies", m.count(PAGEABLE_COPY), budget.pageable_copies, _code_sites(m, (PAGEABLE_COPY,)))
    over("unsynced_reads", m.count(UNSYNCED_READ), budget.unsynced_reads, _code_sites(m, (UNSYNCED_READ,)))
    if budget.peak_bytes is not None:
        if m.peak_bytes is None:
            problems.append(
                Problem("peak", "budget", format_bytes(budget.peak_bytes), "not forecast (a cpu trace)", ())
            )
        elif m.peak_bytes > budget.peak_bytes:
            problems.append(
                Problem(
                    "peak",
                    "budget",
                    format_bytes(budget.peak_bytes),
                    format_bytes(m.peak_bytes),
                    m.sites.get("peak", ()),
                )
            )
    if budget.step_seconds is not None:
        if m.step_seconds is None:
            problems.append(
                Problem("step_time", "budget", format_seconds(budget.step_seconds), "not forecast (a cpu trace)", ())
            )
        elif m.step_seconds > budget.step_seconds:
            problems.append(
                Problem(
                    "step_time",
                    "budget",
                    format_seconds(budget.step_seconds),
                    format_seconds(m.step_seconds),
                    m.sites.get("time", ()),
                )
            )
    if budget.flops_max is not None and m.flops > budget.flops_max:
        problems.append(Problem("flops", "budget", f"at most {budget.flops_max}", str(m.flops), ()))
    if budget.flops_min is not None and m.flops < budget.flops_min:
        problems.append(Problem("flops", "budget", f"at least {budget.flops_min}", str(m.flops), ()))
    if budget.collective_bytes is not None and m.collective_bytes > budget.collective_bytes:
        problems.append(
            Problem(
                "collective_bytes",
                "budget",
                format_bytes(budget.collective_bytes),
                format_bytes(m.collective_bytes),
                m.sites.get("collectives", ()),
            )
        )
    if budget.allow is not None:
        others = tuple(code for code in m.codes if code not in budget.allow)
        if others:
            problems.append(
                Problem(
                    "allow",
                    "budget",
                    "only " + (", ".join(budget.allow) or "no diagnostics"),
                    ", ".join(others),
                    _code_sites(m, others),
                )
            )
    return problems


def check_baseline(m: Measurement, base: BaselineEntry, config: CheckConfig) -> tuple[list[Problem], list[Improvement]]:
    """Regressions (more syncs or diagnostics of a code, a higher peak or step time beyond the
    tolerance, FLOPs changed beyond it either way, more collective bytes) and improvements."""
    now = entry_of(m)
    problems: list[Problem] = []
    better: list[Improvement] = []

    def counted(key: str, before: int, after: int, sites: tuple[Site, ...]) -> None:
        if after > before:
            problems.append(Problem(key, "baseline", str(before), str(after), sites))
        elif after < before:
            better.append(Improvement(key, str(before), str(after)))

    counted("syncs", base.syncs, m.syncs, _sync_sites(m))
    for code in sorted(set(base.codes) | set(m.codes)):
        counted(code, base.codes.get(code, 0), m.count(code), _code_sites(m, (code,)))

    def scaled(key: str, before: Optional[float], after: Optional[float], tolerance: float, shown, sites) -> None:
        if before is None or after is None:
            return
        if after > before * (1 + tolerance) and after > before:
            problems.append(Problem(key, "baseline", shown(before), shown(after), sites))
        elif after < before * (1 - tolerance):
            better.append(Improvement(key, shown(before), shown(after)))

    scaled(
        "peak",
        base.peak_bytes,
        now.peak_bytes,
        config.peak_tolerance,
        lambda v: format_bytes(round(v)),
        m.sites.get("peak", ()),
    )
    scaled(
        "step_time", base.step_seconds, now.step_seconds, config.time_tolerance, format_seconds, m.sites.get("time", ())
    )
    if abs(now.flops - base.flops) > config.flops_tolerance * base.flops:
        problems.append(Problem("flops", "baseline", str(base.flops), str(now.flops), ()))
    if now.collective_bytes > base.collective_bytes:
        problems.append(
            Problem(
                "collective_bytes",
                "baseline",
                format_bytes(base.collective_bytes),
                format_bytes(now.collective_bytes),
                m.sites.get("collectives", ()),
            )
        )
    elif now.collective_bytes < base.collective_bytes:
        better.append(
            Improvement("collective_bytes", format_bytes(base.collective_bytes), format_bytes(now.collective_bytes))
        )
    return problems, better
