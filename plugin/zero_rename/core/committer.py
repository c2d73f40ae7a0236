"""The protocol's steps on one destination, for any Python worker.

committer = Committer("s3://bucket/table", StoreConfig(endpoint_url=...))
job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
attempt = committer.task_attempt(job, "00000")
with attempt.open({"dt": "2024-01-01"}) as f: f.write(data)
attempt.commit()
committer.commit_job(job.job_id)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from zero_rename.core.data import manifests
from zero_rename.core.data.layout import Destination
from zero_rename.core.data.model import (
    CommittedFile,
    JobRecord,
    JobSummary,
    OutputCheck,
    StepTiming,
    SuccessData,
    TaskManifest,
    load,
    utcnow,
)
from zero_rename.core.data.options import JobOptions, parse_options
from zero_rename.core.data.records import (
    JobContext,
    StrayRecord,
    step_failed,
    step_finished,
    step_started,
)
from zero_rename.core.protocol import states
from zero_rename.core.protocol.jobs import setup_job, visible_objects
from zero_rename.core.protocol.states import JobState
from zero_rename.core.protocol.task import TaskAttempt
from zero_rename.core.protocol.validate import Expected
from zero_rename.core.s3.client import (
    ObjectInfo,
    S3Store,
    StoreConfig,
    UploadInfo,
    declared_profile,
)
from zero_rename.core.s3.profiles import AUTO, check_profile_name
from zero_rename.core.s3.progress import Advance, Steps, ignore, no_steps
from zero_rename.core.s3.redact import error_line
from zero_rename.core.tables.registry import open_format
from zero_rename.errors import (
    AbortRefusedError,
    ConfigError,
    JobDecidedError,
    JobNotFoundError,
    ManifestError,
    ZeroRenameError,
)

# The commit's, the abort's and the views' modules are imported by the methods that
# run them: Spark runs job setup and each task in a fresh Python worker, which
# loads this module and would otherwise load them too (about 25 ms of CPU a worker,
# docs/benchmarks.md).
if TYPE_CHECKING:
    from zero_rename.core.protocol.commit import Progress
    from zero_rename.core.protocol.rollback import CommitOutlook
    from zero_rename.core.views.history import History
    from zero_rename.core.views.output_check import Problem
    from zero_rename.core.views.partitions import PartitionView
    from zero_rename.core.views.pending import PendingUploads
    from zero_rename.core.views.snapshot import TableSnapshot

log = logging.getLogger(__name__)


class Committer:
    """Job setup, task attempts, validation, conflict resolution, job commit, abort, cleanup."""

    def __init__(
        self,
        destination: str | Destination,
        config: StoreConfig | None = None,
        store: S3Store | None = None,
        profile: str | None = None,
    ) -> None:
        """``profile``: the store's family, or ``auto`` to probe it at job setup;
        default: ``config.profile`` (``auto``)."""
        self.dest = (
            destination if isinstance(destination, Destination) else Destination.parse(destination)
        )
        self.profile = check_profile_name(profile or (config.profile if config else AUTO))
        store = store or S3Store.connect(config or StoreConfig())
        # A declared family holds for every step, a store made elsewhere's too (an
        # Airflow connection's client); a job's record still wins for its job.
        self.store = store if store.profile else store.with_profile(declared_profile(self.profile))
        self.ctx = JobContext(self.store, self.dest)
        self.records = self.ctx.records

    def _job_store(self) -> S3Store:
        """A view of the connection pool counting one step's requests."""
        return self.store.scoped()

    def setup_job(
        self,
        options: JobOptions | Mapping[str, Any] | None = None,
        job_id: str | None = None,
        expected_tasks: int | None = None,
        origin: Mapping[str, str] | None = None,
        table_schema: str = "",
    ) -> JobRecord:
        """Job setup. ``table_schema``: the files' Arrow schema (IPC, base64), for a
        ``table_format`` to check an existing table against before anything is
        written (the Spark writer gives its DataFrame's)."""
        opts = options if isinstance(options, JobOptions) else parse_options(options)
        return setup_job(
            JobContext(self._job_store(), self.dest),
            opts,
            job_id,
            expected_tasks,
            self.profile,
            origin,
            table_schema,
        )

    def check_table(self, options: JobOptions, table_schema: str) -> None:
        """What job setup checks of a ``table_format``, again: its catalog (or log)
        is reachable and an existing table fits ``table_schema`` and the partition
        columns. For a writer whose job an orchestrator set up without the schema.

        Raises:
            ConfigError: the table does not fit, saying how.
            DestinationError: the catalog or the table cannot be reached.
        """
        table = open_format(self.ctx, options)
        if table is not None:
            table.check(table_schema, options.partition_columns)

    def expire_table(self, options: JobOptions, older_than: timedelta) -> tuple[str, int]:
        """Expire what the retention of the table format ``options`` names allows:
        files that no version younger than ``older_than`` reads (the files
        ``replace`` jobs removed from the table) are deleted. Returns the table's
        name and how many files were deleted.

        Raises:
            ConfigError: ``options`` name no table format.
        """
        table = open_format(self.ctx, options)
        if table is None:
            raise ConfigError(f"no table format to expire at {self.dest.url}")
        from zero_rename.core.protocol import abort as abort_mod

        deleted = table.expire(older_than)
        # What the expiry's own metadata writes left pending (a lost answer's leftover).
        abort_mod.end_table_uploads(self.ctx, options.table_format)
        log.info("expired %s at %s: %d file(s) deleted", table.table, self.dest.url, deleted)
        return table.table, deleted

    def expirable(self, options: JobOptions, older_than: timedelta) -> tuple[str, list[str]]:
        """What :meth:`expire_table` would delete now, changing nothing (a dry run):
        the table's name and the files (relative to the destination).

        Raises:
            ConfigError: ``options`` name no table format.
        """
        table = open_format(self.ctx, options)
        if table is None:
            raise ConfigError(f"no table format to expire at {self.dest.url}")
        return table.table, table.expirable(older_than)

    def job(self, job_id: str) -> JobRecord:
        return self.records.get(job_id)

    def resolve_job(self, ref: str) -> str:
        """The job id ``ref`` names: a whole id, or its first characters (at least 8),
        as git takes a commit's; one listing for a prefix
        (:meth:`~zero_rename.core.data.records.JobRecords.resolve`)."""
        return self.records.resolve(ref)

    def jobs(self, advance: Advance = ignore) -> list[JobRecord]:
        """Every job record of the destination, oldest first; ``advance`` counts them."""
        return self.records.list(advance)

    def stray_records(self, advance: Advance = ignore) -> list[StrayRecord]:
        """Objects under the destination's ``jobs/`` that no reader takes for a job
        record (a ``job.json`` at a key naming no job, a record naming another job
        than its key's), with why; every record is read once. ``advance`` counts them."""
        return self.records.strays(advance)

    def history(
        self,
        limit: int | None = None,
        newest_first: bool = False,
        known: Mapping[str, JobRecord] | None = None,
        stuck_after: timedelta = states.STUCK_AFTER,
    ) -> History:
        """Every job (or the newest ``limit``) with what its commit did: state,
        when, commit seconds, files, rows, bytes, partitions, replaced files,
        mode, why it was aborted; from the job records alone. ``known``: records
        read before (those in a final state are not read again). Cost:
        :mod:`zero_rename.core.views.history`."""
        from zero_rename.core.views import history as history_mod

        return history_mod.job_history(
            JobContext(self._job_store(), self.dest), limit, newest_first, known, stuck_after
        )

    def partitions(
        self,
        known: Mapping[str, JobRecord] | None = None,
        stuck_after: timedelta = states.STUCK_AFTER,
        max_objects: int | None = None,
    ) -> PartitionView:
        """Every partition: its files, bytes and rows as readers read them, the job
        that last wrote it, and the running or stuck jobs whose claims hold it;
        none past ``max_objects`` objects listed (``complete`` is then False).
        Cost: :mod:`zero_rename.core.views.partitions`."""
        from zero_rename.core.views.partitions import partition_view

        return partition_view(
            JobContext(self._job_store(), self.dest), known, stuck_after, max_objects
        )

    def task_attempt(
        self,
        job: JobRecord | str,
        task_id: str,
        attempt: int = 0,
        spool_dir: str | None = None,
        upload_threads: int = 0,
    ) -> TaskAttempt:
        record = job if isinstance(job, JobRecord) else self.job(job)
        return TaskAttempt(
            self.store, self.dest, record, task_id, attempt, spool_dir, upload_threads
        )

    def save_stage_manifest(
        self,
        job_id: str,
        task_manifests: Sequence[TaskManifest],
        engine: str = "",
        started: datetime | None = None,
    ) -> str:
        """Save the engine's choice of task attempts, and record the stage as a step of
        the job (from ``started``, when the engine's write began, to now)."""
        where, digest = manifests.save_stage_manifest(self.ctx, job_id, task_manifests, engine)
        files = sum(len(m.uploads) for m in task_manifests)
        detail = f"{engine or 'engine'}: {len(task_manifests)} task(s), {files} file(s)"

        def stage_step(r: JobRecord) -> JobRecord | None:
            if r.decided:  # an abort won meanwhile: its record is final
                return None
            step = StepTiming(
                started=started or utcnow(), finished=utcnow(), status="succeeded", detail=detail
            )
            # The header's digest: a stage rewritten after this is refused by the commit.
            steps = {**r.steps, "stage": step}
            return r.model_copy(update={"steps": steps, "stage_digest": digest})

        try:
            self.records.update(job_id, stage_step)
        except ZeroRenameError:
            # The step is what the job's record shows, not part of the protocol:
            # the saved manifest is the stage's outcome, which must not fail for it.
            log.warning(
                "job %s: its stage manifest is saved, but the stage step could not be recorded",
                job_id,
                exc_info=True,
            )
        return where

    def load_manifests(self, job_id: str) -> list[TaskManifest]:
        return manifests.load_manifests(self.ctx, job_id)

    def committed_attempts(self, job_id: str) -> tuple[str, ...]:
        """The task attempts a job's decided plan commits (none before its commit)."""
        record = self.records.get(job_id)
        if record.committed_attempts or not record.plan_key:
            return record.committed_attempts
        from zero_rename.core.protocol import planning

        plan = planning.decided_plan(self.ctx, record)
        return tuple(planning.plan_attempts(self.ctx, plan))

    def table_schema(self, job: str | JobRecord) -> str:
        """The job's files' Arrow schema as its task manifests gave it (IPC, base64; read
        it with ``files_schema``), from the plan its commit named, else the plan its
        validation prepared: one GET. "" when there is no plan yet or the writer gave none."""
        record = job if isinstance(job, JobRecord) else self.records.get(job)
        key, digest = record.plan_key, record.plan_digest
        if not key:
            key, digest = record.prepared_plan, record.prepared_plan_digest
        if not key:
            return ""
        from zero_rename.core.protocol import planning

        return planning.load_plan(self.ctx, record.job_id, key, digest).table_schema

    def stage_summary(self, job_id: str, state: JobState = states.SETUP) -> JobSummary | None:
        """What the job's stage manifest holds (tasks, files, bytes, rows), from its
        header alone; None before an engine saved one."""
        counts = manifests.stage_counts(self.ctx, job_id)
        if counts is None:
            return None
        return JobSummary(
            job_id=job_id,
            destination=self.dest.url,
            state=state,
            tasks=counts.tasks,
            files=counts.files,
            bytes=counts.bytes,
            rows=counts.rows,
        )

    def validate(
        self,
        job_id: str,
        task_manifests: Sequence[TaskManifest] | None = None,
        expected: Expected = None,
    ) -> JobSummary:
        """Manifest validation as its own step; raises ValidationError. The plan it
        writes is what the job commit takes, unless the manifests change."""
        return self._step(
            job_id,
            "validate",
            lambda store, record: self._prepare(
                store, record, task_manifests, expected, resolve=False
            ),
        )

    def resolve_conflicts(
        self, job_id: str, task_manifests: Sequence[TaskManifest] | None = None
    ) -> JobSummary:
        """Conflict resolution as its own step: claims the job's partitions, fails
        early for ``fail``, records what ``replace`` replaces in the plan."""
        return self._step(
            job_id,
            "resolve_conflicts",
            lambda store, record: self._prepare(store, record, task_manifests, None, resolve=True),
        )

    def _prepare(
        self,
        store: S3Store,
        record: JobRecord,
        task_manifests: Sequence[TaskManifest] | None,
        expected: Expected,
        resolve: bool,
    ) -> JobSummary:
        from zero_rename.core.data.success import plan_summary
        from zero_rename.core.protocol import commit as commit_mod
        from zero_rename.core.protocol import planning

        source = commit_mod.manifest_source(JobContext(store, self.dest), record, task_manifests)
        plan, key = planning.prepared_for(
            JobContext(store, self.dest), record, source, expected, resolve
        )
        if key != record.prepared_plan:
            prepared = {"prepared_plan": key, "prepared_plan_digest": planning.plan_digest(plan)}
            self.records.update(record.job_id, lambda r: r.model_copy(update=prepared))
        return plan_summary(self.dest, plan, record.state)

    def _step(
        self, job_id: str, step: str, run: Callable[[S3Store, JobRecord], JobSummary]
    ) -> JobSummary:
        started = time.monotonic()
        record = self.records.get(job_id)
        store = self._job_store().with_profile(record.store_profile)
        if record.state not in states.UNDECIDED:
            raise JobDecidedError(f"job {job_id} is {record.state}; {step} runs before commit")
        self.records.update(job_id, lambda r: r.model_copy(update={"steps": step_started(r, step)}))
        try:
            summary: JobSummary = run(store, record)
        except Exception as exc:
            self.record_failure(job_id, step, exc)
            raise
        self.records.update(
            job_id, lambda r: r.model_copy(update={"steps": step_finished(r, step)})
        )
        return summary.model_copy(
            update={
                "requests": store.stats.total_requests,
                "seconds": round(time.monotonic() - started, 3),
            }
        )

    def commit_job(
        self,
        job_id: str,
        task_manifests: Sequence[TaskManifest] | None = None,
        expected: Expected = None,
        progress: Progress | None = None,
    ) -> JobSummary:
        """Job commit (:func:`zero_rename.core.protocol.commit.commit_job`); an error
        it raises is recorded as the commit step's (:meth:`record_failure`)."""
        from zero_rename.core.protocol import commit as commit_mod

        try:
            return commit_mod.commit_job(
                JobContext(self._job_store(), self.dest), job_id, task_manifests, expected, progress
            )
        except JobNotFoundError:
            raise
        except Exception as exc:
            self.record_failure(job_id, "commit", exc)
            raise

    def record_failure(self, job_id: str, step: str, error: BaseException | str) -> None:
        """Record that ``step`` of the job failed, with its error in one line, secrets
        masked (:func:`~zero_rename.core.s3.redact.error_line`), for ``jobs show``,
        the Commits page and the abort's reason. A retry that succeeds records the
        step again. A step a rollback ended keeps saying so.

        Best effort: called while the step's own error propagates, it never raises;
        a record it cannot write (no record, the store unreachable) is logged."""
        line = error_line(error)

        def failed(record: JobRecord) -> JobRecord | None:
            current = record.steps.get(step)
            if current is not None and current.status == "rolled_back":
                return None
            return record.model_copy(update={"steps": step_failed(record, step, line)})

        try:
            self.records.update(job_id, failed)
        except Exception as exc:  # noqa: BLE001 - the step's own error is the one to raise
            log.warning(
                "job %s: the %s step's failure (%s) could not be recorded: %s",
                job_id,
                step,
                line,
                error_line(exc),
            )

    def abort_job(
        self,
        job_id: str,
        reason: str = "",
        roll_back: bool = False,
        force: bool = False,
        steps: Steps = no_steps,
    ) -> JobSummary:
        """Job abort; ``reason`` is recorded in the job record's ``error``. With
        ``roll_back``, a job whose commit passed its point of no return but cannot
        finish is rolled back instead of refused (:meth:`rollback_job`, ``force``
        as there); without it that job's abort raises AbortRefusedError. ``steps``
        shows its progress (:mod:`zero_rename.core.s3.progress`)."""
        from zero_rename.core.protocol import abort as abort_mod

        try:
            return abort_mod.abort_job(
                JobContext(self._job_store(), self.dest), job_id, reason, steps
            )
        except AbortRefusedError:
            if not roll_back:
                raise
        return self.rollback_job(job_id, force=force, reason=reason, steps=steps)

    def rollback_job(
        self,
        job_id: str,
        force: bool = False,
        reason: str = "",
        steps: Steps = no_steps,
    ) -> JobSummary:
        """Return the destination to where it was before the job: for a job stuck in
        ``committing`` whose commit cannot finish, or one rolling back. Refuses
        (RollbackRefusedError) a job that can still finish, unless ``force``, and
        always one whose every file is complete. See :mod:`zero_rename.core.protocol.rollback`.
        ``steps`` shows the check of each planned file and the rollback."""
        from zero_rename.core.protocol import rollback

        return rollback.rollback_job(
            JobContext(self._job_store(), self.dest), job_id, force, reason, steps
        )

    def commit_outlook(self, job_id: str) -> CommitOutlook:
        """For a committing job: how many planned files are complete, pending or lost."""
        from zero_rename.core.protocol import rollback

        return rollback.commit_outlook(
            JobContext(self._job_store(), self.dest), self.records.get(job_id)
        )

    def cleanup_job(self, job_id: str) -> JobSummary:
        from zero_rename.core.protocol import abort as abort_mod

        return abort_mod.cleanup_job(JobContext(self._job_store(), self.dest), job_id)

    def pending_uploads(self, job_id: str | None = None) -> list[UploadInfo]:
        """Pending uploads under the destination, or those of one job."""
        from zero_rename.core.protocol import abort as abort_mod

        store = self.listing_store(job_id)
        if job_id is not None:
            return abort_mod.job_uploads(JobContext(store, self.dest), job_id)
        return list(store.list_uploads(self.dest.bucket, self.dest.dir))

    def uploads(self) -> PendingUploads:
        """The destination's pending uploads with their owners, for ``uploads list``
        and ``uploads abort`` (:mod:`zero_rename.core.views.pending`)."""
        from zero_rename.core.views.pending import PendingUploads

        return PendingUploads(JobContext(self.store, self.dest))

    def listing_store(self, job_id: str | None = None) -> S3Store:
        """The store, knowing how to list pending uploads here: from the job's record
        if there is one, else as the named profile the store was given; with
        neither, the listing confirms an empty answer without a prefix (see
        ``S3Store.list_uploads``)."""
        if job_id is not None:
            try:
                return self.store.with_profile(self.records.get(job_id).store_profile)
            except (JobNotFoundError, ManifestError):
                pass
        return self.store

    def published_task_manifests(self, job_id: str) -> int:
        """Task commits of the job so far (one listing); their manifests are removed
        once the job is decided."""
        return manifests.published_count(self.ctx, job_id)

    def visible_objects(self) -> list[ObjectInfo]:
        """The objects table readers see under the destination (one listing)."""
        return list(visible_objects(self.ctx))

    def holds_anything(self) -> bool:
        """Whether any object is under the destination: a file, or the protocol's own."""
        return (
            next(iter(self.store.list_objects(self.dest.bucket, self.dest.dir)), None) is not None
        )

    def snapshot(self, as_of_job: str | None = None) -> TableSnapshot:
        """The committed state readers read: every file of committed jobs, now or right
        after ``as_of_job`` committed (:mod:`zero_rename.core.views.snapshot`)."""
        from zero_rename.core.views.snapshot import table_snapshot

        return table_snapshot(self.ctx, as_of_job)

    def read_success(self) -> SuccessData | None:
        found = self.store.get_object(self.dest.bucket, self.dest.success_key)
        if found is None:
            return None
        return load(SuccessData, found[0], f"s3://{self.dest.bucket}/{self.dest.success_key}")

    def committed_files(self, success: SuccessData) -> Iterator[CommittedFile]:
        """Every file ``success`` (this destination's ``_SUCCESS``) stands for, streamed."""
        from zero_rename.core.data.success import committed_files

        return committed_files(self.ctx, success)

    def check_output(
        self,
        success: SuccessData,
        threads: int = 16,
        advance: Advance = ignore,
    ) -> list[Problem]:
        """The destination's files against ``success``: every file it lists there with
        its size and ETag, none carrying its job id missing from it; ``advance``
        counts the files listed (in the directories
        :func:`~zero_rename.core.views.output_check.scan_dirs` names)."""
        from zero_rename.core.views.output_check import check_output

        return check_output(self.ctx, success, threads, advance)

    def validate_output(self, job_id: str, threads: int | None = None) -> OutputCheck:
        """The output check as a step after the job's commit (``validate_output``):
        the job's files against ``_SUCCESS`` and its file list
        (:func:`~zero_rename.core.views.output_check.check_job`), with ``threads``
        partitions listed at once (default: the job's ``threads`` option). The
        result goes into the job record (``output_check``, and the step's timing)
        by compare-and-swap. Changes nothing else: the job stays committed.

        Raises:
            OutputCheckError: a problem was found; the record holds the result.
            ConfigError: the job is not committed.
        """
        from zero_rename.core.views.output_check import check_failed, check_job

        started = utcnow()
        record = self.records.get(job_id)
        if record.state != states.COMMITTED:
            raise ConfigError(
                f"job {job_id} is {record.state}: the output check runs once it is committed"
            )
        check = check_job(self.ctx, record, self.read_success(), threads or record.options.threads)
        step = StepTiming(
            started=started,
            finished=utcnow(),
            status="failed" if check.failed else "succeeded",
            detail=check.describe()[:500],
        )
        self.records.update(
            job_id,
            lambda r: r.model_copy(
                update={"output_check": check, "steps": {**r.steps, "validate_output": step}}
            ),
        )
        log.info("output check of job %s at %s: %s", job_id, self.dest.url, check.describe())
        if check.failed:
            raise check_failed(self.dest, job_id, check)
        return check
