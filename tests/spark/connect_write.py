"""A write, a failing write and a read through a Spark Connect client.

Run by tests/spark/test_spark_connect.py in a process of its own, as a client
is: a process with a Connect session routes pyspark's functions to Connect,
which the suite's classic session cannot share. Prints one JSON line: the
error the failing write raised and what the client reads after both.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def counts(spark: Any, destination: str) -> dict[str, int]:
    frame = spark.read.format("zero-rename").load(destination)
    return {row["dt"]: row["count"] for row in frame.groupBy("dt").count().collect()}


def main(server: str, destination: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    # No register(spark): the server finds the format by its pyspark_* module.
    spark = SparkSession.builder.remote(server).getOrCreate()
    try:
        day = F.concat(F.lit("2024-01-0"), (F.col("id") % 2 + 1).cast("string"))
        frame = spark.range(400).select("id", day.alias("dt")).repartition(2, "id")
        writer = frame.write.format("zero-rename").option("partition_by", "dt")
        writer.mode("overwrite").save(destination)
        # One task fails on a row, after the other has uploaded its files.
        boom = F.udf(lambda v: v // 0 if v == 350 else v, LongType())
        failing = frame.withColumn("id", boom("id")).write.format("zero-rename")
        try:
            failing.option("partition_by", "dt").mode("append").save(destination)
            failed = ""
        except Exception as exc:  # what the client sees of the task's error
            failed = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"failed": failed, "read": counts(spark, destination)}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
