"""Attempts that outlive their welcome, and what they leave: each test drives the
case a user met, then checks the destination's files and pending uploads."""

from __future__ import annotations

import pytest

from tests.faults import clear, inject
from tests.helpers import MIB, history_only, pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import (
    JobDecidedError,
    TaskCommitConflict,
    TaskCommitUnknownError,
    ZeroRenameError,
)

pytestmark = pytest.mark.s3


def test_commit_after_own_abort_is_refused(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    attempt = committer.task_attempt(job, "00000")
    with attempt.open() as f:
        f.write(b"x")
    attempt.abort()
    with pytest.raises(ZeroRenameError, match="aborted; it cannot commit; start a new attempt"):
        attempt.commit()
    key = committer.dest.job(job.job_id).task_manifest_key("00000")
    assert committer.store.head_object(committer.dest.bucket, key) is None  # nothing published
    write_task(committer, job, "00000", [b"retried"], attempt=1)
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"retried"]


@pytest.mark.parametrize("decide", ["aborted", "committed"])
@pytest.mark.also_on("moto")
def test_zombie_whose_uploads_were_swept_learns_the_job_is_decided(
    committer: Committer, store_config: StoreConfig, decide: str
) -> None:
    """A magic attempt still writing when the job is decided finds its upload gone at
    the next part: it is told why (JobDecidedError), not NoSuchUpload."""
    job = committer.setup_job({"conflict_mode": "append", "part_size": 5 * MIB})
    if decide == "committed":
        write_task(committer, job, "00001", [b"on time"])
    zombie = Committer(committer.dest, store_config).task_attempt(job, "00000")
    out = zombie.open()
    out.write(b"z" * (5 * MIB + 1))  # one part sent, the rest buffered
    if decide == "aborted":
        committer.abort_job(job.job_id)
    else:
        committer.commit_job(job.job_id)  # its cleanup sweeps the zombie's upload
    with pytest.raises(JobDecidedError, match=f"is {decide} and swept the uploads"):
        out.write(b"z" * (5 * MIB))
    zombie.abort()
    assert pending_in_bucket(committer) == []
    assert list(visible(committer).values()) == ([b"on time"] if decide == "committed" else [])


@pytest.mark.parametrize("decide", ["aborted", "committed"])
def test_a_late_attempt_leaves_no_manifest_behind(committer: Committer, decide: str) -> None:
    """A task attempt that publishes its manifest after the job was decided (and
    cleaned up) withdraws it: the job keeps its history and nothing else."""
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"on time"])
    late = committer.task_attempt(job, "00001")
    with late.open() as f:
        f.write(b"late")
    if decide == "aborted":
        committer.abort_job(job.job_id)
    else:
        committer.commit_job(job.job_id)
    with pytest.raises(JobDecidedError):
        late.commit()
    assert pending_in_bucket(committer) == []
    layout = committer.dest.job(job.job_id)
    assert list(committer.store.list_objects(committer.dest.bucket, layout.tasks_dir)) == []
    if decide == "committed":
        assert history_only(committer, job.job_id)
    else:
        keys = [o.key for o in committer.store.list_objects(committer.dest.bucket, layout.dir)]
        assert keys == [layout.record_key]


def test_retried_commit_of_a_committed_job_cleans_up(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"kept"])
    committer.commit_job(job.job_id)
    zombie = committer.task_attempt(job, "00001")
    with zombie.open() as f:  # a stray created after the commit's own sweep
        f.write(b"stray")
    assert len(pending_in_bucket(committer)) == 1
    assert committer.commit_job(job.job_id).files == 1
    assert pending_in_bucket(committer) == []
    assert list(visible(committer).values()) == [b"kept"]


def test_unknown_manifest_publish_keeps_the_uploads_it_names(
    committer: Committer, store_config: StoreConfig
) -> None:
    """The PUT landed but its answer was lost and reading it back failed too: the
    attempt cannot tell, so it keeps its uploads; the job commit includes them, and
    a new attempt of the task learns the first one committed."""
    job = committer.setup_job({"conflict_mode": "append"})
    first = Committer(committer.dest, store_config)
    lost = inject(first.store.client, "PutObject", when="after", key_contains="tasks/")
    unreadable = inject(first.store.client, "GetObject", times=100, key_contains="tasks/")
    attempt = first.task_attempt(job, "00000", 0)
    with attempt.open() as f:
        f.write(b"first attempt")
    with pytest.raises(TaskCommitUnknownError, match="may or may not have been published"):
        attempt.commit()
    clear(first.store.client, lost)
    clear(first.store.client, unreadable)
    attempt.abort()  # after an unknown outcome, task abort leaves the uploads alone
    assert len(pending_in_bucket(committer)) == 1
    with pytest.raises(TaskCommitConflict, match="already committed by"):
        write_task(committer, job, "00000", [b"second attempt"], attempt=1)
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"first attempt"]
    assert pending_in_bucket(committer) == []


def test_abort_spares_a_nested_destination_that_reused_the_job_id(
    bucket: str, store_config: StoreConfig
) -> None:
    outer = Committer(f"s3://{bucket}/nest", store_config)
    inner = Committer(f"s3://{bucket}/nest/inner", store_config)
    job = outer.setup_job({"conflict_mode": "append"})
    inner_job = inner.setup_job({"conflict_mode": "append"}, job_id=job.job_id)
    write_task(outer, job, "00000", [b"outer"], commit=False)
    write_task(inner, inner_job, "00000", [b"inner"])
    assert outer.abort_job(job.job_id).aborted_uploads == 1
    assert len(inner.pending_uploads(job.job_id)) == 1
    inner.commit_job(job.job_id)
    assert list(visible(inner).values()) == [b"inner"]


def test_directory_marker_is_not_a_file_for_fail(committer: Committer) -> None:
    committer.store.put_object(committer.dest.bucket, committer.dest.dir + "dm/", b"")
    committer.store.put_object(committer.dest.bucket, committer.dest.dir, b"")
    job = committer.setup_job({"conflict_mode": "fail"})
    write_task(committer, job, "00000", [b"first"])
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"first"]


@pytest.mark.also_on("moto")
def test_what_an_attempt_killed_after_the_abort_left_goes_at_the_next_commit(
    committer: Committer,
) -> None:
    """An attempt killed after its job's abort swept (Spark's SIGKILL of a Python
    worker) never aborts the upload it began; no step would complete it either.
    The next commit's listing of the destination takes it, and spares the upload
    of a job still running."""
    options = {"partition_columns": "dt", "conflict_mode": "append", "part_size": 5 * MIB}
    killed_job, running_job = committer.setup_job(options), committer.setup_job(options)
    committer.abort_job(killed_job.job_id)
    killed = committer.task_attempt(killed_job, "00000").open({"dt": "2024-01-01"})
    killed.write(b"k" * (5 * MIB + 1))  # a part sent, then the worker is gone
    running = committer.task_attempt(running_job, "00000")
    out = running.open({"dt": "2024-01-02"})
    out.write(b"r" * (5 * MIB + 1))
    assert len(pending_in_bucket(committer)) == 2

    next_job = committer.setup_job(options)
    write_task(committer, next_job, "00000", {"2024-01-03": b"next"})
    committer.commit_job(next_job.job_id)
    [left] = pending_in_bucket(committer)
    assert running_job.job_id in left and "dt=2024-01-02/" in left

    out.close()
    running.commit()
    committer.commit_job(running_job.job_id)
    assert pending_in_bucket(committer) == []
    assert sorted(len(v) for v in visible(committer).values()) == [4, 5 * MIB + 1]
