"""A JVM engine reading and writing zero-rename's tables: Spark 4.1 with Iceberg's
runtime and Delta in one session, in a process of its own under ``.venv-peers``,
as a consumer's cluster would run beside the producer.

Run as ``python -m tests.peers.peer`` from the repository's root. It reads one
JSON request a line on standard input and answers each with one JSON line:

- ``{"op": "sql", "sql": "..."}``: the query's rows, ``{"arrow": <base64 Arrow IPC
  stream>}`` (timestamps in UTC);
- ``{"op": "append", "format": "iceberg"|"delta", "bucket": ..., "name": ...,
  "arrow": ...}``: the rows appended by Spark's own Iceberg or Delta writer
  (``bench.peers.writes``: the Iceberg table ``zero_rename.peers.<name>``, the
  Delta table ``s3a://<bucket>/<name>``);
- ``{"op": "stop"}``: the session stopped, the process ends.

A failure answers ``{"error": "<type>: <first line>"}``, so that the caller checks
what the engine said. The store and the catalog come from the environment: the
S3 endpoint and keys (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``) and the embedded Iceberg catalog's directory
(``ZERO_RENAME_ICEBERG_HOME``), whose SQLite file the session's JDBC catalog
shares with PyIceberg's SQL catalog.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any, TextIO

import pyarrow as pa

from bench.peers import jars
from bench.peers.sessions import (
    ICEBERG_CATALOG,
    METHODS,
    Store,
    iceberg_settings,
    s3a_settings,
)
from bench.peers.writes import write
from tests.jvm import JAVA_OPTIONS

# Spark's Iceberg catalog keeps a table it loaded, unrefreshed, while it is used:
# a reader of tables another engine commits to turns the cache off (or runs
# REFRESH TABLE before each read).
NO_CACHE = {f"spark.sql.catalog.{ICEBERG_CATALOG}.cache-enabled": "false"}


def store() -> Store:
    home = os.environ["ZERO_RENAME_ICEBERG_HOME"]
    return Store(
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        # Only the warehouse of tables Spark would create by name alone; every
        # request names its table's bucket.
        bucket="peers",
        catalog_db=os.path.join(home, "catalog.db"),
    )


def settings(where: Store) -> dict[str, str]:
    """One session for both formats: Iceberg's catalog and Delta's, each as
    bench.peers.sessions configures it, their SQL extensions together."""
    iceberg, delta = METHODS["iceberg-spark"], METHODS["delta-spark"]
    conf = {
        **jars.spark_conf(tuple(dict.fromkeys(iceberg.packages + delta.packages))),
        **s3a_settings(where),
        **iceberg_settings(where),
        **delta.settings,
        **NO_CACHE,
    }
    conf["spark.sql.extensions"] = ",".join(
        (iceberg_settings(where)["spark.sql.extensions"], delta.settings["spark.sql.extensions"])
    )
    return conf


def start(where: Store, warehouse: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("zero-rename peer")
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        # Delta rebuilds a table's state from its log in this many tasks (50 by
        # default): for the tests' tables of a few versions one is three times faster.
        "spark.databricks.delta.snapshotPartitions": "1",
        # Spark's own default location for tables without one: never the checkout.
        "spark.sql.warehouse.dir": warehouse,
        # C1 alone and the serial collector, as the suite's JVMs (tests/jvm.py).
        "spark.driver.extraJavaOptions": JAVA_OPTIONS,
        **settings(where),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def arrow_out(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def arrow_in(text: str) -> pa.Table:
    return pa.ipc.open_stream(base64.b64decode(text)).read_all()


def handle(spark: Any, where: Store, request: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "sql":
        return {"arrow": arrow_out(spark.sql(request["sql"]).toArrow())}
    if op == "append":
        method = METHODS[f"{request['format']}-spark"]
        df = spark.createDataFrame(arrow_in(request["arrow"]))
        write(spark, method, replace(where, bucket=request["bucket"]), df, request["name"])
        return {}
    raise ValueError(f"unknown op {op!r}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def serve(spark: Any, where: Store, requests: TextIO, answers: TextIO) -> None:
    for line in requests:
        request = json.loads(line)
        if request["op"] == "stop":
            break
        try:
            answer = handle(spark, where, request)
        except Exception as exc:  # the engine's refusal is the answer
            answer = {"error": first_line(exc)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    # Answers go to the original standard output; everything the JVM or Ivy
    # prints goes to standard error, so it cannot break a line of JSON.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    os.environ["TZ"] = "UTC"
    time.tzset()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    where = store()
    started = time.monotonic()
    warehouse = tempfile.mkdtemp(prefix="zero-rename-peer-")
    try:
        spark = start(where, warehouse)
        answers.write(json.dumps({"ready": round(time.monotonic() - started, 1)}) + "\n")
        answers.flush()
        try:
            serve(spark, where, sys.stdin, answers)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
