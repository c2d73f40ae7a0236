"""Spark's own failures, in local mode with task retries (``local[2,3]``).

Each test ends with exactly the source's rows once, or with nothing visible
and no pending upload; it checks rows, files and uploads, not return codes.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import pending_in_bucket
from zero_rename.core.committer import Committer

from spark_support import assert_exactly, assert_nothing, data_files, wait_for_killed_tasks

pytestmark = pytest.mark.spark

PARTS = 4


def source(spark: Any, n: int = 2000) -> Any:
    return spark.sql(f"""select id, concat('v', id) as value,
                                date_add(date'2024-03-01', cast(id % 2 as int)) as dt
                         from range(0, {n}, 1, {PARTS})""")


def faulty_write(df: Any, dest: str, mode: str = "append", **options: str) -> None:
    writer = df.write.format("zero-rename-faults").mode(mode).option("partition_by", "dt")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(dest)


def files_per_task(c: Committer) -> Counter[str]:
    """How many files each task id published (part-<task>-<job>.c<seq>...)."""
    return Counter(f.rsplit("/", 1)[-1].split("-")[1] for f in data_files(c))


def assert_one_clean_copy(spark: Any, c: Committer, tmp: Path, df: Any) -> None:
    assert_exactly(spark, c, tmp, df.collect(), df.columns)
    # Each task published its two partitions once: no attempt's files doubled.
    assert files_per_task(c) == {f"{t:05d}": 2 for t in range(PARTS)}
    [job] = c.jobs()
    assert job.state == "committed" and len(c.committed_attempts(job.job_id)) == PARTS


# Each of these two under make test in one of the task writer's modes and under
# make test-extended in the other (tests/core fails each mode's uploads at the
# protocol's level in both): a Spark write each, about 8 s of the Spark group.
@pytest.mark.parametrize(
    "committer_mode", ["magic", pytest.param("staging", marks=pytest.mark.extended)]
)
def test_failed_first_attempts_are_retried_and_written_once(
    spark: Any, dest: str, committer: Committer, tmp_path: Path, committer_mode: str
) -> None:
    df = source(spark)
    faulty_write(df, dest, committer=committer_mode, fault="raise", fault_partitions="1,3")
    assert_one_clean_copy(spark, committer, tmp_path, df)
    # Tasks 1 and 3 committed a later attempt than their first.
    [job] = committer.jobs()
    manifests = {
        a.split("_")[-2]: int(a.split("_")[-1]) for a in committer.committed_attempts(job.job_id)
    }
    assert manifests["00001"] > manifests["00000"] and manifests["00003"] > manifests["00002"]


@pytest.mark.parametrize(
    "committer_mode", [pytest.param("magic", marks=pytest.mark.extended), "staging"]
)
def test_failed_background_uploads_fail_the_attempt_and_leave_nothing(
    spark: Any, dest: str, committer: Committer, tmp_path: Path, committer_mode: str
) -> None:
    """UploadPart fails on the upload threads of attempt 0 of tasks 0 and 2: the
    attempt fails (at its next file, or at its task commit), aborts what it
    created, and the retry writes."""
    df = source(spark)
    faulty_write(df, dest, committer=committer_mode, fault="part_fault", fault_partitions="0,2")
    assert_one_clean_copy(spark, committer, tmp_path, df)
    assert pending_in_bucket(committer) == []
    [job] = committer.jobs()
    attempts = {
        a.split("_")[-2]: int(a.split("_")[-1]) for a in committer.committed_attempts(job.job_id)
    }
    # Tasks 0 and 2 committed a retry. Attempt ids are Spark's task attempt ids,
    # numbered in launch order within the application: tasks 0 and 1 start first
    # (base and base + 1), and the job's six attempts take base .. base + 5. Which
    # of a retry and a neighbour's first attempt starts first depends on timing,
    # so the check is that the two attempts no task committed are the first
    # attempts of tasks 0 and 2, each older than its task's committed retry.
    base = attempts["00001"] - 1
    failed = set(range(base, base + 6)) - set(attempts.values())
    assert len(failed) == 2 and base in failed, (attempts, failed)
    assert attempts["00000"] > base and attempts["00002"] > max(failed), (attempts, failed)


def test_python_worker_killed_mid_write_leaves_no_upload_behind(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = source(spark)
    # os._exit in attempt 0 after its first batch: its upload is pending and
    # nothing in that process aborts it; the job commit's sweep must.
    faulty_write(df, dest, fault="exit", fault_partitions="2")
    assert_one_clean_copy(spark, committer, tmp_path, df)
    assert pending_in_bucket(committer) == []


def test_a_task_failing_every_attempt_aborts_the_job(
    spark: Any, dest: str, committer: Committer
) -> None:
    with pytest.raises(Exception, match="injected failure in a task attempt"):
        faulty_write(source(spark), dest, fault="raise", fault_partitions="1", fault_attempts="all")
    [job] = committer.jobs()
    assert job.state == "aborted"
    assert data_files(committer) == []
    # An attempt Spark killed after the abort swept (its worker gets SIGKILL past
    # spark.python.task.killTimeout) may leave the upload it had begun: the
    # destination's next commit or cleanup takes it
    # (tests/core/protocol/test_zombies_and_strays.py). On a loaded machine the
    # worker can outlive a few seconds, so the cleanup runs until it is gone.
    deadline = time.monotonic() + 60
    while pending_in_bucket(committer) and time.monotonic() < deadline:
        time.sleep(3)
        committer.cleanup_job(job.job_id)
    assert_nothing(committer)


def test_failure_after_every_task_succeeded_before_job_commit(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = source(spark, 400)
    faulty_write(df, dest)  # a first, good write
    good = data_files(committer)
    with pytest.raises(Exception, match="before job commit"):
        faulty_write(source(spark, 400), dest, mode="overwrite", fault="commit_raise")
    # Spark called abort(messages): the old files stay, the new ones never appear.
    assert data_files(committer) == good
    assert sorted(j.state for j in committer.jobs()) == ["aborted", "committed"]
    assert pending_in_bucket(committer) == []
    assert_exactly(spark, committer, tmp_path, df.collect(), df.columns)


def test_orchestrated_failure_aborts_the_job_and_the_orchestrator_finds_nothing(
    spark: Any, dest: str, committer: Committer
) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    with pytest.raises(Exception, match="injected failure in a task attempt"):
        faulty_write(
            source(spark, 400),
            dest,
            mode="overwrite",
            job_id=job.job_id,
            fault="raise",
            fault_partitions="0",
            fault_attempts="all",
        )
    assert committer.job(job.job_id).state == "aborted"
    wait_for_killed_tasks(spark)  # the DAG's next step waits for the application's end
    committer.abort_job(job.job_id)  # the DAG's abort step: idempotent
    committer.cleanup_job(job.job_id)
    assert_nothing(committer)


def test_job_commit_broken_after_its_point_of_no_return_is_finished_by_a_retry(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = source(spark, 400)
    with pytest.raises(Exception, match="passed its point of no return"):
        faulty_write(df, dest, fault="complete_fault")
    [job] = committer.jobs()
    # Spark's abort was refused: aborting would lose output already visible.
    assert job.state == "committing"
    assert 1 <= len(data_files(committer)) < 8
    committer.commit_job(job.job_id)  # what an operator (or the DAG's retry) runs
    assert_one_clean_copy(spark, committer, tmp_path, df)


def test_speculation_on_with_a_straggler_writes_nothing_twice(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    assert spark.sparkContext.getConf().get("spark.speculation") == "true"
    df = source(spark)
    faulty_write(df, dest, fault="slow", fault_partitions="0", fault_seconds="3")
    assert_one_clean_copy(spark, committer, tmp_path, df)


def test_validate_output_checks_the_committed_files_and_fails_the_write_for_a_problem(
    spark: Any, dest: str, committer: Committer
) -> None:
    faulty_write(source(spark, 400), dest, validate_output="true")
    [passed] = committer.jobs()
    assert passed.output_check is not None and passed.output_check.outcome == "valid"
    assert passed.output_check.files == len(data_files(committer))
    assert passed.steps["validate_output"].status == "succeeded"

    # A committed file deleted before the check: the write fails, naming it.
    with pytest.raises(Exception, match="The job stays committed") as raised:
        faulty_write(source(spark, 400), dest, validate_output="true", fault="tamper_output")
    assert "OutputCheckError" in str(raised.value) and "missing dt=2024-03-0" in str(raised.value)
    failed = next(j for j in committer.jobs() if j.job_id != passed.job_id)
    # Spark's abort after the failed commit() changed nothing: the job is committed.
    assert failed.state == "committed" and failed.output_check is not None
    assert (failed.output_check.outcome, failed.output_check.problem_count) == ("invalid", 1)
    assert failed.steps["validate_output"].status == "failed"
    assert pending_in_bucket(committer) == []
