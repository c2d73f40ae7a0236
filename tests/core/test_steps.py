"""The step runner (``zero_rename.core.steps.StepRunner``): the policies the front ends
share around a step. What an orchestrator's stage step finds before it runs the
engine's write again; a step before the commit skipped once the job is past it;
the abort after a step failed for good, which leaves a committed job alone.

The front ends' own tests drive it through Airflow, Dagster and Spark; these drive
it alone, on the behaviour suite's first backend."""

from __future__ import annotations

import pytest

from tests.faults import clear, inject
from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobSummary
from zero_rename.core.data.records import step_started
from zero_rename.core.protocol import states
from zero_rename.core.steps import StepRunner, failure_reason, run_job_id
from zero_rename.errors import ConfigError, JobDecidedError, ZeroRenameError

pytestmark = pytest.mark.s3


def test_the_stage_runs_until_its_manifest_is_saved_then_never_again(committer: Committer) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    assert StepRunner(committer).stage_done(job.job_id) is None
    manifest = write_task(
        committer, job, "00000", {"2024-01-01": b"a", "2024-01-02": b"b"}, publish=False, rows=5
    )
    assert manifest is not None
    assert StepRunner(committer).stage_done(job.job_id) is None  # a task commit is not a stage
    committer.save_stage_manifest(job.job_id, [manifest], engine="test")
    done = StepRunner(committer).stage_done(job.job_id)
    assert done is not None
    assert (done.state, done.tasks, done.files, done.rows) == ("setup", 1, 2, 10)


@pytest.mark.parametrize("decide", ["commit", "abort"])
def test_a_job_past_setup_is_not_staged_again(committer: Committer, decide: str) -> None:
    """A cleared or re-executed run whose job went on: committed, or aborted."""
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"x"])
    if decide == "commit":
        committer.commit_job(job.job_id)
    else:
        committer.abort_job(job.job_id)
    done = StepRunner(committer).stage_done(job.job_id)
    assert done is not None and done.job_id == job.job_id
    assert done.state == ("committed" if decide == "commit" else "aborted")
    assert done.destination == committer.dest.url


