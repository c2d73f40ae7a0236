"""Arrow record batches to Hive-partitioned Parquet files, one task at a time.

The writer knows nothing of S3 or commit protocols: it asks ``open_file`` for
a writable binary file per partition (the core's ``TaskAttempt.open`` in the
committer, a plain upload in the benchmark baselines), writes Parquet into
it and closes it. Partition columns are left out of the files, as Spark does.

For a table format, each file's column statistics are taken from the footer
the writer has just written (:func:`file_stats`): no byte is read back.

Memory is bounded three ways: rows wait in a per-file buffer only until they
fill a row group; all buffers together stay under :data:`BUFFER_BUDGET`; and
at most ``max_open_files`` files are open, the least recently used one being
finished when another is needed (a task fed unsorted rows of many partitions
then writes several files per partition rather than running out of memory).
"""

from __future__ import annotations

import datetime
import decimal
import io
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from zero_rename.core import Bound, ColumnStats, FileStats
from zero_rename.spark.options import FileOptions
from zero_rename.spark.partitions import PartitionValues, split_by_partition

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# In-memory Arrow bytes that close a row group (Parquet readers like row
# groups of tens of MiB; Spark's default is 128 MiB of encoded data).
ROW_GROUP_BYTES = 64 * MIB
# All row-group buffers of one task together; past it the largest is flushed.
BUFFER_BUDGET = 128 * MIB
# With a file size limit, a row group is also closed at this fraction of the
# limit, so a file passes its limit by at most about that much.
SIZE_CHECK_FRACTION = 4


class Sink(Protocol):
    """What ``open_file`` returns: a writable binary file with ``rows`` and ``stats``
    attributes, set before it is closed (``stats`` only when asked for)."""

    rows: int | None
    stats: FileStats | None

    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    def close(self) -> None: ...


OpenFile = Callable[[PartitionValues], Sink]


# The footer's statistics of one column chunk: null count, then bounds.
_Chunk = tuple[int | None, Any, Any, bool]


def file_stats(metadata: pq.FileMetaData) -> FileStats:
    """A Parquet footer's column statistics, as a table format's commit takes them.

    One entry per top-level column of the file (a struct, list or map column has
    none: the footer counts its leaves, not it), merged over the row groups:

    - ``nulls``: the sum of the row groups' null counts; None if one has none;
    - ``min``/``max``: booleans, integers and strings as JSON's own; a date as
      ``2024-01-31``; a timestamp as ``2024-01-31T10:00:00.123456+00:00`` (UTC,
      microseconds), one without a time zone (Spark's ``TIMESTAMP_NTZ``) as the
      same without the offset; a decimal as its text (``-4.50``, never in
      exponent form). None where the footer has no exact bound: a row group
      without statistics (a string over 4 KiB), a column of only nulls, and
      for every column of another type: binary (whose bounds JSON cannot carry),
      float and double (the footer's bounds leave NaN out, which Spark orders
      above every number: a reader skipping files by them could miss NaN rows),
      nanosecond timestamps (microseconds would round the bound).
    """
    schema = metadata.schema
    columns: dict[str, ColumnStats] = {}
    for index in range(metadata.num_columns):
        column = schema.column(index)
        if column.path != column.name:  # a leaf of a nested column
            continue
        chunks = [
            _chunk(metadata.row_group(r).column(index)) for r in range(metadata.num_row_groups)
        ]
        columns[column.name] = _column_stats(chunks, column)
    return FileStats(columns=columns)


def _chunk(chunk: Any) -> _Chunk:
    """(nulls, min, max, exact) of one column chunk; ``exact`` is False when the
    chunk holds values its statistics do not bound."""
    stats = chunk.statistics if chunk.is_stats_set else None
    if stats is None:
        return None, None, None, False
    nulls = stats.null_count if stats.has_null_count else None
    if stats.has_min_max:
        return nulls, stats.min, stats.max, True
    # No bounds: exact only if every value is null (nothing to bound).
    return nulls, None, None, nulls is not None and nulls == chunk.num_values


