"""What a try of the Spark stage does about an earlier try's application
(``zero_rename.airflow.resume``): submit, reattach through the provider, or fence.

The end-to-end case, a worker killed under a local ``spark-submit``, is
``test_stage_retry.py``; here the choices alone, and the reattach through the
apache-spark provider's own resumable path, with only the cluster manager (a
standalone master's REST answers) played: no cluster runs here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.helpers import write_task
from zero_rename.airflow.resume import STAGE_KEY, Course, StageApplications, course
from zero_rename.core.committer import Committer
from zero_rename.core.steps import StepRunner
from zero_rename.embedded_s3 import EmbeddedS3

JOB = "2e0f6a4c-93b1-5c07-a3e0-5d0f0a6c1b2d"
RUN = "manual__2024-01-01T00:00:00+00:00"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("mark", "external_id", "expected"),
    [
        (None, None, Course.SUBMIT),  # no earlier submit
        ({"job_id": "another", "external_id": None}, None, Course.SUBMIT),  # fenced before
        ({"job_id": JOB, "external_id": None}, None, Course.FENCE),  # local: no id
        ({"job_id": JOB, "external_id": "driver-1"}, "driver-1", Course.FENCE),  # not this one's
        ({"job_id": JOB, "external_id": None}, "driver-2", Course.REATTACH),
        ({"job_id": JOB, "external_id": "driver-1"}, "driver-2", Course.REATTACH),
    ],
)
def test_the_course_of_a_try(mark: Any, external_id: Any, expected: Course) -> None:
    assert course(mark, JOB, external_id) is expected


@dataclass
class StateStore:
    """The task state store of one task instance, as a task sees it."""

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = json.loads(json.dumps(value))

    def delete(self, key: str) -> None:
        self.values.pop(key, None)


@dataclass
class TaskInstance:
    try_number: int
    task_id: str = "stage"
    stats_tags: dict[str, str] = field(default_factory=dict)
    pushed: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def context(store: StateStore | None, try_number: int = 1) -> Any:
    return {"ti": TaskInstance(try_number), "run_id": RUN, "task_state_store": store}


class Unreachable:
    """A step runner a decision must not touch."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the runner was asked for {name}")


@pytest.mark.unit
def test_a_failure_the_worker_saw_is_final_and_leaves_no_mark() -> None:
    """A local spark-submit that exited non-zero: the application is over and failed;
    Spark retried its tasks, so the stage fails for good."""
    from airflow.sdk.exceptions import AirflowFailException

    store = StateStore()
    applications = StageApplications(context(store), Unreachable(), "spark_job_id")  # type: ignore[arg-type]
    assert applications.prepare(JOB) == JOB
    assert store.values[STAGE_KEY] == {"job_id": JOB, "external_id": None}

    def failed() -> None:
        raise RuntimeError("Cannot execute: spark-submit ... Error code is: 1.")

    with pytest.raises(AirflowFailException, match="not submitted again"):
        applications.submit(JOB, failed)
    assert STAGE_KEY not in store.values
    applications.submit(JOB, lambda: None)  # a success leaves no mark either
    assert STAGE_KEY not in store.values


@pytest.mark.unit
def test_without_a_state_store_a_retry_fences_and_a_first_try_submits() -> None:
    first = StageApplications(context(None, 1), Unreachable(), "spark_job_id")  # type: ignore[arg-type]
    assert first.prepare(JOB) == JOB
    fenced: list[str] = []

    class Runner:
        def restage(self, job_id: str, reason: str) -> Any:
            fenced.append(reason)
            return type("Record", (), {"job_id": "next"})()

    retry = StageApplications(context(None, 2), Runner(), "spark_job_id")  # type: ignore[arg-type]
    assert retry.prepare(JOB) == "next"
    assert "try 2 of task stage" in fenced[0] and RUN in fenced[0]


@pytest.mark.airflow
def test_a_retry_reattaches_to_the_application_the_provider_recorded(
    airflow_env: EmbeddedS3, bucket: str, store_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A standalone cluster's driver, submitted by the try whose worker died (the
    provider recorded its id after our mark): the retry polls it through the
    provider's resumable path; nothing is submitted, nothing fenced, and the
    stage manifest its driver saves is the stage's."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.sdk import DAG

    from zero_rename.airflow.spark import SparkStageSubmitOperator

    destination = f"s3://{bucket}/events"
    committer = Committer(destination, store_config)
    job = StepRunner(committer, "daily", RUN).setup({"partition_columns": "dt"})
    monkeypatch.setenv(
        "AIRFLOW_CONN_ZR_CLUSTER",
        json.dumps(
            {
                "conn_type": "spark",
                "host": "spark://master",
                "port": 7077,
                "extra": {"deploy-mode": "cluster"},
            }
        ),
    )
    polled: list[str] = []

    def status(self: Any, url: str, external_id: str) -> str:
        polled.append(url)
        return "RUNNING"

    def tracked_to_the_end(hook: SparkSubmitHook) -> None:
        # The reattached driver finishes its write: the stage manifest is saved.
        manifest = write_task(committer, job, "00000", {"2024-01-01": b"a"}, publish=False)
        assert manifest is not None
        committer.save_stage_manifest(job.job_id, [manifest], engine="spark")
        hook._driver_status = "FINISHED"

    def submitted(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the retry submitted another application")

    monkeypatch.setattr(SparkSubmitOperator, "_fetch_driver_status", status)
    monkeypatch.setattr(SparkSubmitHook, "_start_driver_status_tracking", tracked_to_the_end)
    monkeypatch.setattr(SparkSubmitHook, "submit", submitted)
    with DAG("daily", schedule=None):
        stage = SparkStageSubmitOperator(
            task_id="stage",
            application="app.py",
            conn_id="zr_cluster",
            destination=destination,
            job_id=job.job_id,
            # The suite's Airflow turns the injection on; this test's task instance
            # is a stand-in without the identity it would name.
            openlineage_inject_parent_job_info=False,
        )
    store = StateStore(
        {STAGE_KEY: {"job_id": job.job_id, "external_id": None}, "spark_job_id": "driver-1"}
    )

    summary = stage.execute(context(store, try_number=2))

    assert polled == ["http://master:6066/v1/submissions/status/driver-1"]
    assert (summary["job_id"], summary["tasks"], summary["files"]) == (job.job_id, 1, 1)
    assert committer.job(job.job_id).state == "setup" and len(committer.jobs()) == 1
    assert STAGE_KEY not in store.values
