"""A DataFrame written with ``option("table_format", ...)`` read back by clients nobody
here wrote: deltalake, PyIceberg and Polars, and by ``spark.read.format("zero-rename")``.

Each job is one commit of the format, carrying its job id; a ``replace`` of a
partition shows only its new rows to every table reader, while the replaced
files stay in the store for the table's older versions (plain listing readers
still see them: the documented limit). Each file's statistics in the table are
those of its own footer.
"""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.spark.spark_support import data_files
from tests.table_readers import (
    delta_table,
    delta_versions,
    iceberg_snapshots,
    iceberg_table,
    read,
    rows,
)
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.client import StoreConfig

pytestmark = pytest.mark.spark

D1, D2 = "2024-01-01", "2024-01-02"
# The rows' types as Spark writes them (timestamps in UTC), for comparing readers.
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("dt", pa.date32()),
    ]
)


def frame(spark: Any, days: dict[str, range]) -> Any:
    """Rows of ``days`` (day -> ids) in three tasks; every seventh name null."""
    parts = [
        spark.range(ids.start, ids.stop).selectExpr(
            "id",
            "case when id % 7 = 0 then null else concat('n', id) end as name",
            "cast(id * 1.25 as decimal(10, 2)) as amount",
            f"timestamp_seconds(unix_timestamp(date'{day}') + id * 60) as at",
            f"date'{day}' as dt",
        )
        for day, ids in days.items()
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union.repartition(3)


def write(df: Any, dest: str, options: dict[str, str], mode: str) -> None:
    df.write.format("zero-rename").options(**options).mode(mode).save(dest)


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_written_table_reads_back_through_every_reader_and_a_replace_shows_its_rows_only(
    spark: Any, bucket: str, store_config: StoreConfig, table_format: str
) -> None:
    c = Committer(f"s3://{bucket}/events", store_config)
    options = {"table_format": table_format, "partition_by": "dt"}
    where = c.dest.url
    if table_format == "iceberg":
        where = options["iceberg_table"] = f"spark_tests.events_{uuid.uuid4().hex[:12]}"

    first = frame(spark, {D1: range(0, 40), D2: range(40, 70)})
    write(first, c.dest.url, options, "append")
    (job,) = c.jobs()
    check_published(c, table_format, where, [job])
    expected = first.toArrow()
    check_readers(spark, c, table_format, where, expected)
    check_file_statistics(c, table_format, where)

    # A replace of D1: one commit removing its files and adding the new ones.
    replacement = frame(spark, {D1: range(100, 110)})
    write(replacement, c.dest.url, options, "overwrite")
    first_job, second_job = c.jobs()
    check_published(c, table_format, where, [first_job, second_job])
    old_d1 = [p for p in data_files(c) if p.startswith(f"dt={D1}/") and job.job_id in p]
    assert second_job.table_commit is not None
    assert second_job.table_commit.removed_files == len(old_d1) > 0
    kept = expected.filter(pc.not_equal(expected.column("dt"), datetime.date.fromisoformat(D1)))
    now = pa.concat_tables([kept, replacement.toArrow()])
    check_readers(spark, c, table_format, where, now)
    assert rows(read_day(table_format, where, D1), SCHEMA) == rows(replacement.toArrow(), SCHEMA)
    # The replaced files stay for readers of the older version: a plain listing
    # still sees them, until `zero-rename table expire` deletes them.
    assert set(old_d1) <= set(data_files(c))


def check_published(c: Committer, table_format: str, where: str, jobs: list[JobRecord]) -> None:
    """Each job is in exactly one commit of the table, which its record names."""
    found = (
        delta_versions(where)
        if table_format == "delta"
        else iceberg_snapshots(iceberg_table(where))
    )
    assert sorted(found) == sorted(j.job_id for j in jobs)
    for job in jobs:
        assert job.state == "committed" and job.table_commit is not None
        assert (job.table_commit.format, job.table_commit.table) == (table_format, where)
        assert job.table_commit.id == found[job.job_id]
        assert job.steps["publish_table"].status == "succeeded"
    # The newest commit is the table's current one.
    newest = jobs[-1].table_commit
    assert newest is not None
    if table_format == "delta":
        assert str(delta_table(where).version()) == newest.id
    else:
        assert str(iceberg_table(where).current_snapshot().snapshot_id) == newest.id


def check_readers(
    spark: Any, c: Committer, table_format: str, where: str, expected: pa.Table
) -> None:
    want = rows(expected, SCHEMA)
    ours = spark.read.format("zero-rename").load(c.dest.url).toArrow()
    for reader, table in (
        ("the format's own reader", read(table_format, where, "own")),
        ("Polars", read(table_format, where, "polars")),
        ('spark.read.format("zero-rename")', ours),
    ):
        assert rows(table, SCHEMA) == want, f"{reader} reads other rows"


def read_day(table_format: str, where: str, day: str) -> pa.Table:
    """One partition, through the format's own reader's filter."""
    if table_format == "delta":
        table = delta_table(where)
        kind = table.to_pyarrow_dataset().schema.field("dt").type
        value: Any = datetime.date.fromisoformat(day) if pa.types.is_date(kind) else day
        return table.to_pyarrow_table(filters=[("dt", "=", value)])
    from pyiceberg.expressions import EqualTo

    return iceberg_table(where).scan(row_filter=EqualTo("dt", day)).to_arrow()


def check_file_statistics(c: Committer, table_format: str, where: str) -> None:
    """Row counts and ``id`` bounds of each file, as the table holds them, are
    those of the file's own content: taken from its footer at write time."""
    in_table = table_file_stats(table_format, where, c.dest.dir)
    actual = {}
    for path in data_files(c):
        body, _ = c.store.get_object(c.dest.bucket, c.dest.dir + path)  # type: ignore[misc]
        ids = pq.read_table(io.BytesIO(body)).column("id")
        actual[path] = (len(ids), pc.min(ids).as_py(), pc.max(ids).as_py())
    assert in_table == actual


def table_file_stats(table_format: str, where: str, prefix: str) -> dict[str, tuple[int, int, int]]:
    """Path (relative to the table) -> (rows, min id, max id), from the table's metadata."""
    if table_format == "delta":
        actions = pa.table(delta_table(where).get_add_actions(flatten=True)).to_pylist()
        return {a["path"]: (a["num_records"], a["min.id"], a["max.id"]) for a in actions}
    files = iceberg_table(where).inspect.files().to_pylist()
    return {
        f["file_path"].split(f"/{prefix}", 1)[1]: (
            f["record_count"],
            f["readable_metrics"]["id"]["lower_bound"],
            f["readable_metrics"]["id"]["upper_bound"],
        )
        for f in files
    }
