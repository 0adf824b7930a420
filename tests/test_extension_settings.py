"""The VS Code extension's settings (package.json) are the server's settings: same names, same defaults,
same allowed values. The extension builds the server's settings object from the names package.json
declares (client/src/settings.ts), so a setting missing here would never reach the server."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from atenlens.lsp.settings import DEVICES, Settings, flat_default_settings, settings_from_json

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = json.loads((ROOT / "package.json").read_text())
PROPERTIES = MANIFEST["contributes"]["configuration"]["properties"]
CLIENT_ONLY = {"atenlens.interpreter"}       # how the server is started, not what it does
SERVER_PROPERTIES = {name: spec for name, spec in PROPERTIES.items() if name not in CLIENT_ONLY}


def as_server_json(name: str, value: object) -> dict:
    """`atenlens.hints.maxLength`, 9 -> {"hints": {"maxLength": 9}} (what the extension sends)."""
    _, section, key = name.split(".")
    return {section: {key: value}}


def test_package_json_declares_exactly_the_server_settings() -> None:
    assert sorted(SERVER_PROPERTIES) == sorted(flat_default_settings())


def test_package_json_defaults_are_the_server_defaults() -> None:
    defaults = flat_default_settings()
    assert {name: spec["default"] for name, spec in SERVER_PROPERTIES.items()} == defaults
    # the defaults, sent back as the extension sends them, are accepted unchanged
    for name, spec in SERVER_PROPERTIES.items():
        settings, problems = settings_from_json(as_server_json(name, spec["default"]))
        assert problems == [] and settings == Settings(), name


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


@pytest.mark.parametrize("name", sorted(n for n, s in SERVER_PROPERTIES.items() if "minimum" in s
                                        or "exclusiveMinimum" in s))
def test_numeric_bounds_are_the_servers(name: str) -> None:
    """The smallest value VS Code lets a user enter is accepted by the server; one below it falls back."""
    spec = SERVER_PROPERTIES[name]
    step = 1 if spec["type"] == "integer" else 0.5
    if "minimum" in spec:
        lowest, below = spec["minimum"], spec["minimum"] - step
    else:
        lowest, below = spec["exclusiveMinimum"] + step, spec["exclusiveMinimum"]
    _, section, key = name.split(".")
    field = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)      # maxLength -> max_length
    accepted, problems = settings_from_json(as_server_json(name, lowest))
    assert problems == [] and getattr(getattr(accepted, section), field) == lowest, problems
    rejected, problems = settings_from_json(as_server_json(name, below))
    assert rejected == Settings() and len(problems) == 1 and key in problems[0], problems


def test_workspace_trust_restricts_the_interpreter_setting() -> None:
    """In an untrusted workspace VS Code ignores the workspace's interpreter (it would run that program)."""
    trust = MANIFEST["capabilities"]["untrustedWorkspaces"]
    assert trust["supported"] == "limited"
    assert trust["restrictedConfigurations"] == ["atenlens.interpreter"]
    assert PROPERTIES["atenlens.interpreter"]["default"] == ""
