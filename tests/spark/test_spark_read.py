"""Reading through the ``zero-rename`` format: committed state only, types as written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import write_task
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.spark


def days_df(spark: Any, days: int = 3, n: int = 300) -> Any:
    return spark.sql(f"""
        select id, concat('2026-11-', 20 + cast(id % {days} as int)) as dt,
               cast(id % 2 as int) as shard, id * 0.5 as amount
        from range(0, {n}, 1, 3)""")


def read(spark: Any, dest: str, **options: str) -> Any:
    reader = spark.read.format("zero-rename")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(dest)


def test_types_as_written_partition_columns_included(spark: Any, dest: str) -> None:
    df = days_df(spark)
    df.write.format("zero-rename").mode("append").option("partition_by", "dt,shard").save(dest)
    back = read(spark, dest)
    # A string column of dates stays a string; an int partition column an int.
    assert dict(back.dtypes) == dict(df.dtypes)
    assert sorted(back.select(*df.columns).collect()) == sorted(df.collect())
    assert (
        back.where("dt = '2026-11-21' and shard = 1").count()
        == df.where("dt = '2026-11-21' and shard = 1").count()
    )


def test_overwrite_then_read_and_as_of_job(spark: Any, dest: str, committer: Committer) -> None:
    df = days_df(spark)
    df.write.format("zero-rename").mode("append").option("partition_by", "dt").save(dest)
    first = [j.job_id for j in committer.jobs() if j.state == "committed"]
    newer = days_df(spark, days=1, n=30)  # only 2026-11-20
    newer.write.format("zero-rename").mode("overwrite").option("partition_by", "dt").save(dest)
    back = read(spark, dest)
    assert back.where("dt = '2026-11-20'").count() == 30
    assert back.count() == 30 + df.where("dt != '2026-11-20'").count()
    # The state right after the first job; its 2026-11-20 files were replaced and
    # deleted since, which the reader says rather than read a partial state.
    with pytest.raises(Exception, match="can no longer be read"):
        read(spark, dest, as_of_job=first[0]).count()


def test_only_committed_jobs_and_foreign_files(spark: Any, dest: str, committer: Committer) -> None:
    (
        days_df(spark)
        .write.format("zero-rename")
        .mode("append")
        .option("partition_by", "dt")
        .save(dest)
    )
    # A job written, never committed: its uploads stay pending, nothing is read.
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2026-11-20": b"not parquet"})
    assert read(spark, dest).count() == 300
    committer.abort_job(job.job_id)


def test_user_schema_and_empty_destination(spark: Any, dest: str) -> None:
    with pytest.raises(Exception, match="no committed files"):
        read(spark, dest).count()
    (
        days_df(spark)
        .write.format("zero-rename")
        .mode("append")
        .option("partition_by", "dt")
        .save(dest)
    )
    back = spark.read.schema("id long, amount double, dt string").format("zero-rename").load(dest)
    assert back.columns == ["id", "amount", "dt"]
    assert back.count() == 300


def test_unknown_and_secret_options_are_refused(spark: Any, dest: str) -> None:
    with pytest.raises(Exception, match="unknown option"):
        read(spark, dest, partition_by="dt").count()
    with pytest.raises(Exception, match="credentials are never accepted"):
        read(spark, dest, secret_key="x").count()


def test_filters_on_partition_columns_skip_files_with_pushdown_on(
    spark: Any, dest: str, committer: Committer
) -> None:
    days_df(spark).write.format("zero-rename").mode("append").option("partition_by", "dt").save(
        dest
    )
    # A file another tool left in one partition, which no Parquet reader can read:
    # a query reads it unless its filters rule out the partition.
    committer.store.put_object(
        committer.dest.bucket,
        committer.dest.dir + "dt=2026-11-22/other-tool.parquet",
        b"not parquet",
    )
    query = "dt = '2026-11-21' and id >= 0"
    with pytest.raises(Exception, match="other-tool.parquet|Parquet"):
        read(spark, dest).where(query).count()  # pushdown off, Spark's default: no error either
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        assert read(spark, dest).where(query).count() == 100
        # What a filter keeps is read (Not and the rest: tests/spark/test_pruning.py);
        # a failing read costs Spark's three attempts of its task, so only one here.
        assert read(spark, dest).where("dt in ('2026-11-20', '2026-11-21')").count() == 200
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
