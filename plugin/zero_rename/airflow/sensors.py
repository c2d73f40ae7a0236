"""A sensor for a stage submitted elsewhere: waits for the job's stage manifest."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from zero_rename.airflow.links import CommitsLink
from zero_rename.airflow.triggers import StageManifestTrigger, check_stage
from zero_rename.airflow.xcom import SUMMARY_KEY


class StageManifestSensor(BaseSensorOperator):
    """Waits until the Spark driver of job ``job_id`` saved its stage manifest.

    Deferrable by default: the wait runs in the triggerer, not in a worker slot.
    Fails at once when the job is aborted or was never set up.

    :param destination: ``s3://bucket/table`` of the job.
    :param job_id: the job's id, usually ``{{ ti.xcom_pull(task_ids='setup_job') }}``.
    :param aws_conn_id: AWS connection.
    :param deferrable: wait in the triggerer (True) or poke from the worker.
    """

    template_fields: Sequence[str] = ("destination", "job_id", "aws_conn_id")
    operator_extra_links = (CommitsLink(),)

    def __init__(
        self,
        *,
        destination: str,
        job_id: str,
        aws_conn_id: str | None = "aws_default",
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.destination = destination
        self.job_id = job_id
        self.aws_conn_id = aws_conn_id
        self.deferrable = deferrable

    def poke(self, context: Context) -> bool:
        payload = check_stage(self.aws_conn_id, self.destination, self.job_id)
        if payload is None:
            return False
        self._finish(context, payload)
        return True

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        # Already staged: no deferral round trip.
        payload = check_stage(self.aws_conn_id, self.destination, self.job_id)
        if payload is not None:
            return self._finish(context, payload)
        self.defer(
            trigger=StageManifestTrigger(
                self.destination, self.job_id, self.aws_conn_id, self.poke_interval
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if not event:
            raise AirflowFailException(f"no event from the trigger for job {self.job_id}")
        return self._finish(context, event)

    def _finish(self, context: Context, payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("status") != "staged":
            raise AirflowFailException(str(payload.get("message", payload)))
        summary = {"step": "stage", **{k: v for k, v in payload.items() if k != "status"}}
        self.log.info(
            "job %s is staged: %s task(s), %s file(s), %s row(s)",
            self.job_id,
            summary.get("tasks"),
            summary.get("files"),
            summary.get("rows"),
        )
        context["ti"].xcom_push(key=SUMMARY_KEY, value=summary)
        return summary
