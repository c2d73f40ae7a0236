"""The behaviour suite runs on every S3 implementation in tests.servers.BACKENDS,
or on those named by ``--s3-backends`` (``-k moto`` would also pick the
SeaweedFS case of a test marked ``moto_xfail``: marks are keywords too)."""

from __future__ import annotations

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only this directory's tests: pytest calls a conftest's
    # pytest_generate_tests for the tests under it. Session scope groups each
    # backend's tests together.
    if "s3_backend" in metafunc.fixturenames:
        backends: list[str] = metafunc.config.option.s3_backends
        metafunc.parametrize("s3_backend", backends, indirect=True, scope="session",
                             ids=backends)
