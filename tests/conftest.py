"""Shared fixtures: the real data sets, which CI must have."""

import os

import pytest

from benchmarks.data import ENVIRONMENT_VARIABLE, data_dir


@pytest.fixture(scope="session")
def datasets():
    """The data set directory; a skip without it, or a failure under CI=true."""
    path = data_dir()
    if not path.is_dir():
        message = f"real data sets not found at {path} (set {ENVIRONMENT_VARIABLE} to their directory)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
