"""The store layer against the real S3 server."""

from __future__ import annotations

import pytest

from tests.s3proxy import S3Proxy
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.core.s3.http import direct_unsupported
from zero_rename.core.s3.stats import total_requests
from zero_rename.errors import (
    CredentialsError,
    DestinationError,
    NoSuchUpload,
    PreconditionFailed,
    StoreError,
    is_final,
)

pytestmark = pytest.mark.s3
MIB = 1024 * 1024


@pytest.fixture
def store(store_config: StoreConfig) -> S3Store:
    return S3Store.connect(store_config)


@pytest.mark.also_on("moto")
def test_multipart_lifecycle(store: S3Store, bucket: str) -> None:
    uid = store.create_upload(bucket, "d/f")
    e1 = store.upload_part(bucket, "d/f", uid, 1, b"a" * (5 * MIB))
    e2 = store.upload_part(bucket, "d/f", uid, 2, b"b")
    parts = store.list_parts(bucket, "d/f", uid)
    assert [(p.number, p.size) for p in parts] == [(1, 5 * MIB), (2, 1)]
    assert store.head_object(bucket, "d/f") is None  # invisible until complete
    etag = store.complete_upload(bucket, "d/f", uid, [(1, e1), (2, e2)])
    info = store.head_object(bucket, "d/f")
    assert info is not None and info.size == 5 * MIB + 1 and info.etag == etag
    assert [u.key for u in store.list_uploads(bucket, "d/")] == []
    with pytest.raises(NoSuchUpload):
        store.list_parts(bucket, "d/f", uid)
    # Aborting a completed upload (AWS: NoSuchUpload; SeaweedFS: 204) never
    # takes the visible object away.
    store.abort_upload(bucket, "d/f", uid)
    assert store.head_object(bucket, "d/f") == info


def test_upload_listing_is_paged_and_prefix_exact(store: S3Store, bucket: str) -> None:
    for key in ["out/ds1/a", "out/ds1/b", "out/ds1/c", "out/ds10/a"]:
        store.create_upload(bucket, key)
    found = [u.key for u in store.list_uploads(bucket, "out/ds1/")]
    assert sorted(found) == ["out/ds1/a", "out/ds1/b", "out/ds1/c"]
    # Asked for pages of 2, SeaweedFS pages by NextUploadIdMarker alone.
    paged = [u.key for u in store.list_uploads(bucket, "out/ds1/", page_size=2)]
    assert sorted(paged) == ["out/ds1/a", "out/ds1/b", "out/ds1/c"]
    with pytest.raises(ValueError, match="must end in '/'"):
        list(store.list_uploads(bucket, "out/ds1"))


@pytest.mark.moto_xfail(
    reason="ListMultipartUploads ignores MaxUploads and KeyMarker: every "
    "upload in one page, IsTruncated false",
    raises=AssertionError,
)
# LocalStack pages by key marker as AWS does (SeaweedFS by upload id alone).
@pytest.mark.also_on("localstack")
def test_upload_listing_follows_the_pages(store: S3Store, bucket: str) -> None:
    """The listing above on a server that really pages: more than one request."""
    keys = [f"pg/k{i}" for i in range(5)]
    for key in keys:
        store.create_upload(bucket, key)
    before = store.stats.requests("ListMultipartUploads")
    assert sorted(u.key for u in store.list_uploads(bucket, "pg/", page_size=2)) == keys
    # Pages of 2 on a store paging with markers; on one paging by upload id
    # alone (SeaweedFS), the first page, then the rest in one streamed answer.
    assert store.stats.requests("ListMultipartUploads") - before >= 2


def _uploads_paged_by_id_alone(store: S3Store, bucket: str, keys: list[str]) -> None:
    for key in keys:
        store.create_upload(bucket, key)
    first = store.client.list_multipart_uploads(Bucket=bucket, Prefix="st/", MaxUploads=2)
    if not first.get("IsTruncated") or first.get("NextKeyMarker"):
        pytest.skip("this server does not page uploads by upload id alone")


