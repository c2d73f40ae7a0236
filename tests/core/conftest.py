"""The behaviour suite runs on every S3 implementation in tests.servers.BACKENDS."""

from __future__ import annotations

import pytest

from tests.servers import BACKENDS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only this directory's tests: pytest calls a conftest's
    # pytest_generate_tests for the tests under it. Session scope groups each
    # backend's tests together.
    if "s3_backend" in metafunc.fixturenames:
        metafunc.parametrize("s3_backend", BACKENDS, indirect=True, scope="session",
                             ids=BACKENDS)
