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


class Unsupported(Exception):
    """The method cannot do this write; the message says why."""


def destination(method: Method, store: Store, name: str) -> str:
    """Where ``name`` lives for ``method``: a URL, or an Iceberg identifier."""
    if method.name == "iceberg-spark":
        return f"{ICEBERG_CATALOG}.{ICEBERG_NAMESPACE}.{name.replace('-', '_')}"
    return f"{method.scheme}://{store.bucket}/{name}"


def prefix_of(method: Method, store: Store, name: str) -> str:
    """The key prefix the destination's files live under, for listing."""
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
) -> None:
    """Write ``df`` to ``name`` by ``method``: ``append`` or ``replace``, by
    ``dt`` unless not ``partitioned`` (an append only: what a replace of an
    unpartitioned destination replaces differs from method to method)."""
    if mode not in ("append", "replace"):
        raise ValueError(f"mode must be append or replace, not {mode!r}")
    if not partitioned and mode != "append":
        raise ValueError("an unpartitioned write here is an append")
    target = destination(method, store, name)
    if method.name == "iceberg-spark":
        _iceberg(spark, df, target, mode, max_rows_per_file, partitioned)
    elif method.zero_rename:
        _zero_rename(df, method, store, target, mode, max_rows_per_file, partitioned)
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
    elif method.name in ("s3a-magic", "s3a-directory"):
        raise Unsupported(
            f"{method.label}: no replace of the partitions written. Spark's dynamic "
            "partition overwrite is refused by PathOutputCommitProtocol for the S3A "
            "committers, and their conflict mode replaces the whole destination "
            "(directory) or has none (magic)"
        )
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
        # Iceberg's own file roll-over is by size; rows per file follow Spark's.
        spark.conf.set("spark.sql.files.maxRecordsPerFile", str(max_rows))
    if not spark.catalog.tableExists(table):
        (writer.partitionedBy(col(PARTITION)) if partitioned else writer).using("iceberg").create()
    elif mode == "append":
        writer.append()
    else:
        writer.overwritePartitions()


def _zero_rename(
    df: Any,
    method: Method,
    store: Store,
    target: str,
    mode: str,
    max_rows: int | None,
    partitioned: bool = True,
) -> None:
    writer = (
        df.write.format("zero-rename")
        .mode("overwrite" if mode == "replace" else "append")
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
