"""The commit protocol's steps as Dagster ops, one op per step, each with its own retries.

    setup_job ──> stage ──> validate ──> resolve_conflicts ──> commit ──> cleanup_job
                                                                 └──> validate_output (optional)

:func:`commit_lifecycle_job` builds the job; its failure hook aborts the run's
job when any step fails for good (after its ``RetryPolicy``), so a failed run
leaves nothing visible and nothing pending, and the run shows failed. The
abort is refused once the commit passed its point of no return: the commit's
retries, or a re-execution of the run, finish it instead. The output check
(``validate_output=True``) runs beside the cleanup, after the commit: its
failure fails the run and aborts nothing, the job stays committed.
:data:`manual_abort_job` aborts and cleans up a job named in its run config.
"""

# No postponed annotations here: Dagster reads op and config annotations when it
# decorates them.
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

from dagster import (
    Backoff,
    Config,
    DependencyDefinition,
    GraphDefinition,
    HookContext,
    In,
    JobDefinition,
    OpDefinition,
    OpExecutionContext,
    Out,
    Output,
    PartitionsDefinition,
    RetryPolicy,
    failure_hook,
    job,
    op,
)
from pydantic import Field

from zero_rename.core import JobSummary
from zero_rename.dagster import lifecycle
from zero_rename.dagster.failures import error_text, protocol_errors
from zero_rename.dagster.lifecycle import JobRef
from zero_rename.dagster.resources import ZeroRenameResource
from zero_rename.errors import JobNotFoundError

SETUP_OP = "setup_job"
# Quick steps retry soon; a commit after its point of no return must finish,
# so it retries longer, with backoff for a store that is briefly unavailable.
STEP_RETRIES = RetryPolicy(max_retries=2, delay=2, backoff=Backoff.EXPONENTIAL)
COMMIT_RETRIES = RetryPolicy(max_retries=3, delay=5, backoff=Backoff.EXPONENTIAL)


class SetupConfig(Config):
    destination: str = Field(description="s3://bucket/table of the job")
    options: dict[str, str] = Field(
        default_factory=dict,
        description="job options as text: partition_columns, conflict_mode, "
        "committer, threads...; the writer must use the same",
    )


class JobConfig(Config):
    destination: str = Field(description="s3://bucket/table of the job")
    job_id: str = Field(description="the job's id (a UUID)")
    reason: str = Field(default="", description="why, recorded in the job record")
    roll_back: bool = Field(
        default=False,
        description="roll back a job stuck in committing whose commit cannot finish, "
        "instead of refusing it",
    )
    force: bool = Field(
        default=False, description="with roll_back: even a commit that could still finish"
    )


def _report(context: OpExecutionContext, step: str, summary: JobSummary) -> None:
    context.log.info(
        f"{step} of job {summary.job_id} at {summary.destination}: "
        f"{summary.files} file(s), {summary.bytes} byte(s), {summary.rows} row(s), "
        f"{summary.tasks} task(s), {summary.requests} S3 request(s)"
    )
    context.add_output_metadata(lifecycle.metadata(summary))


@op(name=SETUP_OP, retry_policy=STEP_RETRIES, out=Out(JobRef))
def setup_job(
    context: OpExecutionContext, config: SetupConfig, zero_rename: ZeroRenameResource
) -> JobRef:
    """Job setup: this run's job, found again by a retry or a re-execution."""
    record = lifecycle.setup(context, zero_rename.committer(config.destination), config.options)
    context.log.info(f"job {record.job_id} at {record.destination} is {record.state}")
    return JobRef(record.destination, record.job_id)


def stage_op(
    write: Callable[[OpExecutionContext, JobRef, dict[str, str]], None],
    name: str = "stage",
    required_resource_keys: frozenset[str] | set[str] = frozenset(),
    **op_kwargs: Any,
) -> OpDefinition:
    """The engine's stage as an op: ``write(context, job, options)`` writes the job's
    files through the ``zero-rename`` format with ``options`` (``job_id`` and the
    store's endpoint among them), and the format saves the stage manifest.
    ``required_resource_keys`` names what ``write`` uses (``pyspark``...).

    Not retried by default: Spark retries its own tasks, and a write that fails
    aborts its job, so a second attempt could only fail; re-execute the run instead.
    """

    @op(
        name=name,
        ins={"job": In(JobRef)},
        out=Out(JobRef),
        required_resource_keys={"zero_rename", *required_resource_keys},
        **op_kwargs,
    )
    def _stage(context: OpExecutionContext, job: JobRef) -> JobRef:
        zero_rename: ZeroRenameResource = context.resources.zero_rename
        committer = zero_rename.committer(job.destination)
        options = {**zero_rename.spark_options(), "job_id": job.job_id}
        summary = lifecycle.stage(committer, job.job_id, lambda: write(context, job, options))
        _report(context, "stage", summary)
        return job

    return _stage


@op(retry_policy=STEP_RETRIES, ins={"job": In(JobRef)}, out=Out(JobRef))
def validate(context: OpExecutionContext, job: JobRef, zero_rename: ZeroRenameResource) -> JobRef:
    """Validates the task manifests of the job's stage; changes nothing."""
    committer = zero_rename.committer(job.destination)
    _report(context, "validate", lifecycle.before_commit(committer, job.job_id, committer.validate))
    return job


@op(retry_policy=STEP_RETRIES, ins={"job": In(JobRef)}, out=Out(JobRef))
def resolve_conflicts(
    context: OpExecutionContext, job: JobRef, zero_rename: ZeroRenameResource
) -> JobRef:
    """Applies the conflict mode: fails early for ``fail``, lists what ``replace`` replaces."""
    committer = zero_rename.committer(job.destination)
    _report(
        context,
        "resolve_conflicts",
        lifecycle.before_commit(committer, job.job_id, committer.resolve_conflicts),
    )
    return job