def test_a_store_paging_by_upload_id_alone_is_listed_in_one_streamed_answer(
    store: S3Store, bucket: str
) -> None:
    keys = sorted(f"st/k{i:02d}" for i in range(7))
    _uploads_paged_by_id_alone(store, bucket, keys)
    store.create_upload(bucket, "stx/outside")
    before = store.stats.requests("ListMultipartUploads")
    assert sorted(u.key for u in store.list_uploads(bucket, "st/", page_size=2)) == keys
    assert store.stats.requests("ListMultipartUploads") - before == 2
    # Without remembering: the first page's uploads may come twice, none is missing.
    repeated = [u.key for u in store.list_uploads(bucket, "st/", page_size=2, unique=False)]
    assert sorted(set(repeated)) == keys and len(repeated) <= len(keys) + 2
    assert all(u.initiated is not None for u in store.list_uploads(bucket, "st/", page_size=2))


def test_a_no_proxy_setting_alone_keeps_the_streamed_listing(
    store: S3Store, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NO_PROXY configures no proxy (company environments set it everywhere), and a
    proxy whose NO_PROXY names this host is one botocore does not use either: the
    listing streams its answer as without them, in fewer requests than pages."""
    keys = sorted(f"st/k{i:02d}" for i in range(5))
    _uploads_paged_by_id_alone(store, bucket, keys)
    for proxy in ("", "http://127.0.0.1:9"):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        before = store.stats.requests("ListMultipartUploads")
        assert sorted(u.key for u in store.list_uploads(bucket, "st/", page_size=2)) == keys
        assert store.stats.requests("ListMultipartUploads") - before <= 2


@pytest.mark.unit
def test_a_proxy_botocore_would_use_sends_the_requests_through_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "corp.example")
    assert direct_unsupported("http://127.0.0.1:8333") is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.corp.example:3128")
    assert "HTTP proxy" in (direct_unsupported("http://127.0.0.1:8333") or "")
    assert direct_unsupported("https://s3.amazonaws.com") is None  # no HTTPS proxy
    monkeypatch.setenv("NO_PROXY", "corp.example,127.0.0.1")
    assert direct_unsupported("http://127.0.0.1:8333") is None


@pytest.mark.also_on("moto")
def test_conditional_create_and_replace(store: S3Store, bucket: str) -> None:
    etag = store.put_object(bucket, "rec", b"1", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put_object(bucket, "rec", b"2", if_none_match=True)
    new = store.put_object(bucket, "rec", b"2", if_match=etag)
    with pytest.raises(PreconditionFailed):
        store.put_object(bucket, "rec", b"3", if_match=etag)  # stale etag
    with pytest.raises(PreconditionFailed):
        store.put_object(bucket, "missing", b"3", if_match=new)
    assert store.get_object(bucket, "rec") == (b"2", new)


def test_a_get_is_one_request_its_body_read_counted_for_bytes_only(
    store: S3Store, bucket: str
) -> None:
    """The read of a GET's body has counters of its own (bytes, time), which
    the request totals (a job's summary, the views' request counts, the
    snapshot's total in _SUCCESS) must not count as a second request."""
    store.put_object(bucket, "obj", b"12345")
    before = store.stats.total_requests
    assert store.get_object(bucket, "obj") is not None
    assert store.stats.total_requests - before == 1
    assert total_requests(store.stats.snapshot()) == store.stats.total_requests
    assert store.stats.snapshot()["counters"]["s3.GetObject.read.bytes"] == 5


@pytest.mark.parametrize("light", [False, True], ids=["botocore", "light"])
def test_a_get_whose_body_is_cut_short_is_sent_again(
    proxy: S3Proxy, bucket: str, light: bool
) -> None:
    """A GET answered with its head and half its body (a connection reset mid-body;
    LocalStack ends the body of an object deleted while it sends it) is sent
    again, on either request path; cut every time, it is one StoreError naming
    the key, not the client library's own exception."""
    store = S3Store.connect(StoreConfig(endpoint_url=proxy.endpoint_url), light=light)
    body = b"record " * 100
    store.put_object(bucket, "rec.json", body)
    proxy.add("GetObject", "cut")
    assert store.get_object(bucket, "rec.json") == (
        body,
        store.head_object(bucket, "rec.json").etag,
    )  # type: ignore[union-attr]
    assert proxy.counts["GetObject"] == 2
    proxy.add("GetObject", "cut", times=None)
    with pytest.raises(StoreError, match=r"GetObject s3://\S+/rec\.json") as raised:
        store.get_object(bucket, "rec.json")
    assert "\n" not in str(raised.value)


def test_listing_and_bulk_delete_past_one_page(store: S3Store, bucket: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    keys = [f"p/k{i:05d}" for i in range(1203)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: store.put_object(bucket, k, b""), keys))
    assert [o.key for o in store.list_objects(bucket, "p/")] == keys
    before = store.stats.requests("DeleteObjects")
    assert store.delete_objects(bucket, keys + ["p/never-there"]) == 1204
    assert store.stats.requests("DeleteObjects") - before == 2  # 1,000 keys a request
    assert list(store.list_objects(bucket, "p/")) == []


def test_missing_bucket(store: S3Store) -> None:
    with pytest.raises(DestinationError, match="does not exist"):
        store.check_bucket("no-such-bucket-here")


@pytest.mark.moto_xfail(
    reason="accepts any credentials (no signature check without IAM emulation)",
    raises=pytest.fail.Exception,
)
@pytest.mark.localstack_xfail(
    reason="accepts any credentials (host mode checks no signature)",
    raises=pytest.fail.Exception,
)
def test_bad_credentials(
    store_config: StoreConfig, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    bad = S3Store.connect(store_config)
    with pytest.raises(CredentialsError, match="refused the credentials") as err:
        bad.put_object(bucket, "k", b"x")
    assert "wrong-secret" not in str(err.value) and is_final(err.value)


@pytest.mark.parametrize("light", [False, True], ids=["botocore", "light"])
def test_slowdown_and_5xx_are_retried_with_backoff(
    proxy: S3Proxy, bucket: str, light: bool
) -> None:
    store = S3Store.connect(StoreConfig(endpoint_url=proxy.endpoint_url), light=light)
    proxy.add("PutObject", "error", status=503, code="SlowDown")
    proxy.add("PutObject", "error", nth=2)
    store.put_object(bucket, "k", b"x")
    snap = store.stats.snapshot()["counters"]
    assert snap["s3.PutObject"] == 1 and snap["s3.PutObject.retries"] == 2
    assert proxy.counts["PutObject"] == 3
    assert store.get_object(bucket, "k") is not None


def test_pool_is_sized_to_the_commit_threads(store_config: StoreConfig) -> None:
    store = S3Store.connect(
        StoreConfig(endpoint_url=store_config.endpoint_url, max_pool_connections=96)
    )
    assert store.pool_size == 96
    assert StoreConfig().max_pool_connections == 64


def test_scoped_stats_count_separately(store: S3Store, bucket: str) -> None:
    task = store.scoped()
    task.put_object(bucket, "a", b"12345")
    assert task.stats.requests("PutObject") == 1
    assert store.stats.requests("PutObject") == 0
    assert task.stats.snapshot()["counters"]["s3.PutObject.bytes"] == 5


def test_a_repeated_upload_is_listed_once_unless_repeats_are_fine(
    store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store that lists an upload on two pages (unsorted listings may).
    pages = [
        {"Uploads": [{"Key": "p/a", "UploadId": "1"}, {"Key": "p/b", "UploadId": "2"}]},
        {"Uploads": [{"Key": "p/a", "UploadId": "1"}]},
    ]
    monkeypatch.setattr(store, "_pages", lambda *args, **kwargs: iter(pages))
    assert [u.key for u in store.list_uploads("bucket-x", "p/")] == ["p/a", "p/b"]
    # A job commit's listing remembers nothing (a million uploads): repeats pass.
    assert [u.key for u in store.list_uploads("bucket-x", "p/", unique=False)] == [
        "p/a",
        "p/b",
        "p/a",
    ]
