"""The fault-injecting proxy, shown with plain boto3 clients in front of the session's SeaweedFS."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.auth
import pytest
from botocore.auth import SIGV4_TIMESTAMP, S3SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, ConnectionClosedError
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum
from botocore.httpsession import URLLib3Session

from tests.s3proxy import S3Proxy, S3Request, classify, proxy_for, rewrite_request
from zero_rename.embedded_s3 import EmbeddedS3

pytestmark = pytest.mark.s3

# Headers that differ between any two responses, proxied or not.
VOLATILE = {"date", "x-amz-request-id"}


@pytest.fixture
def proxy(s3_server: EmbeddedS3) -> Iterator[S3Proxy]:
    with proxy_for(s3_server) as p:
        yield p


def client(
    server: EmbeddedS3, endpoint: str, attempts: int = 3, pool: int = 10, read_timeout: float = 60
) -> Any:
    """A path-style client; ``attempts`` counts the first try too."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        config=Config(
            s3={"addressing_style": "path"},
            max_pool_connections=pool,
            retries={"mode": "standard", "total_max_attempts": attempts},
            read_timeout=read_timeout,
            connect_timeout=5,
        ),
    )


MakeClient = Callable[..., Any]


@pytest.fixture
def make_client(s3_server: EmbeddedS3) -> Iterator[MakeClient]:
    """Clients closed after the test, so that no pooled connection outlives it."""
    made: list[Any] = []

    def make(endpoint: str, **kwargs: Any) -> Any:
        made.append(client(s3_server, endpoint, **kwargs))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture
def via(make_client: MakeClient, proxy: S3Proxy) -> Any:
    """A client through the proxy: standard retry mode, 3 attempts."""
    return make_client(proxy.endpoint_url)


@pytest.fixture
def direct(make_client: MakeClient, s3_server: EmbeddedS3) -> Any:
    return make_client(s3_server.endpoint_url, pool=64)


def code_of(exc: ClientError) -> str:
    return str(exc.response["Error"]["Code"])


def exists(c: Any, bucket: str, key: str) -> bool:
    try:
        c.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        assert code_of(exc) in ("404", "NoSuchKey")
        return False


def one_part_upload(
    c: Any, bucket: str, key: str, body: bytes = b"part"
) -> tuple[str, list[dict[str, Any]]]:
    """A pending upload of one part: its id and the parts list to complete it with."""
    upload_id = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    part = c.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=body)
    return upload_id, [{"PartNumber": 1, "ETag": part["ETag"]}]


