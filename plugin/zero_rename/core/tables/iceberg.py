"""Apache Iceberg through PyIceberg: each committed job is one snapshot of a table
whose location is the destination.

The table is created at the first publish, with the files' schema (partition
columns the files lack added as optional strings), an identity partition spec
on the job's partition columns, its metadata under ``<dest>/_iceberg/metadata``
(Hive-style readers skip names starting with ``_``) and a name mapping, since
the files carry no field ids. A job is one snapshot, tagged with its job id in
the summary: an ``append`` for ``append`` and ``fail``; for ``replace``, one
``overwrite`` that drops the current files of the job's partitions (all of an
unpartitioned table's) and adds the job's. Its data files are described from
what the task attempts recorded (:mod:`.iceberg_files`): no request per file.

Concurrency: the catalog's compare-and-swap refuses a commit whose base moved;
PyIceberg then refreshes, re-checks for conflicts and retries by itself. A
conflict (another writer's commit touched what a replace drops) is final: the
job is rolled back (:class:`~zero_rename.errors.TableConflictError`). Any other
failure leaves the outcome unknown; the protocol's retry asks :meth:`find`,
which reads the job id back from the snapshots' summaries (so a retry can find
a commit only until snapshot expiry removes it; the job record's
``table_commit`` is the other witness).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.expressions import BooleanExpression
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.metadata import SUPPORTED_TABLE_FORMAT_VERSION, TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update.snapshot import _FastAppendFiles, _OverwriteFiles
from pyiceberg.utils.properties import property_as_bool

from zero_rename.core.data.model import TableCommit
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import JobContext
from zero_rename.core.tables.base import JOB_ID_PROPERTY, Publication, TableFile
from zero_rename.core.tables.common import files_schema
from zero_rename.core.tables.iceberg_blocks import in_blocks
from zero_rename.core.tables.iceberg_catalog import (
    catalog_label,
    derived_table_name,
    open_catalog,
    reason,
)
from zero_rename.core.tables.iceberg_expire import expirable_files, expire_snapshots
from zero_rename.core.tables.iceberg_files import (
    DataFiles,
    iceberg_schema,
    identity_spec,
    partition_predicate,
    replaced_files,
    schema_problems,
    spec_problem,
)
from zero_rename.core.tables.iceberg_plugin import PLUGIN
from zero_rename.errors import (
    CommitStateUnknownError,
    ConfigError,
    ContentionError,
    DestinationError,
    TableConflictError,
    ZeroRenameError,
)

log = logging.getLogger(__name__)

METADATA_DIR = "_iceberg/metadata"
# Set on the tables zero-rename creates: one metadata.json per job would
# otherwise pile up forever; the last 100 stay, as Iceberg's default says.
_CREATED_PROPERTIES = {
    TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
    TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: "100",
}


class IcebergFormat:
    """The Iceberg table at a job's destination, in the catalog its options name."""

    name = "iceberg"

    def __init__(self, ctx: JobContext, options: JobOptions) -> None:
        self.ctx = ctx
        self.options = options
        self.iceberg = PLUGIN.options_of(options)
        self.identifier = self.iceberg.iceberg_table or derived_table_name(ctx.dest)
        self._catalog: Catalog | None = None
        # The table as find() read it, for the publish the protocol makes right
        # after it: its metadata is not read twice.
        self._found: Table | None = None

    @property
    def table(self) -> str:
        return self.identifier

    # -- the TableFormat protocol ------------------------------------------
    def check(self, table_schema: str, partition_columns: tuple[str, ...]) -> str:
        """Returns "": the catalog names the table's current metadata at no cost of
        the store, and a commit reads that metadata whatever setup saw."""
        files = files_schema(table_schema)
        if files is not None:
            iceberg_schema(files, partition_columns)  # a type Iceberg lacks: refused now
        try:
            table = self._load()
        except ZeroRenameError:
            raise
        except Exception as exc:
            raise DestinationError(
                f"the Iceberg catalog {catalog_label(self.iceberg.iceberg_catalog)} cannot "
                f"be reached: {reason(exc)}"
            ) from exc
        if table is None:
            return ""  # created by the first commit
        problems = self._misfits(table.metadata, files, partition_columns)
        if problems:
            raise ConfigError(
                f"the Iceberg table {self.identifier} does not fit the job: {'; '.join(problems)}"
            )
        return ""

    def find(self, job_id: str, base: str = "") -> TableCommit | None:
        try:
            table = self._load()
        except ZeroRenameError:
            raise
        except Exception as exc:
            raise CommitStateUnknownError(
                f"cannot tell whether job {job_id} is in the Iceberg table {self.identifier}: "
                f"{reason(exc)}; retry the job commit once the catalog answers"
            ) from exc
        self._found = table
        if table is None:
            return None
        for snapshot in table.metadata.snapshots:
            if _job_of(snapshot) == job_id:
                return self._commit_of(snapshot)
        return None

    def publish(self, publication: Publication) -> TableCommit:
        try:
            return self._publish(publication)
        except ZeroRenameError:
            raise
        except CommitFailedException as exc:
            # Nothing landed: the table changed under every one of PyIceberg's retries.
            raise ContentionError(
                f"the Iceberg table {self.identifier} changed under every retry of job "
                f"{publication.job_id}'s commit; nothing of it was committed: {reason(exc)}"
            ) from exc
        except Exception as exc:
            raise CommitStateUnknownError(
                f"job {publication.job_id}'s commit to the Iceberg table {self.identifier} "
                f"failed, its outcome unknown: {reason(exc)}; a retry of the job commit finds "
                "it if it landed"
            ) from exc

    def expire(self, older_than: timedelta) -> int:
        """Expire the snapshots older than ``older_than`` (never a branch's or tag's
        head), then delete the data files under the destination that only those
        snapshots read, and their manifests and manifest lists under ``_iceberg/``
        (finishing first what an earlier run that died left).
        Returns how many data files were deleted."""
        if older_than < timedelta(0):
            raise ConfigError(f"older_than must not be negative, got {older_than}")
        table = self._load()
        if table is None:
            return 0
        try:
            return expire_snapshots(self.ctx, table, datetime.now(UTC) - older_than)
        except CommitFailedException as exc:
            raise ContentionError(
                f"the Iceberg table {self.identifier} changed while its snapshots were "
                f"being expired; nothing was expired: {reason(exc)}"
            ) from exc

    def expirable(self, older_than: timedelta) -> list[str]:
        """The data files :meth:`expire` would delete now (an earlier run's left ones
        included); nothing is expired, written or deleted."""
        if older_than < timedelta(0):
            raise ConfigError(f"older_than must not be negative, got {older_than}")
        table = self._load()
        if table is None:
            return []
        return expirable_files(self.ctx, table, datetime.now(UTC) - older_than)

    # -- publishing ----------------------------------------------------------
    def _publish(self, publication: Publication) -> TableCommit:
        # The files stream, a shard at a time, into their DataFiles: only those are
        # all held at once. The first is looked at for a table created without a schema.
        source = iter(publication.files)
        first = next(source, None)
        files = itertools.chain([first] if first is not None else [], source)
        table, self._found = self._found or self._load(), None
        try:
            table = table or self._create(publication, first)
            added, removed, predicate = self._changes(table, publication, files)
        except ConfigError as exc:
            # The table can never take these files: a retry would fail alike and
            # with every file complete the job could not be rolled back by hand
            # either, so it is refused like a conflict, and rolled back.
            raise TableConflictError(
                f"the Iceberg table {self.identifier} cannot take job {publication.job_id}'s "
                f"files: {exc}"
            ) from exc
        base = table.metadata.current_snapshot_id
        try:
            snapshot_id = self._commit(table, publication.job_id, added, removed, predicate)
        except ValidationException as exc:
            raise self._conflict(publication.job_id, base, exc) from exc
        return TableCommit(
            format="iceberg",
            table=self.identifier,
            id=str(snapshot_id),
            files=len(added),
            removed_files=len(removed),
        )

    def _changes(
        self, table: Table, publication: Publication, files: Iterable[TableFile]
    ) -> tuple[list[DataFile], list[DataFile], BooleanExpression | None]:
        """The data files the job adds, those it removes, and the rows it replaces
        (None for an append).

        Raises:
            ConfigError: the table does not fit the job (another writer changed it
                since the job's setup, or made it since), or a file cannot be in it.
        """
        schema = files_schema(publication.table_schema)
        problems = self._misfits(table.metadata, schema, publication.partition_columns)
        if problems:
            raise ConfigError(f"it no longer fits the job: {'; '.join(problems)}")
        builder = DataFiles(table.metadata, publication.destination)
        added = [builder.data_file(f, self._rows(table.io, f)) for f in files]
        predicate = None
        if publication.replaces:
            predicate = partition_predicate(
                table.schema(), publication.partition_columns, publication.partitions
            )
        removed = []
        if predicate is not None:
            columns, partitions = publication.partition_columns, publication.partitions
            removed = replaced_files(table, columns, partitions, predicate)
        return added, removed, predicate

    def _commit(
        self,
        table: Table,
        job_id: str,
        added: list[DataFile],
        removed: list[DataFile],
        predicate: BooleanExpression | None,
    ) -> int:
        """One snapshot, one catalog commit. PyIceberg retries a refused one on the
        fresh state, re-checking conflicts, and keeps the snapshot id across
        retries, so a lost answer it retried is not committed twice."""
        transaction = table.transaction()
        if table.metadata.name_mapping() is None:  # a table made elsewhere
            mapping = table.schema().name_mapping.model_dump_json()
            transaction.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
        update = transaction.update_snapshot(snapshot_properties={JOB_ID_PROPERTY: job_id})
        producer: _FastAppendFiles | _OverwriteFiles
        if predicate is None:
            merge = property_as_bool(
                table.metadata.properties,
                TableProperties.MANIFEST_MERGE_ENABLED,
                TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT,
            )
            producer = update.merge_append() if merge else update.fast_append()
        else:
            producer = update.overwrite()
            # The predicate scopes PyIceberg's conflict check to these partitions.
            producer.delete_by_predicate(predicate)
            for old in removed:
                producer.delete_data_file(old)
        for new in added:
            producer.append_data_file(new)
        # The same manifests, their entries in blocks of many (:mod:`.iceberg_blocks`).
        make = producer.new_manifest_writer
        producer.new_manifest_writer = in_blocks(make)  # type: ignore[method-assign,assignment]
        # The job's own snapshot id: two commits of one job racing (a zombie
        # resumed beside its retry) both passed find(); the loser's retry finds
        # the id landed and stops, as after a lost answer.
        producer._snapshot_id = job_snapshot_id(job_id, table.metadata)
        producer.commit()
        transaction.commit_transaction()
        return producer.snapshot_id

    def _rows(self, io: FileIO, file: TableFile) -> int:
        """The file's row count: the writer's, or its footer's (one request) for a
        writer that gave none, since Iceberg needs one for every file."""
        if file.rows is not None:
            return file.rows
        log.info("no row count recorded for %s: reading its footer", file.path)
        return int(self._footer(io, file).num_rows)

    def _footer(self, io: FileIO, file: TableFile) -> pq.FileMetaData:
        with io.new_input(f"{self.ctx.dest.url}/{file.path}").open() as stream:
            return pq.read_metadata(stream)

    def _conflict(self, job_id: str, base: int | None, exc: Exception) -> TableConflictError:
        """The conflict, naming the commits that landed since the job's base."""
        others: list[Snapshot] = []
        try:
            fresh = self._load()
            if fresh is not None:
                others = list(_since(fresh.metadata, base))
        except Exception:
            log.warning("could not read the Iceberg table %s after a conflict", self.identifier)
        shown = ", ".join(_described(s) for s in others) or "a concurrent commit"
        return TableConflictError(
            f"{shown} to the Iceberg table {self.identifier} conflicts with job {job_id}'s "
            f"commit, so nothing of the job was committed ({reason(exc)})",
            other=", ".join(str(s.snapshot_id) for s in others),
        )

    # -- the table -----------------------------------------------------------
    def _catalog_(self) -> Catalog:
        if self._catalog is None:
            self._catalog = open_catalog(
                self.iceberg.iceberg_catalog, self.ctx.store, self.ctx.dest.bucket
            )
        return self._catalog

    def _load(self) -> Table | None:
        try:
            return self._catalog_().load_table(self.identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def _create(self, publication: Publication, first: TableFile | None) -> Table:
        """The table, created for the job's files (another publisher may create it
        first: then that one)."""
        catalog = self._catalog_()
        schema = iceberg_schema(
            self._files_schema(catalog, publication, first), publication.partition_columns
        )
        dest = self.ctx.dest.url
        namespace = self.identifier.rsplit(".", 1)[0]
        catalog.create_namespace_if_not_exists(namespace)
        try:
            with catalog.create_table_transaction(
                self.identifier,
                schema=schema,
                location=dest,
                partition_spec=identity_spec(schema, publication.partition_columns),
                properties={
                    TableProperties.WRITE_METADATA_PATH: f"{dest}/{METADATA_DIR}",
                    **_CREATED_PROPERTIES,
                },
            ) as transaction:
                mapping = transaction.table_metadata.schema().name_mapping
                transaction.set_properties(
                    {TableProperties.DEFAULT_NAME_MAPPING: mapping.model_dump_json()}
                )
        except TableAlreadyExistsError:
            log.info("the Iceberg table %s was created meanwhile", self.identifier)
        else:
            log.info("created the Iceberg table %s at %s", self.identifier, dest)
        return catalog.load_table(self.identifier)

    def _files_schema(
        self, catalog: Catalog, publication: Publication, first: TableFile | None
    ) -> pa.Schema:
        """The files' Arrow schema: the writer's, or a file's footer for a writer
        that gave none (one request, at the table's creation only)."""
        if publication.table_schema:
            return files_schema(publication.table_schema)
        if first is None:
            raise ConfigError(
                f"the Iceberg table {self.identifier} does not exist, and job "
                f"{publication.job_id} has neither a schema recorded nor a file to read one from"
            )
        io = load_file_io(dict(catalog.properties), self.ctx.dest.url)
        return self._footer(io, first).schema.to_arrow_schema()

    def _misfits(
        self, metadata: TableMetadata, files: pa.Schema | None, partition_columns: tuple[str, ...]
    ) -> list[str]:
        problems = []
        if metadata.format_version > SUPPORTED_TABLE_FORMAT_VERSION:
            # PyIceberg writes manifests of versions 1 and 2 only; it would fail at the
            # catalog commit, every file of the job complete, its outcome unknown.
            problems.append(
                f"its format version is {metadata.format_version}, and zero-rename "
                f"(PyIceberg) commits to versions up to {SUPPORTED_TABLE_FORMAT_VERSION}"
            )
        location = _normal(metadata.location)
        if location != self.ctx.dest.url:
            problems.append(f"its location is {location}, not the destination {self.ctx.dest.url}")
        spec = spec_problem(metadata, partition_columns)
        if spec is not None:
            problems.append(spec)
        if files is not None:
            problems += schema_problems(metadata.schema(), files, partition_columns)
        return problems

    def _commit_of(self, snapshot: Snapshot) -> TableCommit:
        summary = snapshot.summary
        return TableCommit(
            format="iceberg",
            table=self.identifier,
            id=str(snapshot.snapshot_id),
            files=int(summary.get("added-data-files", 0) or 0) if summary else 0,
            removed_files=int(summary.get("deleted-data-files", 0) or 0) if summary else 0,
        )


def job_snapshot_id(job_id: str, metadata: TableMetadata) -> int:
    """A snapshot id that is the job's in this table: from the job id and the
    table's uuid, positive and 63 bits, as Iceberg's ids are. Another writer's
    snapshot holding it (one chance in 2**63) gets a random one instead."""
    digest = hashlib.sha256(f"{metadata.table_uuid}/{job_id}".encode()).digest()
    snapshot_id = int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)
    taken = metadata.snapshot_by_id(snapshot_id)
    if snapshot_id == 0 or (taken is not None and _job_of(taken) != job_id):
        return metadata.new_snapshot_id()
    return snapshot_id


def _job_of(snapshot: Snapshot) -> str | None:
    return snapshot.summary.get(JOB_ID_PROPERTY) if snapshot.summary is not None else None


def _since(metadata: TableMetadata, base: int | None) -> Iterable[Snapshot]:
    """The main branch's snapshots after ``base``, newest first."""
    snapshot = metadata.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != base:
        yield snapshot
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None


def _described(snapshot: Snapshot) -> str:
    operation = snapshot.summary.operation.value if snapshot.summary is not None else "commit"
    job = _job_of(snapshot)
    by = f"zero-rename job {job}" if job else "another writer"
    when = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC).isoformat(timespec="seconds")
    return f"snapshot {snapshot.snapshot_id} ({operation} by {by} at {when})"


def _normal(location: str) -> str:
    """A table location as the destination's URL: ``s3://``, no trailing ``/``."""
    scheme, sep, rest = location.partition("://")
    if sep and scheme.lower() in ("s3a", "s3n"):
        location = f"s3://{rest}"
    return location.rstrip("/")
