"""Task attempts whose files upload on background threads (``upload_threads``).

The Spark writer turns them on so a file's requests overlap the encoding of
the next one. The guarantees do not move: nothing visible before job commit,
the manifest names exactly the parts uploaded, and a failed or aborted
attempt leaves no pending upload, even one whose creation was in flight.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.faults import clear, inject
from tests.helpers import MIB, pending_in_bucket, visible
from zero_rename.core.committer import Committer
from zero_rename.core.protocol.writers import BackgroundUploads
from zero_rename.errors import JobDecidedError, StoreError, ZeroRenameError

THREADS = 3


def opts(mode: str, **more: Any) -> dict[str, Any]:
    return {"committer": mode, "conflict_mode": "append", "part_size": 5 * MIB, **more}


def _slow(client: Any, op: str, seconds: float) -> Any:
    """Delay every ``op`` on this client, so it is still in flight when the test acts."""

    def delay(**_: Any) -> None:
        time.sleep(seconds)

    client.meta.events.register(f"before-call.s3.{op}", delay, unique_id=f"slow-{op}")
    return lambda: client.meta.events.unregister(f"before-call.s3.{op}", unique_id=f"slow-{op}")


# -- BackgroundUploads alone ---------------------------------------------------


def test_the_memory_bound_holds_the_writer_until_bodies_are_sent() -> None:
    uploads = BackgroundUploads(threads=4, max_bytes=10)
    release = threading.Event()
    uploads.submit(8, lambda: release.wait(10))
    admitted = threading.Event()

    def second() -> None:
        uploads.submit(8, lambda: None)
        admitted.set()

    writer = threading.Thread(target=second)
    writer.start()
    assert not admitted.wait(0.3)  # 8 + 8 bytes would pass the bound of 10
    release.set()
    assert admitted.wait(10)
    writer.join(10)
    uploads.wait()
    uploads.stop()


def test_a_body_larger_than_the_bound_still_goes_alone() -> None:
    uploads = BackgroundUploads(threads=1, max_bytes=10)
    sent: list[int] = []
    uploads.submit(100, lambda: sent.append(100))
    uploads.wait()
    assert sent == [100]
    uploads.stop()


def test_the_first_failure_stops_new_work_and_is_raised_at_wait() -> None:
    uploads = BackgroundUploads(threads=2, max_bytes=10)

    def fail() -> None:
        raise StoreError("boom", operation="UploadPart")

    uploads.submit(1, fail)
    with pytest.raises(StoreError, match="boom"):
        uploads.wait()
    with pytest.raises(StoreError, match="boom"):
        uploads.submit(1, lambda: None)
    uploads.stop()
    with pytest.raises(StoreError, match="boom"):  # the failure stays the answer
        uploads.submit(1, lambda: None)


def test_stop_drops_queued_work_and_waits_for_running_work() -> None:
    uploads = BackgroundUploads(threads=1, max_bytes=100)
    started, finished, ran = threading.Event(), threading.Event(), []

    def running() -> None:
        started.set()
        time.sleep(0.3)
        finished.set()

    uploads.submit(1, running)
    uploads.submit(1, lambda: ran.append("queued"))
    assert started.wait(10)
    uploads.stop()
    assert finished.is_set() and ran == []
    with pytest.raises(ZeroRenameError, match="stopped"):
        uploads.submit(1, lambda: None)


# -- task attempts on a real store ------------------------------------------------


@pytest.mark.s3
@pytest.mark.parametrize("mode", ["magic", "staging"])
def test_background_files_commit_with_exactly_their_parts(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode, partition_columns="dt"))
    attempt = committer.task_attempt(job, "00000", upload_threads=THREADS)
    bodies = {f"2024-01-{d:02d}": bytes([d]) * (1000 * d) for d in range(1, 9)}
    bodies["2024-02-01"] = b"".join(bytes([i]) * MIB for i in range(11))  # three parts
    bodies["2024-03-01"] = b""  # one empty part
    for day, body in bodies.items():
        with attempt.open({"dt": day}) as out:
            out.write(body)
    manifest = attempt.commit()
    assert {u.partition["dt"]: u.bytes for u in manifest.uploads} == {
        d: len(b) for d, b in bodies.items()
    }
    for upload in manifest.uploads:
        assert [p.number for p in upload.parts] == list(range(1, len(upload.parts) + 1))
        assert sum(p.size for p in upload.parts) == upload.bytes
    assert visible(committer) == {}  # pending until the job commit
    committer.commit_job(job.job_id)
    found = {
        path.split("/")[0].removeprefix("dt="): body for path, body in visible(committer).items()
    }
    assert found == bodies
    assert pending_in_bucket(committer) == []


@pytest.mark.s3
def test_magic_creates_a_small_files_upload_only_when_it_closes(committer: Committer) -> None:
    job = committer.setup_job(opts("magic"))
    attempt = committer.task_attempt(job, "00000", upload_threads=THREADS)
    out = attempt.open()
    out.write(b"small")
    assert attempt.stats.requests("CreateMultipartUpload") == 0  # open cost no request
    out.close()
    attempt.commit(publish=False)
    assert attempt.stats.requests("CreateMultipartUpload") == 1
    assert attempt.stats.requests("UploadPart") == 1


@pytest.mark.s3
@pytest.mark.parametrize("mode", ["magic", "staging"])
@pytest.mark.parametrize("op,nth", [("CreateMultipartUpload", 2), ("UploadPart", 3)])
@pytest.mark.also_on("moto")
def test_a_failed_background_request_fails_the_commit_and_leaves_nothing(
    committer: Committer, mode: str, op: str, nth: int
) -> None:
    job = committer.setup_job(opts(mode))
    attempt = committer.task_attempt(job, "00000", upload_threads=THREADS)
    fault = inject(committer.store.client, op, nth=nth)
    try:
        with pytest.raises(StoreError, match="injected"):
            for body in (b"one", b"two", b"three", b"four"):
                with attempt.open() as out:
                    out.write(body)
            attempt.commit()
    finally:
        clear(committer.store.client, fault)
    attempt.abort()  # Spark's writer aborts whatever raised; a second abort is harmless
    assert pending_in_bucket(committer) == []
    assert attempt._spool is None
    committer.commit_job(job.job_id, expected=0)
    assert visible(committer) == {}


@pytest.mark.s3
@pytest.mark.parametrize("mode", ["magic", "staging"])
def test_abort_waits_for_uploads_still_being_created(committer: Committer, mode: str) -> None:
    """An upload whose creation is in flight when the task aborts is aborted too,
    not left pending behind the abort."""
    job = committer.setup_job(opts(mode))
    attempt = committer.task_attempt(job, "00000", upload_threads=THREADS)
    restore = _slow(committer.store.client, "CreateMultipartUpload", 0.5)
    try:
        for body in (b"one", b"two", b"three", b"four", b"five"):
            with attempt.open() as out:
                out.write(body)
        attempt.abort()
    finally:
        restore()
    assert pending_in_bucket(committer) == []


@pytest.mark.s3
@pytest.mark.also_on("moto")
def test_a_zombie_with_background_uploads_adds_nothing_to_an_aborted_job(
    committer: Committer,
) -> None:
    job = committer.setup_job(opts("magic"))
    zombie = committer.task_attempt(job, "00000", upload_threads=THREADS)
    with zombie.open() as out:
        out.write(b"late")
    committer.abort_job(job.job_id)
    with pytest.raises(JobDecidedError, match="aborted"):
        zombie.commit()
    assert pending_in_bucket(committer) == [] and visible(committer) == {}


@pytest.mark.s3
def test_abort_with_parts_in_flight_leaves_no_upload(committer: Committer) -> None:
    """Parts of a multi-part file still on the wire when the task aborts: the
    abort waits for them, then aborts their upload."""
    job = committer.setup_job(opts("magic"))
    attempt = committer.task_attempt(job, "00000", upload_threads=THREADS)
    restore = _slow(committer.store.client, "UploadPart", 0.5)
    try:
        out = attempt.open()
        out.write(b"x" * (3 * 5 * MIB))  # three full parts, handed to the threads
        attempt.abort()
    finally:
        restore()
    assert pending_in_bucket(committer) == []


@pytest.mark.s3
def test_the_attempts_bodies_in_flight_stay_within_threads_parts(committer: Committer) -> None:
    """``upload_threads`` parts at most, queued or on the wire, however fast the
    task writes and however slow S3 answers."""
    job = committer.setup_job(opts("magic"))
    threads, part = 2, 5 * MIB
    attempt = committer.task_attempt(job, "00000", upload_threads=threads)
    uploads = attempt._uploads
    assert uploads is not None
    seen: list[int] = []

    def sample(**_: Any) -> None:
        seen.append(uploads._bytes)
        time.sleep(0.2)

    client = committer.store.client
    client.meta.events.register("before-call.s3.UploadPart", sample, unique_id="sample")
    try:
        for _ in range(3):
            with attempt.open() as out:
                out.write(b"y" * (2 * part))
        attempt.commit(publish=False)
    finally:
        client.meta.events.unregister("before-call.s3.UploadPart", unique_id="sample")
    assert len(seen) == 6
    assert max(seen) <= threads * part
    assert max(seen) == threads * part  # the bound was reached: the writer did wait
