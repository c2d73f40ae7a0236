"""One job per orchestrator run and destination, whatever the orchestrator retries.

An orchestrator (an Airflow DAG run, a Dagster run) names its run; the job id
is a UUID5 of the pipeline's name, the run's id and the destination, so a
retry of the setup step, or of the whole run, finds the job it set up before
instead of creating a second one. Only an aborted job makes room for another:
a run whose job was aborted and that is run again sets up the next
"generation" of the same name, which is again the same for every retry.

Both front ends (:mod:`zero_rename.airflow`, :mod:`zero_rename.dagster`) take
their run's job from here, and classify errors with :data:`FINAL_ERRORS`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from zero_rename.core.committer import Committer
from zero_rename.core.model import JobRecord, JobSummary
from zero_rename.errors import (
    AbortRefusedError,
    ConfigError,
    ConflictError,
    DestinationError,
    JobDecidedError,
    JobNotFoundError,
    ManifestError,
    OutputCheckError,
    PartitionClaimConflict,
    ValidationError,
)

log = logging.getLogger(__name__)

# Fixed: changing it would give every existing run a new job id.
NAMESPACE = uuid.UUID("6f1c3d5e-8a0b-5c2d-9e4f-7a6b5c4d3e2f")
# Aborted generations one run may step over before setup refuses.
MAX_GENERATIONS = 100
# Errors that stay the same however often a step is retried: a refusal (abort
# after the point of no return, a job decided elsewhere), bad options, invalid
# manifests, a conflict, committed files that fail the output check. S3
# errors, an unknown commit outcome and another job's claim on a partition (it
# goes away when that job finishes) are not.
FINAL_ERRORS: tuple[type[Exception], ...] = (
    AbortRefusedError,
    ConfigError,
    ConflictError,
    DestinationError,
    JobDecidedError,
    JobNotFoundError,
    ManifestError,
    OutputCheckError,
    ValidationError,
)
# Enough problems to act on without flooding a step's log.
MAX_PROBLEMS = 20


def is_final(exc: BaseException) -> bool:
    """Whether no retry of the step can change the outcome."""
    return isinstance(exc, FINAL_ERRORS) and not isinstance(exc, PartitionClaimConflict)


def describe(exc: BaseException) -> str:
    """The error for a step's failure message, with a validation's (or an output
    check's) problems listed."""
    text = f"{type(exc).__name__}: {exc}"
    problems = getattr(exc, "problems", None)
    if isinstance(exc, (ValidationError, OutputCheckError)) and problems:
        shown = problems[:MAX_PROBLEMS]
        more = len(problems) - len(shown)
        text += "\n  - " + "\n  - ".join(shown) + (f"\n  ... and {more} more" if more else "")
    return text


@contextmanager
def final_errors_as(convert: Callable[[str], Exception]) -> Iterator[None]:
    """Raise errors no retry can fix as ``convert(description)``, the orchestrator's
    "fail now, do not retry"; every other error propagates for its retries."""
    try:
        yield
    except Exception as exc:
        if is_final(exc):
            raise convert(describe(exc)) from exc
        raise


def run_job_id(pipeline: str, run_id: str, destination: str, generation: int = 0) -> str:
    """The job id of a run's job at ``destination``."""
    name = f"{pipeline}\n{run_id}\n{destination.rstrip('/')}\n{generation}"
    return str(uuid.uuid5(NAMESPACE, name))


def setup_run_job(
    committer: Committer,
    pipeline: str,
    run_id: str,
    options: Mapping[str, Any] | None,
    origin: Mapping[str, str] | None = None,
) -> JobRecord:
    """Set up, or find again, this run's job: the first generation not aborted.

    A job in setup is set up again (idempotent for the same options); a job
    committing or committed is returned as it is, for the commit step to finish
    or report.

    Raises:
        ConfigError: the job exists with other options, or too many generations were aborted.
    """
    for generation in range(MAX_GENERATIONS):
        job_id = run_job_id(pipeline, run_id, committer.dest.url, generation)
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


def current_run_job(committer: Committer, pipeline: str, run_id: str) -> JobRecord | None:
    """The run's job that is not aborted, if the run set one up."""
    for generation in range(MAX_GENERATIONS):
        try:
            record = committer.job(run_job_id(pipeline, run_id, committer.dest.url, generation))
        except JobNotFoundError:
            return None
        if record.state != "aborted":
            return record
    return None


def decided_summary(committer: Committer, record: JobRecord) -> JobSummary | None:
    """The summary a pre-commit step reports when it finds its job already past it:
    the committed job's, or, while its commit is under way (a retry after a killed
    commit), what its stage holds, not a summary of nothing."""
    if record.state not in ("committing", "committed"):
        return None
    return (
        record.summary
        or committer.stage_summary(record.job_id, record.state)
        or JobSummary(job_id=record.job_id, destination=committer.dest.url, state=record.state)
    )


def stage_done(committer: Committer, job_id: str) -> JobSummary | None:
    """What a stage step reports instead of running the engine's write again: the
    job's stage manifest is saved (a retry after the write), or the job is past
    setup (a cleared or re-executed run whose job went on). None: the write runs."""
    record = committer.job(job_id)
    staged = committer.stage_summary(job_id, record.state)
    if record.state == "setup" and staged is None:
        return None
    log.info(
        "job %s is %s%s; its stage is not run again",
        job_id,
        record.state,
        " and its stage manifest is saved" if staged else "",
    )
    return staged or JobSummary(job_id=job_id, destination=committer.dest.url, state=record.state)