def assert_same_headers(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """The same response headers, through the proxy or not (but for the volatile ones)."""

    def kept(response: dict[str, Any]) -> dict[str, str]:
        headers = response["ResponseMetadata"]["HTTPHeaders"]
        return {k: v for k, v in headers.items() if k not in VOLATILE}

    assert kept(ours) == kept(theirs)


# -- forwarding --------------------------------------------------------------------


def test_forwards_verbatim_from_64_threads(
    make_client: MakeClient, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    via = make_client(proxy.endpoint_url, pool=64)
    # A delay of nothing: a probe counting the requests its predicate picks.
    expects = proxy.add(
        "PutObject", "delay", times=None, when=lambda r: r.header("Expect") == "100-continue"
    )
    start = threading.Barrier(64)

    def work(i: int) -> None:
        key = f"verbatim/{i:02d} a+b=c&d ü~!.bin"
        body = bytes([i]) * (i * 16_411)
        start.wait()  # all 64 at once, so the pool really holds 64 connections
        # botocore makes every PutObject body a file object, and for those it sends
        # "Expect: 100-continue" and waits for the 100 before the body.
        via.put_object(Bucket=bucket, Key=key, Body=body)
        ours, theirs = (c.get_object(Bucket=bucket, Key=key) for c in (via, direct))
        assert ours["Body"].read() == theirs["Body"].read() == body
        assert_same_headers(ours, theirs)
        assert_same_headers(
            via.head_object(Bucket=bucket, Key=key), direct.head_object(Bucket=bucket, Key=key)
        )

    with ThreadPoolExecutor(64) as pool:
        list(pool.map(work, range(64)))
    assert proxy.counts == Counter(PutObject=64, GetObject=64, HeadObject=64)
    assert expects.fired == 64
    # One upstream connection per client connection; up to the pool's 64 (a thread
    # that finishes first can hand its connection on before the last one starts).
    connections = proxy.connections
    assert connections["client"] == connections["upstream"]
    assert 16 <= connections["client"] <= 64


def test_chunked_body_with_expect_continue(
    s3_server: EmbeddedS3, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    """botocore's over-TLS form of an upload (aws-chunked in HTTP chunks, a trailing
    checksum, Expect: 100-continue), sent by botocore's own HTTP session."""
    data = bytes(range(256)) * 3_000
    seen: list[S3Request] = []

    def record(request: S3Request) -> bool:
        seen.append(request)
        return True

    proxy.add("PutObject", "delay", when=record)  # a delay of nothing: a probe
    response = send_chunked_put(s3_server, proxy.endpoint_url, bucket, "chunked/obj", data)
    assert response.status_code == 200, response.content
    [request] = seen
    assert request.header("Transfer-Encoding") == "chunked"
    # HTTP chunks (the wire) carrying aws-chunks (the body: 12 of 64 KiB, a last
    # empty one, the checksum trailer), each passed on as it came.
    assert request.body.startswith(b"10000\r\n") and b"x-amz-checksum-crc32:" in request.body
    assert len(request.wire_body) > len(request.body) > len(data)
    assert direct.get_object(Bucket=bucket, Key="chunked/obj")["Body"].read() == data
    assert proxy.forwarded["PutObject"] == 1


def send_chunked_put(
    server: EmbeddedS3, endpoint: str, bucket: str, key: str, data: bytes, **headers: str
) -> Any:
    # Small aws-chunks, so the HTTP chunks the proxy must pass on are many.
    body = AwsChunkedWrapper(
        io.BytesIO(data),
        checksum_cls=Crc32Checksum,
        checksum_name="x-amz-checksum-crc32",
        chunk_size=64 * 1024,
    )
    request = AWSRequest(
        "PUT",
        f"{endpoint}/{bucket}/{key}",
        data=body,
        headers={
            "Transfer-Encoding": "chunked",
            "Content-Encoding": "aws-chunked",
            "X-Amz-Trailer": "x-amz-checksum-crc32",
            "Expect": "100-continue",
            "X-Amz-Decoded-Content-Length": str(len(data)),
            **headers,
        },
    )
    # Tells the signer the body is a streaming one with a trailer.
    request.context["checksum"] = {"request_algorithm": {"in": "trailer"}}
    S3SigV4Auth(Credentials(server.access_key, server.secret_key), "s3", "us-east-1").add_auth(
        request
    )
    return URLLib3Session().send(request.prepare())


def test_counts_operations_by_botocore_name(via: Any, proxy: S3Proxy, bucket: str) -> None:
    via.head_bucket(Bucket=bucket)
    via.put_object(Bucket=bucket, Key="t/a", Body=b"a")
    via.copy_object(Bucket=bucket, Key="t/b", CopySource={"Bucket": bucket, "Key": "t/a"})
    via.head_object(Bucket=bucket, Key="t/b")
    via.get_object(Bucket=bucket, Key="t/b")["Body"].read()
    via.list_objects_v2(Bucket=bucket, Prefix="t/")
    upload_id, parts = one_part_upload(via, bucket, "t/m")
    via.list_parts(Bucket=bucket, Key="t/m", UploadId=upload_id)
    via.list_multipart_uploads(Bucket=bucket, Prefix="t/")
    via.complete_multipart_upload(
        Bucket=bucket, Key="t/m", UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    aborted = via.create_multipart_upload(Bucket=bucket, Key="t/x")["UploadId"]
    via.abort_multipart_upload(Bucket=bucket, Key="t/x", UploadId=aborted)
    via.delete_object(Bucket=bucket, Key="t/a")
    via.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "t/b"}, {"Key": "t/m"}]})
    lifecycle = {
        "Rules": [
            {
                "ID": "abort",
                "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            }
        ]
    }
    for call in (
        lambda: via.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration=lifecycle
        ),
        lambda: via.get_bucket_lifecycle_configuration(Bucket=bucket),
        lambda: via.create_bucket(Bucket=bucket + "-2"),
    ):
        try:  # counted whatever SeaweedFS answers
            call()
        except ClientError:
            pass
    assert proxy.counts == Counter(
        HeadBucket=1,
        PutObject=1,
        CopyObject=1,
        HeadObject=1,
        GetObject=1,
        ListObjectsV2=1,
        CreateMultipartUpload=2,
        UploadPart=1,
        ListParts=1,
        ListMultipartUploads=1,
        CompleteMultipartUpload=1,
        AbortMultipartUpload=1,
        DeleteObject=1,
        DeleteObjects=1,
        PutBucketLifecycleConfiguration=1,
        GetBucketLifecycleConfiguration=1,
        CreateBucket=1,
    )
    proxy.reset_counts()
    assert proxy.counts == Counter()


