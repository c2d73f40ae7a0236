"""Jobs of real Parquet files through the library, as the Spark writer leaves them for a
table format: each file's statistics from its own footer
(:func:`zero_rename.spark.parquet.file_stats`), the schema (partition columns
included) in every task manifest. For the tests that need a committed table
without a Spark session, and their readers' checks."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.spark.parquet import file_stats

# The table: ``id`` in the files, ``dt`` (a string) in the path only.
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
TABLE_SCHEMA = base64.b64encode(SCHEMA.serialize().to_pybytes()).decode()


def parquet_file(ids: Sequence[int]) -> tuple[bytes, pq.FileMetaData]:
    """A Parquet file of ``ids`` (the partition column left out, as Spark does) and its footer."""
    out = io.BytesIO()
    footers: list[pq.FileMetaData] = []
    with pq.ParquetWriter(out, SCHEMA.remove(1), metadata_collector=footers) as writer:
        writer.write_table(pa.table({"id": pa.array(ids, pa.int64())}))
    return out.getvalue(), footers[0]


def written_table_job(
    c: Committer,
    days: Mapping[str, Sequence[int]],
    conflict_mode: str = "append",
    **options: Any,
) -> JobRecord:
    """One job, one task, a file per day of ``days`` (day -> ids), set up with
    ``options`` (``table_format``...) and partitioned by ``dt``; not committed."""
    job = c.setup_job(
        {"partition_columns": "dt", "conflict_mode": conflict_mode, **options},
        table_schema=TABLE_SCHEMA,
    )
    attempt = c.task_attempt(job, "00000")
    attempt.table_schema = TABLE_SCHEMA
    for day, ids in days.items():
        body, footer = parquet_file(ids)
        with attempt.open({"dt": day}, ".snappy.parquet") as out:
            out.write(body)
            out.rows = len(ids)
            out.stats = file_stats(footer)
    attempt.commit()
    return job


def table_job(
    c: Committer,
    days: Mapping[str, Sequence[int]],
    conflict_mode: str = "append",
    **options: Any,
) -> JobRecord:
    """:func:`written_table_job`, committed."""
    job = written_table_job(c, days, conflict_mode, **options)
    c.commit_job(job.job_id)
    return c.job(job.job_id)
