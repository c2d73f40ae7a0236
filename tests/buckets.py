"""Fresh buckets for tests, made ready in batches on SeaweedFS.

SeaweedFS gives every bucket a collection of its own, and the first write of
data to a new bucket waits about 215 ms while that collection's first volumes
are grown (about 14 ms of the server's CPU; the rest is idle). Several hundred
tests each write to a new bucket, so the suite waited over a minute for it.
Volumes for many collections grow side by side: 32 buckets, eight at a time,
are ready in about a second, so the ``bucket`` fixture takes them from a batch
made that way. (At 32 at a time the master's volume assignment fell behind
after a few hundred buckets and writes failed with InternalError; at 8 and 16
a run of 384 buckets had none.)

The batch is made in the test's own thread and its threads are joined before
the test starts: a crash child forked by the test (tests/faults.py) must not
inherit a live thread. Each bucket is handed over empty: its warming object is
deleted (the grown volumes stay with the collection).
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from tests.servers import S3Server
from zero_rename.embedded_s3 import EmbeddedS3

BATCH, THREADS = 32, 8
_WARM_KEY = "_warm"
_ready: dict[str, list[str]] = {}  # endpoint -> buckets made ready, not yet handed out


def new_bucket_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def fresh_bucket(server: S3Server) -> str:
    """An empty bucket no other test has used, on ``server``."""
    if not isinstance(server, EmbeddedS3):  # moto: no wait to save
        name = new_bucket_name()
        server.create_bucket(name)
        return name
    ready = _ready.setdefault(server.endpoint_url, [])
    if not ready:
        ready.extend(_make_ready(server, BATCH))
    return ready.pop()


def _make_ready(server: EmbeddedS3, count: int) -> list[str]:
    client = server.client()
    names = [new_bucket_name() for _ in range(count)]

    def ready(name: str) -> str:
        client.create_bucket(Bucket=name)  # one client: making one costs 16 ms of CPU
        # Data: an empty object is kept by the filer and grows no volume.
        client.put_object(Bucket=name, Key=_WARM_KEY, Body=b"1")
        client.delete_object(Bucket=name, Key=_WARM_KEY)
        return name

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(ready, names))