def test_measures_copies_and_arrivals(via: Any, proxy: S3Proxy, bucket: str) -> None:
    """Off by default; on, each copy's bytes (whole objects by a HEAD of the proxy's
    own, parts by their range) and each request's arrival, neither counted as a
    request of the client's."""
    via.put_object(Bucket=bucket, Key="copies/dt=1/a b", Body=b"x" * 1000)
    source = {"Bucket": bucket, "Key": "copies/dt=1/a b"}
    via.copy_object(Bucket=bucket, Key="copies/off", CopySource=source)
    assert proxy.copied_bytes == Counter() and proxy.arrivals == []
    proxy.measure_copies = True
    proxy.record_arrivals()
    proxy.reset_counts()
    started = time.time()
    via.copy_object(Bucket=bucket, Key="copies/dt=2/b", CopySource=source)
    upload = via.create_multipart_upload(Bucket=bucket, Key="copies/m")["UploadId"]
    for number, extra in ((1, {"CopySourceRange": "bytes=0-99"}), (2, {})):
        via.upload_part_copy(
            Bucket=bucket,
            Key="copies/m",
            UploadId=upload,
            PartNumber=number,
            CopySource=source,
            **extra,
        )
    via.abort_multipart_upload(Bucket=bucket, Key="copies/m", UploadId=upload)
    assert proxy.copied_bytes == Counter(CopyObject=1000, UploadPartCopy=1100)
    assert [op for _, op in proxy.arrivals] == [
        "CopyObject",
        "CreateMultipartUpload",
        "UploadPartCopy",
        "UploadPartCopy",
        "AbortMultipartUpload",
    ]
    assert all(started <= t <= time.time() for t, _ in proxy.arrivals)
    assert proxy.counts == Counter(
        CopyObject=1, CreateMultipartUpload=1, UploadPartCopy=2, AbortMultipartUpload=1
    )
    proxy.reset_counts()
    assert proxy.copied_bytes == Counter() and proxy.arrivals == []


def test_keeps_connections_alive(via: Any, proxy: S3Proxy, bucket: str) -> None:
    for i in range(20):
        via.put_object(Bucket=bucket, Key=f"k/{i}", Body=b"x")
        via.head_object(Bucket=bucket, Key=f"k/{i}")
    assert proxy.connections == Counter(client=1, upstream=1)


def test_key_contains_matches_keys_prefixes_and_deleted_keys() -> None:
    put = S3Request.build("PUT", "/b/dir/a%20b.txt", [("Host", "h")])
    assert (put.op, put.bucket, put.key, put.names()) == (
        "PutObject",
        "b",
        "dir/a b.txt",
        ["dir/a b.txt"],
    )
    listing = S3Request.build("GET", "/b?list-type=2&prefix=dir%2F", [])
    assert (listing.op, listing.names()) == ("ListObjectsV2", ["dir/"])
    body = b"<Delete><Object><Key>x/1</Key></Object><Object><Key>y/2</Key></Object></Delete>"
    delete = S3Request.build("POST", "/b?delete", [], body)
    assert (delete.op, delete.names()) == ("DeleteObjects", ["x/1", "y/2"])
    assert (
        classify("PUT", "/b/k?partNumber=1&uploadId=u", [("x-amz-copy-source", "b/j")])[0]
        == "UploadPartCopy"
    )


