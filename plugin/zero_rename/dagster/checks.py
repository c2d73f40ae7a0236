"""Manifest validation and the output check as Dagster asset checks, in the Checks tab.

Both are blocking: a failure stops the run's assets downstream of the asset.

- ``manifests_valid``: the validation of the job's task manifests, a check spec
  on the asset (:func:`manifests_check_spec`) whose result
  :func:`~zero_rename.dagster.assets.commit_partition` yields from what the
  validate step reported. It gates the commit, so it runs inside the asset's
  op: a failure aborts the job (nothing of it visible or pending) and fails
  the step; the check shows the problems.
- ``output_valid``: the output check after the commit (:func:`output_check`),
  an ``@asset_check`` of its own step: every file ``_SUCCESS`` lists is there
  with its size and ETag, and no visible file of the job is missing from it.
  Blocking, because a failure means readers now see files other than those
  the commit published: the job stays committed (nothing is undone), but the
  assets built on it must not run until the files are restored or the
  partition written again. In a run that materialized the asset it checks
  that run's job; run on its own (the Checks tab's "Execute"), the job that
  committed last (``_SUCCESS``'s).

The core's steps decide: this module only turns what they report (a summary,
a validation error, an :class:`~zero_rename.core.OutputCheck`) into
``AssetCheckResult``.
"""

# No postponed annotations here: Dagster reads the check's context annotation when it
# decorates it.
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    MetadataValue,
    OpExecutionContext,
    asset_check,
)

from zero_rename.core import Committer, JobSummary, OutputCheck, StepRunner, states
from zero_rename.dagster import lifecycle
from zero_rename.dagster.failures import protocol_errors
from zero_rename.dagster.resources import ZeroRenameResource
from zero_rename.errors import ValidationError

MANIFESTS_CHECK = "manifests_valid"
OUTPUT_CHECK = "output_valid"
# Problems named in a check's metadata; the job record and the step's log keep the rest.
PROBLEMS_SHOWN = 20


def manifests_check_spec(asset: AssetKey | str) -> AssetCheckSpec:
    """The validation check, for the ``check_specs`` of the asset that commits the job."""
    return AssetCheckSpec(
        MANIFESTS_CHECK,
        asset=asset,
        blocking=True,
        description="The job's task manifests describe a committable job (one manifest per "
        "task, every file under its partition, one schema); a failure aborts the job "
        "before anything is visible.",
    )


def validation_passed(summary: JobSummary) -> AssetCheckResult:
    """What the validate step reported; a job already past its commit (a retry of the
    asset) was validated by the attempt that committed it."""
    earlier = summary.state in states.PUBLISHING
    return AssetCheckResult(
        check_name=MANIFESTS_CHECK,
        passed=True,
        metadata={
            "job_id": MetadataValue.text(summary.job_id),
            "tasks": MetadataValue.int(summary.tasks),
            "files": MetadataValue.int(summary.files),
            "rows": MetadataValue.int(summary.rows),
        },
        description=(
            f"job {summary.job_id} was validated before its commit went ahead"
            if earlier
            else f"{summary.tasks} task manifest(s), {summary.files} file(s) validated"
        ),
    )


def validation_failed(job_id: str, error: ValidationError) -> AssetCheckResult:
    """A validation that found problems: the job is aborted, the step fails."""
    return AssetCheckResult(
        check_name=MANIFESTS_CHECK,
        passed=False,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "job_id": MetadataValue.text(job_id),
            "problems": MetadataValue.int(len(error.problems)),
            "first_problems": MetadataValue.json(list(error.problems[:PROBLEMS_SHOWN])),
        },
        description=f"{error}"[:1000],
    )


def output_result(job_id: str, check: OutputCheck, name: str = OUTPUT_CHECK) -> AssetCheckResult:
    """An output check as the core recorded it: failed only when it found problems
    (``superseded``: a later job's ``_SUCCESS``, which that job's check covers)."""
    metadata: dict[str, Any] = {
        "job_id": MetadataValue.text(job_id),
        "outcome": MetadataValue.text(check.outcome),
        "files": MetadataValue.int(check.files),
        "problems": MetadataValue.int(check.problem_count),
    }
    if check.problems:
        shown = [p.to_json() for p in check.problems[:PROBLEMS_SHOWN]]
        metadata["first_problems"] = MetadataValue.json(shown)
    return AssetCheckResult(
        check_name=name,
        passed=not check.failed,
        severity=AssetCheckSeverity.ERROR,
        metadata=metadata,
        description=check.describe()
        + (
            ". The job stays committed: restore the files, or write the partition again"
            if check.failed
            else ""
        ),
    )


def for_partition(result: AssetCheckResult, partition: str | None) -> AssetCheckResult:
    """``result`` naming the run's partition (the day) in its metadata: an asset's check
    is one for all its partitions, and its evaluation would not say which day it saw."""
    if partition is None:
        return result
    return result.with_metadata({**result.metadata, "partition": MetadataValue.text(partition)})


def checked_job(context: OpExecutionContext, committer: Committer) -> str | None:
    """The job the output check checks: the run's own when it committed one, else the
    job whose ``_SUCCESS`` is the destination's; None when nothing is committed."""
    pipeline, run_id = lifecycle.run_key(context)
    with protocol_errors():
        record = StepRunner(committer, pipeline, run_id).current_job()
        if record is not None and record.state == states.COMMITTED:
            return record.job_id
        success = committer.read_success()
    return success.job_id if success is not None else None


def output_check(
    asset: Any,
    destination: str,
    zero_rename: ZeroRenameResource | None = None,
    name: str = OUTPUT_CHECK,
) -> AssetChecksDefinition:
    """The output check of ``destination`` as a blocking ``@asset_check`` on ``asset``
    (its key or definition). The store: ``zero_rename``, else the resource of that key."""

    @asset_check(
        asset=asset,
        name=name,
        blocking=True,
        required_resource_keys=set() if zero_rename is not None else {"zero_rename"},
        description="The committed files match _SUCCESS (sizes and ETags) and no visible "
        "file of the job is missing from it; a failure stops downstream assets, the job "
        "stays committed.",
    )
    def _output_check(context: AssetCheckExecutionContext) -> AssetCheckResult:
        store = zero_rename if zero_rename is not None else context.resources.zero_rename
        committer = store.committer(destination)
        job_id = checked_job(context.op_execution_context, committer)
        if job_id is None:
            return AssetCheckResult(
                check_name=name,
                passed=False,
                severity=AssetCheckSeverity.WARN,
                description=f"nothing is committed at {committer.dest.url} yet",
            )
        check = lifecycle.output_check(committer, job_id)
        context.log.info(f"output check of job {job_id}: {check.describe()}")
        op = context.op_execution_context
        partition = op.partition_key if op.has_partition_key else None
        return for_partition(output_result(job_id, check, name), partition)

    return _output_check
