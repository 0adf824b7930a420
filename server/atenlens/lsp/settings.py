"""The server's settings: fully-defaulted frozen dataclasses, read from camelCase JSON.

This module is the single source of the defaults: the VS Code extension's package.json declares
the same values (a test compares them with `default_settings_json()`), docs/lsp.md lists them.
Settings arrive as `initializationOptions` and with `workspace/didChangeConfiguration`; every key is
optional, and an invalid value falls back to its default and is reported (once per change) by
`settings_from_json`'s second return value.

`trace.enabled` is the exception, because it decides whether the workspace's code runs: it is true
only while the last explicit, valid value the client gave is `true` (`trace_switch`). A source that
does not mention it keeps the last value (off if none was ever given); a value that is not a clear
`true` or `false` (null, a string, a `trace` section that is not an object, settings that are not
an object) turns tracing off.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from atenlens.gpus import find_gpu, gpu_names
from atenlens.worker.limits import DEFAULT_MEMORY_LIMIT_MB, LONGEST_TIMEOUT_SECONDS

DEVICES = ("cuda", "cpu")
# which functions get a "Trace this step" code lens (lsp/lenses.py): "steps" those traceable as they are,
# with a `# atenlens:` directive, or that look like a training step; "all" every function and method
LENS_CHOICES = ("steps", "all", "none")
# The largest memory limit accepted: 16 TiB, far above any machine's memory and well inside what
# setrlimit takes in bytes (a larger value used to be accepted and then fail every trace).
LARGEST_MEMORY_LIMIT_MB = 16 * 1024 * 1024


@dataclass(frozen=True)
class TraceSettings:
    enabled: bool = False  # True only when the client said so (trace_switch); False: no user
    # code ever runs, no worker process starts
    device: str = "cuda"  # device to simulate: "cuda" or "cpu"
    timeout_seconds: float = 30.0  # budget for loading the module and running the function
    on_save: bool = False  # re-trace the functions traced before when the file is saved
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB  # the data-segment limit of each trace's process
    gpu: str = "h100-sxm"  # GPU that memory and time are forecast for (atenlens/gpus.py)
    world_size: int = 0  # simulated ranks (docs/distributed.md); 0: the function's
    #                                  `# atenlens-ranks:` comment, else a single-process run
    rank: int = 0  # the rank traced (with world_size)
    gpus_per_node: int = 8  # ranks on one node share NVLink (with world_size)
    compile: bool = False  # trace every function as torch.compile would run it (AL600 graph breaks, AL601)


@dataclass(frozen=True)
class HintSettings:
    enabled: bool = True
    max_length: int = 60  # inlay hint labels longer than this are cut with "+N"
    # which parts a hint shows, one switch per kind (as Pylance's inlayHints.* settings)
    ops: bool = True  # op names (`addmm, relu`; off: counts only)
    shapes: bool = True  # the output shape (`f32[8, 32]`, a roll-up's `-> f32[8, 4]`)
    backward: bool = True  # the backward part (`∇ mm, sum`)
    syncs: bool = True  # `sync` where the host waits for the GPU
    time: bool = False  # cost: the line's estimated time and share of the step (`~20 µs 33%`)
    memory: bool = False  # cost: the device memory the line allocated (`alloc 5.5 KiB`)
    show_bookkeeping: bool = False  # views/detach in hints and hovers, setup ops in hints (__init__, optimizer state)


@dataclass(frozen=True)
class LensSettings:
    functions: str = "steps"  # one of LENS_CHOICES


@dataclass(frozen=True)
class LintSettings:
    enabled: bool = True
    select: tuple[str, ...] = ()  # codes to run; empty = all
    ignore: tuple[str, ...] = ()  # codes to skip


@dataclass(frozen=True)
class Settings:
    trace: TraceSettings = field(default_factory=TraceSettings)
    hints: HintSettings = field(default_factory=HintSettings)
    lenses: LensSettings = field(default_factory=LensSettings)
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


def _valid_timeout(value: Any) -> bool:
    # NaN fails both comparisons; inf fails the upper bound
    return _valid_positive_number(value) and value <= LONGEST_TIMEOUT_SECONDS


def _valid_memory_limit(value: Any) -> bool:
    return _valid_positive_int(value) and value <= LARGEST_MEMORY_LIMIT_MB


def _valid_gpu(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        find_gpu(value)
    except KeyError:
        return False
    return True


def _gpu_key(value: str) -> str:
    return find_gpu(value).key


def _valid_codes(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


# (section, field) -> (validator, converter); the description is what the user reads when a
# value is rejected.
_FIELDS: dict[tuple[str, str], tuple[Callable[[Any], bool], Callable[[Any], Any], str]] = {
    ("trace", "enabled"): (_valid_bool, bool, "true or false"),
    ("trace", "device"): (lambda v: v in DEVICES, str, "one of " + ", ".join(f'"{d}"' for d in DEVICES)),
    ("trace", "timeout_seconds"): (
        _valid_timeout,
        float,
        f"a positive number of seconds, at most {LONGEST_TIMEOUT_SECONDS:g}",
    ),
    ("trace", "on_save"): (_valid_bool, bool, "true or false"),
    ("trace", "gpu"): (_valid_gpu, _gpu_key, "a GPU of the table: " + ", ".join(gpu_names())),
    ("trace", "world_size"): (lambda v: _valid_positive_int(v) or v == 0, int, "0 (none) or a positive integer"),
    ("trace", "rank"): (lambda v: _valid_positive_int(v) or v == 0, int, "an integer >= 0"),
    ("trace", "gpus_per_node"): (_valid_positive_int, int, "a positive integer"),
    ("trace", "compile"): (_valid_bool, bool, "true or false"),
    ("trace", "memory_limit_mb"): (
        _valid_memory_limit,
        int,
        f"a positive integer of MiB, at most {LARGEST_MEMORY_LIMIT_MB}",
    ),
    ("hints", "enabled"): (_valid_bool, bool, "true or false"),
    ("hints", "max_length"): (lambda v: _valid_positive_int(v) and v >= 10, int, "an integer >= 10"),
    ("hints", "ops"): (_valid_bool, bool, "true or false"),
    ("hints", "shapes"): (_valid_bool, bool, "true or false"),
    ("hints", "backward"): (_valid_bool, bool, "true or false"),
    ("hints", "syncs"): (_valid_bool, bool, "true or false"),
    ("hints", "time"): (_valid_bool, bool, "true or false"),
    ("hints", "memory"): (_valid_bool, bool, "true or false"),
    ("hints", "show_bookkeeping"): (_valid_bool, bool, "true or false"),
    ("lenses", "functions"): (lambda v: v in LENS_CHOICES, str, "one of " + ", ".join(f'"{c}"' for c in LENS_CHOICES)),
    ("lint", "enabled"): (_valid_bool, bool, "true or false"),
    ("lint", "select"): (_valid_codes, lambda v: tuple(v), "a list of codes"),
    ("lint", "ignore"): (_valid_codes, lambda v: tuple(v), "a list of codes"),
}


FAIL_CLOSED = ("trace", "enabled")


@dataclass(frozen=True)
class TraceSwitch:
    """What one settings source says about `trace.enabled`: `value` True or False when it says
    so (False also for anything unclear), None when it does not mention it; `why` in words."""

    value: Optional[bool]
    why: str


def _unwrap(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("atenlens"), dict):
        return data["atenlens"]
    return data


def trace_switch(data: Any) -> TraceSwitch:
    """`trace.enabled` as `data` gives it. Silence (no settings, no `trace` section, no `enabled`
    key) is None: the switch keeps its last value. Anything but a clear true or false turns it off."""
    data = _unwrap(data)
    if data is None:
        return TraceSwitch(None, "no settings")
    if not isinstance(data, dict):
        return TraceSwitch(False, f"settings are {type(data).__name__}, not an object")
    if "trace" not in data:
        return TraceSwitch(None, "no trace section")
    section = data["trace"]
    if not isinstance(section, dict):
        return TraceSwitch(False, f"trace is {_json_repr(section)}, not an object")
    if "enabled" not in section:
        return TraceSwitch(None, "no trace.enabled")
    value = section["enabled"]
    if isinstance(value, bool):
        return TraceSwitch(value, f"trace.enabled is {_json_repr(value)}")
    return TraceSwitch(False, f"trace.enabled is {_json_repr(value)}, not true or false")


def _json_repr(value: Any) -> str:
    return json.dumps(value) if value is None or isinstance(value, bool) else repr(value)


def settings_from_json(data: Any, enabled_before: bool = False) -> tuple[Settings, list[str]]:
    """camelCase JSON -> Settings, plus one line per rejected value (which keeps its default).

    `data` may be the settings object itself or wrapped as `{"atenlens": {...}}` (what a client
    sends for `workspace/didChangeConfiguration` with a configuration section); None or {} gives
    the defaults. Unknown keys are ignored (newer editors may send more). `trace.enabled` is
    `trace_switch(data)`'s value, or `enabled_before` where `data` does not mention it."""
    problems: list[str] = []
    switch = trace_switch(data)
    enabled = enabled_before if switch.value is None else switch.value
    data = _unwrap(data)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.append(
            f"atenlens settings must be an object, got {type(data).__name__}; using defaults, tracing is off"
        )
        return _with_enabled(Settings(), enabled), problems
    sections: dict[str, Any] = {}
    defaults = Settings()
    for section_field in dataclasses.fields(Settings):
        section = section_field.name
        default_section = getattr(defaults, section)
        raw = data.get(section, {})
        if raw is None and section != FAIL_CLOSED[0]:
            raw = {}
        if not isinstance(raw, dict):
            if section == FAIL_CLOSED[0]:
                problems.append(f"atenlens.{section} must be an object; using its defaults, tracing is off")
            else:
                problems.append(f"atenlens.{section} must be an object; using its defaults")
            sections[section] = default_section
            continue
        values: dict[str, Any] = {}
        for item in dataclasses.fields(default_section):
            key = camel(item.name)
            if (section, item.name) == FAIL_CLOSED:
                if key in raw and not isinstance(raw[key], bool):
                    # the switch that keeps user code from running: a value that is not a clear
                    # `true` turns tracing off rather than falling back to anything
                    problems.append(
                        f"atenlens.{section}.{key} must be true or false (got {_json_repr(raw[key])}); tracing is off"
                    )
                continue
            if key not in raw or raw[key] is None:
                continue
            valid, convert, expected = _FIELDS[(section, item.name)]
            if valid(raw[key]):
                values[item.name] = convert(raw[key])
            else:
                problems.append(
                    f"atenlens.{section}.{key} must be {expected} (got {raw[key]!r}); "
                    f"using the default {_json_value(getattr(default_section, item.name))!r}"
                )
        sections[section] = dataclasses.replace(default_section, **values)
    return _with_enabled(Settings(**sections), enabled), problems


def _with_enabled(settings: Settings, enabled: bool) -> Settings:
    return dataclasses.replace(settings, trace=dataclasses.replace(settings.trace, enabled=enabled))


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
