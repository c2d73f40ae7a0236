"""One local SparkSession for every Spark test, started once (it takes seconds).

``local[2,3]``: two task threads and three attempts per task, so a failed
task attempt is retried as on a cluster. Speculation is switched on for the
whole session: Spark never runs a speculative copy on the host that already
runs the task, so on one machine it changes nothing but lets a test check
that a straggler under speculation is not written twice.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator

import pytest

import spark_faults
from zero_rename.embedded_s3 import EmbeddedS3

MASTER = "local[2,3]"


@pytest.fixture(scope="session")
def spark(s3_server: EmbeddedS3) -> Iterator[object]:
    # Executors are Python workers forked by the JVM: they need this interpreter
    # (pyarrow, zero_rename) and the S3 credentials the s3_server fixture put in
    # os.environ before the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from zero_rename.spark import register

    # The fault-injecting data source lives in the tests, which executors cannot
    # import: ship its code inside the pickles instead.
    cloudpickle.register_pickle_by_value(spark_faults)
    session = (SparkSession.builder.master(MASTER)
               .appName("zero-rename-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "4")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
               .config("spark.speculation", "true")
               .config("spark.speculation.interval", "100ms")
               .config("spark.speculation.quantile", "0.5")
               .config("spark.speculation.multiplier", "1.5")
               .config("spark.speculation.minTaskRuntime", "200ms")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    session.dataSource.register(spark_faults.FaultyDataSource)
    yield session
    session.stop()
    # py4j logs from its finalizers at interpreter exit, after pytest has
    # closed the streams it captured: quiet it once Spark is stopped.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
