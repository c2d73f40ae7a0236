"""Writes and a read through a Spark Connect client, in a process of its own.

Run by tests/spark/test_spark_connect.py as a client is run: a process with a
Connect session routes pyspark's functions to Connect, which the suite's
classic session cannot share.

- ``connect_write.py SERVER DEST``: a write, a write whose task fails, and a
  read; prints one JSON line: the failing write's error and what it read.
- ``connect_write.py SERVER DEST MARKER``: a write one of whose tasks hangs
  after creating the file ``MARKER``, for the test to kill this client then.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROWS = 400
HANG_AT = 350  # in the second of the write's two tasks


def counts(spark: Any, destination: str) -> dict[str, int]:
    frame = spark.read.format("zero-rename").load(destination)
    return {row["dt"]: row["count"] for row in frame.groupBy("dt").count().collect()}


def day_frame(spark: Any) -> Any:
    from pyspark.sql import functions as F

    day = F.concat(F.lit("2024-01-0"), (F.col("id") % 2 + 1).cast("string"))
    # range(): rows in order, 200 a partition, so HANG_AT is in the second task.
    return spark.range(0, ROWS, 1, 2).select("id", day.alias("dt"))


def write_then_fail(spark: Any, destination: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    frame = day_frame(spark)
    frame.write.format("zero-rename").option("partition_by", "dt").mode("overwrite").save(
        destination
    )
    # One task fails on a row; the other's files are uploaded, pending.
    boom = F.udf(lambda v: v // 0 if v == HANG_AT else v, LongType())
    failing = frame.withColumn("id", boom("id")).write.format("zero-rename")
    try:
        failing.option("partition_by", "dt").mode("append").save(destination)
        failed = ""
    except Exception as exc:  # what the client sees of the task's error
        failed = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"failed": failed, "read": counts(spark, destination)}))


def write_and_hang(spark: Any, destination: str, marker: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    def hang(v: int) -> int:
        if v == HANG_AT:
            Path(marker).touch()
            time.sleep(600)
        return v

    frame = day_frame(spark).withColumn("id", F.udf(hang, LongType())("id"))
    frame.write.format("zero-rename").option("partition_by", "dt").mode("append").save(destination)


def main(server: str, destination: str, marker: str | None) -> None:
    from pyspark.sql import SparkSession

    # No register(spark): the server finds the format by its pyspark_* module.
    spark = SparkSession.builder.remote(server).getOrCreate()
    try:
        if marker is None:
            write_then_fail(spark, destination)
        else:
            write_and_hang(spark, destination, marker)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
