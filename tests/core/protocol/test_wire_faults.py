"""Faults on the wire, between botocore and the S3 server, through the fault proxy.

Where the hooks in ``tests/faults.py`` fail a call inside the client, the proxy
drops connections after S3 acted, answers 409 or 503, and plays other stores'
quirks (MinIO's upload listing, GCS's missing preconditions, Ceph RGW 16's
If-Match), so botocore's own retries meet the protocol's read-backs as they
would in production.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import pending_in_bucket, visible, write_task
from tests.s3proxy import CHAOS_ACTIONS, S3Proxy
from tests.whole_job import JOB_WRITES, assert_committed_once, run_job
from zero_rename.core.committer import Committer
from zero_rename.core.s3 import client as store_module
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.core.s3.probes import examine
from zero_rename.errors import StoreCapabilityError, StoreError

pytestmark = pytest.mark.s3

# Every write of a whole job, and the uploads' own; "lose" lets the request act
# on S3, then drops the connection: botocore sends it again and meets its own write.
# (The complete's is apart: it alone takes paths of its own on LocalStack.)
LOST = [
    *(p for p in JOB_WRITES if p.id != "complete"),
    pytest.param("CreateMultipartUpload", None, 1, id="create-upload"),
    pytest.param("UploadPart", None, 1, id="upload-part"),
    pytest.param("AbortMultipartUpload", None, 1, id="stray-abort"),
]


@pytest.mark.parametrize("op,key,nth", LOST)
@pytest.mark.also_on("moto")
def test_a_lost_response_anywhere_commits_once_in_one_pass(
    proxy: S3Proxy, proxied: Committer, op: str, key: str | None, nth: int
) -> None:
    _lose_once_and_commit(proxy, proxied, op, key, nth)


@pytest.mark.every_backend
def test_a_lost_complete_commits_once_in_one_pass(proxy: S3Proxy, proxied: Committer) -> None:
    """The complete sent again after its response was lost: SeaweedFS and moto answer
    200 with the same ETag, LocalStack NoSuchUpload (as MinIO does); either way the
    commit checks the object's ETag and goes on."""
    _lose_once_and_commit(proxy, proxied, "CompleteMultipartUpload", None, 1)


def _lose_once_and_commit(
    proxy: S3Proxy, proxied: Committer, op: str, key: str | None, nth: int
) -> None:
    rule = proxy.add(op, "lose", key_contains=key, nth=nth)
    job_id = run_job(proxied, losing_attempt=True)
    assert rule.fired == 1
    assert_committed_once(proxied, job_id)


def test_conflict_409_on_every_conditional_write_is_a_lost_round(
    proxy: S3Proxy, proxied: Committer
) -> None:
    """AWS answers racing conditional writes with 409, which botocore does not retry."""
    proxy.enable("aws_conflict_409")
    job_id = run_job(proxied)
    assert proxy.counts["PutObject"] > proxy.forwarded["PutObject"]  # 409s were answered
    assert_committed_once(proxied, job_id)


@pytest.mark.parametrize("seed", range(4))
def test_five_percent_faults_over_a_whole_job(
    proxy: S3Proxy, proxied: Committer, seed: int
) -> None:
    """500s, SlowDown, resets, lost responses, delays and answers cut half-way on 5%
    of requests: botocore's retries, the store's and the protocol's read-backs leave
    exactly one copy."""
    proxy.chaos(0.05, seed=seed, actions=(*CHAOS_ACTIONS, "cut"))
    job_id = run_job(proxied)
    proxy.chaos(0)
    assert sum(proxy.chaos_fired.values()) >= 1
    assert_committed_once(proxied, job_id)


def test_max_attempts_is_every_attempt(proxy: S3Proxy, bucket: str) -> None:
    def store(attempts: int) -> S3Store:
        return S3Store.connect(StoreConfig(endpoint_url=proxy.endpoint_url, max_attempts=attempts))

    proxy.add("PutObject", "error", status=503, code="SlowDown", times=None)
    with pytest.raises(StoreError, match="SlowDown"):
        store(1).put_object(bucket, "k", b"x")
    assert proxy.counts["PutObject"] == 1
    proxy.clear()
    proxy.reset_counts()
    proxy.add("PutObject", "error", status=503, code="SlowDown", times=2)
    store(3).put_object(bucket, "k", b"x")
    assert proxy.counts["PutObject"] == 3