def signed_put(**kwargs: Any) -> S3Request:
    """The request a botocore client signs for a PutObject, caught before it is sent."""
    c = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        region_name="eu-west-3",
        aws_access_key_id="AK",
        aws_secret_access_key="SK",
        config=Config(s3={"addressing_style": "path"}),
    )
    caught: list[Any] = []

    def catch(request: Any, **_: Any) -> AWSResponse:
        caught.append(request)
        return AWSResponse(request.url, 200, {}, _EmptyRaw())

    c.meta.events.register("before-send.s3.PutObject", catch)
    c.put_object(Bucket="b", Key="a b/c", Body=b"body", **kwargs)
    request = caught[0]
    url = urlsplit(request.url)
    body = request.body.read() if hasattr(request.body, "read") else request.body
    headers = [(k, v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()]
    return S3Request.build(
        request.method,
        url.path + (f"?{url.query}" if url.query else ""),
        [("Host", url.netloc), *headers],
        body,
    )


class _EmptyRaw:
    def stream(self, **_: Any) -> Iterator[bytes]:
        return iter(())


def test_rewrite_request_signs_as_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    request = signed_put(IfNoneMatch="*")
    signed_at = datetime.strptime(request.header("X-Amz-Date") or "", SIGV4_TIMESTAMP)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: signed_at)
    credentials = Credentials("AK", "SK")
    # Nothing dropped: the very same signature (region from the credential scope).
    same = rewrite_request(request, credentials, "us-east-1")
    assert same.header("Authorization") == request.header("Authorization")
    dropped = rewrite_request(request, credentials, "us-east-1", drop_headers=["If-None-Match"])
    assert dropped.header("If-None-Match") is None
    assert "if-none-match" not in (dropped.header("Authorization") or "")
    assert dropped.header("x-amz-content-sha256") == request.header("x-amz-content-sha256")
    # What botocore signs for the request without the header, at the same time.
    assert dropped.header("Authorization") == signed_put().header("Authorization")


# -- fault actions -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "retried"),
    [
        (500, "InternalError", True),
        (503, "SlowDown", True),
        (409, "ConditionalRequestConflict", False),  # botocore retries neither 409 ...
        (412, "PreconditionFailed", False),  # ... nor 412
    ],
)
def test_error(
    via: Any, proxy: S3Proxy, bucket: str, status: int, code: str, retried: bool
) -> None:
    rule = proxy.add("PutObject", "error", key_contains="err/", status=status, code=code)
    via.put_object(Bucket=bucket, Key="other", Body=b"x")  # not matched
    if retried:
        response = via.put_object(Bucket=bucket, Key="err/k", Body=b"x")
        assert response["ResponseMetadata"]["RetryAttempts"] == 1
        assert proxy.forwarded["PutObject"] == 2
    else:
        with pytest.raises(ClientError) as caught:
            via.put_object(Bucket=bucket, Key="err/k", Body=b"x")
        assert code_of(caught.value) == code
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
        assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 0
        assert proxy.forwarded["PutObject"] == 1
    assert rule.fired == 1 and rule.seen == (2 if retried else 1)  # the retry is seen too


def test_nth_and_times(via: Any, proxy: S3Proxy, bucket: str) -> None:
    rule = proxy.add("HeadBucket", "error", nth=2, times=2, status=503, code="SlowDown")
    via.head_bucket(Bucket=bucket)  # the 1st: passes
    response = via.head_bucket(Bucket=bucket)  # the 2nd and 3rd fail, the 4th passes
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert (rule.seen, rule.fired) == (4, 2)
    proxy.remove(rule)
    assert via.head_bucket(Bucket=bucket)["ResponseMetadata"]["RetryAttempts"] == 0


