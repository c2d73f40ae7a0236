"""Pending uploads: whose job each belongs to, what may go, and the sweep that aborts them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers import pending, pending_in_bucket, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import Destination, data_file_name, file_job_id, is_job_data_key
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol.abort import SWEEP_ROUNDS, sweep_uploads
from zero_rename.core.s3.client import UploadInfo
from zero_rename.core.views import pending as pend

JOB = "5f0c9a4e-2b1d-4c8e-9f3a-1d2e3f4a5b6c"
OTHER = "0b7e4c1a-9d2f-4e3b-8a6c-5d4e3f2a1b0c"


# -- whose upload is it ----------------------------------------------------
def test_job_id_comes_from_the_file_name_only() -> None:
    assert file_job_id(f"t/dt=1/part-00000-{JOB}.c000.parquet") == JOB
    assert file_job_id(f"t/{JOB}/part-00000.parquet") is None
    assert file_job_id("t/dt=1/someone-elses-file.csv") is None
    # Spark's own names end in -c000, not .c000: not a zero-rename job's
    assert file_job_id(f"t/part-00000-{JOB}-c000.snappy.parquet") is None


@pytest.mark.parametrize("task_id", [OTHER, f"{OTHER}-{OTHER}", f"x-{OTHER}", f"{OTHER}_7"])
def test_a_uuid_shaped_task_id_is_not_the_job(task_id: str) -> None:
    """Task ids are any 1-64 of [A-Za-z0-9_-]: one may be a UUID, even another job's id.
    The job id is the UUID right before ``.c<seq>``, wherever it is read."""
    name = data_file_name(task_id[:64], JOB, 3, ".snappy.parquet")
    assert file_job_id(f"t/dt=1/{name}") == JOB
    dest = Destination("b", "t")
    assert is_job_data_key(dest, JOB, f"t/dt=1/{name}")
    assert not is_job_data_key(dest, OTHER, f"t/dt=1/{name}")


def test_job_records_are_looked_for_at_dest_first_then_along_the_key() -> None:
    dest = Destination("b", "warehouse/events")
    found = [
        d.prefix
        for d in pend.candidate_destinations(dest, "warehouse/events/dt=1/region=eu/part-x")
    ]
    assert found == [
        "warehouse/events",
        "warehouse",
        "warehouse/events/dt=1",
        "warehouse/events/dt=1/region=eu",
    ]


# -- what may go -----------------------------------------------------------
@pytest.mark.parametrize(
    "state, action",
    [
        (None, pend.ABORT),
        ("aborted", pend.ABORT),
        ("committed", pend.ABORT),
        ("committing", pend.REFUSE),
        ("setup", pend.REFUSE),
    ],
)
def test_job_scoped_abort_decisions(state: str | None, action: str) -> None:
    assert pend.decide_for_job(pend.Owner(JOB, state)).action == action


@pytest.mark.parametrize(
    "job, state, action",
    [
        (JOB, None, pend.ABORT),
        (JOB, "aborted", pend.ABORT),
        (JOB, "committed", pend.ABORT),
        (JOB, "committing", pend.REFUSE),
        (JOB, "setup", pend.ABORT_JOB),
        (None, None, pend.KEEP),
    ],
)
def test_sweep_decisions(job: str | None, state: str | None, action: str) -> None:
    assert pend.decide_for_sweep(pend.Owner(job, state)).action == action


def test_a_sweep_decides_each_job_once_in_order_of_first_appearance() -> None:
    other = str(uuid.uuid4())
    owners = {
        JOB: pend.Owner(JOB, "committed"),
        other: pend.Owner(other, "committing"),
        None: pend.Owner(None),
    }
    old = [
        pend.Pending(UploadInfo(f"k{n}", f"u{n}", None), owners[job])
        for n, job in enumerate([other, JOB, None, other, JOB])
    ]
    plan = pend.plan_sweep(old)
    assert [(j.owner.job_id, len(j.uploads), j.decision.action) for j in plan] == [
        (other, 2, pend.REFUSE),
        (JOB, 2, pend.ABORT),
        (None, 1, pend.KEEP),
    ]
    assert [p.upload.upload_id for p in plan[0].uploads] == ["u0", "u3"]


# -- the sweep, on a real store --------------------------------------------
@pytest.mark.s3
def test_the_sweep_lists_again_until_a_late_upload_is_gone_too(committer: Committer) -> None:
    """An upload created after the first listing (a zombie attempt) goes in the next pass."""
    bucket, prefix = committer.dest.bucket, committer.dest.dir
    store = committer.store
    job_id = str(uuid.uuid4())
    keys = iter(f"{prefix}part-{n:05d}-{job_id}.c000.csv" for n in range(10))
    store.create_upload(bucket, next(keys))
    listings = 0

    def listing() -> list[UploadInfo]:
        nonlocal listings
        listings += 1
        found = pend.named_uploads(JobContext(store, committer.dest), job_id)
        if listings == 1:
            store.create_upload(bucket, next(keys))  # behind the listing's back
        return found

    assert sweep_uploads(store, bucket, listing, threads=4) == (2, 0)
    assert listings == 3 and pending_in_bucket(committer) == []


@pytest.mark.s3
def test_the_sweep_gives_up_after_its_rounds(committer: Committer) -> None:
    bucket, prefix = committer.dest.bucket, committer.dest.dir
    store = committer.store
    job_id = str(uuid.uuid4())
    names: Iterator[str] = (f"{prefix}part-{n:05d}-{job_id}.c000.csv" for n in range(100))

    def listing() -> list[UploadInfo]:
        found = pend.named_uploads(JobContext(store, committer.dest), job_id)
        store.create_upload(bucket, next(names))  # a zombie that never stops
        return found

    store.create_upload(bucket, next(names))

    assert sweep_uploads(store, bucket, listing, threads=4) == (SWEEP_ROUNDS, 0)
    assert len(pending_in_bucket(committer)) == 1


@pytest.mark.s3
def test_a_job_whose_commit_wins_the_race_against_the_sweep_is_refused(
    committer: Committer,
) -> None:
    """The sweep saw the job in setup; by the time it aborts, the commit decided first."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-01-01": b"a"})
    committer.commit_job(job.job_id)
    seen = pend.JobSweep(
        pend.Owner(job.job_id, "setup", committer.dest),
        (),
        pend.Decision(pend.ABORT_JOB, "seen in setup"),
    )
    carried, aborted = pend.abort_abandoned_job(committer.store, seen, "abandoned")
    assert aborted == 0
    assert carried.decision.action == pend.REFUSE
    assert "point of no return" in carried.decision.reason
    assert committer.job(job.job_id).state == "committed"


