"""``zero-rename doctor``: every probe against the real server, and against other
stores' behaviour played by the fault proxy; it cleans up what it wrote.

The races cost SeaweedFS a second or more a round (racing conditional writes
wait on a per-key lock there), so these tests skip them (``--race-rounds 0``)
unless the proxy plays the store and the races are the subject; one round on
the real server is raced in tests/core/s3/test_doctor_backends.py."""

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
    ran = cli("doctor", dest, "--race-rounds", "0")
    assert ran.code == 0, ran.err
    assert "the committer can run on this store safely" in ran.out
    assert "ListMultipartUploads by prefix" in ran.out and "behaves like:" in ran.out
    assert "races skipped (--race-rounds 0)" in ran.out
    data = cli("doctor", dest, "--json", "--race-rounds", "0").json()
    assert data["safe"] is True and data["problems"] == [] and "seaweedfs" in data["like"]
    assert {c["status"] for c in data["checks"]} <= {"ok", "info"}
    assert data["races"] == {} and data["if_match_forms"] == ["as-returned", "unquoted"]
    _nothing_left(committer)


def test_doctor_on_a_minio_like_store(cli: Cli, proxy: S3Proxy, proxied: Committer) -> None:
    proxy.enable("minio_upload_prefix", "minio_recomplete")
    args = ("--endpoint-url", proxy.endpoint_url, "doctor", proxied.dest.url, "--json")
    args += ("--race-rounds", "0")
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


def test_doctor_on_a_ceph_rgw_16_like_store(cli: Cli, proxy: S3Proxy, proxied: Committer) -> None:
    """Ceph RGW 16 refuses every If-Match whose ETag is quoted as S3 returns it: the
    doctor finds the unquoted form, says so, and names the profiles that send it."""
    proxy.enable("ceph_quoted_if_match")
    args = ("--endpoint-url", proxy.endpoint_url, "doctor", proxied.dest.url, "--race-rounds", "0")
    ran = cli(*args)
    assert ran.code == 0, ran.out
    assert "accepted unquoted only" in ran.out and "sends every If-Match ETag unquoted" in ran.out
    data = cli(*args, "--json").json()
    assert data["safe"] is True and data["profile"]["if_match_form"] == "unquoted"
    assert data["if_match_forms"] == ["unquoted"] and data["like"] == ["ceph"]
    wrong = cli(*args, "--store-profile", "aws")
    assert wrong.code == 1 and "If-Match carries the ETag as-returned" in wrong.out
    assert cli(*args, "--store-profile", "ceph").code == 0
    _nothing_left(proxied)


def test_doctor_refuses_a_store_whose_swap_never_succeeds(
    cli: Cli, proxy: S3Proxy, proxied: Committer
) -> None:
    """Refusing its own ETag quoted and unquoted, the store could never advance a job
    record; checking only that a wrong ETag is refused would call it safe."""
    proxy.enable("ceph_quoted_if_match")
    proxy.add(
        "PutObject",
        "error",
        status=412,
        code="PreconditionFailed",
        times=None,
        when=lambda request: not (request.header("If-Match") or '"').startswith('"'),
    )
    args = ("--endpoint-url", proxy.endpoint_url, "doctor", proxied.dest.url, "--json")
    ran = cli(*args, "--race-rounds", "0")
    data = ran.json()
    assert ran.code == 1 and data["safe"] is False and data["refused_at_setup"] is True
    assert data["profile"]["if_match_form"] == "refused" and data["if_match_forms"] == []
    assert data["problems"] == [
        "PutObject refuses If-Match with the object's own ETag, quoted or not, so no "
        "compare-and-swap could succeed: a job record could never advance"
    ]
    proxy.clear()
    proxy.disable("ceph_quoted_if_match")
    _nothing_left(proxied)


def test_doctor_refuses_a_store_whose_conditional_writes_race(
    cli: Cli, proxy: S3Proxy, proxied: Committer
) -> None:
    """Conditional PUTs checked and written in two steps, without a lock: each is
    right one at a time, so only racing them shows that several writers win."""
    proxy.enable("racy_if_none_match", "racy_if_match")
    args = ("--endpoint-url", proxy.endpoint_url, "doctor", proxied.dest.url, "--race-rounds", "2")
    ran = cli(*args)
    assert ran.code == 1
    assert "job setup's probe does not race writes" in ran.out
    data = cli(*args, "--json").json()
    assert data["safe"] is False and data["refused_at_setup"] is False
    races = data["races"]
    assert races["create"]["broken_rounds"] == 2 == races["swap"]["broken_rounds"]
    assert races["create"]["rounds"] == 2 and min(races["swap"]["winners"]) > 1
    assert len(data["problems"]) == 2
    assert data["problems"][0].startswith(
        "16 racing PutObject If-None-Match: * on one key had more than one winner in 2 of 2"
    )
    assert data["problems"][1].endswith("so a commit and an abort could both decide a job")
    unsafe = [c["behaviour"] for c in data["checks"] if c["status"] == "unsafe"]
    assert unsafe == [
        "16 racing PutObject If-None-Match: * on one key",
        "16 racing compare-and-swaps from one ETag",
    ]
    proxy.disable("racy_if_none_match", "racy_if_match")
    _nothing_left(proxied)


def test_doctor_flags_a_needlessly_refusing_profile(cli: Cli, dest: str) -> None:
    ran = cli("doctor", dest, "--store-profile", "gcs", "--race-rounds", "0")
    assert ran.code == 1 and "makes the committer refuse to run" in ran.out


@pytest.mark.parametrize(
    "argv",
    [
        ("doctor", "s3://bucket/t#x"),
        ("doctor", "s3://k:s@bucket/t"),
        ("--store-profile", "dynamo", "doctor", "s3://bucket/t"),
        ("doctor", "s3://bucket/t", "--race-rounds", "-1"),
        ("doctor", "s3://bucket/t", "--race-rounds", "51"),
        ("doctor", "s3://bucket/t", "--race-rounds", "2x"),
    ],
)
def test_doctor_bad_input_is_a_usage_error(cli: Cli, argv: tuple[str, ...]) -> None:
    ran = cli(*argv)
    assert ran.code == 2 and ":s@" not in ran.err