def test_a_step_before_commit_reports_the_stage_of_a_commit_under_way(
    committer: Committer,
) -> None:
    """A retried run's validation finds the commit begun by the killed run: it
    reports what the job's stage holds, not a summary of nothing."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    manifest = write_task(
        committer, job, "00000", {"2024-01-01": b"a", "2024-01-02": b"b"}, publish=False, rows=5
    )
    assert manifest is not None
    committer.save_stage_manifest(job.job_id, [manifest], engine="test")
    assert (
        StepRunner(committer).decided_summary(committer.job(job.job_id)) is None
    )  # not decided: run it
    inject(committer.store.client, "CompleteMultipartUpload", times=1000)
    with pytest.raises(ZeroRenameError):
        committer.commit_job(job.job_id)
    record = committer.job(job.job_id)
    assert record.state == "committing"
    summary = StepRunner(committer).decided_summary(record)
    assert summary is not None
    assert (summary.state, summary.tasks, summary.files, summary.rows) == ("committing", 1, 2, 10)


def test_a_step_before_the_commit_is_skipped_once_the_job_is_committed(
    committer: Committer,
) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"x"])
    ran: list[str] = []

    def step(job_id: str) -> JobSummary:
        ran.append(job_id)
        return committer.validate(job_id)

    runner = StepRunner(committer)
    assert runner.before_commit(job.job_id, step).state == states.SETUP
    committer.commit_job(job.job_id)
    skipped = runner.before_commit(job.job_id, step)
    assert ran == [job.job_id] and skipped.state == states.COMMITTED and skipped.files == 1


def test_the_abort_after_a_failure_aborts_and_cleans_up_the_runs_job(
    committer: Committer,
) -> None:
    runner = StepRunner(committer, "daily", "scheduled__2024-01-02")
    assert runner.abort_after_failure("nothing set up") is None
    job = runner.setup({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"x", b"y"], publish=False)
    summary = runner.abort_after_failure("the stage failed")
    assert summary is not None and summary.aborted_uploads == 2
    record = committer.job(job.job_id)
    assert record.state == states.ABORTED and "the stage failed" in record.error
    assert pending_in_bucket(committer) == [] and visible(committer) == {}
    assert runner.current_job() is None  # the next setup is a new generation


@pytest.mark.parametrize("known", [True, False], ids=["record-read", "record-unread"])
def test_the_abort_leaves_a_committed_job_alone(committer: Committer, known: bool) -> None:
    """A step after the commit failed (the output check): the record as read, or
    (Spark's abort) the abort's refusal, says the job is committed."""
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"x"])
    committer.commit_job(job.job_id)
    record = committer.job(job.job_id) if known else None
    assert StepRunner(committer).abort_job(job.job_id, "late", record, cleanup=not known) is None
    assert committer.job(job.job_id).state == states.COMMITTED
    assert len(visible(committer)) == 1


def test_a_restaged_jobs_lost_write_can_commit_nothing_and_the_run_goes_on_with_the_next(
    committer: Committer,
) -> None:
    """An engine's write whose submitter died, still running where nobody can reach
    it: one task attempt committed (its manifest on its way to the lost driver),
    one still writing. ``restage`` aborts the job and sets up the run's next one;
    the late attempt's fence read refuses it, the lost driver's stage manifest
    lands in a job no commit takes, and the steps handed the first job go on with
    the second."""
    runner = StepRunner(committer, "daily", "scheduled__2024-01-02")
    origin = {"airflow_dag_id": "daily"}
    first = runner.setup({"partition_columns": "dt", "conflict_mode": "replace"}, origin)
    done = write_task(committer, first, "00000", {"2024-01-01": b"a"}, publish=False)
    late = committer.task_attempt(first, "00001")
    with late.open({"dt": "2024-01-01"}) as out:
        out.write(b"b")
    assert len(pending_in_bucket(committer)) == 2

    second = runner.restage(first.job_id, "its driver was lost")

    assert second.job_id == run_job_id("daily", "scheduled__2024-01-02", committer.dest.url, 1)
    assert (second.state, second.options, second.origin) == ("setup", first.options, origin)
    fenced = committer.job(first.job_id)
    assert fenced.state == states.ABORTED
    assert "its driver was lost" in fenced.error and second.job_id in fenced.error
    assert pending_in_bucket(committer) == []
    with pytest.raises(JobDecidedError):
        late.commit(publish=False)
    assert pending_in_bucket(committer) == []
    assert done is not None
    committer.save_stage_manifest(first.job_id, [done], engine="lost")
    with pytest.raises(JobDecidedError):
        committer.commit_job(first.job_id)
    assert visible(committer) == {}
    for handed in (first.job_id, second.job_id):
        assert runner.successor(handed) == second.job_id
    assert runner.successor("some-other-job") == "some-other-job"


def test_a_restaged_job_named_by_hand_is_aborted_and_a_new_run_must_write(
    committer: Committer,
) -> None:
    job = committer.setup_job({"conflict_mode": "append"})  # its id given, not the run's
    runner = StepRunner(committer, "daily", "scheduled__2024-01-02")
    with pytest.raises(ConfigError, match="new id"):
        runner.restage(job.job_id, "its driver was lost")
    assert committer.job(job.job_id).state == states.ABORTED
    assert runner.current_job() is None


def test_a_failed_stage_keeps_its_own_error_and_the_abort_names_it(
    committer: Committer,
) -> None:
    """The engine's error goes into the record, one line, its secret masked; the
    abort's reason names the failed step alone and quotes it; the commit step the
    abort stopped says so."""
    runner = StepRunner(committer, "daily", "manual__2024-02-01")
    job = runner.setup({"partition_columns": "dt", "conflict_mode": "append"})

    def write() -> None:
        raise ValueError("unknown codec 'no-such-codec', password=hunter2\n  at the writer")

    with pytest.raises(ValueError):
        runner.stage(job.job_id, write)
    record = committer.job(job.job_id)
    stage = record.steps["stage"]
    assert (stage.status, stage.error) == (
        "failed",
        "ValueError: unknown codec 'no-such-codec', password=***",
    )
    assert record.failed_steps == {"stage": stage.error}
    reason = failure_reason(["stage"], "DAG daily, run r", record)
    assert reason == f"step(s) stage failed (DAG daily, run r): stage: {stage.error}"
    runner.abort_after_failure(reason)
    aborted = committer.job(job.job_id)
    assert aborted.error == reason and "hunter2" not in aborted.model_dump_json()
    assert aborted.steps["abort"].status == "succeeded"


def test_a_commit_that_failed_then_finished_says_so(committer: Committer) -> None:
    """A commit's failure is its step's until a retry finishes it; a commit the
    abort stops ends as aborted, not running."""
    job = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, job, "00000", [b"x"])
    fault = inject(committer.store.client, "CompleteMultipartUpload", times=1000)
    with pytest.raises(ZeroRenameError):
        committer.commit_job(job.job_id)
    failed = committer.job(job.job_id).steps["commit"]
    assert failed.status == "failed" and "CompleteMultipartUpload" in failed.error
    clear(committer.store.client, fault)
    committer.commit_job(job.job_id)
    done = committer.job(job.job_id).steps["commit"]
    assert (done.status, done.error) == ("succeeded", "")

    sealed = committer.setup_job({"conflict_mode": "append"})
    write_task(committer, sealed, "00000", [b"y"])
    committer.records.advance(
        sealed.job_id, states.SEAL, lambda r: {"steps": step_started(r, "commit")}
    )
    committer.abort_job(sealed.job_id, reason="by hand")
    assert committer.job(sealed.job_id).steps["commit"].status == "aborted"
