"""One job per DAG run: retries find it again; only an aborted job makes room for another."""

from __future__ import annotations

import pytest

from tests.helpers import write_task
from zero_rename.airflow.xcom import xcom_summary
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.steps import StepRunner, run_job_id
from zero_rename.errors import ConfigError

pytestmark = pytest.mark.s3


OPTIONS = {"partition_columns": "dt", "conflict_mode": "replace"}


def setup_run_job(c: Committer, pipeline: str, run_id: str, options: dict) -> JobRecord:
    return StepRunner(c, pipeline, run_id).setup(options)


def test_the_job_id_depends_on_dag_run_and_destination_only() -> None:
    base = run_job_id("daily", "scheduled__2024-01-02", "s3://b/t")
    assert base == run_job_id("daily", "scheduled__2024-01-02", "s3://b/t/")
    others = {
        run_job_id("other", "scheduled__2024-01-02", "s3://b/t"),
        run_job_id("daily", "scheduled__2024-01-03", "s3://b/t"),
        run_job_id("daily", "scheduled__2024-01-02", "s3://b/u"),
        run_job_id("daily", "scheduled__2024-01-02", "s3://b/t", generation=1),
    }
    assert base not in others and len(others) == 4


def test_a_retried_setup_finds_the_same_job(committer: Committer) -> None:
    first = setup_run_job(committer, "daily", "run-1", OPTIONS)
    again = setup_run_job(committer, "daily", "run-1", OPTIONS)
    assert first.job_id == again.job_id == run_job_id("daily", "run-1", committer.dest.url)
    assert len(committer.jobs()) == 1


def test_a_committed_job_is_found_again_not_replaced(committer: Committer) -> None:
    job = setup_run_job(committer, "daily", "run-1", OPTIONS)
    write_task(committer, job, "00000", {"2024-01-01": b"data"})
    committer.commit_job(job.job_id)
    assert setup_run_job(committer, "daily", "run-1", OPTIONS).state == "committed"
    assert len(committer.jobs()) == 1


def test_a_cleared_run_after_an_abort_gets_the_next_generation(committer: Committer) -> None:
    aborted = setup_run_job(committer, "daily", "run-1", OPTIONS)
    committer.abort_job(aborted.job_id)
    second = setup_run_job(committer, "daily", "run-1", OPTIONS)
    assert second.job_id == run_job_id("daily", "run-1", committer.dest.url, generation=1)
    assert setup_run_job(committer, "daily", "run-1", OPTIONS).job_id == second.job_id


def test_changed_options_are_refused(committer: Committer) -> None:
    setup_run_job(committer, "daily", "run-1", OPTIONS)
    with pytest.raises(ConfigError, match="other options"):
        setup_run_job(committer, "daily", "run-1", {**OPTIONS, "conflict_mode": "append"})


def test_the_xcom_summary_is_plain_json(committer: Committer) -> None:
    job = setup_run_job(committer, "daily", "run-1", OPTIONS)
    write_task(committer, job, "00000", {"2024-01-01": b"data"}, rows=3)
    summary = xcom_summary(committer.commit_job(job.job_id), "commit")
    assert summary["step"] == "commit" and summary["rows"] == 3
    assert summary["partitions"] == ["dt=2024-01-01"]
    assert all(isinstance(v, (str, int, float, list)) for v in summary.values())
