"""The behaviour suite runs on the S3 implementations in tests.servers.BACKENDS,
or on those named by ``--s3-backends`` (``-k moto`` would also pick the
SeaweedFS case of a test marked ``moto_xfail``: marks are keywords too).

A test marked ``every_backend`` runs on each: the implementations answer it
differently (what an abort of a completed upload returns, error codes, the
doctor's probes), so its moto case takes code paths of zero_rename that its
SeaweedFS case does not. The others run on the first backend only, SeaweedFS by
default: traced line by line (the test's call, in this process), their moto
case ran no line of zero_rename that their SeaweedFS case did not, beyond the
translation of AWS's 404 for If-Match on a missing key into SeaweedFS's 412
(the same error from there on), garbage-collection timing and a cache hit that
depends on the tests run before; it doubled their cost and checked nothing
more. ``--s3-every-test-on-every-backend`` runs them all on each, as before:
do so when the store layer or a backend changes, and
mark the tests whose moto case then differs. A test marked ``moto_xfail`` runs
on each as well: its moto case records moto's difference, and fails when a moto
release removes it.
"""

from __future__ import annotations

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only this directory's tests: pytest calls a conftest's
    # pytest_generate_tests for the tests under it. Session scope groups each
    # backend's tests together.
    if "s3_backend" in metafunc.fixturenames:
        backends = backends_for(metafunc.definition, metafunc.config)
        metafunc.parametrize("s3_backend", backends, indirect=True, scope="session", ids=backends)


def backends_for(definition: pytest.Item, config: pytest.Config) -> list[str]:
    chosen: list[str] = config.option.s3_backends
    if config.option.s3_full_matrix or any(
        definition.get_closest_marker(m) is not None for m in ("every_backend", "moto_xfail")
    ):
        return chosen
    return chosen[:1]
