"""One step runner for every front end: the policies the steps share, decided here once.

An orchestrator (an Airflow DAG run, a Dagster run) or an engine (Spark's
driver) runs the protocol's steps; what each does around a step is the same
and lives in :class:`StepRunner`:

- **one job per run**: the job id is a UUID5 of the pipeline's name, the run's
  id and the destination, so a retry of the setup step, or of the whole run,
  finds the job it set up before. Only an aborted job makes room for another:
  a run whose job was aborted sets up the next "generation" of the same name;
- **skip a decided job**: a step before the commit (validate, resolve
  conflicts) that finds its job past the point of no return reports the job as
  it is, instead of failing on a plan the commit has taken;
- **the stage once**: the engine's write runs unless the job's stage manifest
  is saved (a retry after the write) or the job went on; after the write the
  manifest is required;
- **a lost stage fenced off**: a write whose submitter died and which nothing
  can reach is fenced off by aborting its job, and the stage writes the run's
  next job, which the steps handed the first one follow;
- **retry past the point of no return**: a commit that fails after it is run
  again (an engine has no orchestrator's retries); before it, the error stands;
- **abort after a failure**: a step that failed for good aborts the run's job,
  unless its commit passed the point of no return.

Front ends only translate outcomes: :func:`failures_as` turns an error that no
retry can fix (:func:`zero_rename.errors.is_final`) into the front end's "fail
now", and every step's summary is published under :data:`SUMMARY_KEY`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord, JobSummary, TaskManifest
from zero_rename.core.data.options import JobOptions
from zero_rename.core.protocol import states
from zero_rename.core.protocol.validate import Expected
from zero_rename.errors import (
    AbortRefusedError,
    CommitStateUnknownError,
    ConfigError,
    JobNotFoundError,
    OutputCheckError,
    StageError,
    ValidationError,
    ZeroRenameError,
    is_final,
)

log = logging.getLogger(__name__)

# Where every front end publishes a step's summary (Airflow's XCom key).
SUMMARY_KEY = "summary"
# Fixed: changing it would give every existing run a new job id.
NAMESPACE = uuid.UUID("6f1c3d5e-8a0b-5c2d-9e4f-7a6b5c4d3e2f")
# Aborted generations one run may step over before setup refuses.
MAX_GENERATIONS = 100
# Enough problems to act on without flooding a step's log.
MAX_PROBLEMS = 20


def run_job_id(pipeline: str, run_id: str, destination: str, generation: int = 0) -> str:
    """The job id of a run's job at ``destination``."""
    name = f"{pipeline}\n{run_id}\n{destination.rstrip('/')}\n{generation}"
    return str(uuid.uuid5(NAMESPACE, name))


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


def failure_reason(failed: Sequence[str], where: str, record: JobRecord | None) -> str:
    """An abort's reason after steps failed for good: the steps that failed (those
    alone, not those that did not run because of them), where (the run), and each
    failed step's own error as the job's record keeps it (one line each)."""
    errors = {n: e for n, e in (record.failed_steps if record else {}).items() if e}
    named = ", ".join(failed) or ", ".join(errors) or "a step"
    text = f"step(s) {named} failed ({where})"
    if errors:
        text += ": " + "; ".join(f"{name}: {error}" for name, error in errors.items())
    return text


@contextmanager
def failures_as(convert: Callable[[str], Exception]) -> Iterator[None]:
    """Raise errors no retry can fix as ``convert(description)``, the front end's
    "fail now, do not retry"; every other error propagates for its retries."""
    try:
        yield
    except Exception as exc:
        if is_final(exc):
            raise convert(describe(exc)) from exc
        raise


