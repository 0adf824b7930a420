"""Shared fixtures and pytest plugins of the test suite.

The suite runs in three stages, in this order (markers registered in pyproject.toml):
- ``fast``: torch-free and worker-free (lint, text sync, rendering, schema, settings); seconds.
- ``engine``: torch on fake tensors, the trace worker, the server with traces, the CLI (the default stage).
- ``e2e``: a real VS Code in headless Chromium, a real Neovim, the packaged extension.
``pytest -m fast`` is the quick loop while editing; a plain ``pytest`` runs all three, fast ones first, so
a broken lint fails in seconds rather than after the editor tests.
"""

from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from atenlens.worker.client import TraceWorker
from lsp_helpers import EDITORS, SERVER, install_recorder
from reliability_report import add_options as reliability_options
from reliability_report import pytest_configure, reliability  # noqa: F401  (docs/reliability.md)


@pytest.fixture(scope="module")
def worker():
    """A warm trace worker shared by the tests of one module."""
    with TraceWorker() as warm:
        warm.start()
        assert warm.wait_ready(), "the worker did not become ready"
        yield warm


def pytest_addoption(parser: pytest.Parser) -> None:
    reliability_options(parser)
    parser.addoption(
        "--update-lint-snapshots",
        action="store_true",
        dest="update_lint_snapshots",
        help="rewrite tests/lint/fixtures/*.expected from the lint's findings and fixes",
    )


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), params=EDITORS)
async def client(lsp_client: LanguageClient, request):
    """The real server process (`python -m atenlens serve`) and a real LSP client, once as VS Code and
    once as Neovim (lsp_helpers.initialize sends that editor's capabilities)."""
    lsp_client.editor = request.param  # read by `initialize`
    lsp_client.recorder = install_recorder(lsp_client)
    yield
    await lsp_client.shutdown_session()


TESTS = Path(__file__).parent
FAST = {
    "lint",
    "test_lsp_lint.py",
    "test_layering.py",
    "test_libraries.py",
    "test_lsp_lenses.py",
    "test_lsp_example_call.py",
    "test_lsp_text.py",
    "test_lsp_convert.py",
    "test_render.py",
    "test_report_schema_doc.py",
    "test_extension_settings.py",
    "test_extension_marketplace.py",
    "test_version.py",
}
E2E = {"e2e", "test_neovim.py", "test_extension_bundle.py"}
STAGE_ORDER = {"fast": 0, "engine": 1, "e2e": 2}


def stage_of(path: Path) -> str:
    top = path.relative_to(TESTS).parts[0]
    return "fast" if top in FAST else "e2e" if top in E2E else "engine"


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(stage_of(Path(item.fspath)))
    items.sort(key=lambda item: STAGE_ORDER[stage_of(Path(item.fspath))])  # stable: file order kept within a stage
