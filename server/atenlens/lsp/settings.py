"""The server's settings: fully-defaulted frozen dataclasses, read from camelCase JSON.

This module is the single source of the defaults: the VS Code extension's package.json declares
the same values (a test compares them with `default_settings_json()`), docs/lsp.md lists them.
Settings arrive as `initializationOptions` and with `workspace/didChangeConfiguration`; every key is
optional, and an invalid value falls back to its default and is reported (once per change) by
`settings_from_json`'s second return value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

DEVICES = ("cuda", "cpu")


@dataclass(frozen=True)
class TraceSettings:
    enabled: bool = True             # False: no user code ever runs, no worker process starts
    device: str = "cuda"             # device to simulate: "cuda" or "cpu"
    timeout_seconds: float = 30.0    # budget for loading the module and running the function
    on_save: bool = False            # re-trace the functions traced before when the file is saved
    memory_limit_mb: int = 4096      # address-space limit of the trace worker process


@dataclass(frozen=True)
class HintSettings:
    enabled: bool = True
    max_length: int = 60             # inlay hint labels longer than this are cut with "+N"
    # which parts a hint shows, one switch per kind (as Pylance's inlayHints.* settings)
    ops: bool = True                 # op names (`addmm, relu`; off: counts only)
    shapes: bool = True              # the output shape (`f32[8, 32]`, a roll-up's `-> f32[8, 4]`)
    backward: bool = True            # the backward part (`∇ mm, sum`)
    syncs: bool = True               # `sync` where the host waits for the GPU
    show_bookkeeping: bool = False   # views/detach in hints and hovers, setup ops in hints (__init__, optimizer state)


@dataclass(frozen=True)
class LintSettings:
    enabled: bool = True
    select: tuple[str, ...] = ()     # codes to run; empty = all
    ignore: tuple[str, ...] = ()     # codes to skip


@dataclass(frozen=True)
class Settings:
    trace: TraceSettings = field(default_factory=TraceSettings)
    hints: HintSettings = field(default_factory=HintSettings)
    lint: LintSettings = field(default_factory=LintSettings)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _valid_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _valid_positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _valid_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _valid_codes(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


# (section, field) -> (validator, converter); the description is what the user reads when a
# value is rejected.
_FIELDS: dict[tuple[str, str], tuple[Callable[[Any], bool], Callable[[Any], Any], str]] = {
    ("trace", "enabled"): (_valid_bool, bool, "true or false"),
    ("trace", "device"): (lambda v: v in DEVICES, str, "one of " + ", ".join(f'"{d}"' for d in DEVICES)),
    ("trace", "timeout_seconds"): (_valid_positive_number, float, "a positive number"),
    ("trace", "on_save"): (_valid_bool, bool, "true or false"),
    ("trace", "memory_limit_mb"): (_valid_positive_int, int, "a positive integer"),
    ("hints", "enabled"): (_valid_bool, bool, "true or false"),
    ("hints", "max_length"): (lambda v: _valid_positive_int(v) and v >= 10, int, "an integer >= 10"),
    ("hints", "ops"): (_valid_bool, bool, "true or false"),
    ("hints", "shapes"): (_valid_bool, bool, "true or false"),
    ("hints", "backward"): (_valid_bool, bool, "true or false"),
    ("hints", "syncs"): (_valid_bool, bool, "true or false"),
    ("hints", "show_bookkeeping"): (_valid_bool, bool, "true or false"),
    ("lint", "enabled"): (_valid_bool, bool, "true or false"),
    ("lint", "select"): (_valid_codes, lambda v: tuple(v), "a list of codes"),
    ("lint", "ignore"): (_valid_codes, lambda v: tuple(v), "a list of codes"),
}


FAIL_CLOSED = ("trace", "enabled")


def settings_from_json(data: Any) -> tuple[Settings, list[str]]:
    """camelCase JSON -> Settings, plus one line per rejected value (which keeps its default).

    `data` may be the settings object itself or wrapped as `{"atenlens": {...}}` (what a client
    sends for `workspace/didChangeConfiguration` with a configuration section); None or {} gives
    the defaults. Unknown keys are ignored (newer editors may send more)."""
    problems: list[str] = []
    if isinstance(data, dict) and isinstance(data.get("atenlens"), dict):
        data = data["atenlens"]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return Settings(), [f"atenlens settings must be an object, got {type(data).__name__}; using defaults"]
    sections: dict[str, Any] = {}
    defaults = Settings()
    for section_field in dataclasses.fields(Settings):
        section = section_field.name
        default_section = getattr(defaults, section)
        raw = data.get(section, {})
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            if section == FAIL_CLOSED[0]:
                problems.append(f"atenlens.{section} must be an object; using its defaults, tracing stays off")
                sections[section] = dataclasses.replace(default_section, **{FAIL_CLOSED[1]: False})
                continue
            problems.append(f"atenlens.{section} must be an object; using its defaults")
            sections[section] = default_section
            continue
        values: dict[str, Any] = {}
        for item in dataclasses.fields(default_section):
            key = camel(item.name)
            if key not in raw or raw[key] is None:
                continue
            valid, convert, expected = _FIELDS[(section, item.name)]
            if valid(raw[key]):
                values[item.name] = convert(raw[key])
            elif (section, item.name) == FAIL_CLOSED:
                # the switch that keeps user code from running: a value that is not a clear
                # `true` keeps tracing off rather than falling back to the default (on)
                values[item.name] = False
                problems.append(f"atenlens.{section}.{key} must be {expected} (got {raw[key]!r}); tracing stays off")
            else:
                problems.append(
                    f"atenlens.{section}.{key} must be {expected} (got {raw[key]!r}); "
                    f"using the default {_json_value(getattr(default_section, item.name))!r}")
        sections[section] = dataclasses.replace(default_section, **values)
    return Settings(**sections), problems


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def settings_to_json(settings: Settings) -> dict[str, Any]:
    """Settings -> the camelCase JSON an editor sends (the inverse of `settings_from_json`)."""
    return {
        section.name: {
            camel(item.name): _json_value(getattr(getattr(settings, section.name), item.name))
            for item in dataclasses.fields(getattr(settings, section.name))
        }
        for section in dataclasses.fields(settings)
    }


def default_settings_json() -> dict[str, Any]:
    """The defaults as camelCase JSON: {"trace": {"enabled": True, ...}, "hints": {...}, ...}."""
    return settings_to_json(Settings())


def flat_default_settings() -> dict[str, Any]:
    """The defaults keyed as VS Code declares them: {"atenlens.trace.enabled": True, ...}."""
    return {
        f"atenlens.{section}.{key}": value
        for section, values in default_settings_json().items()
        for key, value in values.items()
    }


def merge_problem_message(problems: list[str]) -> Optional[str]:
    """The ONE message shown to the user for a batch of rejected values."""
    if not problems:
        return None
    return "atenlens: invalid settings, defaults used instead: " + "; ".join(problems)
