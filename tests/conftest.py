"""Shared pytest plugins of the test suite."""
from reliability_report import pytest_configure, reliability  # noqa: F401  (docs/reliability.md)
