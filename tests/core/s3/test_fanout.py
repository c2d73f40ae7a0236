"""Completing uploads in parallel: in this process and in worker processes,
by botocore and by the light request path (zero_rename.core.s3.fanout, .completers)."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.s3proxy import S3Proxy
from tests.servers import S3Server
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.completers import _judge
from zero_rename.core.s3.fanout import Completion, Item, complete_uploads, default_processes
from zero_rename.core.s3.stats import RequestStats, total_requests
from zero_rename.errors import ConfigError, FanoutWorkerError, NoSuchUpload

pytestmark = pytest.mark.s3

OP = "CompleteMultipartUpload"


def prepare(server: S3Server, bucket: str, count: int, prefix: str = "f/") -> list[Item]:
    client = server.client()

    def one(i: int) -> Item:
        key = f"{prefix}part {i:04d}+./x.bin"  # a space, a plus, a dot segment
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        etag = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=os.urandom(64)
        )["ETag"]
        return i, key, upload_id, [(1, etag)]

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(count)))


def bogus(count: int) -> Iterator[Item]:
    """Items whose uploads do not exist: answered at once, nothing to prepare."""
    for i in range(count):
        yield i, f"missing/{i}", f"no-such-upload-{i}", [(1, '"0"')]


def check_completed(
    server: S3Server, bucket: str, items: list[Item], done: list[Completion]
) -> None:
    client = server.client()
    assert sorted(c.index for c in done) == [i for i, *_ in items]
    assert all(c.ok for c in done), [c.failure for c in done if not c.ok][:3]
    for c in done:
        assert client.head_object(Bucket=bucket, Key=c.key)["ETag"] == c.etag
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# The light path in-process is exercised by the proxy tests below.
@pytest.mark.parametrize("processes,path", [(1, "botocore"), (3, "light")])
def test_completes_every_upload(
    s3_backend: S3Server, store_config: StoreConfig, bucket: str, processes: int, path: str
) -> None:
    items = prepare(s3_backend, bucket, 30)
    stats = RequestStats()
    with complete_uploads(
        store_config,
        bucket,
        iter(items),
        processes=processes,
        threads=6,
        request_path=path,
        stats=stats,
    ) as stream:
        done = list(stream)
    check_completed(s3_backend, bucket, items, done)
    # Statistics add up: one complete per upload, each worker's counted once.
    assert len(stream.worker_stats) == processes
    assert stats.requests(OP) == 30
    assert sum(s["counters"].get(f"s3.{OP}", 0) for s in stream.worker_stats) == 30
    assert sum(total_requests(s) for s in stream.worker_stats) == stats.total_requests


@pytest.mark.moto_xfail(
    reason="answers 500, not NoSuchUpload, for an upload that is not pending", raises=AssertionError
)
@pytest.mark.parametrize("processes", [1, 2])
def test_no_such_upload_fails_that_item_only(
    s3_backend: S3Server, store_config: StoreConfig, bucket: str, processes: int
) -> None:
    items = prepare(s3_backend, bucket, 10)
    gone = items[4]
    s3_backend.client().abort_multipart_upload(Bucket=bucket, Key=gone[1], UploadId=gone[2])
    config = dataclasses.replace(store_config, max_attempts=2)
    done = {
        c.index: c for c in complete_uploads(config, bucket, items, processes=processes, threads=4)
    }
    failed = done.pop(4)
    assert failed.failure is not None and failed.etag is None
    assert (failed.failure.code, failed.failure.status) == ("NoSuchUpload", 404)
    assert isinstance(failed.failure.error(failed.key), NoSuchUpload)
    assert not failed.failure.outcome_unknown
    assert all(c.ok for c in done.values()) and len(done) == 9


@pytest.mark.parametrize(
    "processes,exc", [(1, ValueError), (2, ValueError), (2, KeyboardInterrupt)]
)
@pytest.mark.also_on("moto")
def test_an_error_in_the_callers_items_stops_the_workers(
    s3_backend: S3Server,
    store_config: StoreConfig,
    bucket: str,
    processes: int,
    exc: type[BaseException],
) -> None:
    pulled = 0

    def items() -> Iterator[Item]:
        nonlocal pulled
        for item in bogus(10_000):
            pulled += 1
            if pulled == 60:
                raise exc("the caller's generator broke")
            yield item

    config = dataclasses.replace(store_config, max_attempts=1)
    stream = complete_uploads(config, bucket, items(), processes=processes, threads=4)
    seen = 0
    with pytest.raises(exc, match="generator broke"):
        for _ in stream:
            seen += 1
            # Bounded memory: never more than two items per thread in flight.
            assert pulled - seen <= 2 * 4 + processes
    assert pulled == 60
    assert len(stream.worker_pids) == (0 if processes == 1 else processes)
    assert not any(alive(pid) for pid in stream.worker_pids)
    assert stream.stats.requests(OP) <= 60  # what was sent before the stop, counted


def test_closing_the_stream_early_stops_the_workers(
    s3_backend: S3Server, store_config: StoreConfig, bucket: str
) -> None:
    config = dataclasses.replace(store_config, max_attempts=1)
    with complete_uploads(config, bucket, bogus(100_000), processes=2, threads=4) as stream:
        first = next(stream)
    assert first.failure is not None
    assert stream.worker_pids and not any(alive(pid) for pid in stream.worker_pids)
    assert len(stream.worker_stats) == 2  # stopped workers still report their requests


def test_a_worker_that_dies_is_an_error_not_a_hang(
    s3_backend: S3Server, store_config: StoreConfig, bucket: str
) -> None:
    config = dataclasses.replace(store_config, max_attempts=1)
    stream = complete_uploads(config, bucket, bogus(100_000), processes=2, threads=4)
    next(stream)
    victim = stream.worker_pids[0]
    # No secret on a worker's command line: credentials come from its environment.
    with open(f"/proc/{victim}/cmdline", "rb") as f:
        assert s3_backend.secret_key.encode() not in f.read()
    os.kill(victim, signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(FanoutWorkerError, match=f"pid {victim}.*exited with -9"):
        for _ in stream:
            pass
    assert time.monotonic() - started < 10
    assert not any(alive(pid) for pid in stream.worker_pids)


# -- the light path's answers to a misbehaving store, beside botocore's --------------
@pytest.fixture
def proxied_config(proxy: S3Proxy) -> StoreConfig:
    return StoreConfig(endpoint_url=proxy.endpoint_url, max_pool_connections=8, max_attempts=3)


def complete_one(
    config: StoreConfig, bucket: str, item: Item, path: str, stats: RequestStats | None = None
) -> Completion:
    (done,) = list(
        complete_uploads(
            config, bucket, [item], processes=1, threads=1, request_path=path, stats=stats
        )
    )
    return done


@pytest.mark.parametrize("path", ["light", "botocore"])
@pytest.mark.parametrize(
    "status,code",
    [(500, "InternalError"), (503, "SlowDown"), (200, "InternalError")],
    ids=["500", "503-slowdown", "200-with-error-body"],
)
def test_a_transient_error_is_retried(
    s3_backend: S3Server,
    proxy: S3Proxy,
    proxied_config: StoreConfig,
    bucket: str,
    path: str,
    status: int,
    code: str,
) -> None:
    (item,) = prepare(s3_backend, bucket, 1)
    proxy.add(OP, "error", status=status, code=code)
    stats = RequestStats()
    done = complete_one(proxied_config, bucket, item, path, stats)
    assert done.ok, done.failure
    assert s3_backend.client().head_object(Bucket=bucket, Key=item[1])["ETag"] == done.etag
    assert stats.total_requests == 2  # one retry, counted


@pytest.mark.parametrize("path", ["light", "botocore"])
def test_a_dropped_connection_is_retried(
    s3_backend: S3Server, proxy: S3Proxy, proxied_config: StoreConfig, bucket: str, path: str
) -> None:
    (item,) = prepare(s3_backend, bucket, 1)
    proxy.add(OP, "reset")
    assert complete_one(proxied_config, bucket, item, path).ok


@pytest.mark.parametrize("path", ["light", "botocore"])
def test_a_5xx_after_every_attempt_is_an_unknown_outcome(
    s3_backend: S3Server, proxy: S3Proxy, proxied_config: StoreConfig, bucket: str, path: str
) -> None:
    (item,) = prepare(s3_backend, bucket, 1)
    proxy.add(OP, "error", status=200, code="InternalError", times=None)
    stats = RequestStats()
    done = complete_one(proxied_config, bucket, item, path, stats)
    assert done.failure is not None
    # botocore reports the code of the Error document it was given.
    assert (done.failure.code, done.failure.status) == ("InternalError", 500)
    assert done.failure.outcome_unknown
    assert stats.total_requests == 3 and stats.snapshot()["counters"][f"s3.{OP}.failures"] == 1


# -- no server -------------------------------------------------------------------
def error_body(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>m</Message></Error>".encode()


@pytest.mark.unit
@pytest.mark.parametrize(
    "status,body,code,retried",
    [
        (
            200,
            b'<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            b"<ETag>&quot;abc-1&quot;</ETag></CompleteMultipartUploadResult>",
            None,
            None,
        ),
        (200, error_body("InternalError"), "InternalError", 0.05),
        (200, b"<CompleteMultipartUploadResult><ETag>", "500", 0.05),  # cut short
        (404, error_body("NoSuchUpload"), "NoSuchUpload", None),
        (400, error_body("InvalidPart"), "InvalidPart", None),
        (412, error_body("PreconditionFailed"), "PreconditionFailed", None),
        (503, error_body("SlowDown"), "SlowDown", 1.0),
        (400, error_body("RequestTimeout"), "RequestTimeout", 0.05),
        (429, b"", "429", 1.0),
        (502, b"<html>bad gateway</html>", "502", 0.05),
    ],
)
def test_judging_answers(status: int, body: bytes, code: str | None, retried: float | None) -> None:
    outcome, scale = _judge(status, body)
    assert scale == retried
    if code is None:
        assert outcome.etag == '"abc-1"' and outcome.failure is None
    else:
        assert outcome.failure is not None and outcome.failure.code == code


@pytest.mark.unit
def test_arguments_are_checked() -> None:
    config = StoreConfig(endpoint_url="http://127.0.0.1:9")
    for kwargs in ({"processes": 0}, {"threads": 0}, {"request_path": "curl"}):
        with pytest.raises(ConfigError):
            complete_uploads(config, "b", [], **kwargs)  # type: ignore[arg-type]


@pytest.mark.unit
def test_workers_by_default_only_where_they_paid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(8)), raising=False)
    remote = StoreConfig(endpoint_url="https://s3.example.com")
    assert default_processes(remote) == default_processes(StoreConfig()) == 4
    assert default_processes(remote, uploads=1000) == 1  # starting workers costs more
    for local in ("http://127.0.0.1:8333", "http://localhost:9000", "http://[::1]:9000"):
        assert default_processes(StoreConfig(endpoint_url=local)) == 1  # the server needs the cores
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    assert default_processes(remote) == 2