class StepRunner:
    """The steps of one destination's jobs, with the policies every front end shares.

    ``pipeline`` and ``run_id`` name the orchestrator's run, for :meth:`setup`,
    :meth:`current_job` and :meth:`abort_after_failure`.
    """

    def __init__(self, committer: Committer, pipeline: str = "", run_id: str = "") -> None:
        self.committer = committer
        self.pipeline = pipeline
        self.run_id = run_id

    # -- one job per run ---------------------------------------------------------------
    def _job_id(self, generation: int) -> str:
        return run_job_id(self.pipeline, self.run_id, self.committer.dest.url, generation)

    def setup(
        self,
        options: JobOptions | Mapping[str, Any] | None,
        origin: Mapping[str, str] | None = None,
    ) -> JobRecord:
        """Set up, or find again, this run's job: the first generation not aborted.
        A job in setup is set up again (idempotent for the same options); one past
        it is returned as it is, for the later steps to finish or report.

        Raises:
            ConfigError: the job exists with other options, or too many generations
                were aborted.
        """
        for generation in range(MAX_GENERATIONS):
            job_id = self._job_id(generation)
            try:
                existing = self.committer.job(job_id)
            except JobNotFoundError:
                return self.committer.setup_job(options, job_id=job_id, origin=origin)
            if existing.state == states.ABORTED:
                log.info("job %s of this run was aborted; trying the next generation", job_id)
                continue
            if existing.state == states.SETUP:
                return self.committer.setup_job(options, job_id=job_id, origin=origin)
            log.info("job %s of this run is already %s", job_id, existing.state)
            return existing
        raise ConfigError(
            f"{MAX_GENERATIONS} jobs of run {self.run_id} were aborted; trigger a new run"
        )

    def current_job(self) -> JobRecord | None:
        """The run's job that is not aborted, if the run set one up."""
        for generation in range(MAX_GENERATIONS):
            try:
                record = self.committer.job(self._job_id(generation))
            except JobNotFoundError:
                return None
            if record.state != states.ABORTED:
                return record
        return None

    def generation(self, job_id: str) -> int | None:
        """Which of this run's jobs ``job_id`` is; None: not one of this run's."""
        return next(
            (g for g in range(MAX_GENERATIONS) if self._job_id(g) == job_id),
            None,
        )

    def successor(self, job_id: str) -> str:
        """The job a step of this run works on when handed ``job_id`` (a setup step's
        answer): ``job_id``, unless it is one of this run's jobs that was aborted and
        a later one was set up (:meth:`restage`, a cleared run); then the newest of
        them. One GET for a job of this run, none for another."""
        generation = self.generation(job_id)
        if generation is None or self.committer.job(job_id).state != states.ABORTED:
            return job_id
        newest = job_id
        for later in range(generation + 1, MAX_GENERATIONS):
            try:
                self.committer.job(self._job_id(later))
            except JobNotFoundError:
                break
            newest = self._job_id(later)
        if newest != job_id:
            log.info("job %s of this run was aborted; the step goes on with job %s", job_id, newest)
        return newest

    # -- skip a decided job ------------------------------------------------------------
    def before_commit(self, job_id: str, step: Callable[[str], JobSummary]) -> JobSummary:
        """Run a step before the commit (validate, resolve conflicts), or report the
        job if its commit went ahead: a retry after that has nothing left to check."""
        record = self.committer.job(job_id)
        summary = self.decided_summary(record)
        if summary is None:
            return step(job_id)
        log.info("job %s is already %s; its step before the commit ran", job_id, record.state)
        return summary

    def decided_summary(self, record: JobRecord) -> JobSummary | None:
        """The summary a step before the commit reports when its job is past it: the
        committed job's, or, while its commit is under way (a retry after a killed
        commit), what its stage holds, not a summary of nothing. None: not past it."""
        if record.state not in states.PUBLISHING:
            return None
        return (
            record.summary
            or self.committer.stage_summary(record.job_id, record.state)
            or JobSummary(
                job_id=record.job_id, destination=self.committer.dest.url, state=record.state
            )
        )

    # -- the stage once ----------------------------------------------------------------
    def stage_done(self, job_id: str) -> JobSummary | None:
        """What the stage reports instead of running the engine's write again: the
        job's stage manifest is saved (a retry after the write), or the job is past
        setup (a cleared or re-executed run whose job went on). None: the write runs."""
        record = self.committer.job(job_id)
        staged = self.committer.stage_summary(job_id, record.state)
        if record.state == states.SETUP and staged is None:
            return None
        log.info(
            "job %s is %s%s; its stage is not run again",
            job_id,
            record.state,
            " and its stage manifest is saved" if staged else "",
        )
        return staged or JobSummary(
            job_id=job_id, destination=self.committer.dest.url, state=record.state
        )

    def stage(self, job_id: str, write: Callable[[], object]) -> JobSummary:
        """Run the engine's write unless :meth:`stage_done`; then require its manifest.

        Raises:
            StageError: the write finished without saving the job's stage manifest.
        """
        done = self.stage_done(job_id)
        if done is not None:
            return done
        started = time.monotonic()
        try:
            write()
            staged = self.committer.stage_summary(job_id)
            if staged is None:
                raise StageError(
                    f"the write finished but saved no stage manifest for job {job_id}; does it "
                    "write through the zero-rename format with the job's id (option job_id)?"
                )
        except Exception as exc:
            # The engine's error, in the record: where an abort's reason finds it.
            self.committer.record_failure(job_id, "stage", exc)
            raise
        return staged.model_copy(update={"seconds": round(time.monotonic() - started, 3)})

    def restage(self, job_id: str, reason: str) -> JobRecord:
        """Fence off an engine's write of ``job_id`` that may still be running where
        nobody can reach it (its submitter died), and set up this run's next job
        for the stage to write again; returns the new job's record.

        The guard is the job's state: the abort is one compare-and-swap
        (:meth:`Committer.abort_job`), and an engine's task attempt counts only
        while its job is ``setup`` (the fence read after its task commit), so from
        the abort on every attempt of the lost write aborts its own uploads and
        fails; the uploads it made before are aborted here; a stage manifest its
        driver still saves belongs to an aborted job, which no commit takes (seal
        refuses it). Sealing would close the job to the new write as well, and a
        partition claim only orders job commits: neither fences a stage.

        Raises:
            ConfigError: ``job_id`` is not one of this run's jobs (its id was given,
                not derived from the run): it is aborted, and a new run must write.
            AbortRefusedError: the job's commit passed its point of no return.
        """
        record = self.committer.job(job_id)
        generation = self.generation(job_id)
        successor = None if generation is None else self._job_id(generation + 1)
        self.committer.abort_job(
            job_id,
            reason=f"{reason}; its stage runs again"
            + (f" as job {successor}" if successor else " in a new run"),
        )
        self.committer.cleanup_job(job_id)
        if successor is None:
            raise ConfigError(
                f"job {job_id} was aborted to fence off a write that may still be running; "
                "its id was given rather than derived from the run, so run the job again "
                "under a new id"
            )
        log.warning(
            "job %s is aborted (%s); the stage writes job %s instead", job_id, reason, successor
        )
        return self.setup(record.options, record.origin)

    # -- retry past the point of no return --------------------------------------------
    def commit(
        self,
        job_id: str,
        manifests: Sequence[TaskManifest] | None = None,
        expected: Expected = None,
        attempts: int = 1,
        pause: float = 5.0,
    ) -> JobSummary:
        """Job commit; a failure after its point of no return is retried, up to
        ``attempts`` in all, ``pause`` seconds times the attempt apart.

        Raises:
            CommitStateUnknownError: still unfinished after ``attempts``; the job is
                committing, and a later commit finishes it.
        """
        for attempt in range(1, attempts + 1):
            try:
                return self.committer.commit_job(job_id, manifests, expected)
            except ZeroRenameError as exc:
                if is_final(exc) or not self._past_no_return(job_id):
                    raise
                if attempt == attempts:
                    raise CommitStateUnknownError(
                        f"job {job_id} at {self.committer.dest.url} passed its point of no "
                        f"return but did not finish ({exc}). Its output is safe: run the job "
                        f"commit again for job id {job_id} to finish it"
                    ) from exc
                log.warning(
                    "job %s: commit attempt %d failed after the point of no return (%s); retrying",
                    job_id,
                    attempt,
                    exc,
                )
                time.sleep(pause * attempt)
        raise AssertionError("unreachable")

    def _past_no_return(self, job_id: str) -> bool:
        try:
            return self.committer.job(job_id).state in states.PUBLISHING
        except ZeroRenameError:
            log.warning("job %s: cannot read the job record", job_id, exc_info=True)
            return True  # unknown: keep the output rather than guess it is safe to abort

    # -- abort after a failure ---------------------------------------------------------
    def abort_after_failure(self, reason: str) -> JobSummary | None:
        """Abort the run's job after a step failed for good, and clean it up. A job
        committed (a later step failed: cleanup, the output check) or past its point
        of no return is left alone, with an error in the log: a retry of the commit
        finishes it."""
        record = self.current_job()
        if record is None:
            log.warning(
                "no job of this run is left to abort at %s (none was set up, or it is "
                "aborted already)",
                self.committer.dest.url,
            )
            return None
        return self.abort_job(record.job_id, reason, record)

    def abort_job(
        self, job_id: str, reason: str, record: JobRecord | None = None, cleanup: bool = True
    ) -> JobSummary | None:
        """Abort ``job_id`` after a step (or an engine's stage) failed for good, then
        clean it up unless ``cleanup`` is False. A committed job, or one past its
        point of no return, is left alone, with a line in the log: a retry of the
        commit finishes it. ``record``: the job's record as just read (None: the
        abort reads it, and a refused one is read again to say why)."""
        if record is not None and record.state == states.COMMITTED:
            log.info("job %s is committed; a step after its commit cannot undo it", job_id)
            return None
        try:
            summary = self.committer.abort_job(job_id, reason=reason)
        except AbortRefusedError as exc:
            if record is None and self._committed(job_id):
                log.info("job %s is committed; a step after its commit cannot undo it", job_id)
                return None
            log.error("job %s was not aborted: %s; run it again to finish its commit", job_id, exc)
            return None
        if cleanup:
            self.committer.cleanup_job(job_id)
        log.info(
            "job %s is aborted: nothing of it was published, %d pending upload(s) were aborted",
            job_id,
            summary.aborted_uploads,
        )
        return summary

    def _committed(self, job_id: str) -> bool:
        try:
            return self.committer.job(job_id).state == states.COMMITTED
        except ZeroRenameError:
            return False
