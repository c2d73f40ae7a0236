"""The committed state a reader reads: jobs frozen mid-commit, replaces between
their commit and their deletes, foreign files, states as of a job."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.faults import clear, inject, pause
from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.views.snapshot import file_job_id, table_snapshot
from zero_rename.errors import JobNotFoundError, StoreError, ZeroRenameError

pytestmark = pytest.mark.s3


def job(c: Committer, mode: str, days: dict[str, bytes], tasks: int = 1) -> JobRecord:
    record = c.setup_job({"partition_columns": "dt", "conflict_mode": mode})
    for t in range(tasks):
        write_task(c, record, f"{t:05d}", days)
    return record


def files(c: Committer, as_of_job: str | None = None) -> dict[str, str | None]:
    """Relative path of each file of the committed state -> its job id."""
    state = table_snapshot(c.ctx, as_of_job)
    return {f.relative: f.job_id for f in state.files}


def in_background(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_file_job_id() -> None:
    job_id = "0b3c8f3e-9a41-4b7e-8d2e-3f1c2a6b7d90"
    assert file_job_id(f"part-00003-{job_id}.c000.snappy.parquet") == job_id
    assert file_job_id(f"part-task_7-{job_id}.c012") == job_id
    assert file_job_id("part-00000-c000.snappy.parquet") is None  # Spark's own names
    assert file_job_id("data.parquet") is None


def test_committed_jobs_only(committer: Committer) -> None:
    first = job(committer, "append", {"d1": b"a", "d2": b"b"})
    committer.commit_job(first.job_id)
    open_job = job(committer, "append", {"d1": b"c"})  # written, never committed
    state = table_snapshot(committer.ctx)
    assert sorted(f.relative.split("/")[0] for f in state.files) == ["dt=d1", "dt=d2"]
    assert {f.job_id for f in state.files} == {first.job_id}
    assert state.committed_jobs == (first.job_id,)
    assert dict(state.files[0].partition) in ({"dt": "d1"}, {"dt": "d2"})
    committer.commit_job(open_job.job_id)
    assert sorted(files(committer).values()) == sorted([first.job_id] * 2 + [open_job.job_id])


def test_job_in_its_commit_is_skipped_until_committed(committer: Committer) -> None:
    record = job(committer, "append", {f"d{i}": b"x" for i in range(6)})
    # Hold the commit after some of its uploads are visible in a listing.
    with pause(committer.store.client, "CompleteMultipartUpload", nth=4) as held:
        thread = in_background(lambda: committer.commit_job(record.job_id))
        assert held.reached.wait(60)
        assert committer.job(record.job_id).state == "committing"
        state = table_snapshot(committer.ctx)
        assert state.files == ()
        assert state.skipped.get("uncommitted", 0) >= 1  # completed, not yet committed
        held.release()
        thread.join(60)
    assert len(files(committer)) == 6


def test_replace_supersedes_old_files_before_deleting_them(committer: Committer) -> None:
    old = job(committer, "append", {"d1": b"old", "d2": b"keep"})
    committer.commit_job(old.job_id)
    new = job(committer, "replace", {"d1": b"new"})
    # Hold the delete of the replaced files: the record already says committed.
    with pause(committer.store.client, "DeleteObjects") as held:
        thread = in_background(lambda: committer.commit_job(new.job_id))
        assert held.reached.wait(60)
        assert committer.job(new.job_id).state == "committed"
        listed = [
            o.key
            for o in committer.store.list_objects(
                committer.dest.bucket, committer.dest.dir + "dt=d1/"
            )
        ]
        assert any(old.job_id in k for k in listed)  # still there ...
        state = files(committer)  # ... but not read
        held.release()
        thread.join(60)
    assert sorted((p.split("/")[0], j) for p, j in state.items()) == [
        ("dt=d1", new.job_id),
        ("dt=d2", old.job_id),
    ]
    assert files(committer) == state


def test_replace_in_its_commit_keeps_the_old_state(committer: Committer) -> None:
    old = job(committer, "append", {"d1": b"old"})
    committer.commit_job(old.job_id)
    new = job(committer, "replace", {"d1": b"new"})
    with pause(committer.store.client, "CompleteMultipartUpload") as held:
        thread = in_background(lambda: committer.commit_job(new.job_id))
        assert held.reached.wait(60)
        state = files(committer)
        held.release()
        thread.join(60)
    assert list(state.values()) == [old.job_id]


def test_foreign_files_are_read_until_a_replace(committer: Committer) -> None:
    c = committer
    c.store.put_object(c.dest.bucket, c.dest.dir + "dt=d1/from-another-tool.parquet", b"f")
    c.store.put_object(c.dest.bucket, c.dest.dir + "dt=d2/from-another-tool.parquet", b"f")
    c.store.put_object(c.dest.bucket, c.dest.dir + "_SUCCESS", b"{}")  # hidden
    assert sorted(files(c)) == [
        "dt=d1/from-another-tool.parquet",
        "dt=d2/from-another-tool.parquet",
    ]
    new = job(c, "replace", {"d1": b"new"})
    c.commit_job(new.job_id)
    state = files(c)
    assert state["dt=d2/from-another-tool.parquet"] is None
    assert "dt=d1/from-another-tool.parquet" not in state
    assert [j for p, j in state.items() if p.startswith("dt=d1/")] == [new.job_id]


def test_as_of_job(committer: Committer) -> None:
    c = committer
    first = job(c, "append", {"d1": b"1"})
    c.commit_job(first.job_id)
    second = job(c, "append", {"d1": b"2", "d2": b"2"})
    c.commit_job(second.job_id)
    assert set(files(c, as_of_job=first.job_id).values()) == {first.job_id}
    assert len(files(c, as_of_job=second.job_id)) == 3
    third = job(c, "replace", {"d2": b"3"})
    c.commit_job(third.job_id)
    # d1 untouched: the state after the first job is still whole ...
    assert set(files(c, as_of_job=first.job_id).values()) == {first.job_id}
    # ... but the second job's d2 file was replaced and deleted.
    with pytest.raises(ZeroRenameError, match="can no longer be read"):
        files(c, as_of_job=second.job_id)
    with pytest.raises(JobNotFoundError):
        files(c, as_of_job="0b3c8f3e-9a41-4b7e-8d2e-3f1c2a6b7d90")
    open_job = job(c, "append", {"d3": b"4"})
    with pytest.raises(ZeroRenameError, match="not committed"):
        files(c, as_of_job=open_job.job_id)


def test_a_job_committed_during_the_listing_is_listed_again(committer: Committer) -> None:
    c = committer
    record = job(c, "append", {"d1": b"x", "d2": b"y"})
    # The job commits while the data is first listed, after the records were read.
    calls = {"n": 0}
    original = c.store.list_objects

    def listing(bucket: str, prefix: str, page_size: int = 1000):  # type: ignore[no-untyped-def]
        if prefix == c.dest.dir:
            calls["n"] += 1
            if calls["n"] == 1:
                c.commit_job(record.job_id)  # commits between the two record reads
        return original(bucket, prefix, page_size)

    c.store.list_objects = listing  # type: ignore[method-assign]
    try:
        state = table_snapshot(c.ctx)
    finally:
        del c.store.list_objects
    assert calls["n"] == 2
    assert len(state.files) == 2


@pytest.mark.parametrize("finish", ["commit", "cleanup"])
def test_deletes_cut_short_after_committed_are_finished(committer: Committer, finish: str) -> None:
    c = committer
    old = job(c, "append", {"d1": b"old"})
    c.commit_job(old.job_id)
    new = job(c, "replace", {"d1": b"new"})
    fault = inject(c.store.client, "DeleteObjects", times=10)
    with pytest.raises(StoreError):
        c.commit_job(new.job_id)
    clear(c.store.client, fault)
    assert c.job(new.job_id).state == "committed"
    assert list(files(c).values()) == [new.job_id]  # the committed state is whole ...
    listed = [o.key for o in c.store.list_objects(c.dest.bucket, c.dest.dir + "dt=d1/")]
    assert any(old.job_id in k for k in listed)  # ... the old file not yet deleted
    if finish == "commit":
        c.commit_job(new.job_id)
    else:
        c.cleanup_job(new.job_id)
    listed = [o.key for o in c.store.list_objects(c.dest.bucket, c.dest.dir + "dt=d1/")]
    assert [k for k in listed if old.job_id in k] == []
    assert list(files(c).values()) == [new.job_id]