def test_reset_never_reaches_s3(
    make_client: MakeClient, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    once = make_client(proxy.endpoint_url, attempts=1)
    proxy.add("PutObject", "reset")
    with pytest.raises(ConnectionClosedError):
        once.put_object(Bucket=bucket, Key="reset", Body=b"x")
    assert proxy.forwarded["PutObject"] == 0 and not exists(direct, bucket, "reset")
    proxy.add("PutObject", "reset")  # botocore retries a reset connection
    retried = make_client(proxy.endpoint_url)
    assert (
        retried.put_object(Bucket=bucket, Key="reset", Body=b"x")["ResponseMetadata"][
            "RetryAttempts"
        ]
        == 1
    )


def test_hold_then_forward_or_drop(
    make_client: MakeClient, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    once = make_client(proxy.endpoint_url, attempts=1)
    rule = proxy.add("PutObject", "hold", nth=2, times=None)
    once.put_object(Bucket=bucket, Key="first", Body=b"x")  # the 1st passes
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(once.put_object, Bucket=bucket, Key=k, Body=b"x") for k in "ab"]
        assert rule.arrived.wait(10)
        time.sleep(0.2)
        assert not any(f.done() for f in held) and not exists(direct, bucket, "a")
        proxy.release(rule)
        assert all(f.result()["ResponseMetadata"]["HTTPStatusCode"] == 200 for f in held)
    assert exists(direct, bucket, "a") and exists(direct, bucket, "b")
    rule = proxy.add("PutObject", "hold")
    with ThreadPoolExecutor(1) as pool:
        dropped = pool.submit(once.put_object, Bucket=bucket, Key="dropped", Body=b"x")
        assert rule.arrived.wait(10)
        proxy.release(rule, forward=False)  # as if the client had died meanwhile
        with pytest.raises(ConnectionClosedError):
            dropped.result()
    assert proxy.forwarded["PutObject"] == 3 and not exists(direct, bucket, "dropped")


def test_lose_takes_effect_but_the_client_never_hears(
    make_client: MakeClient, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    once = make_client(proxy.endpoint_url, attempts=1)
    rule = proxy.add("PutObject", "lose")
    with pytest.raises(ConnectionClosedError):
        once.put_object(Bucket=bucket, Key="lost", Body=b"x")
    assert rule.fired == 1 and exists(direct, bucket, "lost")


def test_lost_upload_part_is_sent_again(via: Any, proxy: S3Proxy, direct: Any, bucket: str) -> None:
    key = "lost/part"
    upload_id = via.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    proxy.add("UploadPart", "lose")
    body = b"p" * 1000
    response = via.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=body)
    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    assert proxy.forwarded["UploadPart"] == 2
    parts = direct.list_parts(Bucket=bucket, Key=key, UploadId=upload_id)["Parts"]
    # SeaweedFS 4.48 lists the part twice (two entries, PartNumber 1, same ETag and
    # size): the retried UploadPart stored a second copy instead of replacing the
    # first. AWS keeps one part per number; accept that too if SeaweedFS changes.
    assert [p["PartNumber"] for p in parts] in ([1], [1, 1])
    assert {p["ETag"] for p in parts} == {response["ETag"]}
    # Completing with the recorded part still makes the right object.
    via.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": response["ETag"]}]},
    )
    assert direct.get_object(Bucket=bucket, Key=key)["Body"].read() == body


def test_lost_responses_mislead_the_retry(
    via: Any, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    """What botocore's automatic retry reports after a lost response, on SeaweedFS."""
    # A create-if-absent PUT that took effect: the retry finds the writer's own
    # object and reports PreconditionFailed, as if another writer had won.
    proxy.add("PutObject", "lose")
    with pytest.raises(ClientError) as caught:
        via.put_object(Bucket=bucket, Key="mine", Body=b"mine", IfNoneMatch="*")
    assert code_of(caught.value) == "PreconditionFailed"
    assert direct.get_object(Bucket=bucket, Key="mine")["Body"].read() == b"mine"
    # A CreateMultipartUpload: the retry starts a second upload; the first,
    # whose id the client never saw, stays pending.
    proxy.add("CreateMultipartUpload", "lose")
    via.create_multipart_upload(Bucket=bucket, Key="twice")
    listing = direct.list_multipart_uploads(Bucket=bucket, Prefix="twice")
    assert upload_keys(listing) == ["twice", "twice"]


def test_delay(make_client: MakeClient, proxy: S3Proxy, via: Any, bucket: str) -> None:
    via.put_object(Bucket=bucket, Key="slow", Body=b"x")
    proxy.add("GetObject", "delay", seconds=0.3)
    start = time.monotonic()
    assert via.get_object(Bucket=bucket, Key="slow")["Body"].read() == b"x"
    assert time.monotonic() - start >= 0.3
    # Longer than the client waits: a read timeout, which botocore retries.
    impatient = make_client(proxy.endpoint_url, read_timeout=0.2)
    proxy.add("GetObject", "delay", seconds=0.5)
    response = impatient.get_object(Bucket=bucket, Key="slow")
    assert response["ResponseMetadata"]["RetryAttempts"] == 1


def test_error_after_takes_effect(
    make_client: MakeClient, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    once = make_client(proxy.endpoint_url, attempts=1)
    proxy.add("PutObject", "error_after", status=503, code="SlowDown")
    with pytest.raises(ClientError) as caught:
        once.put_object(Bucket=bucket, Key="after", Body=b"x")
    assert code_of(caught.value) == "SlowDown" and exists(direct, bucket, "after")


def test_chaos(make_client: MakeClient, proxy: S3Proxy, bucket: str) -> None:
    """Idempotent calls under random faults all succeed through botocore's retries."""
    patient = make_client(proxy.endpoint_url, attempts=10, pool=16)
    # Threads take the random draws in any order, but the draws are the seed's:
    # the first 32 (one a request, at least 32 requests) hold 8 faults, of all five kinds.
    proxy.chaos(0.2, seed=3)

    def work(i: int) -> None:
        body = str(i).encode() * 100
        patient.put_object(Bucket=bucket, Key=f"chaos/{i}", Body=body)
        assert patient.get_object(Bucket=bucket, Key=f"chaos/{i}")["Body"].read() == body

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(16)))
    fired = proxy.chaos_fired
    assert sum(fired.values()) >= 8, fired
    assert set(fired) == {"error500", "slowdown", "reset", "lose", "delay"}
    proxy.chaos(0)
    proxy.reset_counts()
    work(0)
    assert proxy.chaos_fired == Counter()


