"""The commit protocol on the real S3 server, one behaviour suite run in both modes.

Scenarios follow S3A's commit protocol tests (commit lifecycle, duplicated
commit, two attempts of one task, no output, abort variants, parallel jobs)
and the paper's five properties: complete, exclusive, concurrent, abortable,
continuity of correctness.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import MIB, history_only, pending, pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import (
    AbortRefusedError,
    JobDecidedError,
    TaskCommitConflict,
)

pytestmark = pytest.mark.s3


@pytest.fixture(params=["magic", "staging"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def opts(mode: str, **more: object) -> dict[str, object]:
    return {"committer": mode, "conflict_mode": "append", **more}


def test_commit_lifecycle(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [b"alpha"], rows=1)
    write_task(committer, job, "00001", [b"beta", b"gamma"], rows=2)
    assert visible(committer) == {}  # task commit publishes nothing
    assert len(pending(committer, job.job_id)) == 3
    summary = committer.commit_job(job.job_id)
    files = visible(committer)
    assert sorted(files.values()) == [b"alpha", b"beta", b"gamma"]
    assert all(job.job_id in name for name in files)
    assert (summary.files, summary.rows, summary.tasks) == (3, 5, 2)
    assert pending_in_bucket(committer) == []
    success = json.loads(
        committer.store.get_object(committer.dest.bucket, committer.dest.success_key)[0]
    )
    assert success["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    assert success["jobId"] == job.job_id and success["success"] is True
    assert success["committer"] == ("magic" if mode == "magic" else "directory")
    assert {f["path"] for f in success["files"]} == set(files)
    assert sorted(success["filenames"]) == sorted("/" + committer.dest.dir + f for f in files)
    for key in ("timestamp", "date", "hostname", "metrics", "iostatistics", "diagnostics"):
        assert key in success
    assert success["iostatistics"]["counters"]["s3.CompleteMultipartUpload"] == 3
    assert committer.job(job.job_id).state == "committed"
    # temporary objects are gone; the job's history stays (its record, the fence
    # late attempts read; its file list; the plan's header and attempts), and
    # the destination's claim table, released
    assert history_only(committer, job.job_id)
    claims = committer.dest.hidden_dir + "claims.json"
    assert json.loads(committer.store.get_object(committer.dest.bucket, claims)[0])["claims"] == []
    record = committer.job(job.job_id)
    assert record.claimed == ("",) and record.store_profile is not None


def test_duplicated_commit_returns_the_same_summary(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [b"x"])
    first = committer.commit_job(job.job_id)
    again = committer.commit_job(job.job_id)
    assert again == first
    assert list(visible(committer).values()) == [b"x"]


def test_large_and_empty_files(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode, part_size=5 * MIB))
    big = bytes(range(256)) * (11 * MIB // 256 + 7)  # three parts, the last short
    write_task(committer, job, "00000", [big, b""])
    manifests = committer.load_manifests(job.job_id)
    assert sorted(len(u.parts) for u in manifests[0].uploads) == [1, 3]
    committer.commit_job(job.job_id)
    assert sorted(visible(committer).values(), key=len) == [b"", big]


def test_tasks_with_no_output(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [])
    write_task(committer, job, "00001", [b"only"])
    summary = committer.commit_job(job.job_id, expected=2)
    assert (summary.tasks, summary.files) == (2, 1)
    assert list(visible(committer).values()) == [b"only"]


def test_two_attempts_of_one_task_first_wins(committer: Committer, mode: str) -> None:
    """Both attempts write; the first to publish its manifest wins, the loser aborts."""
    job = committer.setup_job(opts(mode))
    a0 = committer.task_attempt(job, "00000", 0)
    a1 = committer.task_attempt(job, "00000", 1)
    for attempt, body in ((a0, b"from-0"), (a1, b"from-1")):
        with attempt.open() as f:
            f.write(body)
    a1.commit()
    with pytest.raises(TaskCommitConflict, match="already committed by"):
        a0.commit()
    assert len(pending(committer, job.job_id)) == 1
    summary = committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"from-1"]
    assert summary.files == 1 and pending_in_bucket(committer) == []


def test_engine_decides_between_live_attempts(committer: Committer, mode: str) -> None:
    """Where an engine picks the attempt (Spark), only its manifest goes to job commit;
    the loser's uploads are found by listing and aborted."""
    job = committer.setup_job(opts(mode))
    chosen = write_task(committer, job, "00000", [b"chosen"], attempt=1, publish=False)
    write_task(committer, job, "00000", [b"speculative"], attempt=0, publish=False)
    assert chosen is not None
    committer.commit_job(job.job_id, [chosen], expected=1)
    assert list(visible(committer).values()) == [b"chosen"]
    assert pending_in_bucket(committer) == []


