"""The manual abort job and the stale-jobs sensor, against the embedded S3 (no Spark)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from dagster import RunRequest, SkipReason, build_sensor_context

from tests.faults import clear, inject
from tests.helpers import pending, pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.s3.profiles import named_profile
from zero_rename.dagster import ZeroRenameResource, manual_abort_job, stale_jobs_sensor
from zero_rename.errors import StoreError

pytestmark = pytest.mark.dagster


def abort_run(instance: Any, destination: str, job_id: str, **options: Any) -> Any:
    config = {"destination": destination, "job_id": job_id, **options}
    return manual_abort_job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        resources={"zero_rename": ZeroRenameResource()},
        run_config={"ops": {"abort_job": {"config": config}}},
    )


def test_the_manual_abort_job_aborts_and_refuses_a_committed_job(
    daily: Committer, instance: Any
) -> None:
    running = daily.setup_job({"partition_columns": "dt"})
    write_task(daily, running, "00000", {"2024-01-05": b"x" * 100})
    assert pending(daily, running.job_id)

    result = abort_run(instance, daily.dest.url, running.job_id)
    assert result.success
    assert daily.job(running.job_id).state == "aborted"
    assert pending_in_bucket(daily) == [] and visible(daily) == {}
    assert "aborted by Dagster run" in daily.job(running.job_id).error

    committed = daily.setup_job({"partition_columns": "dt"})
    write_task(daily, committed, "00000", {"2024-01-06": b"y" * 100})
    daily.commit_job(committed.job_id)
    before = visible(daily)
    refused = abort_run(instance, daily.dest.url, committed.job_id)
    assert not refused.success
    failure = next(e for e in refused.all_events if e.event_type_value == "STEP_FAILURE")
    assert "AbortRefusedError" in str(failure.event_specific_data.error)
    assert "committed" in str(failure.event_specific_data.error)
    # Refused at once, no retry; the committed files are untouched.
    assert not [e for e in refused.all_events if e.event_type_value == "STEP_RESTARTED"]
    assert visible(daily) == before and daily.job(committed.job_id).state == "committed"


def test_the_sensor_reports_jobs_left_in_setup_and_requests_their_abort(
    daily: Committer, instance: Any
) -> None:
    resources = {"zero_rename": ZeroRenameResource()}
    left = daily.setup_job({"partition_columns": "dt"})
    quiet = stale_jobs_sensor([daily.dest.url], older_than=timedelta(hours=1))
    (skip,) = quiet(build_sensor_context(instance=instance, resources=resources))
    assert isinstance(skip, SkipReason) and "no job in setup" in skip.skip_message

    report = stale_jobs_sensor([daily.dest.url], older_than=timedelta(0))
    (named,) = report(build_sensor_context(instance=instance, resources=resources))
    assert isinstance(named, SkipReason) and left.job_id in named.skip_message

    aborting = stale_jobs_sensor([daily.dest.url], older_than=timedelta(0), abort=True)
    (request,) = aborting(build_sensor_context(instance=instance, resources=resources))
    assert isinstance(request, RunRequest) and request.run_key == left.job_id
    config = request.run_config["ops"]["abort_job"]["config"]
    assert (config["destination"], config["job_id"]) == (daily.dest.url, left.job_id)
    # The requested run, executed, aborts the job.
    assert manual_abort_job.execute_in_process(
        instance=instance, resources=resources, run_config=request.run_config
    ).success
    assert daily.job(left.job_id).state == "aborted"


def test_the_manual_abort_job_rolls_back_a_commit_that_cannot_finish(
    daily: Committer, instance: Any
) -> None:
    job = daily.setup_job({"partition_columns": "dt"})
    write_task(daily, job, "00000", {"2024-01-07": b"x" * 10, "2024-01-08": b"y" * 10})
    fault = inject(daily.store.client, "CompleteMultipartUpload", "before", 2, 1)
    with pytest.raises(StoreError):
        daily.commit_job(job.job_id)  # the first file is visible, the second pending
    clear(daily.store.client, fault)
    (left,) = daily.pending_uploads(job.job_id)
    daily.store.abort_upload(daily.dest.bucket, left.key, left.upload_id)
    assert len(visible(daily)) == 1

    refused = abort_run(instance, daily.dest.url, job.job_id)  # without roll_back
    assert not refused.success and daily.job(job.job_id).state == "committing"
    result = abort_run(instance, daily.dest.url, job.job_id, roll_back=True)
    assert result.success
    record = daily.job(job.job_id)
    assert record.state == "aborted" and "rolled back" in record.error
    assert pending_in_bucket(daily) == [] and visible(daily) == {}


@pytest.mark.parametrize("keys", [False, True], ids=["boto3's chain", "keys of its own"])
def test_the_resources_store_behaves_as_its_store_profile(keys: bool) -> None:
    """Whichever way the resource builds its client, the declared family holds."""
    own = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "s"} if keys else {}
    resource = ZeroRenameResource(endpoint_url="http://127.0.0.1:9", store_profile="minio", **own)
    assert resource.store().profile == named_profile("minio")
    assert resource.committer("s3://bkt/t").store.profile == named_profile("minio")
