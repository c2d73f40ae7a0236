"""Empty buckets for tests: on SeaweedFS a bucket is emptied after its test and
handed to a later one.

SeaweedFS gives every bucket a collection of its own, and the first write of
data to a new bucket waits about 215 ms (nearly all of it idle) while that
collection's first volume grows; the process's store probe (11 requests) runs
once per bucket too. Several hundred tests pay both for a fresh bucket. An
emptied bucket keeps its volume and its probed profile, so a test given one
pays neither. (Growing volumes for many new buckets at once instead wedged
SeaweedFS's volume growth after about 180 buckets: every later write timed
out on "assign volume".)

A bucket goes back only when emptying it worked (objects, pending uploads,
lifecycle rules), and waits behind a few others, so that a straggling request
of its test lands long before the bucket is handed out again; it is checked
empty once more at that point, and dropped if it is not. Tests whose buckets
other processes write to (Spark's, Airflow's and Dagster's workers, which may
outlive the test) always get a new bucket.

A bucket is emptied by a thread of its own, one per process, while the next
tests run: emptying takes some eight requests (72 ms by median, 36 s in all
for tests/core's 388 buckets on three workers), which the test's teardown no
longer waits for.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.servers import S3Server
from zero_rename.core.s3 import probes
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.light import LightClient
from zero_rename.core.s3.sigv4 import StaticCredentials
from zero_rename.embedded_s3 import EmbeddedS3

log = logging.getLogger(__name__)

# Buckets waiting to be handed out again, per endpoint; one is reused only once
# this many more wait behind it.
_WAITING = 4
_pools: dict[str, deque[str]] = {}
_clients: dict[str, Any] = {}
# Empties the buckets handed back, one after another, beside the tests.
_emptier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bucket-emptier")


def new_bucket(server: S3Server) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    server.create_bucket(name)
    return name


def take(server: S3Server) -> str:
    """An empty bucket on ``server``: an emptied one on SeaweedFS when there is one."""
    pool = _pools.get(server.endpoint_url)
    while pool is not None and len(pool) > _WAITING:
        name = pool.popleft()
        if _is_empty(_client(server), name):
            return name
        log.warning("bucket %s was written to after its test; not reused", name)
    return new_bucket(server)


def give_back(server: S3Server, name: str) -> None:
    """Have ``name`` emptied for a later test, in the background; on any failure
    the bucket is left as it is."""
    if not isinstance(server, EmbeddedS3):  # moto: a new bucket costs nothing
        return
    # What this process probed through another endpoint (a test's fault-injecting
    # proxy) must not reach a later test whose proxy gets the same port. Here,
    # in the test's thread: the tests' own threads change this dictionary too.
    for key in [k for k in probes._DETECTED if k[1] == name and k[0] != server.endpoint_url]:
        probes._DETECTED.pop(key, None)
    _emptier.submit(_empty_for_later, server, name)


def finish_emptying() -> None:
    """Wait for the buckets handed back to be emptied (the session's end)."""
    _emptier.shutdown(wait=True)


def _empty_for_later(server: EmbeddedS3, name: str) -> None:
    try:
        empty_bucket(_client(server), name)
    except Exception:
        log.warning("could not empty bucket %s; not reused", name, exc_info=True)
        return
    _pools.setdefault(server.endpoint_url, deque()).append(name)


def _client(server: EmbeddedS3) -> Any:
    """One light client per server, with the server's own credentials (a test may
    change the environment's): a bucket handed back costs some six requests, at
    a third of botocore's client CPU each."""
    if server.endpoint_url not in _clients:
        config = StoreConfig(endpoint_url=server.endpoint_url)
        credentials = StaticCredentials(server.access_key, server.secret_key)
        _clients[server.endpoint_url] = LightClient(config, "us-east-1", credentials)
    return _clients[server.endpoint_url]


def empty_bucket(client: Any, name: str) -> None:
    """Abort a bucket's pending uploads, delete its objects and lifecycle rules, and
    check that nothing is left; through the light client or botocore's (the
    benchmarks')."""
    for upload in pending_uploads(client, name):
        client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    more: dict[str, str] = {}  # botocore's client takes no None for a token
    while True:
        page = client.list_objects_v2(Bucket=name, **more)
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
        if not page.get("IsTruncated") or not page.get("NextContinuationToken"):
            break
        more = {"ContinuationToken": page["NextContinuationToken"]}
    client.delete_bucket_lifecycle(Bucket=name)  # botocore's, through the light client
    if not _is_empty(client, name):
        raise RuntimeError(f"bucket {name} is not empty after emptying it")


def pending_uploads(client: Any, name: str, prefix: str = "") -> list[dict[str, Any]]:
    """Every pending upload in the bucket (under ``prefix``), page after page."""
    uploads: list[dict[str, Any]] = []
    markers: dict[str, str] = {}
    while True:
        page = client.list_multipart_uploads(Bucket=name, Prefix=prefix, **markers)
        uploads += page.get("Uploads", [])
        if not page.get("IsTruncated"):
            return uploads
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


def _is_empty(client: Any, name: str) -> bool:
    objects = client.list_objects_v2(Bucket=name, MaxKeys=1).get("Contents", [])
    uploads = client.list_multipart_uploads(Bucket=name, MaxUploads=1).get("Uploads", [])
    return not objects and not uploads
