"""The commit protocol's steps for a Dagster run, shared by the ops and the asset.

One job per run and destination (:mod:`zero_rename.core.runs`), keyed by the
Dagster job's name and the run's root run id: a retry of an op, or a
re-execution of the run, finds the job it set up before. Each step is a few
lines over :class:`~zero_rename.core.committer.Committer`; each returns the
core's :class:`JobSummary`, which :func:`metadata` turns into Dagster metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dagster import AssetExecutionContext, Failure, MetadataValue, OpExecutionContext

from zero_rename.core.committer import Committer
from zero_rename.core.model import JobRecord, JobSummary, OutputCheck
from zero_rename.core.runs import current_run_job, decided_summary, setup_run_job, stage_done
from zero_rename.dagster.failures import protocol_errors
from zero_rename.errors import AbortRefusedError

log = logging.getLogger(__name__)

# The ops' context or the asset's: both name the Dagster job and the run.
RunContext = OpExecutionContext | AssetExecutionContext


@dataclass(frozen=True)
class JobRef:
    """What one op hands the next: the job, by destination and id (never a credential)."""

    destination: str
    job_id: str


def run_key(context: RunContext) -> tuple[str, str]:
    """(pipeline, run) naming the run's job: a re-execution keeps its root run's job."""
    run = context.run
    return context.job_name, run.root_run_id or run.run_id


def origin(context: RunContext) -> dict[str, str]:
    return {"dagster_job": context.job_name, "dagster_run_id": context.run.run_id}


def setup(
    context: RunContext, committer: Committer, options: Mapping[str, Any] | None
) -> JobRecord:
    pipeline, run_id = run_key(context)
    with protocol_errors():
        return setup_run_job(committer, pipeline, run_id, options, origin(context))


def stage(committer: Committer, job_id: str, write: Callable[[], None]) -> JobSummary:
    """Run the engine's write, unless the job's stage is already saved or the job is
    past it (an op retry after the write, a re-execution of a committed run)."""
    with protocol_errors():
        done = stage_done(committer, job_id)
    if done is not None:
        return done
    write()
    with protocol_errors():
        staged = committer.stage_summary(job_id)
    if staged is None:
        raise Failure(
            description=f"the write finished but saved no stage manifest for job "
            f"{job_id}; does it write through the zero-rename format "
            "with option job_id?",
            allow_retries=False,
        )
    return staged


def before_commit(
    committer: Committer, job_id: str, step: Callable[[str], JobSummary]
) -> JobSummary:
    """Validate or resolve conflicts, or report the job if its commit went ahead."""
    with protocol_errors():
        summary = decided_summary(committer, committer.job(job_id))
        return summary if summary is not None else step(job_id)


def commit(committer: Committer, job_id: str) -> JobSummary:
    with protocol_errors():
        return committer.commit_job(job_id)


def validate_output(committer: Committer, job_id: str) -> OutputCheck:
    """The output check after the commit, recorded in the job record; a problem
    raises a ``Failure`` that is not retried (the job stays committed)."""
    with protocol_errors():
        return committer.validate_output(job_id)


def abort_after_failure(
    committer: Committer, pipeline: str, run_id: str, reason: str
) -> JobSummary | None:
    """Abort the run's job after a step failed for good; a job past its point of no
    return is left for a retry of the commit, with an error in the log."""
    record = current_run_job(committer, pipeline, run_id)
    if record is None:
        log.warning(
            "no job of this run is left to abort at %s (none was set up, or it is aborted already)",
            committer.dest.url,
        )
        return None
    if record.state == "committed":  # a later step failed (cleanup, the output check)
        log.info("job %s is committed; a step after its commit cannot undo it", record.job_id)
        return None
    try:
        summary = committer.abort_job(record.job_id, reason=reason)
    except AbortRefusedError as exc:
        log.error(
            "job %s was not aborted: %s; re-execute the run to finish its commit",
            record.job_id,
            exc,
        )
        return None
    committer.cleanup_job(record.job_id)
    log.info(
        "job %s is aborted: nothing of it was published, %d pending upload(s) were aborted",
        record.job_id,
        summary.aborted_uploads,
    )
    return summary


def check_metadata(check: OutputCheck) -> dict[str, Any]:
    """An output check as Dagster metadata: its outcome and counts."""
    return {
        "output_check": MetadataValue.text(check.outcome),
        "output_check_files": MetadataValue.int(check.files),
        "output_check_problems": MetadataValue.int(check.problem_count),
    }


def metadata(
    summary: JobSummary, steps: Mapping[str, float] | None = None, success: str | None = None
) -> dict[str, Any]:
    """A step's summary as Dagster metadata: counts, requests, seconds; never a credential."""
    values: dict[str, Any] = {
        "job_id": MetadataValue.text(summary.job_id),
        "destination": MetadataValue.url(summary.destination),
        "state": MetadataValue.text(str(summary.state)),
        "files": MetadataValue.int(summary.files),
        "rows": MetadataValue.int(summary.rows),
        "bytes": MetadataValue.int(summary.bytes),
        "tasks": MetadataValue.int(summary.tasks),
        "partitions": MetadataValue.json(list(summary.partitions)),
        "s3_requests": MetadataValue.int(summary.requests),
        "seconds": MetadataValue.float(float(summary.seconds)),
    }
    if success:
        values["success_file"] = MetadataValue.url(success)
    for name, seconds in (steps or {}).items():
        values[f"{name}_seconds"] = MetadataValue.float(round(seconds, 3))
    return values
