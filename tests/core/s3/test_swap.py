"""Compare-and-swap that starts from what this process last saw (``known``):
a stale memory costs a lost write and a read, never a wrong result."""

from __future__ import annotations

import json

import pytest

from zero_rename.core.committer import Committer
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import states
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.core.s3.writes import swap
from zero_rename.errors import AbortRefusedError

pytestmark = pytest.mark.s3


@pytest.fixture
def store(store_config: StoreConfig) -> S3Store:
    return S3Store.connect(store_config)


def _add(item: str):  # type: ignore[no-untyped-def]
    def change(current: bytes | None) -> bytes:
        items = json.loads(current) if current is not None else []
        return json.dumps([*items, item]).encode()

    return change


def _holds(store: S3Store, bucket: str) -> list[str]:
    found = store.get_object(bucket, "o")
    assert found is not None
    return json.loads(found[0])


@pytest.mark.also_on("moto")
def test_stale_memory_loses_the_write_and_the_swap_reads(store: S3Store, bucket: str) -> None:
    swap(store, bucket, "o", _add("a"), "o")  # a create: its answer carries no ETag
    mine = swap(store, bucket, "o", _add("b"), "o")
    assert mine.wrote and mine.data and mine.etag
    swap(store, bucket, "o", _add("c"), "o")  # another process, after our memory
    # one round allowed: the try on memory is not a round of its own
    done = swap(store, bucket, "o", _add("d"), "o", rounds=1, known=(mine.data, mine.etag))
    assert done.wrote
    assert _holds(store, bucket) == ["a", "b", "c", "d"]


def test_memory_of_no_object_loses_to_one_created_since(store: S3Store, bucket: str) -> None:
    swap(store, bucket, "o", _add("a"), "o")
    swap(store, bucket, "o", _add("b"), "o", known=(None, None))
    assert _holds(store, bucket) == ["a", "b"]


def test_fresh_memory_writes_without_reading(store: S3Store, bucket: str) -> None:
    swap(store, bucket, "o", _add("a"), "o")
    mine = swap(store, bucket, "o", _add("b"), "o")
    assert mine.data and mine.etag
    reads, writes = store.stats.requests("GetObject"), store.stats.requests("PutObject")
    swap(store, bucket, "o", _add("c"), "o", known=(mine.data, mine.etag))
    assert store.stats.requests("GetObject") == reads
    assert store.stats.requests("PutObject") == writes + 1
    assert _holds(store, bucket) == ["a", "b", "c"]


def test_refusals_and_no_change_are_decided_on_what_s3_holds(store: S3Store, bucket: str) -> None:
    swap(store, bucket, "o", _add("a"), "o")
    mine = swap(store, bucket, "o", _add("b"), "o")
    assert mine.data and mine.etag
    swap(store, bucket, "o", _add("c"), "o")

    def refuse_unless_c(current: bytes | None) -> bytes | None:
        if "c" not in json.loads(current or b"[]"):
            raise ValueError("no c")
        return None

    # memory says no "c" (a refusal) and S3 holds one: S3 decides, no change
    done = swap(store, bucket, "o", refuse_unless_c, "o", known=(mine.data, mine.etag))
    assert not done.wrote and json.loads(done.data or b"") == ["a", "b", "c"]


def test_two_processes_advance_one_record_with_stale_memories(committer: Committer) -> None:
    """Each process's records remember the record as it left it; the other's
    step in between makes that memory stale: a step allowed on the memory but
    not on the record is refused, one refused on the memory but allowed on the
    record lands."""
    job = committer.setup_job()
    mine, theirs = committer.ctx, JobContext(committer.ctx.store, committer.ctx.dest)
    mine.records.get(job.job_id)
    theirs.records.get(job.job_id)  # remembers the job set up
    mine.records.advance(job.job_id, states.SEAL)
    # on memory DECIDE is illegal (set up); on the record (sealed) it lands
    decided, moved = theirs.records.advance(job.job_id, states.DECIDE)
    assert moved and decided.state == states.COMMITTING
    # mine remembers it sealed, where an abort is allowed: the record is decided
    with pytest.raises(AbortRefusedError):
        mine.records.advance(job.job_id, states.ABORT)
    assert committer.job(job.job_id).state == states.COMMITTING
