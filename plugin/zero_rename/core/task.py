"""Task attempts: write files, then task commit or task abort.

Task commit turns the attempt's pending uploads into one task manifest. Where
no engine decides which attempt of a task commits, the manifest is published
with If-None-Match, so the first attempt wins and a loser aborts its own
uploads. Either way the attempt then reads the job record: if the job was
already decided without it, it aborts its uploads and fails (fencing), so a
late or zombie attempt can add nothing to a decided job.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zero_rename.core.jobs import JobRecords
from zero_rename.core.layout import Destination, check_task_id, data_file_name, partition_dir
from zero_rename.core.model import JobRecord, TaskManifest, dump, load
from zero_rename.core.stats import RequestStats
from zero_rename.core.store import S3Store
from zero_rename.core.writers import MagicOutput, OutputFile, StagingOutput
from zero_rename.errors import (
    JobDecidedError,
    PreconditionFailed,
    StoreError,
    TaskCommitConflict,
    ZeroRenameError,
)

log = logging.getLogger(__name__)


class TaskAttempt:
    """One attempt of one task of a job; writes files that stay invisible."""

    def __init__(self, store: S3Store, dest: Destination, job: JobRecord, task_id: str,
                 attempt: int = 0, spool_dir: str | None = None) -> None:
        self.dest = dest
        self.job = job
        self.task_id = check_task_id(task_id)
        self.attempt = attempt
        self.attempt_id = f"attempt_{job.job_id}_{task_id}_{attempt}"
        self.stats = RequestStats()
        self.store = store.scoped(self.stats)
        self._files: list[OutputFile] = []
        self._spool: Path | None = None
        self._spool_root = spool_dir
        self._state = "writing"

    @property
    def options(self):  # noqa: ANN201 - JobOptions
        return self.job.options

    def open(self, partition: dict[str, str | None] | None = None,
             extension: str = ".parquet") -> OutputFile:
        """A new output file in ``partition`` (values of the partition columns)."""
        if self._state != "writing":
            raise ZeroRenameError(f"{self.attempt_id} is {self._state}; it cannot open files")
        values = dict(partition or {})
        relative = partition_dir(self.options.partition_columns, values)
        name = data_file_name(self.task_id, self.job.job_id, len(self._files), extension)
        key = self.dest.dir + relative + name
        if self.options.committer == "magic":
            out: OutputFile = MagicOutput(self.store, self.dest.bucket, key, values,
                                          self.options.part_size)
        else:
            spool = self._spool_dir() / f"{len(self._files):05d}{extension}"
            out = StagingOutput(self.dest.bucket, key, values, str(spool),
                                self.options.part_size)
        self._files.append(out)
        return out

    def _spool_dir(self) -> Path:
        if self._spool is None:
            self._spool = Path(tempfile.mkdtemp(prefix=f"zr-{self.attempt_id}-",
                                                dir=self._spool_root))
        return self._spool

    def commit(self, publish: bool = True) -> TaskManifest:
        """Task commit; returns the manifest (Spark's commit message).

        Args:
            publish: save the manifest for the job commit with first-attempt-wins.
                False where the engine picks the committing attempt itself.

        Raises:
            TaskCommitConflict: another attempt of this task committed first.
            JobDecidedError: the job was committed or aborted without this attempt.
        """
        if self._state == "committed":
            raise ZeroRenameError(f"{self.attempt_id} is already committed")
        try:
            for f in self._files:
                f.close()
            self._upload_staged()
            manifest = self._manifest()
            if publish:
                self._publish(manifest)
        except BaseException:
            self.abort()
            raise
        try:
            self._check_fence()
        except JobDecidedError:
            self.abort()
            raise
        except BaseException:
            # A published manifest is this task's commit: its uploads stay for
            # the job commit. Unpublished, they are this attempt's to abort.
            if not publish:
                self.abort()
            raise
        self._state = "committed"
        self._remove_spool()
        log.info("task commit %s: %d file(s), %d bytes", self.attempt_id,
                 len(manifest.uploads), manifest.bytes)
        return manifest

    def _upload_staged(self) -> None:
        staged = [f for f in self._files if isinstance(f, StagingOutput)]
        if not staged:
            return
        with ThreadPoolExecutor(min(self.options.threads, len(staged), 16)) as pool:
            for future in [pool.submit(f.upload, self.store) for f in staged]:
                future.result()

    def _manifest(self) -> TaskManifest:
        return TaskManifest(job_id=self.job.job_id, task_id=self.task_id, attempt=self.attempt,
                            task_attempt_id=self.attempt_id,
                            committer=self.options.mode_name,
                            uploads=tuple(f.pending() for f in self._files),
                            stats=self.stats.snapshot())

    def _publish(self, manifest: TaskManifest) -> None:
        key = self.dest.job(self.job.job_id).task_manifest_key(self.task_id)
        try:
            self.store.put_object(self.dest.bucket, key, dump(manifest), if_none_match=True)
            return
        except PreconditionFailed:
            pass
        except StoreError:
            # Outcome unknown: the PUT may have landed before its response was
            # lost. If our manifest is there, this attempt is committed.
            if self._published_is_ours(key):
                return
            raise
        # The key exists: another attempt won, or our own earlier PUT did and
        # its response was lost. Read it before deciding.
        found = self.store.get_object(self.dest.bucket, key)
        if found is not None:
            winner = load(TaskManifest, found[0], key)
            if winner.task_attempt_id == self.attempt_id:
                return
            raise TaskCommitConflict(
                f"task {self.task_id} was already committed by {winner.task_attempt_id}; "
                f"{self.attempt_id} aborted its uploads")
        raise TaskCommitConflict(f"task manifest {key} could not be created")

    def _published_is_ours(self, key: str) -> bool:
        found = self.store.get_object(self.dest.bucket, key)
        return found is not None and load(TaskManifest, found[0], key).task_attempt_id == \
            self.attempt_id

    def _check_fence(self) -> None:
        record = JobRecords(self.store, self.dest).get(self.job.job_id)
        if record.decided and self.attempt_id not in record.committed_attempts:
            raise JobDecidedError(
                f"job {record.job_id} is already {record.state}; task attempt "
                f"{self.attempt_id} may not add output, its uploads were aborted")

    def abort(self) -> None:
        """Task abort: abort this attempt's uploads and remove its spool. Idempotent."""
        if self._state == "committed":
            raise ZeroRenameError(f"{self.attempt_id} is committed; abort the job instead")
        errors = []
        for f in self._files:
            try:
                f.abort(self.store)
            except Exception as exc:  # keep aborting the rest
                log.warning("could not abort upload of %s", f.key, exc_info=True)
                errors.append(exc)
        self._state = "aborted"
        self._remove_spool()
        if errors:
            log.warning("%s: %d upload(s) could not be aborted; job abort or cleanup "
                        "will find them by job id", self.attempt_id, len(errors))

    def _remove_spool(self) -> None:
        if self._spool is not None:
            shutil.rmtree(self._spool, ignore_errors=True)
            self._spool = None