def test_commit_job_without_task_commit(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [b"committed"])
    write_task(committer, job, "00001", [b"never committed"], commit=False)
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"committed"]
    assert pending_in_bucket(committer) == []


@pytest.mark.also_on("moto")
def test_abort_task_then_job(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    attempt = committer.task_attempt(job, "00000")
    with attempt.open() as f:
        f.write(b"x" * 100)
    attempt.abort()
    attempt.abort()  # idempotent
    assert pending_in_bucket(committer) == []
    summary = committer.abort_job(job.job_id)
    assert summary.state == "aborted"
    assert visible(committer) == {} and pending_in_bucket(committer) == []


def test_abort_job_not_task(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [b"a"])
    write_task(committer, job, "00001", [b"b"], commit=False)
    summary = committer.abort_job(job.job_id)
    assert summary.aborted_uploads >= 1
    assert committer.abort_job(job.job_id).state == "aborted"  # idempotent
    assert visible(committer) == {} and pending_in_bucket(committer) == []
    with pytest.raises(JobDecidedError):
        committer.commit_job(job.job_id)


def test_abort_job_with_no_work_and_without_a_record(committer: Committer) -> None:
    job = committer.setup_job({})
    assert committer.abort_job(job.job_id).aborted_uploads == 0
    orphan = "11111111-2222-4333-8444-555555555555"
    assert committer.abort_job(orphan).state == "aborted"


def test_abort_refused_after_commit(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [b"kept"])
    committer.commit_job(job.job_id)
    with pytest.raises(AbortRefusedError, match="point of no return"):
        committer.abort_job(job.job_id)
    assert list(visible(committer).values()) == [b"kept"]


@pytest.mark.also_on("moto")
def test_late_attempt_after_commit_adds_nothing(committer: Committer, mode: str) -> None:
    """Continuity of correctness: a zombie attempt finishing after job commit is fenced."""
    job = committer.setup_job(opts(mode))
    write_task(committer, job, "00000", [b"on time"])
    zombie = committer.task_attempt(job, "00001")
    with zombie.open() as f:
        f.write(b"late")
    committer.commit_job(job.job_id)
    with pytest.raises(JobDecidedError, match="already committed"):
        zombie.commit()
    assert list(visible(committer).values()) == [b"on time"]
    assert pending_in_bucket(committer) == []
    assert committer.commit_job(job.job_id).files == 1


@pytest.mark.also_on("moto")
def test_late_attempt_after_abort_adds_nothing(committer: Committer, mode: str) -> None:
    job = committer.setup_job(opts(mode))
    zombie = committer.task_attempt(job, "00000")
    with zombie.open() as f:
        f.write(b"late")
    committer.abort_job(job.job_id)
    with pytest.raises(JobDecidedError, match="aborted"):
        zombie.commit()
    assert visible(committer) == {} and pending_in_bucket(committer) == []


def test_parallel_jobs_to_adjacent_paths(bucket: str, store_config: StoreConfig, mode: str) -> None:
    c1 = Committer(f"s3://{bucket}/out/ds1", store_config)
    c10 = Committer(f"s3://{bucket}/out/ds10", store_config)
    j1, j10 = c1.setup_job(opts(mode)), c10.setup_job(opts(mode))
    assert j1.job_id != j10.job_id
    write_task(c10, j10, "00000", [b"ten"])
    write_task(c1, j1, "00000", [b"one"])
    c1.commit_job(j1.job_id)
    assert list(visible(c1).values()) == [b"one"]
    assert len(pending(c10, j10.job_id)) == 1  # ds1's cleanup left ds10 alone
    c10.commit_job(j10.job_id)
    assert list(visible(c10).values()) == [b"ten"]
    assert pending_in_bucket(c1) == []


def test_parallel_jobs_to_one_destination(
    committer: Committer, store_config: StoreConfig, mode: str
) -> None:
    """Two jobs write other partitions of one table at once; each cleanup spares the other."""
    other = Committer(committer.dest, store_config)
    j1 = committer.setup_job(opts(mode, partition_columns="dt"))
    j2 = other.setup_job(opts(mode, partition_columns="dt"))
    write_task(committer, j1, "00000", {"2024-01-01": b"day1"})
    write_task(other, j2, "00000", {"2024-01-02": b"day2"}, commit=False)
    committer.commit_job(j1.job_id)
    # magic streams while writing; staging uploads only at task commit
    assert len(pending(other, j2.job_id)) == (1 if mode == "magic" else 0)
    write_task(other, j2, "00001", {"2024-01-02": b"day2-more"})
    other.abort_job(j2.job_id)
    assert list(visible(committer).values()) == [b"day1"]
    assert pending_in_bucket(committer) == []


def test_job_setup_is_idempotent_for_one_job_id(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    again = committer.setup_job({"conflict_mode": "append"}, job_id=job.job_id)
    assert again.job_id == job.job_id and again.created == job.created
    from zero_rename.errors import ConfigError

    with pytest.raises(ConfigError, match="already exists"):
        committer.setup_job({"conflict_mode": "replace"}, job_id=job.job_id)


def test_step_timings_are_recorded(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"x"])
    committer.validate(job.job_id)
    committer.resolve_conflicts(job.job_id)
    committer.commit_job(job.job_id)
    steps = committer.job(job.job_id).steps
    assert set(steps) >= {"setup", "validate", "resolve_conflicts", "commit"}
    assert all(s.status == "succeeded" and s.finished for s in steps.values())


def test_tasks_commit_concurrently(committer: Committer, mode: str) -> None:
    """Concurrent: many task attempts of one job commit side by side."""
    from concurrent.futures import ThreadPoolExecutor

    job = committer.setup_job(opts(mode, partition_columns="dt"))
    bodies = {f"{i:05d}": f"task {i}".encode() for i in range(24)}
    with ThreadPoolExecutor(12) as pool:
        list(
            pool.map(
                lambda item: write_task(
                    committer, job, item[0], {f"2024-01-{int(item[0]) % 3 + 1:02d}": item[1]}
                ),
                bodies.items(),
            )
        )
    summary = committer.commit_job(job.job_id, expected=list(bodies))
    assert summary.files == 24 and len(summary.partitions) == 3
    assert sorted(visible(committer).values()) == sorted(bodies.values())
    assert pending_in_bucket(committer) == []


def test_abort_records_its_reason(committer: Committer) -> None:
    record = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, record, "00000", [b"x"])
    committer.abort_job(record.job_id, reason="step stage_job failed:\n  OOM\n" + "x" * 2000)
    aborted = committer.job(record.job_id)
    assert aborted.state == "aborted"
    assert aborted.error.startswith("step stage_job failed: OOM xxx")
    assert len(aborted.error) <= 1000 and "\n" not in aborted.error
    committer.abort_job(record.job_id, reason="again")  # idempotent: the first reason stays
    assert committer.job(record.job_id).error == aborted.error
