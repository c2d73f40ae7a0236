"""The output check in Dagster: the steps job's optional op, on the embedded S3 (no Spark).

The stage writes through the core, as an engine would, and saves its stage
manifest; the rest of the job is the package's own ops.
"""

from __future__ import annotations

from typing import Any

import pytest
from dagster import Failure, OpExecutionContext, build_op_context

from tests.helpers import visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.dagster import (
    JobRef,
    ZeroRenameResource,
    commit_lifecycle_job,
    stage_op,
    validate_output_op,
)

pytestmark = pytest.mark.dagster


def write_with_the_core(context: OpExecutionContext, job: JobRef, options: dict[str, str]) -> None:
    committer: Committer = context.resources.zero_rename.committer(job.destination)
    record = committer.job(job.job_id)
    manifest = write_task(committer, record, "00000", {"2024-03-01": b"x" * 99}, publish=False)
    assert manifest is not None
    committer.save_stage_manifest(job.job_id, [manifest], engine="test")


def test_the_output_check_op_records_its_result_and_fails_on_a_rewritten_file(
    daily: Committer, instance: Any
) -> None:
    steps = commit_lifecycle_job(
        "checked_steps",
        daily.dest.url,
        stage_op(write_with_the_core),
        options={"partition_columns": "dt", "conflict_mode": "replace"},
        validate_output=True,
    )
    resources = {"zero_rename": ZeroRenameResource()}
    result = steps.execute_in_process(instance=instance, raise_on_error=False, resources=resources)

    assert result.success
    (record,) = daily.jobs()
    assert record.state == "committed" and record.output_check is not None
    assert (record.output_check.outcome, record.output_check.files) == ("valid", 1)
    assert record.steps["validate_output"].status == "succeeded"
    (output,) = [
        e
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.step_key == "validate_output"
    ]
    assert output.event_specific_data.metadata["output_check"].value == "valid"

    # Rewritten with other bytes of the same size: the op fails at once, not retried.
    (path,) = visible(daily)
    daily.store.put_object(daily.dest.bucket, daily.dest.dir + path, b"y" * 99)
    with pytest.raises(Failure) as failed:
        validate_output_op(
            build_op_context(resources=resources), JobRef(daily.dest.url, record.job_id)
        )
    assert failed.value.allow_retries is False
    assert f"etag {path}" in str(failed.value.description)
    assert "The job stays committed" in str(failed.value.description)
    record = daily.job(record.job_id)
    assert record.state == "committed" and record.output_check is not None
    assert record.output_check.outcome == "invalid"
    assert record.steps["validate_output"].status == "failed"
