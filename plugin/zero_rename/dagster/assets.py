"""The whole commit lifecycle inside one asset materialization.

:func:`commit_partition` is what a partitioned asset's body calls: job setup,
the engine's write (``write(options)``), validation, conflict resolution and
job commit, then the ``MaterializeResult`` with the job's metadata (with a
``table_format`` option, the table and its commit too). A step that
fails for good (an error no retry fixes, or the asset's last retry) aborts the
job before the error propagates: nothing is left visible or pending. A failure
after the commit's point of no return is never aborted; the asset's retry
finds the job committing and finishes it. With ``validate_output=True`` the
output check follows the commit and its cleanup; a failed check fails the
materialization at once and aborts nothing: the job stays committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dagster import AssetExecutionContext, Failure, MaterializeResult

from zero_rename.dagster import lifecycle
from zero_rename.dagster.failures import error_text
from zero_rename.dagster.resources import ZeroRenameResource

T = TypeVar("T")


def commit_partition(
    context: AssetExecutionContext,
    zero_rename: ZeroRenameResource,
    destination: str,
    options: Mapping[str, Any],
    write: Callable[[dict[str, str]], None],
    validate_output: bool = False,
) -> MaterializeResult:
    """Write and commit one job; ``write(options)`` writes the job's files through the
    ``zero-rename`` format with these writer options (``job_id``, the store's endpoint).
    ``validate_output``: check the committed files against ``_SUCCESS`` afterwards."""
    committer = zero_rename.committer(destination)
    seconds: dict[str, float] = {}

    def timed(step: str, run: Callable[[], T]) -> T:
        started = time.monotonic()
        try:
            return run()
        except Exception as exc:
            if _final_attempt(context, exc):
                pipeline, run_id = lifecycle.run_key(context)
                lifecycle.abort_after_failure(
                    committer,
                    pipeline,
                    run_id,
                    reason=f"step {step} failed (Dagster run {context.run_id}): {error_text(exc)}",
                )
            raise
        finally:
            seconds[step] = time.monotonic() - started

    record = timed("setup", lambda: lifecycle.setup(context, committer, options))
    job_id = record.job_id
    writer = {**zero_rename.spark_options(), "job_id": job_id}
    timed("stage", lambda: lifecycle.stage(committer, job_id, lambda: write(writer)))
    timed("validate", lambda: lifecycle.before_commit(committer, job_id, committer.validate))
    timed(
        "resolve_conflicts",
        lambda: lifecycle.before_commit(committer, job_id, committer.resolve_conflicts),
    )
    summary = timed("commit", lambda: lifecycle.commit(committer, job_id))
    table = lifecycle.table_metadata(committer, job_id)
    timed("cleanup", lambda: committer.cleanup_job(job_id))
    checked = {}
    if validate_output:
        check = timed("validate_output", lambda: lifecycle.validate_output(committer, job_id))
        checked = lifecycle.check_metadata(check)
    context.log.info(
        f"committed job {job_id} at {destination}: {summary.files} file(s), "
        f"{summary.rows} row(s), {summary.bytes} byte(s) in "
        f"{len(summary.partitions)} partition(s), {summary.requests} S3 request(s)"
    )
    return MaterializeResult(
        metadata={
            **lifecycle.metadata(summary, seconds, success=f"{committer.dest.url}/_SUCCESS"),
            **table,
            **checked,
        }
    )


def _final_attempt(context: AssetExecutionContext, exc: Exception) -> bool:
    """No retry of the asset will follow: a final error, or the policy's last attempt."""
    if isinstance(exc, Failure) and exc.allow_retries is False:
        return True
    policy = getattr(context.op_def, "retry_policy", None)
    return context.retry_number >= (policy.max_retries if policy else 0)
