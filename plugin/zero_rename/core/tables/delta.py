"""Delta Lake through delta-rs: the destination itself is the table.

The table's log, ``_delta_log/``, sits beside ``_zero_rename/`` at the
destination; Hive-style readers skip both. The table is created by the first
job published to it, from the files' schema (partition columns, which Spark
keeps in the path only, added as strings). Each committed job is one version:
its files as add actions built from what the writers recorded (no request per
file), and for a ``replace`` the removal of its partitions' earlier files, in
the same commit.

Exactly once: the commit carries the app transaction ``zero-rename:<job id>``
(Delta's ``txn`` action, kept in the table's state across checkpoints), whose
version is the Delta version the commit lands in, and the job id in its commit
info. :meth:`DeltaFormat.find` reads it back with ``transaction_version``.

Concurrency: the log is written with S3 conditional writes (delta-rs's
``PUT _delta_log/<version>.json`` with ``If-None-Match: *``; no lock table),
which job setup's store probe has checked the store enforces. delta-rs is told
not to retry a lost race itself (``max_commit_retries=0``), so a commit lands
exactly at the version after the one it read, or not at all. When another
writer's commit got there first, its actions are read from the log and judged
(:func:`~zero_rename.core.tables.delta_log.conflict`): a conflict is a
:class:`~zero_rename.errors.TableConflictError` naming that commit, otherwise
the commit is built again on the fresh table (a replace recomputes what it
removes). delta-rs's own check is not enough here: a partition overwrite
through its API reads the whole table, so two replaces of different partitions
refuse each other, and one that adds files to an empty partition passes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaProtocolError, TableNotFoundError
from deltalake.transaction import CommitProperties, create_table_with_add_actions

from zero_rename.core.data.model import TableCommit
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import JobContext
from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.redact import redact
from zero_rename.core.s3.writes import create_once
from zero_rename.core.tables import delta_features, delta_log
from zero_rename.core.tables.base import JOB_ID_PROPERTY, Publication
from zero_rename.core.tables.common import files_schema
from zero_rename.core.tables.delta_storage import storage_options
from zero_rename.errors import (
    ConfigError,
    ContentionError,
    DestinationError,
    StoreError,
    TableConflictError,
    ZeroRenameError,
)

log = logging.getLogger(__name__)

# Commits built again after another writer's landed first, before giving up
# (ContentionError: nothing was committed; the job commit's retry starts afresh).
COMMIT_ATTEMPTS = 20
# Longest pause between two of them, in seconds (random, growing: jobs that
# race each other spread out).
MAX_PAUSE = 2.0
# Table properties of a table this creates. A checkpoint every 10 versions, as
# Spark's Delta writes them (delta-rs's default is 100): opening the table, which
# every commit does, reads every commit file since the last checkpoint.
TABLE_CONFIGURATION = {"delta.checkpointInterval": "10"}
# A Parquet footer is read from the file's last bytes: this many at first.
FOOTER_GUESS = 64 * 1024
# Versions committed since the job's setup read one by one, at most, before the
# table is read whole (from its last checkpoint) instead.
TAIL_LIMIT = 20
# Delta's checkpoint interval where a table's settings name none.
DEFAULT_CHECKPOINT_INTERVAL = 100


@dataclass
class Tail:
    """The log since the version job setup checked the job against: the commits
    after it, which a commit must land after."""

    checked: int  # the version job setup checked
    interval: int  # the table's checkpoint interval
    schema: str  # digest of the files' schema setup checked
    commits: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    # For a replace, the table's files up to ``checked``: its last checkpoint (a
    # single Parquet file; None: the log from version 0) and the commits after it.
    checkpoint: bytes | None = None
    before: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def latest(self) -> int:
        return self.commits[-1][0] if self.commits else self.checked

    @property
    def current(self) -> bool:
        """Whether the table is still as setup checked it: no commit since changed
        its schema, settings or protocol."""
        return not any(delta_log.changes_table(actions) for _, actions in self.commits)


def parse_base(base: str) -> Tail | None:
    """The tail to read after what :func:`setup_base` kept; None for none."""
    if not base:
        return None
    try:
        setup = json.loads(base)
        return Tail(int(setup["version"]), int(setup["interval"]), str(setup["schema"]))
    except (ValueError, TypeError, KeyError):
        return None


def schema_digest(table_schema: str) -> str:
    return hashlib.sha256(table_schema.encode()).hexdigest()[:16]


def setup_base(table: DeltaTable, table_schema: str) -> str:
    """What job setup keeps of a table it checked: its version, its checkpoint
    interval, and which files' schema it was checked against."""
    settings = table.metadata().configuration
    interval = settings.get("delta.checkpointInterval", "") or DEFAULT_CHECKPOINT_INTERVAL
    return json.dumps(
        {
            "version": table.version(),
            "interval": int(interval),
            "schema": schema_digest(table_schema),
        }
    )


