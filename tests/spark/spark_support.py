"""What the Spark tests check a destination with: rows, files, pending uploads, read back.

Spark reads the destination back through the format's own reader (the
committed state; pip's pyspark ships no S3A connector for spark.read.parquet),
and every check that reads also compares what a plain listing shows with that
committed state. pyarrow reads the destination on S3 itself.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from tests.helpers import pending, pending_in_bucket
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import is_visible
from zero_rename.core.views.snapshot import table_snapshot


def data_files(c: Committer) -> list[str]:
    """Visible Parquet files under the destination, relative paths."""
    return sorted(
        o.key[len(c.dest.dir) :]
        for o in c.store.list_objects(c.dest.bucket, c.dest.dir)
        if is_visible(o.key[len(c.dest.dir) :])
    )


def spark_rows(spark: Any, c: Committer, tmp: Path, schema: Any = None) -> Any:
    """The destination's committed state as Spark reads it through the format."""
    reader = spark.read if schema is None else spark.read.schema(schema)
    return reader.format("zero-rename").load(c.dest.url)


def arrow_table(c: Committer, partitioning: pa.Schema | None = None) -> pa.Table:
    """The destination as pyarrow.dataset reads it from S3, Hive partitions decoded."""
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    fs = pafs.S3FileSystem(
        endpoint_override=endpoint.split("://", 1)[1],
        scheme=endpoint.split("://", 1)[0],
        region="us-east-1",
    )
    hive = pads.partitioning(partitioning, flavor="hive") if partitioning is not None else "hive"
    return pads.dataset(
        f"{c.dest.bucket}/{c.dest.prefix}", filesystem=fs, format="parquet", partitioning=hive
    ).to_table()


def row_counter(rows: list[Any]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in rows)


def assert_exactly(
    spark: Any, c: Committer, tmp: Path, expected: list[Any], columns: list[str], schema: Any = None
) -> None:
    """The destination holds exactly ``expected`` rows, once each, and nothing pending.

    ``schema`` (the source's) keeps partition discovery from reading, say, a
    string column of dates as dates.
    """
    got = spark_rows(spark, c, tmp, schema).select(*columns).collect()
    assert row_counter(got) == row_counter(expected)
    assert pending_in_bucket(c) == []
    # What a plain reader lists is exactly the committed state: no file of a
    # failed or losing attempt, no replaced file left behind.
    committed = table_snapshot(c.ctx).files
    assert data_files(c) == sorted(f.relative for f in committed)


def assert_nothing(c: Committer) -> None:
    """No visible file and no pending upload: the job left no trace readers could see."""
    assert data_files(c) == []
    assert pending_in_bucket(c) == []
    assert pending(c) == []


def wait_for_killed_tasks(spark: Any, timeout: float = 60.0) -> None:
    """Wait until no task of the application runs, as an orchestrator's next step
    does by waiting for the application to end. A failed write returns to its
    caller once Spark has asked its other tasks to stop, and a task still writing
    then may begin an upload after the format's abort has swept the job's: the
    abort step that follows must find it."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while any(e.numRunningTasks() for e in tracker.getExecutorInfos()):
        assert time.monotonic() < deadline, "a killed task still runs"
        time.sleep(0.1)