@pytest.mark.s3
def test_a_job_left_in_setup_is_aborted_as_a_job(committer: Committer) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-01-01": b"a", "2024-01-02": b"b"})
    owners = pend.Owners(committer.ctx)
    (seen,) = pend.plan_sweep(pend.pending_uploads(committer.ctx, owners))
    assert seen.decision.action == pend.ABORT_JOB and len(seen.uploads) == 2
    carried, aborted = pend.abort_abandoned_job(committer.store, seen, "abandoned")
    assert carried == seen and aborted == 2
    record = committer.job(job.job_id)
    assert record.state == "aborted" and record.error == "abandoned"
    assert pending(committer) == []


@pytest.mark.s3
def test_a_job_named_by_another_jobs_task_id_keeps_its_uploads(committer: Committer) -> None:
    """Job B's task ``<A's id>`` writes ``part-<A>-<B>.c000``: listing, aborting and
    sweeping job A leave it to B, which stays in setup."""
    a = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    b = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, a, "00000", {"2024-01-01": b"a"})
    write_task(committer, b, a.job_id, {"2024-01-01": b"b"})
    b_keys = pending(committer, b.job_id)
    owners = pend.Owners(committer.ctx)
    listed = pend.pending_uploads(committer.ctx, owners, a.job_id)
    assert [p.key for p in listed] == pending(committer, a.job_id) and len(listed) == 1
    assert pend.named_uploads(committer.ctx, a.job_id)[0].key == listed[0].key
    committer.abort_job(a.job_id)
    assert pending(committer) == b_keys and len(b_keys) == 1
    (seen,) = pend.plan_sweep(pend.pending_uploads(committer.ctx, owners))
    assert (seen.owner.job_id, seen.owner.state) == (b.job_id, "setup")
    assert committer.job(b.job_id).state == "setup"
