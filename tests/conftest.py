"""Shared fixtures and pytest plugins of the test suite."""
import pytest

from atenlens.worker.client import TraceWorker
from reliability_report import pytest_configure, reliability  # noqa: F401  (docs/reliability.md)


@pytest.fixture(scope="module")
def worker():
    """A warm trace worker shared by the tests of one module."""
    with TraceWorker() as warm:
        warm.start()
        assert warm.wait_ready(), "the worker did not become ready"
        yield warm
