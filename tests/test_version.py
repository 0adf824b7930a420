"""The version is written once (atenlens/__init__.py); the package metadata, the server and the
extension manifest report that same version."""

import json
import tomllib
from importlib.metadata import version
from pathlib import Path

import atenlens
from atenlens.lsp import server

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_takes_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project
    assert project["dynamic"] == ["version"]


def test_installed_metadata_server_and_extension_agree():
    manifest = json.loads((ROOT / "package.json").read_text())
    assert version("atenlens") == atenlens.__version__
    assert server.VERSION == atenlens.__version__
    assert manifest["version"] == atenlens.__version__