# -- quirks --------------------------------------------------------------------------


def upload_keys(listing: dict[str, Any]) -> list[str]:
    return [u["Key"] for u in listing.get("Uploads", [])]


def test_minio_upload_prefix(via: Any, proxy: S3Proxy, bucket: str) -> None:
    keys = ["table/dt=1/f.parquet", "table/dt=2/g.parquet", "table/dt=1/f.parquet.x", "other/x"]
    for key in keys:
        via.create_multipart_upload(Bucket=bucket, Key=key)
    assert sorted(
        upload_keys(via.list_multipart_uploads(Bucket=bucket, Prefix="table/"))
    ) == sorted(keys[:3])
    proxy.quirks = {"minio_upload_prefix"}
    assert upload_keys(via.list_multipart_uploads(Bucket=bucket, Prefix="table/")) == []
    exact = via.list_multipart_uploads(Bucket=bucket, Prefix="table/dt=1/f.parquet", MaxUploads=1)
    assert upload_keys(exact) == ["table/dt=1/f.parquet"]
    everything = via.list_multipart_uploads(Bucket=bucket, MaxUploads=1, KeyMarker="table/")
    assert sorted(upload_keys(everything)) == sorted(keys)
    assert everything["IsTruncated"] is False and "NextKeyMarker" not in everything


