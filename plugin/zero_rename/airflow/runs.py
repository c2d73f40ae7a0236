"""One job per DAG run and destination, whatever Airflow retries or clears.

The job id is a UUID5 of the DAG id, the run id and the destination, so a retry
of the setup task, or of the whole run, finds the job it set up before instead
of creating a second one. Only an aborted job makes room for another: clearing
a run whose job was aborted sets up the next "generation" of the same name,
which is again the same for every retry.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from zero_rename.core.committer import Committer
from zero_rename.core.model import JobRecord, JobSummary
from zero_rename.errors import ConfigError, JobNotFoundError

log = logging.getLogger(__name__)

# Fixed: changing it would give every existing run a new job id.
NAMESPACE = uuid.UUID("6f1c3d5e-8a0b-5c2d-9e4f-7a6b5c4d3e2f")
# Aborted generations one run may step over before setup refuses.
MAX_GENERATIONS = 100


def run_job_id(dag_id: str, run_id: str, destination: str, generation: int = 0) -> str:
    """The job id of a DAG run's job at ``destination``."""
    name = f"{dag_id}\n{run_id}\n{destination.rstrip('/')}\n{generation}"
    return str(uuid.uuid5(NAMESPACE, name))


def setup_run_job(committer: Committer, dag_id: str, run_id: str,
                  options: Mapping[str, Any] | None,
                  origin: Mapping[str, str] | None = None) -> JobRecord:
    """Set up, or find again, this run's job: the first generation not aborted.

    A job in setup is set up again (idempotent for the same options); a job
    committing or committed is returned as it is, for the commit step to finish
    or report.

    Raises:
        ConfigError: the job exists with other options, or too many generations were aborted.
    """
    for generation in range(MAX_GENERATIONS):
        job_id = run_job_id(dag_id, run_id, committer.dest.url, generation)
        try:
            existing = committer.job(job_id)
        except JobNotFoundError:
            return committer.setup_job(options, job_id=job_id, origin=origin)
        if existing.state == "aborted":
            log.info("job %s of this run was aborted; trying the next generation", job_id)
            continue
        if existing.state == "setup":
            return committer.setup_job(options, job_id=job_id, origin=origin)
        log.info("job %s of this run is already %s", job_id, existing.state)
        return existing
    raise ConfigError(f"{MAX_GENERATIONS} jobs of run {run_id} were aborted; trigger a new run")


def xcom_summary(summary: JobSummary, step: str) -> dict[str, Any]:
    """A step's summary as plain JSON for XCom: counts and timings, never a credential."""
    return {"step": step, **summary.model_dump(mode="json")}
