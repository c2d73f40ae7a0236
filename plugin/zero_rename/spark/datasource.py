"""The ``zero-rename`` format: Spark's commit protocol mapped onto the core's.

Spark's roles, in a Python data source:

- ``DataSource.writer()`` runs once per write, in a Python worker on the
  driver. Without a ``job_id`` option it runs job setup here; with one it
  reads the job record that an orchestrator (Airflow) set up. With a
  ``table_format``, the DataFrame's schema is checked against an existing
  table first (job setup does it), so an incompatible table fails the write
  before anything is written; each file's footer statistics and the schema go
  into the task manifests, for the job commit's one commit of the format.
- The writer object is pickled to executors; its ``write()`` runs once per
  task attempt: the core task writer writes invisible pending uploads and
  task commit returns the manifest as the commit message
  (``publish=False``: Spark's commit coordinator, not S3, picks the attempt).
- On the driver, ``commit(messages)`` receives one message per task from
  the attempts Spark chose. Orchestrated: it saves them as the stage manifest
  and makes nothing visible. Otherwise it runs the job commit (validation,
  conflict resolution, completing the uploads, ``_SUCCESS``), then, with
  option ``validate_output``, the output check of the committed files.
- ``abort(messages)`` aborts the job: every pending upload of the job is
  aborted, including those of attempts whose message never arrived, and the
  job record turns ``aborted`` so that a late attempt fences itself off.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa

from zero_rename.spark import worker_imports, worker_step

# The committer's models built without pydantic's plugin lookup, however the
# format was registered: this module is what every write's worker unpickles.
with worker_imports():
    from zero_rename.core import (
        Committer,
        JobOptions,
        JobRecord,
        JobSummary,
        S3Store,
        StepRunner,
        StoreConfig,
        TaskAttempt,
        TaskManifest,
        load_object,
        table_formats,
        utcnow,
    )
    from zero_rename.errors import (
        ConfigError,
        ConflictError,
        JobDecidedError,
        ValidationError,
        ZeroRenameError,
    )
    from zero_rename.spark.options import WriteConfig, parse_writer_options
    from zero_rename.spark.schema import (
        arrow_schema,
        check_partition_types,
        check_writable,
        footer_metadata,
        resolve_columns,
        table_schema,
    )
    from zero_rename.spark.source import ZeroRenameDataSource

log = logging.getLogger(__name__)

# ZeroRenameDataSource lives in .source, which Spark imports without this module;
# it is named here too for the code that subclasses it with its own writer().
__all__ = [
    "IgnoredWrite",
    "ZeroRenameCommitMessage",
    "ZeroRenameDataSource",
    "ZeroRenameWriter",
    "committer_for",
    "new_writer",
]

ENGINE = "spark"
# Retries of a job commit that failed after its point of no return: the core's
# commit is safe to run again, and finishing it beats leaving it half done.
COMMIT_RETRIES = 3
COMMIT_RETRY_SECONDS = 2.0

# Python workers are reused across tasks and jobs: a few destinations' clients
# are kept, the least recently used dropped.
_CACHED_COMMITTERS = 8
_committers: OrderedDict[tuple[str, StoreConfig], Committer] = OrderedDict()


def committer_for(destination: str, store: StoreConfig) -> Committer:
    """One Committer (and S3 connection pool) per destination in each Python worker,
    shared by the tasks a reused worker runs."""
    key = (destination, store)
    if key in _committers:
        _committers.move_to_end(key)
        return _committers[key]
    _committers[key] = Committer(destination, store, S3Store.connect(store))
    while len(_committers) > _CACHED_COMMITTERS:
        _committers.popitem(last=False)
    return _committers[key]


@dataclass
class ZeroRenameCommitMessage(WriterCommitMessage):
    """What a task attempt reports to the driver: its task manifest, as JSON.

    JSON rather than the pydantic object keeps the message readable by any
    version of the driver that can load_object the manifest format.
    """

    manifest_json: str
    rows: int
    files: int
    bytes: int
    seconds: float
    peak_rss_bytes: int

    def manifest(self) -> TaskManifest:
        return load_object(TaskManifest, self.manifest_json.encode("utf-8"), "Spark commit message")


def new_writer(
    options: dict[str, str], schema: StructType, overwrite: bool
) -> DataSourceArrowWriter:
    """The format's ``writer()``: the options parsed, ``if_exists`` applied, the
    job set up (or, orchestrated, read)."""
    config = parse_writer_options(options, overwrite)
    if config.if_exists and destination_has_data(config):
        if config.if_exists == "error":
            raise ConflictError(
                f"{config.destination.url} already holds data and if_exists=error "
                "refuses to write (Spark's save mode errorifexists); nothing was written. "
                "Drop if_exists to append, or use mode('overwrite') to replace"
            )
        log.info(
            "%s already holds data: if_exists=ignore, the write does nothing",
            config.destination.url,
        )
        return IgnoredWrite()
    return ZeroRenameWriter(config, schema)


def destination_has_data(config: WriteConfig) -> bool:
    """Whether a reader would find rows: files of committed jobs, or of other tools.
    Files of jobs in progress or aborted do not count."""
    return bool(committer_for(config.destination.url, config.store).snapshot().files)


class IgnoredWrite(DataSourceArrowWriter):
    """``if_exists=ignore`` on a destination with data: no job, no upload, no change."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return WriterCommitMessage()

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        pass