def _column_stats(chunks: list[_Chunk], column: Any) -> ColumnStats:
    counts = [c[0] for c in chunks]
    nulls = None if any(n is None for n in counts) else sum(n for n in counts if n is not None)
    bounded = [c for c in chunks if c[1] is not None]
    if not bounded or not all(c[3] for c in chunks) or _bound(bounded[0][1], column) is None:
        return ColumnStats(nulls=nulls)
    return ColumnStats(
        nulls=nulls,
        min=_bound(min(c[1] for c in bounded), column),
        max=_bound(max(c[2] for c in bounded), column),
    )


def _bound(value: Any, column: Any) -> Bound | None:
    """A footer's bound as JSON, or None for a type whose bounds are not given."""
    logical, physical = column.logical_type.type, column.physical_type
    if physical == "BOOLEAN":
        return bool(value)
    if logical in ("NONE", "INT") and physical in ("INT32", "INT64"):
        return int(value)
    if logical == "STRING" and isinstance(value, str):
        return value
    if logical == "DATE" and isinstance(value, datetime.date):
        return value.isoformat()
    # pandas' Timestamp (nanoseconds) is a subclass: those are left without bounds.
    if logical == "TIMESTAMP" and type(value) is datetime.datetime:
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC)
        return value.isoformat(timespec="microseconds")
    if logical == "DECIMAL" and isinstance(value, decimal.Decimal):
        return format(value, "f")
    return None


@dataclass(frozen=True)
class WrittenFile:
    partition: PartitionValues
    rows: int
    bytes: int
    stats: FileStats | None = None


class _Counted(io.RawIOBase):
    """Passes Parquet bytes to the sink, counting them; drops them once discarded,
    so a writer torn down after a failure sends nothing more."""

    def __init__(self, sink: Sink) -> None:
        super().__init__()
        self.sink = sink
        self.bytes = 0
        self.discarded = False

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if not self.discarded:
            self.sink.write(data)
        self.bytes += len(data)
        return len(data)


