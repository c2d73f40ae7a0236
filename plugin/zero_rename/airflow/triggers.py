"""Waiting for a stage that runs elsewhere (EMR, Livy, Kubernetes) without holding a worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from zero_rename.airflow.hooks import ZeroRenameHook
from zero_rename.core import states
from zero_rename.errors import JobNotFoundError


def check_stage(aws_conn_id: str | None, destination: str, job_id: str) -> dict[str, Any] | None:
    """One look at the job: an event payload once it is staged or can never be, else None."""
    committer = ZeroRenameHook(aws_conn_id=aws_conn_id).committer(destination)
    try:
        record = committer.job(job_id)
    except JobNotFoundError:
        return {
            "status": "error",
            "job_id": job_id,
            "message": f"no job {job_id} at {destination}; was it set up?",
        }
    if record.state in states.FAILED:
        return {
            "status": "error",
            "job_id": job_id,
            "message": f"job {job_id} was {record.state.label}; its stage will never be committed",
        }
    summary = committer.stage_summary(job_id, record.state)
    if summary is None:
        return None
    return {"status": "staged", **summary.model_dump(mode="json")}


class StageManifestTrigger(BaseTrigger):
    """Fires when the job's stage manifest exists, or when the job is aborted or missing.

    :param destination: ``s3://bucket/table`` of the job.
    :param job_id: the job's id.
    :param aws_conn_id: AWS connection; looked up again wherever the trigger runs.
    :param poll_interval: seconds between looks.
    """

    def __init__(
        self,
        destination: str,
        job_id: str,
        aws_conn_id: str | None = "aws_default",
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        self.destination = destination
        self.job_id = job_id
        self.aws_conn_id = aws_conn_id
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        # Only names: the connection is resolved again in the triggerer.
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "destination": self.destination,
                "job_id": self.job_id,
                "aws_conn_id": self.aws_conn_id,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            # boto3 blocks: look from a thread so the triggerer's loop runs on.
            payload = await asyncio.to_thread(
                check_stage, self.aws_conn_id, self.destination, self.job_id
            )
            if payload is not None:
                yield TriggerEvent(payload)
                return
            self.log.info("no stage manifest yet for job %s at %s", self.job_id, self.destination)
            await asyncio.sleep(self.poll_interval)
