"""The manual_abort DAG: aborts and cleans up a job; refuses one already committed."""

from __future__ import annotations

import pytest

from tests.airflow.dagruns import run_dag, xcom
from tests.faults import clear, inject
from tests.helpers import pending, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.embedded_s3 import EmbeddedS3
from zero_rename.errors import StoreError

pytestmark = pytest.mark.airflow


DAG_ID = "manual_abort"


@pytest.fixture
def jobs(airflow_env: EmbeddedS3, committer: Committer) -> Committer:
    return committer


def test_manual_abort_aborts_a_staged_job(jobs: Committer) -> None:
    job = jobs.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    manifests = [
        write_task(jobs, job, f"{i:05d}", {"2024-05-01": b"x" * 100}, publish=False)
        for i in range(3)
    ]
    jobs.save_stage_manifest(job.job_id, [m for m in manifests if m is not None])
    assert len(pending(jobs)) == 3

    result = run_dag(DAG_ID, "2024-05-02", {"destination": jobs.dest.url, "job_id": job.job_id})

    assert result.state == "success"
    assert result.states == {"abort_job": "success", "cleanup_job": "success"}
    summary = xcom(DAG_ID, result.run_id, "abort_job", "summary")
    assert (summary["state"], summary["aborted_uploads"]) == ("aborted", 3)
    assert jobs.job(job.job_id).state == "aborted"
    assert pending(jobs) == [] and visible(jobs) == {}
    # The aborted job can no longer be committed.
    with pytest.raises(Exception, match="aborted"):
        jobs.commit_job(job.job_id)


def test_manual_abort_refuses_a_committed_job(
    jobs: Committer, capfd: pytest.CaptureFixture[str]
) -> None:
    job = jobs.setup_job({"conflict_mode": "append"})
    write_task(jobs, job, "00000", [b"committed data"])
    jobs.commit_job(job.job_id)
    before = visible(jobs)

    result = run_dag(DAG_ID, "2024-05-03", {"destination": jobs.dest.url, "job_id": job.job_id})

    assert result.state == "failed"
    assert result.states == {"abort_job": "failed", "cleanup_job": "upstream_failed"}
    # Refused at once (no retry can change it), with a message that says why.
    assert result.tries["abort_job"] == 1
    out = capfd.readouterr().out
    assert f"job {job.job_id} is committed" in out and "point of no return" in out
    assert jobs.job(job.job_id).state == "committed"
    assert visible(jobs) == before


def _stuck(jobs: Committer) -> tuple[str, list[str]]:
    """A job past its point of no return whose completes all failed, one of its
    uploads then aborted by hand: its commit can never finish."""
    job = jobs.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(jobs, job, "00000", {"2024-05-04": b"a" * 10, "2024-05-05": b"b" * 10})
    fault = inject(jobs.store.client, "CompleteMultipartUpload", times=1000)
    with pytest.raises(StoreError):
        jobs.commit_job(job.job_id)
    clear(jobs.store.client, fault)
    uploads = jobs.pending_uploads(job.job_id)
    jobs.store.abort_upload(jobs.dest.bucket, uploads[0].key, uploads[0].upload_id)
    return job.job_id, [u.key for u in uploads]


def test_manual_abort_rolls_back_a_commit_that_cannot_finish(jobs: Committer) -> None:
    job_id, _ = _stuck(jobs)
    params = {"destination": jobs.dest.url, "job_id": job_id, "roll_back": True}

    result = run_dag(DAG_ID, "2024-05-04", params)

    assert result.state == "success", result.states
    record = jobs.job(job_id)
    assert record.state == "aborted" and "rolled back" in record.error
    # Its commit step says it was rolled back, keeping the error its commit failed with.
    commit = record.steps["commit"]
    assert commit.status == "rolled_back" and "CompleteMultipartUpload" in commit.error
    assert pending(jobs) == [] and visible(jobs) == {}