class _OpenParquet:
    """One Parquet file being written, with its buffer of rows not yet in a row group."""

    def __init__(
        self,
        partition: PartitionValues,
        sink: Sink,
        schema: pa.Schema,
        options: FileOptions,
        collect_stats: bool = False,
    ) -> None:
        self.partition = partition
        self.sink = sink
        self.out = _Counted(sink)
        self.options = options
        # The footer the writer builds, handed over at close: its statistics
        # cost no read of the file.
        self.footers: list[pq.FileMetaData] | None = [] if collect_stats else None
        self.writer = pq.ParquetWriter(
            self.out,
            schema,
            compression=options.parquet_compression,
            metadata_collector=self.footers,
        )
        self.buffer: list[pa.RecordBatch] = []
        self.buffered_rows = 0
        self.buffered_bytes = 0
        self.rows = 0  # rows already in row groups

    @property
    def total_rows(self) -> int:
        return self.rows + self.buffered_rows

    def room(self, rows: pa.RecordBatch) -> int:
        """How many of ``rows`` fit in the current row group (at least one)."""
        per_row = max(1, rows.nbytes // max(rows.num_rows, 1))
        by_bytes: int = (self._row_group_bytes() - self.buffered_bytes) // per_row
        by_rows = self.options.row_group_rows - self.buffered_rows
        return max(1, min(by_bytes, by_rows))

    def add(self, batch: pa.RecordBatch) -> None:
        """Buffer rows; a row group is written once the buffer reaches its limit."""
        self.buffer.append(batch)
        self.buffered_rows += batch.num_rows
        self.buffered_bytes += batch.nbytes
        if (
            self.buffered_rows >= self.options.row_group_rows
            or self.buffered_bytes >= self._row_group_bytes()
        ):
            self.flush()

    def _row_group_bytes(self) -> int:
        limit = self.options.max_file_size
        if limit is None:
            return ROW_GROUP_BYTES
        remaining = limit - self.out.bytes
        return max(1, min(ROW_GROUP_BYTES, max(remaining, limit // SIZE_CHECK_FRACTION)))

    def flush(self) -> None:
        if not self.buffer:
            return
        self.writer.write_table(
            pa.Table.from_batches(self.buffer), row_group_size=max(self.buffered_rows, 1)
        )
        self.rows += self.buffered_rows
        self.buffer, self.buffered_rows, self.buffered_bytes = [], 0, 0

    @property
    def full(self) -> bool:
        """The file reached its size limit (checked after each row group)."""
        limit = self.options.max_file_size
        return limit is not None and self.out.bytes >= limit

    def finish(self) -> WrittenFile:
        self.flush()
        self.writer.close()
        self.sink.rows = self.rows
        stats = file_stats(self.footers[0]) if self.footers else None
        if stats is not None:
            self.sink.stats = stats
        self.sink.close()
        return WrittenFile(self.partition, self.rows, self.out.bytes, stats)

    def discard(self) -> None:
        self.out.discarded = True
        self.buffer = []
        try:
            self.writer.close()
        except Exception:  # the file is abandoned either way
            log.debug("closing an abandoned Parquet writer failed", exc_info=True)


class PartitionedParquetWriter:
    """Writes one task's batches into Parquet files, one or more per partition.

    ``collect_stats``: give each file's sink the column statistics of its footer
    (``sink.stats``, :func:`file_stats`), for a table format's commit.
    """

    def __init__(
        self,
        open_file: OpenFile,
        partition_columns: tuple[str, ...],
        options: FileOptions,
        metadata: Mapping[str, str] | None = None,
        collect_stats: bool = False,
    ) -> None:
        self.open_file = open_file
        self.columns = partition_columns
        self.options = options
        self.metadata = dict(metadata or {})
        self.collect_stats = collect_stats
        self.files: list[WrittenFile] = []
        self._open: OrderedDict[tuple[str | None, ...], _OpenParquet] = OrderedDict()
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Write a batch of the full schema, partition columns included."""
        if batch.num_rows == 0:
            return
        for values, rows in split_by_partition(batch, self.columns):
            self._write_partition(values, rows)
        self.rows += batch.num_rows
        self._keep_budget()

    def _write_partition(self, values: PartitionValues, rows: pa.RecordBatch) -> None:
        limit = self.options.max_rows_per_file
        while rows.num_rows:
            current = self._file(values, rows.schema)
            # Slicing at the row-group and file limits keeps files near their
            # size limit even when Spark's batches are large.
            take = min(rows.num_rows, current.room(rows))
            if limit is not None:
                take = min(take, limit - current.total_rows)
            current.add(rows.slice(0, take))
            rows = rows.slice(take)
            if current.full or (limit is not None and current.total_rows >= limit):
                self._finish(values)

    def _file(self, values: PartitionValues, schema: pa.Schema) -> _OpenParquet:
        key = tuple(values.get(c) for c in self.columns)
        found = self._open.get(key)
        if found is not None:
            self._open.move_to_end(key)
            return found
        if len(self._open) >= self.options.max_open_files:
            oldest = next(iter(self._open))
            self._finish_key(oldest)
        opened = _OpenParquet(
            values, self.open_file(values), self._schema(schema), self.options, self.collect_stats
        )
        self._open[key] = opened
        return opened

    def _schema(self, schema: pa.Schema) -> pa.Schema:
        if not self.metadata:
            return schema
        return schema.with_metadata({**(schema.metadata or {}), **self.metadata})

    def _finish(self, values: PartitionValues) -> None:
        self._finish_key(tuple(values.get(c) for c in self.columns))

    def _finish_key(self, key: tuple[str | None, ...]) -> None:
        self.files.append(self._open.pop(key).finish())

    def _keep_budget(self) -> None:
        while sum(f.buffered_bytes for f in self._open.values()) > BUFFER_BUDGET:
            largest = max(self._open.values(), key=lambda f: f.buffered_bytes)
            largest.flush()
            if largest.full:
                self._finish(largest.partition)

    def write_empty(self, schema: pa.Schema) -> None:
        """One file with no rows, so readers can find the schema of an empty result
        (Spark's first task does the same)."""
        self._file({c: None for c in self.columns}, schema)

    def close(self) -> list[WrittenFile]:
        """Finish every open file; returns all files written."""
        while self._open:
            self._finish_key(next(iter(self._open)))
        return self.files

    def discard(self) -> None:
        """Abandon open files after a failure; the caller aborts their uploads."""
        for opened in self._open.values():
            opened.discard()
        self._open.clear()
