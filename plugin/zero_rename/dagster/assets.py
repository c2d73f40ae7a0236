"""The whole commit lifecycle inside one asset materialization.

:func:`commit_partition` is what a partitioned asset's body returns (or
``yield from``): job setup, the engine's write (``write(options)``),
validation, conflict resolution, job commit and cleanup, then the
``MaterializeResult`` with the job's metadata, Dagster's standard keys among
it (:mod:`zero_rename.dagster.standard`), and the validation's check result
when the asset declares :func:`~zero_rename.dagster.checks.manifests_check_spec`.
A step that fails for good (an error no retry fixes, or the asset's last
retry) aborts the job before the error propagates: nothing is left visible or
pending; invalid manifests are reported as the failed check first. A failure
after the commit's point of no return is never aborted; the asset's retry
finds the job committing and finishes it. The output check after the commit
is an asset check of its own (:func:`~zero_rename.dagster.checks.output_check`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetExecutionContext,
    Failure,
    MaterializeResult,
)

from zero_rename.core import Committer, JobSummary
from zero_rename.dagster import checks, lifecycle, standard
from zero_rename.dagster.failures import error_text, protocol_errors
from zero_rename.dagster.resources import ZeroRenameResource
from zero_rename.errors import ValidationError

T = TypeVar("T")


def commit_partition(
    context: AssetExecutionContext,
    zero_rename: ZeroRenameResource,
    destination: str,
    options: Mapping[str, Any],
    write: Callable[[dict[str, str]], None],
    row_counts: bool = True,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Write and commit one job; ``write(options)`` writes the job's files through the
    ``zero-rename`` format with these writer options (``job_id``, the store's endpoint).
    ``row_counts``: ``dagster/row_count`` and ``dagster/partition_row_count``, which
    list the destination once after the commit (see :mod:`zero_rename.dagster.standard`)."""
    committer = zero_rename.committer(destination)
    seconds: dict[str, float] = {}

    def timed(step: str, run: Callable[[], T]) -> T:
        started = time.monotonic()
        try:
            return run()
        except Exception as exc:
            if _final_attempt(context, exc):
                pipeline, run_id = lifecycle.run_key(context)
                reason = f"step {step} failed (Dagster run {context.run.run_id}): {error_text(exc)}"
                lifecycle.abort_after_failure(committer, pipeline, run_id, reason=reason)
            raise
        finally:
            seconds[step] = time.monotonic() - started

    record = timed("setup", lambda: lifecycle.setup(context, committer, options))
    job_id = record.job_id
    writer = {**zero_rename.spark_options(), "job_id": job_id}
    timed("stage", lambda: lifecycle.stage(committer, job_id, lambda: write(writer)))
    reported = _reports_validation(context)
    day = context.partition_key if context.has_partition_key else None
    try:
        validated = timed(
            "validate", lambda: lifecycle.before_commit(committer, job_id, committer.validate)
        )
    except Failure as failure:
        if reported and isinstance(failure.__cause__, ValidationError):
            yield checks.for_partition(checks.validation_failed(job_id, failure.__cause__), day)
        raise
    timed(
        "resolve_conflicts",
        lambda: lifecycle.before_commit(committer, job_id, committer.resolve_conflicts),
    )
    summary = timed("commit", lambda: lifecycle.commit(committer, job_id))
    catalog = timed("metadata", lambda: _committed_metadata(committer, job_id, row_counts))
    timed("cleanup", lambda: committer.cleanup_job(job_id))
    _log_commit(context, destination, summary)
    yield MaterializeResult(
        metadata={
            **lifecycle.metadata(summary, seconds, success=f"{committer.dest.url}/_SUCCESS"),
            **catalog,
        },
        check_results=[checks.for_partition(checks.validation_passed(validated), day)]
        if reported
        else None,
    )


def _committed_metadata(committer: Committer, job_id: str, row_counts: bool) -> dict[str, Any]:
    """What the committed job's record tells: its table format's commit, and Dagster's
    standard keys."""
    with protocol_errors():
        record = committer.job(job_id)
    return {
        **lifecycle.table_metadata(record),
        **standard.standard_metadata(committer, record, row_counts),
    }


def _reports_validation(context: AssetExecutionContext) -> bool:
    """The asset declares the validation check and the run selected it."""
    key = AssetCheckKey(context.asset_key, checks.MANIFESTS_CHECK)
    return key in context.selected_asset_check_keys


def _log_commit(context: AssetExecutionContext, destination: str, summary: JobSummary) -> None:
    context.log.info(
        f"committed job {summary.job_id} at {destination}: {summary.files} file(s), "
        f"{summary.rows} row(s), {summary.bytes} byte(s) in "
        f"{len(summary.partitions)} partition(s), {summary.requests} S3 request(s)"
    )


def _final_attempt(context: AssetExecutionContext, exc: Exception) -> bool:
    """No retry of the asset will follow: a final error, or the policy's last attempt."""
    if isinstance(exc, Failure) and exc.allow_retries is False:
        return True
    policy = getattr(context.op_def, "retry_policy", None)
    return context.retry_number >= (policy.max_retries if policy else 0)
