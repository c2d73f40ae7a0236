"""The output check as an Airflow task, on a job committed in-process (no Spark).

The daily DAG's re-run checks a passing one (tests/airflow/test_daily_dag.py);
here the manual_validate_output DAG checks a job with a committed file deleted.
"""

from __future__ import annotations

import pytest

from tests.airflow.dagruns import run_dag, xcom
from tests.helpers import visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.embedded_s3 import EmbeddedS3

pytestmark = pytest.mark.airflow

DAG_ID = "manual_validate_output"


def test_a_failed_output_check_fails_its_task_without_retries(
    airflow_env: EmbeddedS3, committer: Committer, capfd: pytest.CaptureFixture[str]
) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-06-01": b"a" * 10, "2024-06-02": b"b" * 10})
    committer.commit_job(job.job_id)
    gone = sorted(visible(committer))[0]
    committer.store.delete_objects(committer.dest.bucket, [committer.dest.dir + gone])

    result = run_dag(
        DAG_ID, "2024-06-03", {"destination": committer.dest.url, "job_id": job.job_id}
    )

    assert result.state == "failed" and result.states == {"validate_output": "failed"}
    assert result.tries == {"validate_output": 1}  # final: no retry brings the file back
    out = capfd.readouterr().out
    assert "OutputCheckError" in out and f"missing {gone}" in out
    assert "The job stays committed" in out
    assert xcom(DAG_ID, result.run_id, "validate_output", "summary") is None
    record = committer.job(job.job_id)
    assert record.state == "committed" and record.output_check is not None
    assert (record.output_check.outcome, record.output_check.files) == ("invalid", 2)
    assert record.steps["validate_output"].status == "failed"