# -- other stores' quirks ---------------------------------------------------------------
def test_minio_upload_listing_falls_back_to_the_whole_bucket(
    proxy: S3Proxy, proxied: Committer, store_config: StoreConfig
) -> None:
    """MinIO takes a ListMultipartUploads prefix as one exact key: a prefix listing
    finds nothing. The probe at setup sees it, and abort lists without a prefix."""
    proxy.enable("minio_upload_prefix")
    job = proxied.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    assert job.store_profile is not None and not job.store_profile.uploads_by_prefix
    write_task(proxied, job, "00000", {"2024-01-01": b"a"}, commit=False)
    write_task(proxied, job, "00001", {"2024-01-02": b"b"})
    other = Committer(f"s3://{proxied.dest.bucket}/other", store_config)
    other_job = other.setup_job({"conflict_mode": "append"})
    write_task(other, other_job, "00000", [b"other"], commit=False)
    assert len(proxied.pending_uploads(job.job_id)) == 2
    assert proxied.abort_job(job.job_id).aborted_uploads == 2
    assert visible(proxied) == {}
    assert [u.key for u in other.pending_uploads()] == [
        u.key for u in other.pending_uploads(other_job.job_id)
    ]  # the other job's, untouched
    assert len(other.pending_uploads()) == 1


def test_minio_commit_sweeps_losing_attempts(proxy: S3Proxy, proxied: Committer) -> None:
    proxy.enable("minio_upload_prefix", "minio_recomplete")
    job_id = run_job(proxied, losing_attempt=True)
    assert_committed_once(proxied, job_id)


def test_unknown_profile_listing_is_right_on_minio(proxy: S3Proxy, proxied: Committer) -> None:
    """With no profile known (the command line's default), an empty prefix listing is
    confirmed by a listing without a prefix."""
    job = proxied.setup_job({"conflict_mode": "append"})
    write_task(proxied, job, "00000", [b"x"], commit=False)
    written = [u.key for u in proxied.pending_uploads(job.job_id)]
    proxy.enable("minio_upload_prefix")
    bare = S3Store.connect(StoreConfig(endpoint_url=proxy.endpoint_url))
    assert [u.key for u in bare.list_uploads(proxied.dest.bucket, proxied.dest.dir)] == written
    assert len(written) == 1 and job.job_id in written[0]


def test_store_without_preconditions_is_refused_before_anything_is_written(
    proxy: S3Proxy, proxied: Committer
) -> None:
    proxy.enable("no_preconditions")
    with pytest.raises(StoreCapabilityError, match="ignores If-None-Match"):
        proxied.setup_job({"conflict_mode": "append"})
    assert proxied.jobs() == [] and visible(proxied) == {}
    assert list(proxied.store.list_objects(proxied.dest.bucket, proxied.dest.dir)) == []


def test_store_whose_swap_never_succeeds_is_refused_at_setup(
    proxy: S3Proxy, proxied: Committer
) -> None:
    """A store refusing If-Match with the object's own ETag, quoted or not: no job
    record could ever advance, so job setup refuses it rather than let a commit give
    up after 20 rounds blaming concurrency."""
    proxy.add(
        "PutObject",
        "error",
        status=412,
        code="PreconditionFailed",
        times=None,
        when=lambda request: request.header("If-Match") is not None,
    )
    with pytest.raises(StoreCapabilityError, match="refuses If-Match with the object's own ETag"):
        proxied.setup_job({"conflict_mode": "append"})
    assert list(proxied.store.list_objects(proxied.dest.bucket, proxied.dest.dir)) == []


def test_a_store_taking_only_unquoted_etags_commits_and_aborts(
    proxy: S3Proxy, proxied: Committer, dest: str
) -> None:
    """Ceph RGW 16 refuses every If-Match whose ETag is quoted as S3 returns it. The
    probe finds the unquoted form, the job record keeps it, and every
    compare-and-swap (job record, claims; commit and abort) goes unquoted; the
    named ``ceph`` profile does the same without probing."""
    proxy.enable("ceph_quoted_if_match")
    job_id = run_job(proxied, losing_attempt=True)
    assert_committed_once(proxied, job_id)
    profile = proxied.job(job_id).store_profile
    assert profile is not None and profile.if_match_form == "unquoted"
    named = Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url, profile="ceph"))
    assert_committed_once(named, run_job(named))
    aborted = named.setup_job({"conflict_mode": "append"})
    assert named.abort_job(aborted.job_id).state == "aborted"


def test_named_gcs_profile_is_refused_without_probing(proxy: S3Proxy, dest: str) -> None:
    c = Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url, profile="gcs"))
    with pytest.raises(StoreCapabilityError, match="gcs"):
        c.setup_job({})
    assert proxy.counts["PutObject"] == 0


