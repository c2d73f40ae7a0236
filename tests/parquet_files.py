"""Real Parquet files written into task attempts, described as a writer describes
them for a table format: each file's rows and column statistics
(:class:`~zero_rename.core.data.model.FileStats`, from the footer pyarrow wrote)
and the files' Arrow schema (base64 Arrow IPC) on the attempt."""

from __future__ import annotations

import base64
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zero_rename.core.committer import Committer
from zero_rename.core.data.model import Bound, ColumnStats, FileStats, JobRecord, TaskManifest


def encoded_schema(schema: pa.Schema) -> str:
    """The files' schema as a task attempt carries it."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def parquet_bytes(table: pa.Table) -> tuple[bytes, pq.FileMetaData]:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    buffer = sink.getvalue()
    return buffer.to_pybytes(), pq.read_metadata(pa.BufferReader(buffer))


def file_stats(meta: pq.FileMetaData) -> FileStats:
    """Per top-level column: nulls, min and max over the row groups, as JSON scalars
    (dates and timestamps as ISO text, decimals as text); no bounds where a row
    group has none or the type has no JSON form."""
    columns: dict[str, ColumnStats] = {}
    for c in range(meta.num_columns):
        path = meta.schema.column(c).path
        if "." in path:
            continue  # nested: no statistics, as Spark's writer gives none
        groups = [meta.row_group(r).column(c).statistics for r in range(meta.num_row_groups)]
        nulls = (
            sum(s.null_count for s in groups)
            if groups and all(s is not None and s.has_null_count for s in groups)
            else None
        )
        low = high = None
        if groups and all(s is not None and s.has_min_max for s in groups):
            low = _json(min(s.min for s in groups))
            high = _json(max(s.max for s in groups))
        if low is None or high is None:
            low = high = None
        columns[path] = ColumnStats(nulls=nulls, min=low, max=high)
    return FileStats(columns=columns)


def _json(value: Any) -> Bound | None:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        text = value.isoformat(timespec="microseconds")
        return text.replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return None


def write_parquet(
    c: Committer,
    job: JobRecord,
    task_id: str,
    files: dict[str | None, pa.Table],
    attempt: int = 0,
    stats: bool = True,
    schema: bool = True,
) -> TaskManifest:
    """One task attempt writing a Parquet file per partition value of the job's
    first partition column (key None: an unpartitioned job's file), committed."""
    attempt_ = c.task_attempt(job, task_id, attempt)
    columns = job.options.partition_columns
    for value, table in files.items():
        body, meta = parquet_bytes(table)
        if schema:
            attempt_.table_schema = encoded_schema(table.schema)
        with attempt_.open({columns[0]: value} if columns else None) as out:
            out.write(body)
            out.rows = meta.num_rows
            out.stats = file_stats(meta) if stats else None
    manifest = attempt_.commit()
    assert manifest is not None
    return manifest
