"""The core's one job per run, for DAG runs, and a step's summary as XCom.

The job id of a DAG run is :func:`zero_rename.core.runs.run_job_id` of the DAG
id, the run id and the destination (:mod:`zero_rename.core.runs`).
"""

from __future__ import annotations

from typing import Any

from zero_rename.core.model import JobSummary
from zero_rename.core.runs import run_job_id, setup_run_job

__all__ = ["run_job_id", "setup_run_job", "xcom_summary"]


def xcom_summary(summary: JobSummary, step: str) -> dict[str, Any]:
    """A step's summary as plain JSON for XCom: counts and timings, never a credential."""
    return {"step": step, **summary.model_dump(mode="json")}
