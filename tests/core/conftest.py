"""The behaviour suite runs on the S3 implementations in tests.servers.BACKENDS
(SeaweedFS, moto's server, LocalStack's S3), or on those named by
``--s3-backends`` (``-k moto`` would also pick the SeaweedFS case of a test
marked ``moto_xfail``: marks are keywords too).

Each test runs on the first backend, SeaweedFS by default, and on another only
where its case there takes code paths of zero_rename that its other cases do
not, found by tracing the cases line by line (the test's call, in this
process): ``also_on("moto")`` names those backends, ``every_backend`` means all.
On moto that is how the store answers (an abort of a completed upload, error
codes, the doctor's probes); on LocalStack, which answers as AWS does, only three
tests: the doctor (a repeated complete is NoSuchUpload there), upload listings
paged by key marker, and a complete sent again after its response was lost.
Beyond those, the traces differed only by garbage-collection timing, a cache hit
that depends on the tests run before, and the translation of AWS's 404 for
If-Match on a missing key into SeaweedFS's 412 (the same error from there on):
another case doubled a test's cost and checked nothing more.
``--s3-every-test-on-every-backend`` runs them all on each: do so when the store
layer or a backend changes, and mark the tests whose case then differs. A test
marked ``moto_xfail`` or ``localstack_xfail`` runs on that backend as well: its
case there records the backend's difference, and fails when a release removes it.
"""

from __future__ import annotations

import pytest

from tests.servers import BACKENDS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only this directory's tests: pytest calls a conftest's
    # pytest_generate_tests for the tests under it. Session scope groups each
    # backend's tests together.
    if "s3_backend" in metafunc.fixturenames:
        backends = backends_for(metafunc.definition, metafunc.config)
        metafunc.parametrize("s3_backend", backends, indirect=True, scope="session", ids=backends)


def backends_for(definition: pytest.Item, config: pytest.Config) -> list[str]:
    chosen: list[str] = config.option.s3_backends
    if config.option.s3_full_matrix or definition.get_closest_marker("every_backend"):
        return chosen
    wanted = {chosen[0]}
    for mark in definition.iter_markers("also_on"):
        wanted.update(mark.args)
    wanted.update(b for b in BACKENDS if definition.get_closest_marker(f"{b}_xfail"))
    return [b for b in chosen if b in wanted]
