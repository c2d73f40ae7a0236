"""One write of a DataFrame by each method: an append, or a ``replace`` of the
partitions the DataFrame holds, as each method's users would write it.

Where a method has no way to replace just the partitions written, the write
raises :class:`Unsupported` with what its documentation or its error says,
rather than doing something else under the same name.
"""

from __future__ import annotations

from typing import Any

from bench.peers.sessions import ICEBERG_CATALOG, Method, Store

PARTITION = "dt"
ICEBERG_NAMESPACE = "peers"
# Iceberg rolls a task's file by its size, not its rows: once the writer's
# estimate of the file (bytes written plus Parquet pages still buffered,
# checked every 1,000 rows) reaches write.target-file-size-bytes. For the
# benchmarks' rows (bench.frames) that estimate was measured as about 77 bytes
# a row plus 538 kB (Iceberg 1.12's Parquet defaults; 6,000 rows at 1 MB, 32,000
# at 3 MB, 109,000 at 9 MB), so a target is set for 10% more rows than the file
# sources' maxRecordsPerFile: the same number of files whatever the estimate's
# error within 10%, the last file of each task the smaller.
ICEBERG_BYTES_PER_ROW = 77
ICEBERG_BYTES_FIXED = 538_000
ICEBERG_ROLL_MARGIN = 1.1
ICEBERG_ROWS_CHECKED = 1_000


class Unsupported(Exception):
    """The method cannot do this write; the message says why."""


def replace_refusal(method: Method) -> str | None:
    """Why ``method`` cannot replace just the partitions written, or None."""
    if method.name in ("s3a-magic", "s3a-directory"):
        return (
            f"{method.label}: no replace of the partitions written. Spark's dynamic "
            "partition overwrite is refused by PathOutputCommitProtocol for the S3A "
            "committers, and their conflict mode replaces the whole destination "
            "(directory) or has none (magic)"
        )
    return None


def iceberg_target_bytes(rows_per_file: int) -> int:
    """write.target-file-size-bytes for files of about ``rows_per_file`` rows (at
    most 10% more); 1 when Iceberg's smallest roll, every 1,000 rows, is wanted."""
    if rows_per_file <= ICEBERG_ROWS_CHECKED:
        return 1
    return int(ICEBERG_BYTES_PER_ROW * rows_per_file * ICEBERG_ROLL_MARGIN + ICEBERG_BYTES_FIXED)


def destination(method: Method, store: Store, name: str) -> str:
    """Where ``name`` lives for ``method``: a URL, or an Iceberg identifier."""
    if method.name == "iceberg-spark":
        return f"{ICEBERG_CATALOG}.{ICEBERG_NAMESPACE}.{name.replace('-', '_')}"
    return f"{method.scheme}://{store.bucket}/{name}"


def prefix_of(method: Method, store: Store, name: str) -> str:
    """The key prefix the destination's files live under, for listing: for
    Iceberg, where its JDBC catalog puts a table by default (the warehouse,
    the namespace, the table)."""
    if method.name == "iceberg-spark":
        # Iceberg's JDBC catalog puts a table at <warehouse>/<namespace>/<table>
        # (no ".db", which Hive's and Hadoop's catalogs add).
        return f"iceberg-warehouse/{ICEBERG_NAMESPACE}/{name.replace('-', '_')}/"
    return f"{name}/"


def write(
    spark: Any,
    method: Method,
    store: Store,
    df: Any,
    name: str,
    mode: str = "append",
    max_rows_per_file: int | None = None,
    partitioned: bool = True,
    zero_rename_format: str = "zero-rename",
    zero_rename_options: dict[str, str] | None = None,
) -> None:
    """Write ``df`` to ``name`` by ``method``: ``append`` or ``replace``, by
    ``dt`` unless not ``partitioned`` (an append only: what a replace of an
    unpartitioned destination replaces differs from method to method). A
    zero-rename method writes through ``zero_rename_format`` (a subclass that
    reports its phases, say) with ``zero_rename_options`` besides its own."""
    if mode not in ("append", "replace"):
        raise ValueError(f"mode must be append or replace, not {mode!r}")
    if not partitioned and mode != "append":
        raise ValueError("an unpartitioned write here is an append")
    target = destination(method, store, name)
    if method.name == "iceberg-spark":
        _iceberg(spark, df, target, mode, max_rows_per_file, partitioned)
    elif method.zero_rename:
        writer = df.write.format(zero_rename_format).options(**(zero_rename_options or {}))
        _zero_rename(writer, method, store, target, mode, max_rows_per_file, partitioned)
    else:
        _files(spark, method, df, target, mode, max_rows_per_file, partitioned)


def _files(
    spark: Any,
    method: Method,
    df: Any,
    target: str,
    mode: str,
    max_rows: int | None,
    partitioned: bool = True,
) -> None:
    writer = df.write.partitionBy(PARTITION) if partitioned else df.write
    if max_rows:
        writer = writer.option("maxRecordsPerFile", str(max_rows))
    if mode == "append":
        fmt = "delta" if method.name == "delta-spark" else "parquet"
        writer.format(fmt).mode("append").save(target)
        return
    if method.name == "delta-spark":
        writer.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(
            target
        )
    elif method.name == "s3a-partitioned":
        # The S3A docs: the partitioned staging committer replaces the
        # partitions a job writes when its conflict mode is "replace"; Spark's
        # own overwrite would delete the whole destination before the job.
        writer.option("fs.s3a.committer.staging.conflict-mode", "replace").format("parquet").mode(
            "append"
        ).save(target)
    elif (refusal := replace_refusal(method)) is not None:
        raise Unsupported(refusal)
    else:  # FileOutputCommitter and the manifest committer: Spark's dynamic overwrite
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        writer.format("parquet").mode("overwrite").save(target)


def _iceberg(
    spark: Any, df: Any, table: str, mode: str, max_rows: int | None, partitioned: bool = True
) -> None:
    from pyspark.sql.functions import col

    spark.sql(f"create namespace if not exists {table.rsplit('.', 1)[0]}")
    writer = df.writeTo(table)
    if max_rows:
        # Iceberg ignores maxRecordsPerFile: its own roll-over is by size.
        writer = writer.option("target-file-size-bytes", str(iceberg_target_bytes(max_rows)))
    if not spark.catalog.tableExists(table):
        # Iceberg's default for a partitioned table (hash) shuffles the rows so
        # that one task writes each partition; "none" writes them where they
        # are, one file per task and partition, as the file sources do, so that
        # every method writes the same files.
        if partitioned:
            writer = writer.partitionedBy(col(PARTITION))
        writer.using("iceberg").tableProperty("write.distribution-mode", "none").create()
    elif mode == "append":
        writer.append()
    else:
        writer.overwritePartitions()


def _zero_rename(
    writer: Any,
    method: Method,
    store: Store,
    target: str,
    mode: str,
    max_rows: int | None,
    partitioned: bool = True,
) -> None:
    writer = (
        writer.mode("overwrite" if mode == "replace" else "append")
        .option("committer", method.committer)
        .option("endpoint", store.endpoint_url)
    )
    if partitioned:
        writer = writer.option("partition_by", PARTITION)
    if method.table_format != "none":
        writer = writer.option("table_format", method.table_format)
    if max_rows:
        writer = writer.option("max_rows_per_file", str(max_rows))
    writer.save(target)
