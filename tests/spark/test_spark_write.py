"""Writing through the ``zero-rename`` format: layout, types, read back, save modes, options."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import pending_in_bucket
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig

from spark_support import arrow_table, assert_nothing, data_files, spark_rows

pytestmark = pytest.mark.spark


def sales(spark: Any, n: int = 2000, parts: int = 4, days: int = 3) -> Any:
    return spark.sql(f"""
        select id,
               cast(id % 7 as int) as qty,
               cast(id * 1.25 as double) as amount,
               concat('item-', id) as item,
               date_add(date'2024-01-01', cast(id % {days} as int)) as dt,
               element_at(array('eu', 'us', 'ap'), cast(id % 3 as int) + 1) as region
        from range(0, {n}, 1, {parts})""")


def write(
    df: Any, dest: str, mode: str = "append", fmt: str = "zero-rename", **options: str
) -> None:
    writer = df.write.format(fmt).mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(dest)


def read_file(c: Committer, relative: str) -> pq.ParquetFile:
    found = c.store.get_object(c.dest.bucket, c.dest.dir + relative)
    assert found is not None
    return pq.ParquetFile(pa.BufferReader(found[0]))


def test_partitioned_append_reads_back_in_spark_and_pyarrow(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = sales(spark)
    write(df, dest, partition_by="dt,region")

    files = data_files(committer)
    assert len(files) == 4 * 3  # each task meets dt and region in lock-step: 3 partitions
    assert all(f.startswith("dt=2024-01-0") and "/region=" in f for f in files)
    assert all(f.endswith(".snappy.parquet") for f in files)
    # Partition columns are directories, not columns of the files.
    assert read_file(committer, files[0]).schema_arrow.names == ["id", "qty", "amount", "item"]
    assert pending_in_bucket(committer) == []
    success = committer.read_success()
    assert success is not None and success.metrics["committer_rows_committed"] == 2000

    back = spark_rows(spark, committer, tmp_path)
    assert dict(back.dtypes) == {**dict(df.dtypes)}
    assert sorted(back.select(*df.columns).collect()) == sorted(df.collect())

    table = arrow_table(committer, pa.schema([("dt", pa.date32()), ("region", pa.string())]))
    source = df.toArrow()
    assert [f.type for f in table.select(source.column_names).schema] == [
        f.type for f in source.schema
    ]
    assert sorted(table.select(source.column_names).to_pylist(), key=lambda r: r["id"]) == sorted(
        source.to_pylist(), key=lambda r: r["id"]
    )


TYPES_SQL = """
    select cast(id % 100 as tinyint) as b, cast(id as smallint) as s, cast(id as int) as i, id as l,
           cast(id / 3 as float) as f, id / 7 as d, cast(id / 9 as decimal(12, 4)) as dec,
           concat('text ', id, ' é') as str, cast(concat('bin', id) as binary) as bin,
           id % 2 = 0 as flag, date_add(date'1999-12-30', cast(id as int)) as day,
           timestamp_seconds(1700000000 + id * 3601) as ts,
           cast(timestamp_seconds(1700000000 + id) as timestamp_ntz) as ntz,
           array(cast(id as int), null) as arr, map('k', id) as m,
           named_struct('x', id, 'y', concat('y', id)) as st,
           if(id % 5 = 0, null, id) as maybe
    from range(0, 300, 1, 3)"""


def test_every_type_round_trips_unpartitioned_staging_via_s3a(
    spark: Any, bucket: str, tmp_path: Path, store_config: StoreConfig
) -> None:
    dest = f"s3a://{bucket}/typed"
    committer = Committer(dest, store_config)
    df = spark.sql(TYPES_SQL)
    write(df, dest, committer="staging", compression="zstd")

    assert all(f.endswith(".zstd.parquet") for f in data_files(committer))
    assert committer.read_success().committer == "directory"  # S3A's name for staging
    back = spark_rows(spark, committer, tmp_path)
    assert back.dtypes == df.dtypes  # Spark reads every Parquet column as nullable
    assert sorted(back.collect(), key=lambda r: r.l) == sorted(df.collect(), key=lambda r: r.l)
    table = arrow_table(committer)
    source = df.toArrow()
    assert [f.type for f in table.schema] == [f.type for f in source.schema]
    assert table.sort_by("l").to_pylist() == source.sort_by("l").to_pylist()


PARTITION_SQL = """
    select * from values
      ('a/b', 1, true, date'2024-01-01', 1L),
      ('k=v', -2, false, date'0999-03-04', 2L),
      ('50%', 3, true, date'2024-02-29', 3L),
      ('12:30', 4, false, date'2024-01-01', 4L),
      ('with space', 5, true, date'2024-01-01', 5L),
      ('été 日本', 6, false, date'2024-01-01', 6L),
      ('#?*[]^{}\\\\', 7, true, date'2024-01-01', 7L),
      (null, null, null, null, 8L),
      ('', 9, true, date'2024-01-01', 9L)
    as t(k, n, flag, day, v)"""


def _relative_dirs(root: Path) -> set[str]:
    return {str(p.parent.relative_to(root)) for p in root.rglob("*.parquet")}


def test_partition_directories_are_named_as_spark_names_them(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = spark.sql(PARTITION_SQL).repartition(2)
    write(df, dest, partition_by="flag,n,day,k")
    # Spark's own Parquet writer, on local disk, is the reference.
    reference = tmp_path / "spark-native"
    df.write.partitionBy("flag", "n", "day", "k").parquet(str(reference))

    ours = {os.path.dirname(f) for f in data_files(committer)}
    assert ours == _relative_dirs(reference)
    assert (
        "flag=__HIVE_DEFAULT_PARTITION__/n=__HIVE_DEFAULT_PARTITION__"
        "/day=__HIVE_DEFAULT_PARTITION__/k=__HIVE_DEFAULT_PARTITION__" in ours
    )

    # Types as written (Spark's own discovery would read flag as a string), values
    # as Spark's reader gives them for those types (the empty string as null).
    expected = spark.read.schema(df.schema).parquet(str(reference))
    back = spark_rows(spark, committer, tmp_path)
    assert dict(back.dtypes) == dict(df.dtypes) == dict(expected.dtypes)
    columns = ["v", "k", "n", "flag", "day"]
    assert sorted(back.select(*columns).collect()) == sorted(expected.select(*columns).collect())

    table = arrow_table(
        committer,
        pa.schema(
            [("flag", pa.bool_()), ("n", pa.int32()), ("day", pa.date32()), ("k", pa.string())]
        ),
    )
    by_v = {r["v"]: r for r in table.to_pylist()}
    assert by_v[1]["k"] == "a/b" and by_v[2]["k"] == "k=v" and by_v[6]["k"] == "été 日本"
    assert by_v[8] == {"v": 8, "flag": None, "n": None, "day": None, "k": None}
    assert by_v[9]["k"] is None  # Spark writes an empty string as the null partition


def test_new_file_past_row_limit_and_size_limit(
    spark: Any, bucket: str, store_config: StoreConfig
) -> None:
    by_rows = Committer(f"s3://{bucket}/rows", store_config)
    write(spark.range(0, 2000, 1, 2), by_rows.dest.url, max_rows_per_file="300")
    counts = sorted(read_file(by_rows, f).metadata.num_rows for f in data_files(by_rows))
    assert counts == [100, 100] + [300] * 6

    by_size = Committer(f"s3://{bucket}/size", store_config)
    noisy = spark.sql("select id, sha2(cast(id as string), 512) as h from range(0, 20000, 1, 1)")
    write(noisy, by_size.dest.url, max_file_size="256k", compression="none")
    files = data_files(by_size)
    sizes = [
        len(by_size.store.get_object(by_size.dest.bucket, by_size.dest.dir + f)[0]) for f in files
    ]
    assert len(files) >= 4
    # A file closes at the first row-group boundary past the limit: at most a
    # quarter of the limit (one row group) over it.
    assert all(size <= 256 * 1024 * 1.3 for size in sizes)
    assert sum(read_file(by_size, f).metadata.num_rows for f in files) == 20000


def test_overwrite_replaces_only_the_partitions_written(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    write(sales(spark, 900, days=3), dest, partition_by="dt")
    before = {f for f in data_files(committer) if f.startswith("dt=2024-01-01/")}
    # The table's own types (0.0 alone would be a decimal(1,1) column).
    fresh = spark.sql(
        "select id + 10000 as id, 0 as qty, cast(0 as double) as amount, "
        "'new' as item, date'2024-01-02' as dt, 'eu' as region "
        "from range(0, 50, 1, 2)"
    )
    write(fresh, dest, mode="overwrite", partition_by="dt")

    back = spark_rows(spark, committer, tmp_path)
    per_day = {str(r.dt): r["count"] for r in back.groupBy("dt").count().collect()}
    assert per_day == {"2024-01-01": 300, "2024-01-02": 50, "2024-01-03": 300}
    assert {f for f in data_files(committer) if f.startswith("dt=2024-01-01/")} == before
    assert committer.read_success().metrics["committer_files_replaced"] == 4
    assert pending_in_bucket(committer) == []


def test_overwrite_unpartitioned_replaces_everything_and_append_adds(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    write(spark.range(0, 100, 1, 2), dest)
    write(spark.range(100, 150, 1, 2), dest)  # append: no conflict mode means append
    assert spark_rows(spark, committer, tmp_path / "a").count() == 150
    write(spark.range(500, 510, 1, 2), dest, mode="overwrite")
    back = spark_rows(spark, committer, tmp_path / "b")
    assert sorted(r.id for r in back.collect()) == list(range(500, 510))
    assert len(data_files(committer)) == 2


def test_conflict_mode_fail_changes_nothing(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    write(sales(spark, 300, days=1), dest, partition_by="dt")
    before = data_files(committer)
    with pytest.raises(Exception, match="conflict mode 'fail'"):
        write(sales(spark, 30, days=1), dest, partition_by="dt", conflict_mode="fail")
    assert data_files(committer) == before
    assert pending_in_bucket(committer) == []
    assert [j.state for j in committer.jobs()] == ["committed", "aborted"]
    # Another partition is no conflict.
    other = sales(spark, 30, days=1).selectExpr(
        "id", "qty", "amount", "item", "date'2024-05-05' as dt", "region"
    )
    write(other, dest, partition_by="dt", conflict_mode="fail")
    assert spark_rows(spark, committer, tmp_path).count() == 330


def test_if_exists_error_and_ignore_as_spark_documents_the_save_modes(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    # On an empty destination both write, as Spark's errorifexists and ignore do.
    write(spark.range(0, 100, 1, 2), dest, if_exists="error")
    write(spark.range(0, 1, 1, 1), committer.dest.url + "-other", if_exists="ignore")
    before = data_files(committer)
    jobs = [j.job_id for j in committer.jobs()]
    with pytest.raises(Exception, match="already holds data and if_exists=error"):
        write(spark.range(100, 200, 1, 2), dest, if_exists="errorifexists")
    # ignore: the DataFrame is not written and nothing changes, not even a job record.
    write(spark.range(100, 200, 1, 2), dest, if_exists="ignore")
    assert data_files(committer) == before
    assert [j.job_id for j in committer.jobs()] == jobs
    assert pending_in_bucket(committer) == []
    assert sorted(r.id for r in spark_rows(spark, committer, tmp_path).collect()) == list(
        range(100)
    )


def test_empty_dataframe_writes_one_empty_file_with_the_schema(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = spark.range(0, 0, 1, 2).selectExpr("id", "cast(id as string) as s")
    write(df, dest)
    assert len(data_files(committer)) == 1
    back = spark_rows(spark, committer, tmp_path)
    assert back.dtypes == df.dtypes and back.count() == 0


# Parsing is covered without Spark in test_spark_units.py; these check that
# Spark surfaces the error, and that nothing is set up before it.
@pytest.mark.parametrize(
    ("options", "mode", "message"),
    [
        ({"partiton_by": "dt"}, "append", "unknown option(s) ['partiton_by']"),
        ({"part_size": "1m"}, "append", "part_size"),
        ({"conflict_mode": "append"}, "overwrite", "contradicts option conflict_mode='append'"),
        ({"partition_by": "amount"}, "append", "partition column 'amount' has type double"),
        ({}, "error", "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"),
        ({}, "ignore", "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"),
    ],
)
def test_bad_options_are_named_and_nothing_is_set_up(
    spark: Any, dest: str, committer: Committer, options: dict[str, str], mode: str, message: str
) -> None:
    with pytest.raises(Exception) as failure:
        write(sales(spark, 10, parts=1), dest, mode=mode, **options)
    assert message in str(failure.value)
    assert committer.jobs() == []
    assert_nothing(committer)


def test_credentials_are_refused_as_options_and_never_echoed(
    spark: Any, dest: str, committer: Committer
) -> None:
    secret = "do-not-print-this-value"
    with pytest.raises(Exception) as failure:
        write(sales(spark, 10, parts=1), dest, aws_secret_access_key=secret)
    assert "aws_secret_access_key" in str(failure.value)
    assert secret not in str(failure.value)
    assert committer.jobs() == []
