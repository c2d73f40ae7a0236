"""``zero-rename doctor`` against each S3 implementation of the suite, as a user runs it."""

from __future__ import annotations

import json

import pytest

from tests.helpers import pending_in_bucket
from tests.servers import S3Server
from zero_rename.cli.main import main
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3

# What each server answers where stores differ (see s3-semantics in the docs).
EXPECTED = {
    "seaweedfs": {"if_match_missing": "412", "recomplete": "same-etag"},
    "moto": {"if_match_missing": "404", "recomplete": "same-etag"},
}


@pytest.mark.every_backend
def test_doctor_on_each_server(
    s3_backend: S3Server,
    committer: Committer,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend = request.node.callspec.params["s3_backend"]
    code = main(["--endpoint-url", s3_backend.endpoint_url, "doctor", committer.dest.url, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["safe"] is True, data
    profile = data["profile"]
    assert profile["conditional_create"] and profile["conditional_replace"]
    assert profile["uploads_by_prefix"]
    for field, value in EXPECTED[backend].items():
        assert profile[field] == value, (field, profile)
    assert list(committer.store.list_objects(committer.dest.bucket, committer.dest.dir)) == []
    assert pending_in_bucket(committer) == []