def test_minio_recomplete(via: Any, proxy: S3Proxy, bucket: str) -> None:
    upload_id, parts = one_part_upload(via, bucket, "done")
    first = via.complete_multipart_upload(
        Bucket=bucket, Key="done", UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    again = via.complete_multipart_upload(
        Bucket=bucket, Key="done", UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    assert again["ETag"] == first["ETag"]  # SeaweedFS, like AWS
    proxy.enable("minio_recomplete")
    with pytest.raises(ClientError) as caught:
        via.complete_multipart_upload(
            Bucket=bucket, Key="done", UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    assert code_of(caught.value) == "NoSuchUpload"


def test_minio_recomplete_after_a_lost_response(
    via: Any, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    """The case that matters: the complete took effect, its answer was lost, and the
    retry is told the upload does not exist."""
    proxy.enable("minio_recomplete")
    upload_id, parts = one_part_upload(via, bucket, "lost-complete", b"body")
    proxy.add("CompleteMultipartUpload", "lose")
    with pytest.raises(ClientError) as caught:
        via.complete_multipart_upload(
            Bucket=bucket, Key="lost-complete", UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    assert code_of(caught.value) == "NoSuchUpload"
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 1
    assert direct.get_object(Bucket=bucket, Key="lost-complete")["Body"].read() == b"body"


def test_no_preconditions(
    s3_server: EmbeddedS3, via: Any, proxy: S3Proxy, direct: Any, bucket: str
) -> None:
    etag = via.put_object(Bucket=bucket, Key="k", Body=b"v1")["ETag"]
    with pytest.raises(ClientError) as caught:
        via.put_object(Bucket=bucket, Key="k", Body=b"v2", IfNoneMatch="*")
    assert code_of(caught.value) == "PreconditionFailed"
    proxy.quirks = {"no_preconditions"}
    # The headers are dropped and the request signed again: the upstream accepts it.
    via.put_object(Bucket=bucket, Key="k", Body=b"v2", IfNoneMatch="*")
    via.put_object(Bucket=bucket, Key="k", Body=b"v3", IfMatch=etag)  # stale ETag
    upload_id, parts = one_part_upload(via, bucket, "k", b"v4")
    via.complete_multipart_upload(
        Bucket=bucket,
        Key="k",
        UploadId=upload_id,
        IfNoneMatch="*",
        MultipartUpload={"Parts": parts},
    )
    assert direct.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v4"
    # A streaming (aws-chunked) body keeps its payload marker when signed again.
    response = send_chunked_put(
        s3_server, proxy.endpoint_url, bucket, "k", b"v5" * 1000, **{"If-None-Match": "*"}
    )
    assert response.status_code == 200, response.content
    assert direct.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v5" * 1000


def test_truncated_without_marker(via: Any, proxy: S3Proxy, bucket: str) -> None:
    for i in range(3):
        via.put_object(Bucket=bucket, Key=f"t/{i}", Body=b"x")
        via.create_multipart_upload(Bucket=bucket, Key=f"t/{i}")
    assert "NextContinuationToken" in via.list_objects_v2(Bucket=bucket, MaxKeys=1)
    proxy.quirks = {"truncated_without_marker"}
    objects = via.list_objects_v2(Bucket=bucket, MaxKeys=1)
    assert objects["IsTruncated"] is True and "NextContinuationToken" not in objects
    uploads = via.list_multipart_uploads(Bucket=bucket, MaxUploads=1)
    assert uploads["IsTruncated"] is True
    assert "NextKeyMarker" not in uploads and "NextUploadIdMarker" not in uploads


def test_unsorted_uploads(via: Any, proxy: S3Proxy, bucket: str) -> None:
    for i in range(8):
        via.create_multipart_upload(Bucket=bucket, Key=f"u/{i}")
    plain = upload_keys(via.list_multipart_uploads(Bucket=bucket))
    proxy.quirks = {"unsorted_uploads"}
    shuffled = upload_keys(via.list_multipart_uploads(Bucket=bucket))
    assert shuffled != plain and sorted(shuffled) == sorted(plain)


def test_aws_conflict_409(via: Any, proxy: S3Proxy, direct: Any, bucket: str) -> None:
    proxy.quirks = {"aws_conflict_409"}
    with pytest.raises(ClientError) as caught:
        via.put_object(Bucket=bucket, Key="c", Body=b"1", IfNoneMatch="*")
    assert code_of(caught.value) == "ConditionalRequestConflict"
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    assert not exists(direct, bucket, "c")
    via.put_object(Bucket=bucket, Key="c", Body=b"1", IfNoneMatch="*")  # the caller's retry
    with pytest.raises(ClientError) as caught:
        via.put_object(Bucket=bucket, Key="c", Body=b"2", IfNoneMatch="*")
    assert code_of(caught.value) == "PreconditionFailed"
    via.put_object(Bucket=bucket, Key="d", Body=b"1")  # unconditional: never a conflict
    assert proxy.forwarded["PutObject"] == 3


def test_quirk_names_are_checked(proxy: S3Proxy) -> None:
    with pytest.raises(ValueError):
        proxy.quirks = {"minio_everything"}
    with pytest.raises(ValueError):
        proxy.add("PutObject", "explode")
    with pytest.raises(ValueError):
        proxy.add("UploadParts", "error")  # a typo would never fire


# -- other servers ---------------------------------------------------------------------


def test_in_front_of_moto() -> None:
    server_module = pytest.importorskip("moto.server")
    moto = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    werkzeug = logging.getLogger("werkzeug")  # moto's server logs every request
    level = werkzeug.level
    werkzeug.setLevel(logging.WARNING)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        with proxy_for(f"http://{host}:{port}") as proxy:
            c = boto3.client(
                "s3",
                endpoint_url=proxy.endpoint_url,
                region_name="us-east-1",
                aws_access_key_id="x",
                aws_secret_access_key="x",
                config=Config(
                    s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 3}
                ),
            )
            c.create_bucket(Bucket="moto-bucket")
            proxy.add("PutObject", "lose")
            c.put_object(Bucket="moto-bucket", Key="k", Body=io.BytesIO(b"v" * 100_000))
            assert c.get_object(Bucket="moto-bucket", Key="k")["Body"].read() == b"v" * 100_000
            assert proxy.counts["PutObject"] == 2
    finally:
        moto.stop()
        werkzeug.setLevel(level)
