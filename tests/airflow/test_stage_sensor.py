"""The stage sensor and its trigger, against the real S3 server."""

from __future__ import annotations

import asyncio
import importlib
import threading
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.embedded_s3 import EmbeddedS3

if TYPE_CHECKING:
    from zero_rename.airflow.triggers import StageManifestTrigger

# Airflow is imported inside the tests, not at collection: importing it sets
# up logging for the whole process.

pytestmark = pytest.mark.airflow


class RecordingTI:
    """Just the part of a task instance the sensor uses: it records XCom pushes."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.fixture
def job(airflow_env: EmbeddedS3, committer: Committer) -> JobRecord:
    return committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})


def stage(c: Committer, job: JobRecord, tasks: int = 2) -> None:
    manifests = [
        write_task(c, job, f"{i:05d}", {"2024-06-01": b"abc" * 10}, publish=False)
        for i in range(tasks)
    ]
    c.save_stage_manifest(job.job_id, [m for m in manifests if m is not None])


def first_event(trigger: StageManifestTrigger) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(run(), timeout=60))


def test_trigger_serializes_to_what_rebuilds_it(committer: Committer) -> None:
    from zero_rename.airflow.triggers import StageManifestTrigger

    trigger = StageManifestTrigger(
        committer.dest.url, "6c3d4a3e-0000-4000-8000-000000000001", "aws_default", poll_interval=2.5
    )
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert kwargs == {
        "destination": committer.dest.url,
        "job_id": "6c3d4a3e-0000-4000-8000-000000000001",
        "aws_conn_id": "aws_default",
        "poll_interval": 2.5,
    }


def test_trigger_fires_when_the_stage_manifest_appears(
    committer: Committer, job: JobRecord
) -> None:
    from zero_rename.airflow.triggers import StageManifestTrigger

    later = threading.Timer(1.0, stage, args=(committer, job, 3))
    later.start()
    try:
        event = first_event(StageManifestTrigger(committer.dest.url, job.job_id, poll_interval=0.2))
    finally:
        later.join()
    assert event["status"] == "staged"
    assert (event["job_id"], event["tasks"], event["files"]) == (job.job_id, 3, 3)


def test_trigger_reports_an_aborted_job_at_once(committer: Committer, job: JobRecord) -> None:
    from zero_rename.airflow.triggers import StageManifestTrigger

    committer.abort_job(job.job_id)
    event = first_event(StageManifestTrigger(committer.dest.url, job.job_id, poll_interval=60))
    assert event["status"] == "error" and "aborted" in event["message"]


def test_sensor_defers_then_completes_with_the_stage_summary(
    committer: Committer, job: JobRecord
) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    from zero_rename.airflow.sensors import StageManifestSensor
    from zero_rename.airflow.triggers import StageManifestTrigger

    sensor = StageManifestSensor(
        task_id="wait_for_stage",
        destination=committer.dest.url,
        job_id=job.job_id,
        poke_interval=5,
        timeout=600,
    )
    context: Any = {"ti": RecordingTI()}
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context)
    assert isinstance(deferred.value.trigger, StageManifestTrigger)
    assert deferred.value.method_name == "execute_complete"

    stage(committer, job)
    event = first_event(deferred.value.trigger)
    summary = sensor.execute_complete(context, event)
    assert summary["files"] == 2 and summary["job_id"] == job.job_id
    assert context["ti"].pushed["summary"] == summary
    # Once staged, a retry of the sensor does not defer at all.
    assert sensor.execute(context)["tasks"] == 2


def test_sensor_fails_for_a_job_that_was_never_set_up(
    committer: Committer, airflow_env: EmbeddedS3
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from zero_rename.airflow.sensors import StageManifestSensor

    sensor = StageManifestSensor(
        task_id="wait_for_stage",
        destination=committer.dest.url,
        job_id="6c3d4a3e-0000-4000-8000-000000000002",
    )
    with pytest.raises(AirflowFailException, match="no job"):
        sensor.execute({"ti": RecordingTI()})  # type: ignore[arg-type]
