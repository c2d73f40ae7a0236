"""``zero-rename doctor``: every probe against the real server, and against other
stores' behaviour played by the fault proxy; it cleans up what it wrote."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli
from tests.helpers import pending_in_bucket
from tests.s3proxy import S3Proxy
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3


def _nothing_left(c: Committer) -> None:
    assert list(c.store.list_objects(c.dest.bucket, c.dest.dir)) == []
    assert pending_in_bucket(c) == []


def test_doctor_on_the_embedded_server(cli: Cli, committer: Committer, dest: str) -> None:
    ran = cli("doctor", dest)
    assert ran.code == 0, ran.err
    assert "the committer can run on this store safely" in ran.out
    assert "ListMultipartUploads by prefix" in ran.out and "behaves like:" in ran.out
    data = cli("doctor", dest, "--json").json()
    assert data["safe"] is True and data["problems"] == [] and "seaweedfs" in data["like"]
    assert {c["status"] for c in data["checks"]} <= {"ok", "info"}
    _nothing_left(committer)


def test_doctor_on_a_minio_like_store(cli: Cli, proxy: S3Proxy, proxied: Committer) -> None:
    proxy.enable("minio_upload_prefix", "minio_recomplete")
    args = ("--endpoint-url", proxy.endpoint_url, "doctor", proxied.dest.url, "--json")
    data = cli(*args).json()
    assert data["safe"] is True and data["like"] == ["minio"]
    listing = next(c for c in data["checks"] if c["behaviour"] == "ListMultipartUploads by prefix")
    assert listing["status"] == "fallback" and "without a prefix" in listing["committer"]
    assert data["profile"]["recomplete"] == "no-such-upload"
    assert cli(*args, "--store-profile", "aws").code == 1  # aws overstates prefix listing
    assert cli(*args, "--store-profile", "minio").code == 0
    proxy.disable("minio_upload_prefix")
    _nothing_left(proxied)


def test_doctor_refuses_a_store_without_preconditions(
    cli: Cli, proxy: S3Proxy, proxied: Committer
) -> None:
    proxy.enable("no_preconditions")
    ran = cli("--endpoint-url", proxy.endpoint_url, "doctor", proxied.dest.url)
    assert ran.code == 1
    assert "the committer refuses to set up jobs on this store" in ran.out
    assert "ignores If-None-Match" in ran.out
    proxy.disable("no_preconditions")
    _nothing_left(proxied)


def test_doctor_flags_a_needlessly_refusing_profile(cli: Cli, dest: str) -> None:
    ran = cli("doctor", dest, "--store-profile", "gcs")
    assert ran.code == 1 and "makes the committer refuse to run" in ran.out


@pytest.mark.parametrize(
    "argv",
    [
        ("doctor", "s3://bucket/t#x"),
        ("doctor", "s3://k:s@bucket/t"),
        ("--store-profile", "dynamo", "doctor", "s3://bucket/t"),
    ],
)
def test_doctor_bad_input_is_a_usage_error(cli: Cli, argv: tuple[str, ...]) -> None:
    ran = cli(*argv)
    assert ran.code == 2 and ":s@" not in ran.err