class ZeroRenameWriter(DataSourceArrowWriter):
    """Built on the driver, pickled to every task; see the module documentation."""

    def __init__(self, config: WriteConfig, schema: StructType) -> None:
        self.config = config
        self.stage_started = utcnow()  # an orchestrated job records its stage step from here
        # Spark's schema, not Arrow's: this object is pickled to the worker that
        # commits the job, which then needs no pyarrow to load_object it.
        self.schema = schema
        # The files' schema as a table format takes it, the same text in every
        # task's manifest; "" on the driver without a table format (pyarrow stays
        # unloaded there: each task computes it).
        self.table_schema = ""
        # Checked before job setup, so a write refused here leaves no job behind.
        check_writable(schema)
        columns = resolve_columns(config.job.partition_columns, schema.fieldNames())
        check_partition_types(schema, columns)
        options = config.job.model_copy(update={"partition_columns": columns})
        if config.orchestrated:
            self.job = self._orchestrated_job(options)
        else:
            if options.table_format != "none":
                _import_table_format(options.table_format)
                self.table_schema = table_schema(schema)
            self.job = self._committer().setup_job(options, table_schema=self.table_schema)
        self.metadata = footer_metadata(schema, self.job.options.partition_columns)
        log.info(
            "zero-rename write to %s: job %s (%s committer, conflict mode %s%s)",
            config.destination.url,
            self.job.job_id,
            self.job.options.mode_name,
            self.job.options.conflict_mode,
            ", orchestrated" if config.orchestrated else "",
        )

    # -- driver: job setup ---------------------------------------------------
    def _committer(self) -> Committer:
        """The worker's committer for this destination."""
        return committer_for(self.config.destination.url, self.config.store)

    def _orchestrated_job(self, options: JobOptions) -> JobRecord:
        """The job an orchestrator set up; the options given here must agree with it."""
        assert self.config.job_id is not None
        record = self._committer().job(self.config.job_id)
        if record.decided:
            raise JobDecidedError(
                f"job {record.job_id} is already {record.state}; a new write needs a new job"
            )
        for name in sorted(self.config.explicit):
            given, recorded = getattr(options, name), getattr(record.options, name)
            if given != recorded:
                raise ConfigError(
                    f"option {name}={_show(given)} disagrees with job {record.job_id}, set up "
                    f"with {name}={_show(recorded)}; an orchestrated job's options are fixed "
                    "at job setup"
                )
        check_partition_types(self.schema, record.options.partition_columns)
        if record.options.table_format != "none":
            _import_table_format(record.options.table_format)
            # The orchestrator's setup could not know the DataFrame's schema.
            self.table_schema = table_schema(self.schema)
            self._committer().check_table(record.options, self.table_schema)
        return record

    @property
    def job_id(self) -> str:
        return self.job.job_id

    # -- executors: one task attempt -----------------------------------------
    @worker_step
    def write(self, iterator: Iterator[pa.RecordBatch]) -> ZeroRenameCommitMessage:
        context = TaskContext.get()
        if context is None:
            raise ZeroRenameError("write() runs inside a Spark task")
        # taskAttemptId is unique within the application, where attemptNumber
        # restarts when Spark retries a whole stage: it keeps attempt ids apart.
        return self.write_attempt(context.partitionId(), context.taskAttemptId(), iterator)

    def write_attempt(
        self, partition_id: int, attempt: int, batches: Iterator[pa.RecordBatch]
    ) -> ZeroRenameCommitMessage:
        """Write one task attempt and commit it as a task; nothing becomes visible.

        Spark's ``write()`` calls this with its TaskContext; a test may call it to
        play two live attempts of one task.
        """
        from zero_rename.spark.parquet import PartitionedParquetWriter

        started = time.monotonic()
        # Background uploads: a file's requests (create, parts) overlap the
        # encoding of the next one instead of stalling the task at every file.
        task = self._committer().task_attempt(
            self.job,
            f"{partition_id:05d}",
            attempt,
            self.config.spool_dir,
            self.config.upload_threads,
        )
        with_table = self.job.options.table_format != "none"
        # Every task records the files' schema (here, where pyarrow is loaded anyway,
        # never on the driver): a table format's commit needs it, and the
        # orchestrators show it (Dagster's column schema). Column stats only for a format.
        task.table_schema = self.table_schema or table_schema(self.schema)
        files = PartitionedParquetWriter(
            lambda values: task.open(values or None, self.config.files.extension),
            self.job.options.partition_columns,
            self.config.files,
            self.metadata,
            collect_stats=with_table,
        )
        try:
            for batch in batches:
                files.write(batch)
            if files.rows == 0 and partition_id == 0 and not self.job.options.partition_columns:
                files.write_empty(self._data_schema())
            files.close()
        except BaseException:
            files.discard()
            task.abort()
            raise
        manifest = task.commit(publish=False)  # aborts its own uploads if it fails
        return self._message(task, manifest, files.rows, time.monotonic() - started)

    def _data_schema(self) -> pa.Schema:
        import pyarrow as pa

        columns = set(self.job.options.partition_columns)
        return pa.schema([f for f in arrow_schema(self.schema) if f.name not in columns])

    @staticmethod
    def _message(
        task: TaskAttempt, manifest: TaskManifest, rows: int, seconds: float
    ) -> ZeroRenameCommitMessage:
        # Linux reports ru_maxrss in KiB: the peak of this Python worker.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        log.info(
            "task attempt %s wrote %d row(s) in %d file(s)",
            task.attempt_id,
            rows,
            len(manifest.uploads),
        )
        return ZeroRenameCommitMessage(
            manifest_json=manifest.model_dump_json(),
            rows=rows,
            files=len(manifest.uploads),
            bytes=manifest.bytes,
            seconds=round(seconds, 3),
            peak_rss_bytes=peak,
        )

    # -- driver: job commit and abort ----------------------------------------
    @worker_step
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        manifests = _manifests(messages)
        if self.config.orchestrated:
            where = self._committer().save_stage_manifest(
                self.job_id, manifests, ENGINE, self.stage_started
            )
            log.info(
                "job %s: stage manifest of %d task(s) saved at %s; nothing is visible "
                "until the orchestrator commits the job",
                self.job_id,
                len(manifests),
                where,
            )
            return
        _import_table_format(self.job.options.table_format)
        summary = self._commit_job(manifests, {f"{i:05d}" for i in range(len(messages))})
        log.info(
            "job %s committed: %d file(s), %d row(s), %d byte(s) in %d partition(s)",
            self.job_id,
            summary.files,
            summary.rows,
            summary.bytes,
            len(summary.partitions),
        )
        if self.config.validate_output:
            # Raises OutputCheckError naming the problems; the job stays committed.
            check = self._committer().validate_output(self.job_id)
            log.info("job %s: output check: %s", self.job_id, check.describe())

    def _commit_job(self, manifests: list[TaskManifest], expected: set[str]) -> JobSummary:
        """Job commit, retried past its point of no return (Spark has no retries of
        its own for the driver's commit); before it, an error stands and Spark
        aborts the job."""
        return StepRunner(self._committer()).commit(
            self.job_id, manifests, expected, COMMIT_RETRIES, COMMIT_RETRY_SECONDS
        )

    @worker_step
    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        finished = sum(1 for m in messages if m is not None)
        log.warning(
            "Spark aborts the write of job %s (%d of %d task(s) had finished)",
            self.job_id,
            finished,
            len(messages),
        )
        # A committed job (a step after the commit failed: the output check) or one
        # past its point of no return is left alone; the abort cleans up itself.
        StepRunner(self._committer()).abort_job(
            self.job_id,
            f"Spark aborted the write ({finished} of {len(messages)} task(s) had finished); "
            "the failing task's error is in the Spark application's log",
            cleanup=False,
        )


def _import_table_format(name: str) -> None:
    """The job's table format's library imported as this module imports the
    committer (:func:`~zero_rename.spark.worker_imports`), where a step is about
    to open the format (job setup, job commit; tasks and the abort need only its
    name): PyIceberg's models would otherwise look pydantic's plugins up in a
    worker that has no use for them. Once a process; a later import finds the
    modules loaded."""
    plugin = table_formats().get(name)  # none for "none"
    if plugin is not None:
        with worker_imports():
            plugin.load()


def _manifests(messages: Sequence[WriterCommitMessage | None]) -> list[TaskManifest]:
    missing = [i for i, m in enumerate(messages) if m is None]
    if missing:
        raise ValidationError(
            f"no commit message from task(s) {missing[:10]}",
            [f"task {i:05d} sent no commit message" for i in missing],
        )
    wrong = [type(m).__name__ for m in messages if not isinstance(m, ZeroRenameCommitMessage)]
    if wrong:
        raise ValidationError(
            f"unexpected commit message type(s) {sorted(set(wrong))}",
            [f"message of type {w}" for w in wrong],
        )
    return [m.manifest() for m in messages if isinstance(m, ZeroRenameCommitMessage)]


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return json.dumps(",".join(value))
    return json.dumps(value)