@op(retry_policy=COMMIT_RETRIES, ins={"job": In(JobRef)}, out=Out(JobRef))
def commit(context: OpExecutionContext, job: JobRef, zero_rename: ZeroRenameResource) -> JobRef:
    """Job commit, resumable: a retry after any failure finishes an interrupted commit.
    With a ``table_format``, its metadata names the table and the commit that
    published the job."""
    committer = zero_rename.committer(job.destination)
    summary = lifecycle.commit(committer, job.job_id)
    _report(context, "commit", summary)
    with protocol_errors():
        record = committer.job(job.job_id)  # one GET
    context.add_output_metadata(lifecycle.table_metadata(record))
    return job


@op(name="validate_output", retry_policy=STEP_RETRIES, ins={"job": In(JobRef)}, out=Out(JobRef))
def validate_output_op(
    context: OpExecutionContext, job: JobRef, zero_rename: ZeroRenameResource
) -> JobRef:
    """The output check after the commit: the job's files against ``_SUCCESS``, recorded
    in the job record. A problem fails the op at once, without retries; the job stays
    committed."""
    check = lifecycle.validate_output(zero_rename.committer(job.destination), job.job_id)
    context.log.info(
        f"validate_output of job {job.job_id} at {job.destination}: {check.describe()}"
    )
    context.add_output_metadata(lifecycle.check_metadata(check))
    return job


@op(retry_policy=STEP_RETRIES, ins={"job": In(JobRef)})
def cleanup_job(
    context: OpExecutionContext, job: JobRef, zero_rename: ZeroRenameResource
) -> Output[None]:
    """Aborts stray uploads of the decided job and removes its temporary objects."""
    with protocol_errors():
        summary = zero_rename.committer(job.destination).cleanup_job(job.job_id)
    return Output(None, metadata=lifecycle.metadata(summary))


@failure_hook(required_resource_keys={"zero_rename"})
def abort_on_failure(context: HookContext) -> None:
    """A step failed for good: abort the run's job, unless it passed its point of no return."""
    run = context.instance.get_run_by_id(context.run_id)
    if run is None:
        return
    run_config: Mapping[str, Any] = run.run_config  # JSON-like, as SETUP_OP was given it
    setup_config = run_config.get("ops", {}).get(SETUP_OP, {}).get("config", {})
    destination = setup_config.get("destination")
    if not destination:
        context.log.warning("no destination in the run's config; nothing to abort")
        return
    committer = context.resources.zero_rename.committer(destination)
    lifecycle.abort_after_failure(
        committer,
        run.job_name,
        run.root_run_id or run.run_id,
        reason=f"step {context.op.name} failed (Dagster job {run.job_name}, run "
        f"{run.run_id}): {error_text(context.op_exception)}",
    )


def commit_lifecycle_job(
    name: str,
    destination: str,
    stage: OpDefinition,
    options: dict[str, Any] | None = None,
    partitions_def: PartitionsDefinition | None = None,
    description: str | None = None,
    validate_output: bool = False,
) -> JobDefinition:
    """A job of one op per protocol step, for a destination; ``stage`` from :func:`stage_op`.
    ``validate_output``: the output check after the commit, beside the cleanup."""
    nodes = [setup_job, stage, validate, resolve_conflicts, commit, cleanup_job]
    dependencies = _chain(stage.name)
    if validate_output:
        nodes.append(validate_output_op)
        dependencies[validate_output_op.name] = {"job": DependencyDefinition("commit")}
    graph = GraphDefinition(
        name=name,
        node_defs=nodes,
        dependencies=dependencies,
        description=description,
    )
    return graph.to_job(
        hooks={abort_on_failure},
        partitions_def=partitions_def,
        config={
            "ops": {
                SETUP_OP: {"config": {"destination": destination, "options": dict(options or {})}}
            }
        },
    )


def _chain(stage_name: str) -> dict[str, dict[str, Any]]:
    order = [SETUP_OP, stage_name, "validate", "resolve_conflicts", "commit", "cleanup_job"]
    return {after: {"job": DependencyDefinition(before)} for before, after in pairwise(order)}


@op(retry_policy=STEP_RETRIES)
def abort_job(
    context: OpExecutionContext, config: JobConfig, zero_rename: ZeroRenameResource
) -> JobRef:
    """Aborts the job: refuses, with the job's state, one past its point of no return,
    unless ``roll_back`` (then one whose commit cannot finish is rolled back)."""
    with protocol_errors():
        summary = zero_rename.committer(config.destination).abort_job(
            config.job_id,
            reason=config.reason or f"aborted by Dagster run {context.run_id}",
            roll_back=config.roll_back,
            force=config.force,
        )
    context.log.info(
        f"job {summary.job_id} is aborted: nothing of it was published, "
        f"{summary.aborted_uploads} pending upload(s) were aborted"
    )
    context.add_output_metadata(lifecycle.metadata(summary))
    return JobRef(config.destination, config.job_id)


@op(name="cleanup_aborted_job", retry_policy=STEP_RETRIES, ins={"job": In(JobRef)})
def cleanup_aborted_job(
    context: OpExecutionContext, job: JobRef, zero_rename: ZeroRenameResource
) -> None:
    with protocol_errors():
        try:
            summary = zero_rename.committer(job.destination).cleanup_job(job.job_id)
        except JobNotFoundError:
            context.log.warning(f"no job {job.job_id} at {job.destination}; nothing to clean up")
            return
    context.add_output_metadata(lifecycle.metadata(summary))


@job(description="Aborts a zero-rename job, named in the run config, and cleans it up")
def manual_abort_job() -> None:
    cleanup_aborted_job(abort_job())