@pytest.mark.moto_xfail(
    reason="moto ignores MaxUploads: its listings are never truncated", raises=pytest.fail.Exception
)
def test_truncated_listing_without_marker_is_an_error(proxy: S3Proxy, proxied: Committer) -> None:
    job = proxied.setup_job({"conflict_mode": "append"})
    write_task(proxied, job, "00000", [b"a", b"b", b"c"], commit=False)
    proxy.enable("truncated_without_marker")
    with pytest.raises(StoreError, match="gives no NextKeyMarker or NextUploadIdMarker"):
        list(proxied.store.list_uploads(proxied.dest.bucket, proxied.dest.dir, page_size=1))


@pytest.mark.also_on("moto")
def test_examine_reports_each_store_family(proxy: S3Proxy, proxied: Committer) -> None:
    # The races: tests/core/s3/test_doctor_backends.py and tests/cli/test_doctor.py.
    found = examine(proxied.store, proxied.dest, race_rounds=0)
    assert found.safe and found.profile.uploads_by_prefix and found.races == []
    assert {c.status for c in found.checks} <= {"ok", "info"}
    proxy.enable("minio_upload_prefix", "minio_recomplete")
    profile = examine(proxied.store, proxied.dest, race_rounds=0).profile
    assert not profile.uploads_by_prefix and profile.recomplete == "no-such-upload"
    proxy.disable("minio_upload_prefix", "minio_recomplete")
    proxy.enable("no_preconditions")
    found = examine(proxied.store, proxied.dest, race_rounds=0)
    assert len(found.problems) == 2 == len(found.profile.problems())
    assert [c.behaviour for c in found.checks if c.status == "unsafe"][:2] == [
        "PutObject If-None-Match: *",
        "PutObject If-Match (compare-and-swap)",
    ]
    proxy.disable("no_preconditions")
    assert list(proxied.store.list_objects(proxied.dest.bucket, proxied.dest.dir)) == []
    assert pending_in_bucket(proxied) == []


@pytest.mark.parametrize("action", ["error", "reset", "lose"])
def test_a_streamed_upload_listing_that_fails_is_asked_again(
    proxy: S3Proxy, bucket: str, action: str
) -> None:
    store = S3Store.connect(StoreConfig(endpoint_url=proxy.endpoint_url))
    keys = sorted(f"st/k{i:02d}" for i in range(6))
    for key in keys:
        store.create_upload(bucket, key)
    first = store.client.list_multipart_uploads(Bucket=bucket, Prefix="st/", MaxUploads=2)
    if not first.get("IsTruncated") or first.get("NextKeyMarker"):
        pytest.skip("this server does not page uploads by upload id alone")
    # The listing's first request is a page; its second, the streamed answer.
    rule = proxy.add("ListMultipartUploads", action, nth=2)
    assert sorted(u.key for u in store.list_uploads(bucket, "st/", page_size=2)) == keys
    assert rule.fired == 1
    assert store.stats.snapshot()["counters"]["s3.ListMultipartUploads.retries"] >= 1


def test_a_job_commit_whose_streamed_listing_is_lost_commits_once(
    proxy: S3Proxy, proxied: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past one page of uploads on a store paging by upload id alone, the job
    commit's verification reads the streamed answer; lost once, it is asked again
    and the job commits every file, once, with nothing left pending. Pages of 16
    uploads stand for pages of 1,000, so that 60 files span four of them."""
    monkeypatch.setattr(store_module, "UPLOADS_PAGE", 16)
    job = proxied.setup_job({"threads": 8})
    tasks = [f"{t:05d}" for t in range(30)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda t: write_task(proxied, job, t, [t.encode()] * 2), tasks))
    first = proxied.store.client.list_multipart_uploads(
        Bucket=proxied.dest.bucket, Prefix=proxied.dest.dir, MaxUploads=2
    )
    if not first.get("IsTruncated") or first.get("NextKeyMarker"):
        pytest.skip("this server does not page uploads by upload id alone")
    streamed = proxy.add(
        "ListMultipartUploads", "lose", when=lambda r: r.param("max-uploads") == "1000000"
    )
    proxied.commit_job(job.job_id)
    assert streamed.fired == 1
    files = visible(proxied)
    assert len(files) == 60 and sorted(set(files.values())) == sorted(t.encode() for t in tasks)
    assert pending_in_bucket(proxied) == []
    assert proxied.job(job.job_id).state == "committed"
