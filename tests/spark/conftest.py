"""The Spark tests run on the suite's one local session (tests/conftest.py:
``local[2,3]``, task retries, speculation on), with the fault-injecting data
source registered.
"""

from __future__ import annotations

from typing import Any

import pytest

import spark_faults
from zero_rename.spark import register_source


@pytest.fixture(scope="session")
def spark(spark: Any) -> Any:
    from pyspark import cloudpickle

    # The fault-injecting data source lives in the tests, which executors cannot
    # import: ship its code inside the pickles instead.
    cloudpickle.register_pickle_by_value(spark_faults)
    # As zero_rename.spark.register registers the format: its workers' environment.
    register_source(spark, spark_faults.FaultyDataSource)
    return spark
