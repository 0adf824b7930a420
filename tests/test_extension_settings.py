"""The VS Code extension's settings (package.json) are the server's settings: same names, same defaults,
same allowed values. The extension builds the server's settings object from the names package.json
declares (client/src/settings.ts), so a setting missing here would never reach the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atenlens.gpus import gpu_names
from atenlens.lsp.settings import DEVICES, Settings, TraceSettings, flat_default_settings, settings_from_json

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = json.loads((ROOT / "package.json").read_text())
PROPERTIES = MANIFEST["contributes"]["configuration"]["properties"]
CLIENT_ONLY = {"atenlens.interpreter"}  # how the server is started, not what it does
SERVER_PROPERTIES = {name: spec for name, spec in PROPERTIES.items() if name not in CLIENT_ONLY}


def as_server_json(name: str, value: object) -> dict:
    """`atenlens.hints.maxLength`, 9 -> {"hints": {"maxLength": 9}} (what the extension sends)."""
    _, section, key = name.split(".")
    return {section: {key: value}}


def test_package_json_declares_exactly_the_server_settings() -> None:
    assert sorted(SERVER_PROPERTIES) == sorted(flat_default_settings())


def test_package_json_defaults_are_the_server_defaults() -> None:
    """All but trace.enabled: VS Code's default is on (for trusted workspaces), the server's, when a
    client sends nothing, is off; the extension always sends it (client/src/settings.ts)."""
    defaults = flat_default_settings()
    declared = {name: spec["default"] for name, spec in SERVER_PROPERTIES.items()}
    assert declared.pop("atenlens.trace.enabled") is True and defaults.pop("atenlens.trace.enabled") is False
    assert declared == defaults
    # the defaults, sent back as the extension sends them, are accepted unchanged
    for name, spec in SERVER_PROPERTIES.items():
        settings, problems = settings_from_json(as_server_json(name, spec["default"]))
        expected = Settings(trace=TraceSettings(enabled=True)) if name == "atenlens.trace.enabled" else Settings()
        assert problems == [] and settings == expected, name


def test_the_extension_always_sends_trace_enabled() -> None:
    """The server traces only when told to, so the extension states the value every time, and false
    whenever the workspace is not trusted."""
    source = (ROOT / "client" / "src" / "settings.ts").read_text()
    assert "settings.trace.enabled = vscode.workspace.isTrusted && settings.trace.enabled !== false;" in source


def test_json_types_match_the_server_defaults() -> None:
    json_type = {bool: "boolean", str: "string", list: "array"}
    for name, default in flat_default_settings().items():
        spec = SERVER_PROPERTIES[name]
        if isinstance(default, bool) or isinstance(default, (str, list)):
            assert spec["type"] == json_type[type(default)], name
        elif isinstance(default, int):
            assert spec["type"] == "integer", name
        else:
            assert spec["type"] == "number", name


def test_device_choices_are_the_servers() -> None:
    assert sorted(SERVER_PROPERTIES["atenlens.trace.device"]["enum"]) == sorted(DEVICES)


def test_gpu_choices_are_the_tables_and_names_are_accepted_in_any_case() -> None:
    assert SERVER_PROPERTIES["atenlens.trace.gpu"]["enum"] == list(gpu_names())
    settings, problems = settings_from_json({"trace": {"gpu": "H200"}})
    assert problems == [] and settings.trace.gpu == "h200"
    settings, problems = settings_from_json({"trace": {"gpu": "v100"}})
    assert settings.trace.gpu == "h100-sxm"
    assert problems == [
        "atenlens.trace.gpu must be a GPU of the table: h100-sxm, h100-pcie, h200, a100-80gb, "
        "a100-40gb, l4, l40s, rtx-4090, mi300x (got 'v100'); using the default 'h100-sxm'"
    ]


@pytest.mark.parametrize(
    "name", sorted(n for n, s in SERVER_PROPERTIES.items() if "minimum" in s or "exclusiveMinimum" in s)
)
def test_numeric_bounds_are_the_servers(name: str) -> None:
    """The smallest value VS Code lets a user enter is accepted by the server; one below it falls back."""
    spec = SERVER_PROPERTIES[name]
    step = 1 if spec["type"] == "integer" else 0.5
    if "minimum" in spec:
        lowest, below = spec["minimum"], spec["minimum"] - step
    else:
        lowest, below = spec["exclusiveMinimum"] + step, spec["exclusiveMinimum"]
    _, section, key = name.split(".")
    field = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)  # maxLength -> max_length
    accepted, problems = settings_from_json(as_server_json(name, lowest))
    assert problems == [] and getattr(getattr(accepted, section), field) == lowest, problems
    rejected, problems = settings_from_json(as_server_json(name, below))
    assert rejected == Settings() and len(problems) == 1 and key in problems[0], problems


@pytest.mark.parametrize("name", sorted(n for n, s in SERVER_PROPERTIES.items() if "maximum" in s))
def test_numeric_upper_bounds_are_the_servers(name: str) -> None:
    """The largest value VS Code lets a user enter is accepted by the server; one above it falls back."""
    spec = SERVER_PROPERTIES[name]
    _, section, key = name.split(".")
    field = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
    accepted, problems = settings_from_json(as_server_json(name, spec["maximum"]))
    assert problems == [] and getattr(getattr(accepted, section), field) == spec["maximum"], problems
    rejected, problems = settings_from_json(as_server_json(name, spec["maximum"] + 1))
    assert rejected == Settings() and len(problems) == 1 and key in problems[0], problems


def test_upper_bounds_are_declared_where_the_server_has_them() -> None:
    assert {n for n, s in SERVER_PROPERTIES.items() if "maximum" in s} == {
        "atenlens.trace.timeoutSeconds",
        "atenlens.trace.memoryLimitMb",
    }


def test_workspace_trust_restricts_the_interpreter_setting() -> None:
    """In an untrusted workspace VS Code ignores the workspace's interpreter (it would run that program)."""
    trust = MANIFEST["capabilities"]["untrustedWorkspaces"]
    assert trust["supported"] == "limited"
    assert trust["restrictedConfigurations"] == ["atenlens.interpreter"]
    assert PROPERTIES["atenlens.interpreter"]["default"] == ""
