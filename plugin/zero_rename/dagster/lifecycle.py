"""The commit protocol's steps for a Dagster run, shared by the ops and the asset.

One job per run and destination (:mod:`zero_rename.core.steps`), keyed by the
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

from dagster import AssetExecutionContext, MetadataValue, OpExecutionContext

from zero_rename.core import (
    PARTITIONS_NAMED,
    Committer,
    JobRecord,
    JobSummary,
    OutputCheck,
    StepRunner,
    partition_count,
)
from zero_rename.dagster.failures import protocol_errors
from zero_rename.errors import OutputCheckError

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
        return StepRunner(committer, pipeline, run_id).setup(options, origin(context))


def stage(committer: Committer, job_id: str, write: Callable[[], None]) -> JobSummary:
    """Run the engine's write, unless the job's stage is already saved or the job is
    past it (an op retry after the write, a re-execution of a committed run)."""
    with protocol_errors():
        return StepRunner(committer).stage(job_id, write)


def before_commit(
    committer: Committer, job_id: str, step: Callable[[str], JobSummary]
) -> JobSummary:
    """Validate or resolve conflicts, or report the job if its commit went ahead."""
    with protocol_errors():
        return StepRunner(committer).before_commit(job_id, step)


def commit(committer: Committer, job_id: str) -> JobSummary:
    with protocol_errors():
        return committer.commit_job(job_id)


def validate_output(committer: Committer, job_id: str) -> OutputCheck:
    """The output check after the commit, recorded in the job record; a problem
    raises a ``Failure`` that is not retried (the job stays committed)."""
    with protocol_errors():
        return committer.validate_output(job_id)


def output_check(committer: Committer, job_id: str) -> OutputCheck:
    """The output check after the commit, recorded in the job record, returned whatever it
    found (for an asset check to report); any other error as :func:`validate_output`."""
    with protocol_errors():
        try:
            return committer.validate_output(job_id)
        except OutputCheckError:
            found = committer.job(job_id).output_check
            if found is None:
                raise
            return found


def abort_after_failure(
    committer: Committer, pipeline: str, run_id: str, reason: str
) -> JobSummary | None:
    """Abort the run's job after a step failed for good; a job past its point of no
    return is left for a retry of the commit, with an error in the log."""
    return StepRunner(committer, pipeline, run_id).abort_after_failure(reason)


def check_metadata(check: OutputCheck) -> dict[str, Any]:
    """An output check as Dagster metadata: its outcome and counts."""
    return {
        "output_check": MetadataValue.text(check.outcome),
        "output_check_files": MetadataValue.int(check.files),
        "output_check_problems": MetadataValue.int(check.problem_count),
    }


def table_metadata(record: JobRecord) -> dict[str, Any]:
    """The table format's commit of a committed job (its record), as Dagster metadata
    (``table_format``, ``table``, ``table_commit``: the snapshot id or Delta
    version); empty for a job without a format."""
    table = record.table_commit
    if table is None:
        return {}
    return {
        "table_format": MetadataValue.text(table.format),
        "table": MetadataValue.text(table.table),
        "table_commit": MetadataValue.text(table.id),
        "table_files_added": MetadataValue.int(table.files),
        "table_files_removed": MetadataValue.int(table.removed_files),
    }


def metadata(
    summary: JobSummary, steps: Mapping[str, float] | None = None, success: str | None = None
) -> dict[str, Any]:
    """A step's summary as Dagster metadata: counts, requests, seconds; never a credential.

    Every number is a numeric entry (int or float), so Dagster's asset page plots
    it across materializations and partitions: files, rows, bytes, tasks,
    partitions (how many), replaced files, S3 requests and seconds. ``seconds`` is
    what the event stands for took: a step's own (an op's output), or, given
    ``steps`` (an asset's materialization), all of them, which ``<step>_seconds``
    split.
    """
    values: dict[str, Any] = {
        "job_id": MetadataValue.text(summary.job_id),
        "destination": MetadataValue.url(summary.destination),
        "state": MetadataValue.text(str(summary.state)),
        "files": MetadataValue.int(summary.files),
        "rows": MetadataValue.int(summary.rows),
        "bytes": MetadataValue.int(summary.bytes),
        "tasks": MetadataValue.int(summary.tasks),
        "partitions": MetadataValue.int(partition_count(summary)),
        "first_partitions": MetadataValue.json(list(summary.partitions[:PARTITIONS_NAMED])),
        "replaced_files": MetadataValue.int(summary.replaced_files),
        "s3_requests": MetadataValue.int(summary.requests),
        "seconds": MetadataValue.float(
            round(sum(steps.values()), 3) if steps else float(summary.seconds)
        ),
    }
    if success:
        values["success_file"] = MetadataValue.url(success)
    for name, seconds in (steps or {}).items():
        values[f"{name}_seconds"] = MetadataValue.float(round(seconds, 3))
    return values
