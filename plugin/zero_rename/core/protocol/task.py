"""Task attempts: write files, then task commit or task abort.

Task commit turns the attempt's pending uploads into one task manifest. Where
no engine decides which attempt of a task commits, the manifest is published
with If-None-Match, so the first attempt wins and a loser aborts its own
uploads. Either way the attempt then reads the job record (the fence):

- ``setup``: no job commit has sealed the job yet, so any later one lists this
  manifest (it seals before it lists): the task is committed.
- ``committing`` or ``committed`` naming this attempt: committed.
- ``sealed``, for a published manifest: a job commit is planning, and may or
  may not have listed it. The attempt waits for the decision and reads it.
- anything else (decided without it, or sealed for an engine's attempt, whose
  message cannot reach a commit that has already begun): the attempt aborts
  its uploads and fails with JobDecidedError, so a late or zombie attempt adds
  nothing to a decided job.

Outcomes: success and JobDecidedError / TaskCommitConflict are final.
TaskCommitUnknownError (a lost answer that could not be read back, or a job
left sealed past the wait) leaves the uploads for the job commit or abort.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zero_rename.core.data.layout import (
    Destination,
    check_key_length,
    check_task_id,
    data_file_name,
    partition_dir,
)
from zero_rename.core.data.model import JobRecord, TaskManifest, dump, load
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import JobContext, JobRecords
from zero_rename.core.protocol import states
from zero_rename.core.protocol.fence import shared_read
from zero_rename.core.protocol.planning import attempt_committed
from zero_rename.core.protocol.writers import (
    BackgroundUploads,
    MagicOutput,
    OutputFile,
    StagingOutput,
)
from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.client import S3Store
from zero_rename.core.s3.stats import RequestStats
from zero_rename.core.s3.writes import create_once
from zero_rename.errors import (
    ConfigError,
    JobDecidedError,
    NoSuchUpload,
    StoreError,
    TaskCommitConflict,
    TaskCommitUnknownError,
    ZeroRenameError,
)

log = logging.getLogger(__name__)

# How long an attempt that published its manifest waits for a sealed job's
# decision; a job commit normally decides within seconds of sealing.
FENCE_WAIT_SECONDS = 300.0


class TaskAttempt:
    """One attempt of one task of a job; writes files that stay invisible."""

    def __init__(
        self,
        store: S3Store,
        dest: Destination,
        job: JobRecord,
        task_id: str,
        attempt: int = 0,
        spool_dir: str | None = None,
        upload_threads: int = 0,
    ) -> None:
        """``upload_threads``: with 0, every request is made by the thread that
        writes; above 0, files are uploaded on that many threads while the task
        goes on writing (see :class:`BackgroundUploads`), at most about one part
        per thread of memory more."""
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise ConfigError(f"task attempt number must be an integer >= 0, got {attempt!r}")
        if (
            isinstance(upload_threads, bool)
            or not isinstance(upload_threads, int)
            or upload_threads < 0
        ):
            raise ConfigError(f"upload_threads must be an integer >= 0, got {upload_threads!r}")
        self.dest = dest
        self.job = job
        self.task_id = check_task_id(task_id)
        self.attempt = attempt
        self.attempt_id = f"attempt_{job.job_id}_{task_id}_{attempt}"
        self.stats = RequestStats()
        self.store = store.scoped(self.stats)
        self._files: list[OutputFile] = []
        self._spool: Path | None = None
        # The files' Arrow schema (IPC, base64), for a table format: set by the writer.
        self.table_schema = ""
        self._spool_root = spool_dir
        self._state = states.WRITING
        self._uploads = (
            BackgroundUploads(upload_threads, upload_threads * job.options.part_size)
            if upload_threads
            else None
        )

    @property
    def options(self) -> JobOptions:
        return self.job.options

    def open(
        self, partition: dict[str, str | None] | None = None, extension: str = ".parquet"
    ) -> OutputFile:
        """A new output file in ``partition`` (values of the partition columns)."""
        states.OPEN_FILES.applies(self.attempt_id, self._state)
        values = dict(partition or {})
        relative = partition_dir(self.options.partition_columns, values)
        name = data_file_name(self.task_id, self.job.job_id, len(self._files), extension)
        key = check_key_length(self.dest.dir + relative + name)
        if self.options.committer == "magic":
            out: OutputFile = MagicOutput(
                self.store,
                self.dest.bucket,
                key,
                values,
                self.options.part_size,
                self._part_failed,
                self._uploads,
            )
        else:
            spool = self._spool_dir() / f"{len(self._files):05d}{extension}"
            out = StagingOutput(
                self.dest.bucket,
                key,
                values,
                str(spool),
                self.options.part_size,
                self._part_failed,
                (self._uploads, self.store) if self._uploads else None,
            )
        self._files.append(out)
        return out

    def _spool_dir(self) -> Path:
        if self._spool is None:
            self._spool = Path(
                tempfile.mkdtemp(prefix=f"zr-{self.attempt_id}-", dir=self._spool_root)
            )
        return self._spool

    def commit(self, publish: bool = True) -> TaskManifest:
        """Task commit; returns the manifest (Spark's commit message).

        Args:
            publish: save the manifest for the job commit with first-attempt-wins.
                False where the engine picks the committing attempt itself.

        Raises:
            TaskCommitConflict: another attempt of this task committed first.
            JobDecidedError: the job was committed, aborted or sealed without this attempt.
            TaskCommitUnknownError: the outcome could not be established; the
                uploads are left for the job commit (which includes them if the
                manifest counts) or the job abort.
        """
        states.COMMIT_TASK.applies(self.attempt_id, self._state)
        try:
            for f in self._files:
                f.close()
            if self._uploads is not None:
                self._uploads.wait()
            self._upload_staged()
            manifest = self._manifest()
        except BaseException:
            self.abort()
            raise
        self._stop_uploads()
        if publish:
            self._publish_or_abort(manifest)
        try:
            self._check_fence(published=publish)
        except JobDecidedError:
            self.abort()
            if publish:
                self._withdraw(manifest)
            raise
        except BaseException as exc:
            if not publish:
                self.abort()
                raise
            # A published manifest may be in a job commit's plan already.
            self._unknown()
            if isinstance(exc, TaskCommitUnknownError):
                raise
            raise TaskCommitUnknownError(
                f"{self.attempt_id} published its manifest but could not read the job record "
                f"({exc}); the job commit includes it if it listed it"
            ) from exc
        self._state = states.COMMIT_TASK.target
        self._remove_spool()
        log.info(
            "task commit %s: %d file(s), %d bytes",
            self.attempt_id,
            len(manifest.uploads),
            manifest.bytes,
        )
        return manifest

    def _publish_or_abort(self, manifest: TaskManifest) -> None:
        """Publish; abort the uploads only where the manifest surely did not count."""
        try:
            self._publish(manifest)
        except TaskCommitUnknownError:
            self._unknown()
            raise
        except StoreError as exc:
            if exc.outcome_unknown:
                self._unknown()
                raise TaskCommitUnknownError(
                    f"{self.attempt_id}: the outcome of publishing its manifest is unknown ({exc})"
                ) from exc
            self.abort()
            raise
        except BaseException:
            self.abort()
            raise

    def _withdraw(self, manifest: TaskManifest) -> None:
        """Delete the manifest this attempt published to a job decided without it: the
        job's cleanup ran before it was published, so nothing else would remove it.
        The key is create-only and holds this attempt's manifest, so no other
        attempt's is deleted; best effort, as a cleanup of the job removes it too."""
        key = self.dest.job(self.job.job_id).task_manifest_key(self.task_id)
        try:
            self.store.delete_objects(self.dest.bucket, [key])
        except ZeroRenameError:
            log.warning("%s: could not delete its late manifest %s", self.attempt_id, key)

    def _unknown(self) -> None:
        self._move(states.LOSE_TASK_OUTCOME)
        self._remove_spool()
        log.warning(
            "%s: task commit outcome unknown; its uploads stay for the job commit or the job abort",
            self.attempt_id,
        )

    def _stop_uploads(self) -> None:
        if self._uploads is not None:
            self._uploads.stop()

    def _upload_staged(self) -> None:
        staged = [f for f in self._files if isinstance(f, StagingOutput) and not f.uploading]
        if not staged:
            return
        with ThreadPoolExecutor(min(self.options.threads, len(staged), 16)) as pool:
            for future in [pool.submit(f.upload, self.store) for f in staged]:
                future.result()

    def _manifest(self) -> TaskManifest:
        return TaskManifest(
            job_id=self.job.job_id,
            task_id=self.task_id,
            attempt=self.attempt,
            task_attempt_id=self.attempt_id,
            committer=self.options.mode_name,
            uploads=tuple(f.pending() for f in self._files),
            stats=self.stats.snapshot(),
            table_schema=self.table_schema,
        )

    def _publish(self, manifest: TaskManifest) -> None:
        key = self.dest.job(self.job.job_id).task_manifest_key(self.task_id)
        try:
            existing = create_once(self.store, self.dest.bucket, key, dump(manifest))
        except StoreError as exc:
            if not exc.outcome_unknown:
                raise
            raise TaskCommitUnknownError(
                f"{self.attempt_id}: its manifest may or may not have been published ({exc}); "
                "its uploads stay for the job commit or the job abort"
            ) from exc
        if existing is None:
            return
        winner = load(TaskManifest, existing, f"s3://{self.dest.bucket}/{key}")
        if winner.task_attempt_id == self.attempt_id:
            return
        raise TaskCommitConflict(
            f"task {self.task_id} was already committed by {winner.task_attempt_id}; "
            f"{self.attempt_id} aborted its uploads"
        )

    def _check_fence(self, published: bool) -> None:
        """Read the job record after task commit; see the module documentation. The
        first read is shared with the attempts of this process that committed
        just before it (:mod:`zero_rename.core.protocol.fence`)."""
        records = JobRecords(self.store, self.dest)
        committed_at = time.monotonic()
        deadline = committed_at + FENCE_WAIT_SECONDS
        round_number = 0
        fence = shared_read(
            id(self.store.client),
            self.dest.url,
            self.job.job_id,
            lambda: records.get(self.job.job_id),
        )
        record = fence.after(committed_at)
        while True:
            if record.state == states.SETUP or attempt_committed(
                JobContext(self.store, self.dest), record, self.attempt_id
            ):
                return
            if record.state != states.SEALED or not published:
                raise JobDecidedError(
                    f"job {record.job_id} is already {record.state}; task attempt "
                    f"{self.attempt_id} may not add output, its uploads were aborted"
                )
            if time.monotonic() > deadline:
                raise TaskCommitUnknownError(
                    f"job {record.job_id} stayed sealed for {FENCE_WAIT_SECONDS:.0f} s after "
                    f"{self.attempt_id} published its manifest: its job commit stopped before "
                    "deciding. A commit retry decides whether this task counts"
                )
            round_number = min(round_number + 1, 8)
            backoff(round_number, base=0.05, cap=2.0)
            record = records.get(self.job.job_id)

    def _part_failed(self, exc: StoreError, key: str, upload_id: str) -> None:
        """A part upload failed. If the upload vanished (a job abort or commit swept
        it) and the job is closed, say so. Some stores answer a part upload to an
        aborted upload with a 500 (moto, older Ceph), not NoSuchUpload: ask."""
        if not isinstance(exc, NoSuchUpload):
            if not exc.outcome_unknown:
                return
            try:
                self.store.list_parts(self.dest.bucket, key, upload_id)
                return
            except NoSuchUpload:
                pass
            except ZeroRenameError:
                return
        try:
            record = JobRecords(self.store, self.dest).get(self.job.job_id)
        except ZeroRenameError:
            return
        if record.closed:
            raise JobDecidedError(
                f"job {record.job_id} is {record.state} and swept the uploads of task attempt "
                f"{self.attempt_id}; this attempt may add nothing"
            ) from exc

    def abort(self) -> None:
        """Task abort: abort this attempt's uploads and remove its spool. Idempotent.

        After an unknown task commit outcome the uploads are left alone: the
        manifest may be in a job commit's plan.
        """
        aborts = states.ABORT_TASK.applies(self.attempt_id, self._state)
        # Before anything is aborted: an upload still being created would outlive it.
        self._stop_uploads()
        if not aborts:  # the task commit's outcome is unknown
            log.warning(
                "%s: its task commit outcome is unknown, so task abort leaves its "
                "uploads to the job commit or job abort",
                self.attempt_id,
            )
            self._remove_spool()
            return
        errors = []
        for f in self._files:
            try:
                f.abort(self.store)
            except Exception as exc:  # keep aborting the rest
                log.warning("could not abort upload of %s", f.key, exc_info=True)
                errors.append(exc)
        self._move(states.ABORT_TASK)
        self._remove_spool()
        if errors:
            log.warning(
                "%s: %d upload(s) could not be aborted; job abort or cleanup "
                "will find them by job id",
                self.attempt_id,
                len(errors),
            )

    def _move(self, event: states.Event[states.AttemptState]) -> None:
        if event.applies(self.attempt_id, self._state):
            self._state = event.target

    def _remove_spool(self) -> None:
        if self._spool is not None:
            shutil.rmtree(self._spool, ignore_errors=True)
            self._spool = None