class DeltaFormat:
    """The Delta table at a job's destination."""

    name = "delta"

    def __init__(self, ctx: JobContext, options: JobOptions) -> None:
        self.ctx = ctx
        self.options = options
        self.uri = ctx.dest.url
        # The table as find() read it, publish() starts from it: None, no table yet.
        self._table: DeltaTable | None = None
        self._read = False
        # The log since job setup, as find() read it: None, the table read whole.
        self._since_setup: Tail | None = None

    @property
    def table(self) -> str:
        return self.uri

    # -- the protocol's calls ------------------------------------------------------------

    def check(self, table_schema: str, partition_columns: tuple[str, ...]) -> str:
        """Returns the version checked (with the table's checkpoint interval and the
        files' schema checked), or "" when there is no table yet."""
        schema = files_schema(table_schema)
        delta_schema = (
            delta_log.table_schema(schema, partition_columns) if schema is not None else None
        )
        try:
            table = self._open()
        except StoreError as exc:
            raise DestinationError(
                f"cannot read the Delta log of {self.uri}: {exc}; check the endpoint, "
                "the credentials and the bucket"
            ) from None
        if table is None:
            return ""
        problem = delta_log.incompatibility(table, delta_schema, partition_columns)
        if problem:
            raise ConfigError(
                f"the Delta table at {self.uri} {problem}; write to another destination, "
                "or change the job to match the table"
            )
        replaces = self.options.conflict_mode == "replace"
        problem = delta_features.unsupported(table, replaces, delta_schema)
        if problem:
            raise ConfigError(
                f"the Delta table at {self.uri} {problem}; zero-rename cannot publish this "
                "job to it: write to another destination"
            )
        return setup_base(table, table_schema)

    def find(self, job_id: str, base: str = "") -> TableCommit | None:
        """With ``base``, the commits since the version job setup checked are read
        (one listing, and a GET of each): the job's commit is one of them if it
        landed, and an append needs nothing more of the log."""
        self._since_setup = self._log_since(base)
        if self._since_setup is not None:
            for version, actions in self._since_setup.commits:
                if delta_log.is_job_commit(actions, job_id):
                    added, removed = delta_log.counts(actions)
                    return self._commit_at(version, added, removed)
            return None
        table = self._open()
        self._table, self._read = table, True
        if table is None:
            return None
        return self._landed(table, job_id)

    def publish(self, publication: Publication) -> TableCommit:
        appended = self._append_to_tail(publication)
        if appended is not None:
            return appended
        columns = publication.partition_columns
        now = int(time.time() * 1000)
        adds = [delta_log.add_action(f, columns, now) for f in publication.files]
        schema = files_schema(publication.table_schema)
        table = self._table if self._read else self._open()
        for attempt in range(COMMIT_ATTEMPTS):
            if attempt:
                backoff(attempt, base=0.05, cap=MAX_PAUSE)
                table = self._fresh(self._table)
            self._table = table
            if table is None:
                done = self._create(publication, adds, schema)
            else:
                done = self._append(table, publication, adds, schema)
            if done is not None:
                return done
        raise ContentionError(
            f"the Delta table {self.uri} took another writer's commit before each of "
            f"{COMMIT_ATTEMPTS} commits of job {publication.job_id}; nothing of it was "
            "committed to the table. Retry the job commit"
        )

    def expire(self, older_than: timedelta) -> int:
        """Delta's VACUUM: the files that versions older than ``older_than`` removed
        (a replace's earlier files) are deleted. The age is taken as given (in
        whole hours, rounded up), even below the table's
        ``delta.deletedFileRetentionDuration``: whoever runs it chose it.

        A dry run first: the log keeps naming removed files after they are gone,
        so the files still there are counted by one listing, and with none
        nothing is committed (a vacuum writes two versions of its own)."""
        table = self._open()
        if table is None:
            return 0
        hours = max(0, math.ceil(older_than.total_seconds() / 3600))
        present = self._vacuumed(table, hours)
        if not present:
            return 0
        with self._errors("vacuum"):
            deleted = present & set(
                table.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False)
            )
        log.info("vacuum of the Delta table %s deleted %d file(s)", self.uri, len(deleted))
        return len(deleted)

    def expirable(self, older_than: timedelta) -> list[str]:
        """The files :meth:`expire` would delete: a vacuum's dry run, less the files
        already gone; nothing is written."""
        table = self._open()
        if table is None:
            return []
        return sorted(self._vacuumed(table, max(0, math.ceil(older_than.total_seconds() / 3600))))

    def _vacuumed(self, table: Any, hours: int) -> set[str]:
        """The files a vacuum of ``hours`` would delete that are still there: the log
        keeps naming removed files after they are gone (one listing)."""
        with self._errors("vacuum"):
            due = set(table.vacuum(retention_hours=hours, enforce_retention_duration=False))
        dest = self.ctx.dest
        return due & {
            o.key[len(dest.dir) :] for o in self.ctx.store.list_objects(dest.bucket, dest.dir)
        }

    # -- committing ----------------------------------------------------------------------

    def _create(
        self, publication: Publication, adds: list[Any], schema: pa.Schema | None
    ) -> TableCommit | None:
        """Create the table with the job's files as version 0; None if another
        writer created it meanwhile (the loser's PUT of version 0 got 412)."""
        columns = publication.partition_columns
        if schema is None:
            schema = self._schema_from_a_file(publication, adds)
        try:
            delta_schema = delta_log.table_schema(schema, columns)
        except ConfigError as exc:
            raise TableConflictError(
                f"the Delta table {self.uri} cannot be created: {exc}"
            ) from None
        try:
            with self._errors("create"):
                create_table_with_add_actions(
                    self.uri,
                    delta_schema,
                    adds,
                    mode="error",
                    partition_by=list(columns) or None,
                    configuration=TABLE_CONFIGURATION,
                    storage_options=self._storage(),
                    commit_properties=self._properties(publication, 0),
                )
        except CommitFailedError:
            return self._after_refusal(publication, -1)
        except StoreError as exc:
            if "already exists" in str(exc):  # created between our look and delta-rs's
                return self._after_refusal(publication, -1)
            raise
        return self._commit(0, adds, [])

    def _append(
        self,
        table: DeltaTable,
        publication: Publication,
        adds: list[Any],
        schema: pa.Schema | None,
    ) -> TableCommit | None:
        """One commit on ``table`` as read: the job's files, and a replace's removes;
        None if another writer's commit landed first and does not conflict."""
        columns = publication.partition_columns
        job_schema = delta_log.table_schema(schema, columns) if schema is not None else None
        problem = delta_log.incompatibility(table, job_schema, columns) or (
            delta_features.unsupported(table, publication.replaces, job_schema)
        )
        if problem:
            raise TableConflictError(
                f"the Delta table {self.uri} {problem}; nothing of job "
                f"{publication.job_id} was committed to it",
                other=f"version {table.version()}",
            )
        read = table.version()
        with self._errors("list the files of"):
            removes = delta_log.remove_actions(table, delta_log.replaced(publication, columns))
        try:
            with self._errors("commit to"):
                table.create_write_transaction(
                    [*adds, *removes],
                    mode="append",
                    schema=table.schema(),
                    partition_by=list(columns) or None,
                    commit_properties=self._properties(publication, read + 1),
                )
        except CommitFailedError:
            return self._after_refusal(publication, read, table)
        return self._commit(read + 1, adds, removes)

    def _after_refusal(
        self, publication: Publication, read: int, table: DeltaTable | None = None
    ) -> TableCommit | None:
        """Another writer's commit took the version after ``read``: ours, if a lost
        answer made delta-rs send its PUT again; else a conflict, or None to build
        the commit again on the fresh table."""
        fresh = self._fresh(table)
        self._table = fresh
        if fresh is None:
            return None
        mine = self._landed(fresh, publication.job_id)
        if mine is not None:
            log.info(
                "job %s: version %s of the Delta table %s is its own commit, whose answer was lost",
                publication.job_id,
                mine.id,
                self.uri,
            )
            return mine
        for version in range(read + 1, fresh.version() + 1):
            self._check_winner(fresh, publication, version)
        log.info(
            "job %s: the Delta table %s moved to version %d meanwhile, without a conflict; "
            "committing again",
            publication.job_id,
            self.uri,
            fresh.version(),
        )
        return None

    def _check_winner(self, fresh: DeltaTable, publication: Publication, version: int) -> None:
        actions = self._entry(version)
        if actions is None:
            return
        columns = publication.partition_columns
        what = delta_log.conflict(actions, publication, columns)
        if not what and any("metaData" in a for a in actions):
            schema = files_schema(publication.table_schema)
            job_schema = delta_log.table_schema(schema, columns) if schema is not None else None
            problem = delta_log.incompatibility(fresh, job_schema, columns)
            what = f"changed the table, which now {problem}" if problem else ""
        self._refuse_if(what, publication, version, actions)

    def _properties(self, publication: Publication, version: int) -> CommitProperties:
        return CommitProperties(
            custom_metadata={
                JOB_ID_PROPERTY: publication.job_id,
                "zero-rename.conflict-mode": publication.conflict_mode,
            },
            max_commit_retries=0,
            app_transactions=delta_log.transactions(
                publication, publication.partition_columns, version
            ),
        )

    def _commit(self, version: int, adds: list[Any], removes: list[Any]) -> TableCommit:
        return self._commit_at(version, len(adds), len(removes))

    def _commit_at(self, version: int, added: int, removed: int) -> TableCommit:
        return TableCommit(
            format="delta", table=self.uri, id=str(version), files=added, removed_files=removed
        )

    # -- an append after the log job setup read ---------------------------------------

    def _log_since(self, base: str) -> Tail | None:
        """The log's commits after the version ``base`` names (one listing, then a
        GET of each); for a replace, from the last checkpoint (and it) instead, for
        the files it replaces. None without a base, or when reading the table
        whole costs less (many commits since) or is needed (no checkpoint where
        the table's interval puts one)."""
        tail = parse_base(base)
        if tail is None:
            return None
        checkpoint, first = -1, tail.checked + 1
        if self.options.conflict_mode == "replace":
            checkpoint = tail.checked // tail.interval * tail.interval if tail.interval > 0 else 0
            first = checkpoint + 1 if checkpoint > 0 else 0
        # A checkpoint's file sorts before its version's commit file.
        after = checkpoint - 1 if checkpoint > 0 else first - 1
        listed = self._log_listing(
            delta_log.log_key(self.ctx.dest.dir, after) if after >= 0 else ""
        )
        if listed is None:
            return None
        found = sorted(v for v in map(delta_log.commit_version, listed) if v is not None)
        versions = [v for v in found if v >= first]
        if len(versions) > TAIL_LIMIT or versions != list(range(first, first + len(versions))):
            return None  # many, or not one after another: read the table whole
        if first <= tail.checked and (not versions or versions[-1] < tail.checked):
            return None  # the commits up to the one setup checked are not all there
        if checkpoint > 0:
            name = delta_log.checkpoint_name(checkpoint)
            tail.checkpoint = self._log_object(name) if name in listed else None
            if tail.checkpoint is None:
                return None
        return tail if self._read_commits(tail, versions) else None

    def _read_commits(self, tail: Tail, versions: list[int]) -> bool:
        """Each version's actions into ``tail``; False if one is missing."""
        for version in versions:
            actions = self._entry(version)
            if actions is None:
                return False
            if version > tail.checked:
                tail.commits.append((version, actions))
            else:
                tail.before.append(actions)
        return True

    def _log_object(self, name: str) -> bytes | None:
        dest = self.ctx.dest
        found = self.ctx.store.get_object(dest.bucket, f"{dest.dir}{delta_log.LOG_DIR}/{name}")
        return found[0] if found is not None else None

    def _log_listing(self, start_after: str) -> set[str] | None:
        """The names in the table's log after ``start_after`` (one page; None if
        there are more: the table is then read whole)."""
        dest = self.ctx.dest
        kwargs = {"StartAfter": start_after} if start_after else {}
        with self._errors("list the log of"):
            listed = self.ctx.store.client.list_objects_v2(
                Bucket=dest.bucket, Prefix=f"{dest.dir}{delta_log.LOG_DIR}/", **kwargs
            )
        if listed.get("IsTruncated"):
            return None
        return {o["Key"].rsplit("/", 1)[-1] for o in listed.get("Contents", [])}

    def _append_to_tail(self, publication: Publication) -> TableCommit | None:
        """An append as one conditional write of the commit file after the log's
        last version, when the table is still as job setup checked it: the write's
        condition (If-None-Match) is the check that no other commit took that
        version. A commit that did is read; the next version is tried after an
        append's, which conflicts with nothing. None where the table must be read
        whole: no tail read, a replace, a changed table, a path left to delta-rs."""
        tail = self._since_setup
        if (
            tail is None
            or tail.schema != schema_digest(publication.table_schema)
            or not tail.current
        ):
            return None
        columns = publication.partition_columns
        now = int(time.time() * 1000)
        adds = []
        for file in publication.files:
            add = delta_log.add_entry(file, columns, now)
            if add is None:
                return None
            adds.append(add)
        live = self._replaced_files(tail, publication)
        dest = self.ctx.dest
        version = tail.latest + 1
        for attempt in range(COMMIT_ATTEMPTS):
            removes = live.removes(now) if live is not None else []
            body = delta_log.commit_file(publication, columns, version, adds, removes)
            key = delta_log.log_key(dest.dir, version)
            try:
                other = create_once(self.ctx.store, dest.bucket, key, body)
            except StoreError as exc:
                raise StoreError(
                    redact(f"cannot commit to the Delta table {self.uri}: {exc}"),
                    operation="delta commit to",
                    code=exc.code,
                    status=exc.status,
                ) from None
            if other is None:
                self._checkpoint_if_due(tail, version)
                return self._commit_at(version, len(adds), len(removes))
            actions = delta_log.parse_entry(other)
            if delta_log.is_job_commit(actions, publication.job_id):
                return self._commit_at(version, *delta_log.counts(actions))
            tail.commits.append((version, actions))
            if not tail.current:
                return None
            self._judge_winner(publication, version, actions)
            if live is not None:
                live.apply(actions)
            log.info(
                "job %s: version %d of the Delta table %s was another writer's; appending after it",
                publication.job_id,
                version,
                self.uri,
            )
            version += 1
            backoff(attempt)
        return None

    def _replaced_files(self, tail: Tail, publication: Publication) -> delta_log.LiveFiles | None:
        """For a replace, the table's files in the partitions it replaces, as of the
        log's last version; None for an append."""
        if not publication.replaces:
            return None
        live = delta_log.LiveFiles(publication, publication.partition_columns)
        if tail.checkpoint is not None:
            live.read_checkpoint(tail.checkpoint)
        for actions in [*tail.before, *(a for _, a in tail.commits)]:
            live.apply(actions)
        return live

    def _judge_winner(
        self, publication: Publication, version: int, actions: list[dict[str, Any]]
    ) -> None:
        """Another writer's commit took ``version``: a conflict with the job's is final."""
        what = delta_log.conflict(actions, publication, publication.partition_columns)
        self._refuse_if(what, publication, version, actions)

    def _refuse_if(
        self, what: str, publication: Publication, version: int, actions: list[dict[str, Any]]
    ) -> None:
        """The conflict ``what`` (none: "") with another writer's ``version``, raised."""
        if what:
            raise TableConflictError(
                f"version {version} of the Delta table {self.uri} "
                f"({delta_log.describe(actions)}) {what}; nothing of job "
                f"{publication.job_id} was committed to the table",
                other=f"version {version}",
            )

    def _checkpoint_if_due(self, tail: Tail, version: int) -> None:
        """A checkpoint where the table's interval says, as delta-rs writes one after
        its own commits, and the expired log files cleaned up; best effort: the
        commit has landed, and a later one checkpoints if this does not."""
        if tail.interval <= 0 or version % tail.interval:
            return
        try:
            with self._errors("checkpoint"):
                # The latest version (this one, unless another writer's followed): a
                # table opened at a version reads the log from its start.
                table = DeltaTable(self.uri, storage_options=self._storage())
                table.create_checkpoint()
                table.cleanup_metadata()
        except ZeroRenameError as exc:
            log.warning(
                "no checkpoint of the Delta table %s at version %d: %s", self.uri, version, exc
            )

    # -- reading -------------------------------------------------------------------------

    def _landed(self, table: DeltaTable, job_id: str) -> TableCommit | None:
        """The commit that published ``job_id``: its app transaction's version is
        the version it landed in; that commit file tells its counts (zeros if the
        log's retention has removed it)."""
        version = table.transaction_version(delta_log.job_app_id(job_id))
        if version is None:
            return None
        actions = self._entry(version) or []
        added, removed = delta_log.counts(actions)
        return TableCommit(
            format="delta", table=self.uri, id=str(version), files=added, removed_files=removed
        )

    def _open(self) -> DeltaTable | None:
        """The table at its latest version; None when there is none yet."""
        try:
            with self._errors("open"):
                return DeltaTable(self.uri, storage_options=self._storage())
        except TableNotFoundError:
            return None

    def _fresh(self, table: DeltaTable | None) -> DeltaTable | None:
        """``table`` brought to the latest version (reading only the new commits)."""
        if table is None:
            return self._open()
        with self._errors("read"):
            table.update_incremental()
        return table

    def _entry(self, version: int) -> list[dict[str, Any]] | None:
        """A version's actions, read from its commit file with the store's client."""
        dest = self.ctx.dest
        found = self.ctx.store.get_object(dest.bucket, delta_log.log_key(dest.dir, version))
        if found is None:
            log.warning("the Delta table %s has no commit file for version %d", self.uri, version)
            return None
        return delta_log.parse_entry(found[0])

    def _schema_from_a_file(self, publication: Publication, adds: list[Any]) -> pa.Schema:
        """The files' schema when the writers gave none: the first file's footer,
        read from its last bytes (one or two ranged GETs)."""
        if not adds:
            raise TableConflictError(
                f"the Delta table {self.uri} cannot be created by job {publication.job_id}: "
                "it wrote no file and its writers gave no schema"
            )
        dest = self.ctx.dest
        key = dest.dir + adds[0].path
        tail = self._tail(key, FOOTER_GUESS)
        length = int.from_bytes(tail[-8:-4], "little")
        if tail[-4:] != b"PAR1":
            raise TableConflictError(f"{key} is not a Parquet file: no schema for the Delta table")
        if length + 8 > len(tail):
            tail = self._tail(key, length + 8)
        schema: pa.Schema = pq.read_metadata(pa.BufferReader(tail)).schema.to_arrow_schema()
        return schema

    def _tail(self, key: str, size: int) -> bytes:
        with self._errors("read a file footer of"):
            response = self.ctx.store.client.get_object(
                Bucket=self.ctx.dest.bucket, Key=key, Range=f"bytes=-{size}"
            )
            data: bytes = response["Body"].read()
        return data

    def _storage(self) -> dict[str, str]:
        return storage_options(self.ctx.store, self.ctx.dest.bucket)

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """delta-rs's failures as ours, in one line, with no secret: a commit that
        raised anything but CommitFailedError may have landed (the protocol's
        retry finds it); a table this delta-rs cannot write is final."""
        try:
            yield
        except (CommitFailedError, TableNotFoundError, ZeroRenameError):
            raise
        except DeltaProtocolError as exc:
            raise DestinationError(
                redact(f"cannot {what} the Delta table {self.uri}: {delta_log.one_line(exc)}")
            ) from None
        except Exception as exc:
            raise StoreError(
                redact(f"cannot {what} the Delta table {self.uri}: {delta_log.one_line(exc)}"),
                operation=f"delta {what}",
            ) from None
