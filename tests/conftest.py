"""Session-wide test configuration."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """scikit-learn's ``check_array_api_input`` only runs when SciPy's array-API mode is switched on, which must
    happen before SciPy is imported, so in this process it would skip.  Those checks are moved out of this run
    and run for real, in a child process with ``SCIPY_ARRAY_API=1``, by tests/test_estimators_array_api.py."""
    if os.environ.get("SCIPY_ARRAY_API") == "1":
        return
    moved = [it for it in items if "check_array_api_input" in it.nodeid]
    if moved:
        config.hook.pytest_deselected(items=moved)
        items[:] = [it for it in items if "check_array_api_input" not in it.nodeid]
