"""``spark.read.format("zero-rename").load("s3://bucket/table")``: committed output only.

Spark's roles, in a Python data source reader:

- ``DataSource.schema()`` (driver, when no schema is given): the columns of a
  committed file's Parquet footer, as the writer recorded them for Spark, and
  the partition columns from the ``column=value`` directories: typed as the
  writer recorded them, or inferred as Spark infers partition values (integer,
  long, double, date, else string) for files other tools wrote.
- ``DataSource.reader(schema)`` (driver): takes one snapshot of the committed
  state (:mod:`zero_rename.core.views.snapshot`) and groups its files into input
  partitions; the reader, with the snapshot's file list, is pickled to the
  executors, so every task reads the same state. With
  ``spark.sql.python.filterPushdown.enabled`` on, filters on partition columns
  skip whole files (:mod:`zero_rename.spark.pruning`).
- ``read(partition)`` (executors): streams each file's row groups as Arrow
  batches, with the partition columns added.

A replace job that commits while a query runs deletes files of the snapshot
the query reads; such a task fails saying so, and the query can be run again.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import (
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from zero_rename.spark import FORMAT, worker_imports

# The committer's models built without pydantic's plugin lookup, however the
# format was registered: this module is what every read's worker unpickles.
with worker_imports():
    from zero_rename.core import (
        Committer,
        Destination,
        SnapshotFile,
        StoreConfig,
        TableSnapshot,
        check_job_id,
    )
    from zero_rename.errors import ConfigError, ZeroRenameError
    from zero_rename.read import filesystem
    from zero_rename.spark.options import (
        DEFAULT_MAX_PARTITION_BYTES,
        ReaderOptions,
        check_secret_keys,
        validated,
    )
    from zero_rename.spark.pruning import called_for_pushdown, may_match, typed_value
    from zero_rename.spark.schema import (
        PARTITION_SCHEMA_KEY,
        SPARK_SCHEMA_KEY,
        arrow_to_spark,
        spark_to_arrow,
    )

log = logging.getLogger(__name__)

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT32 = 2**31


@dataclass(frozen=True)
class ReadConfig:
    destination: Destination
    store: StoreConfig
    as_of_job: str | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES


READ_OPTIONS = frozenset(ReaderOptions.model_fields)


def parse_reader_options(options: Mapping[str, str]) -> ReadConfig:
    opts = {str(k).lower(): v for k, v in options.items()}
    check_secret_keys(opts)
    unknown = sorted(set(opts) - READ_OPTIONS)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown} for reading format {FORMAT!r}; valid "
            f"options are {sorted(READ_OPTIONS - {'path'})}"
        )
    parsed = validated(ReaderOptions, opts)
    if not parsed.path:
        raise ConfigError(f"format {FORMAT!r} reads a destination: .load('s3://bucket/table')")
    return ReadConfig(
        Destination.parse(parsed.path),
        parsed.store_config(),
        check_job_id(parsed.as_of_job) if parsed.as_of_job else None,
        max(1, parsed.max_partition_bytes),
    )


def take_snapshot(config: ReadConfig) -> TableSnapshot:
    return Committer(config.destination, config.store).snapshot(config.as_of_job)


# -- schema (driver) -------------------------------------------------------------
def infer_schema(config: ReadConfig, snapshot: TableSnapshot) -> StructType:
    """Data columns from a footer of the newest committed job's files (or any file),
    then the partition columns."""
    if not snapshot.files:
        raise ZeroRenameError(
            f"{config.destination.url} has no committed files to take a schema from; give "
            "one with spark.read.schema(...)"
        )
    newest = snapshot.committed_jobs[-1] if snapshot.committed_jobs else None
    sample = next((f for f in reversed(snapshot.files) if f.job_id == newest), snapshot.files[-1])
    fs = filesystem(config.store)
    with fs.open_input_file(f"{config.destination.bucket}/{sample.key}") as handle:
        arrow = pq.read_schema(handle)
    metadata = {k.decode(): v.decode() for k, v in (arrow.metadata or {}).items()}
    data = (
        StructType.fromJson(json.loads(metadata[SPARK_SCHEMA_KEY]))
        if SPARK_SCHEMA_KEY in metadata
        else arrow_to_spark(arrow)
    )
    recorded = (
        StructType.fromJson(json.loads(metadata[PARTITION_SCHEMA_KEY]))
        if PARTITION_SCHEMA_KEY in metadata
        else StructType([])
    )
    fields = [f for f in data.fields]
    for column in snapshot.partition_columns():
        if column in data.fieldNames():
            continue  # a data column of the same name wins, as in Spark
        known = [f for f in recorded.fields if f.name == column]
        values = {dict(f.partition).get(column) for f in snapshot.files}
        fields.append(known[0] if known else StructField(column, partition_type(values), True))
    return StructType(fields)


def partition_type(values: set[str | None]) -> DataType:
    """The type Spark infers for a partition column from its directory values."""
    present = [v for v in values if v is not None]
    if not present:
        return StringType()
    if all(_is_int(v) for v in present):
        return IntegerType() if all(-_INT32 <= int(v) < _INT32 for v in present) else LongType()
    if all(_is_float(v) for v in present):
        return DoubleType()
    if all(_is_date(v) for v in present):
        return DateType()
    return StringType()


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return -(2**63) <= int(text) < 2**63 and text.strip() == text


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text


def _is_date(text: str) -> bool:
    if not _DATE_RE.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


# -- planning (driver) and reading (executors) ---------------------------------------
@dataclass(frozen=True)
class FileGroup(InputPartition):
    """Files one task reads: (key, partition values) each."""

    files: tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...]


def group_files(files: Sequence[SnapshotFile], max_bytes: int) -> list[FileGroup]:
    """One input partition per large file, small files together up to ``max_bytes``."""
    groups: list[FileGroup] = []
    current: list[SnapshotFile] = []
    size = 0
    for f in sorted(files, key=lambda f: -f.size):
        if current and size + f.size > max_bytes:
            groups.append(_group(current))
            current, size = [], 0
        current.append(f)
        size += f.size
    if current:
        groups.append(_group(current))
    return groups


def _group(files: Sequence[SnapshotFile]) -> FileGroup:
    return FileGroup(tuple((f.key, f.partition) for f in files))


class ZeroRenameReader(DataSourceReader):
    """Built on the driver with one snapshot; pickled to the executors."""

    def __init__(self, config: ReadConfig, schema: StructType) -> None:
        self.config = config
        self.schema = schema
        snapshot = take_snapshot(config)
        self.files: tuple[SnapshotFile, ...] = tuple(snapshot.files)
        log.info(
            "reading %s: %d committed file(s) of %d job(s)%s",
            config.destination.url,
            len(snapshot.files),
            len(snapshot.committed_jobs),
            "".join(f", {n} {why}" for why, n in sorted(snapshot.skipped.items())),
        )

    def partitions(self) -> Sequence[InputPartition]:
        groups = group_files(self.selected_files(), self.config.max_partition_bytes)
        log.info("%s: %d input partition(s)", self.config.destination.url, len(groups))
        return groups

    def selected_files(self) -> Sequence[SnapshotFile]:
        return self.files

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FileGroup)
        target = spark_to_arrow(self.schema)
        fs = filesystem(self.config.store)
        for key, values in partition.files:
            path = f"{self.config.destination.bucket}/{key}"
            try:
                handle = fs.open_input_file(path)
            except FileNotFoundError as exc:
                raise ZeroRenameError(
                    f"s3://{path} was deleted while this query read it: a replace job "
                    "committed after the query took its snapshot. Run the query again to "
                    "read the new committed state"
                ) from exc
            with handle:
                try:
                    batches = pq.ParquetFile(handle).iter_batches()
                    for batch in batches:
                        yield _conform(batch, target, dict(values), key)
                except OSError as exc:
                    # A file deleted mid-read ends in a cut-off response, not "not found".
                    raise ZeroRenameError(
                        f"reading s3://{path} failed ({exc}); if a replace job committed "
                        "since the query started, it deleted this file: run the query "
                        "again to read the new committed state"
                    ) from exc


class PruningReader(ZeroRenameReader):
    """The reader Spark's filter pushdown gets: files of partitions no row of which
    can pass the query's filters are not read (:mod:`zero_rename.spark.pruning`)."""

    filters: tuple[Filter, ...] = ()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 - Spark's name
        self.filters = tuple(filters)
        # Every filter goes back to Spark, which applies it to the rows read.
        return list(filters)

    def selected_files(self) -> Sequence[SnapshotFile]:
        if not self.filters:
            return self.files
        types = {f.name: f.dataType for f in self.schema.fields}
        kept = [
            f
            for f in self.files
            if may_match(
                self.filters,
                {
                    column: typed_value(value, types[column])
                    for column, value in f.partition
                    if column in types
                },
            )
        ]
        log.info(
            "%s: partition filters leave %d of %d file(s)",
            self.config.destination.url,
            len(kept),
            len(self.files),
        )
        return kept


def new_reader(config: ReadConfig, schema: StructType) -> ZeroRenameReader:
    return (PruningReader if called_for_pushdown() else ZeroRenameReader)(config, schema)


def _conform(
    batch: pa.RecordBatch, target: pa.Schema, partition: dict[str, str | None], key: str
) -> pa.RecordBatch:
    """The batch as ``target`` says: columns in its order and types, partition columns
    filled from the path, columns a file lacks as nulls."""
    columns = []
    for field in target:
        if field.name in batch.schema.names:
            column = batch.column(field.name)
        elif field.name in partition:
            value = partition[field.name]
            column = pa.array([value] * batch.num_rows, pa.string())
        else:
            column = pa.nulls(batch.num_rows, field.type)
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise ZeroRenameError(
                    f"column {field.name!r} of s3://.../{key.rsplit('/', 1)[-1]} "
                    f"cannot be read as {field.type}: {exc}"
                ) from exc
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=target)
