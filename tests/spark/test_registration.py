"""``register(spark)``: the environment the format's Python workers run with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import spark_faults
from zero_rename.spark import WORKER_ENVIRONMENT, register_source

pytestmark = pytest.mark.spark


def test_every_worker_of_a_registered_source_has_its_environment_and_the_session_keeps_its_own(
    spark: Any, tmp_path: Path
) -> None:
    """Job setup, the tasks and job commit are given WORKER_ENVIRONMENT (pydantic's
    plugin lookup off: about 60 ms a fresh worker); the SparkContext's own
    environment, which every later UDF's workers get, is left as it was."""
    environment = dict(spark.sparkContext.environment)
    register_source(spark, spark_faults.EnvironmentProbe)
    assert dict(spark.sparkContext.environment) == environment
    seen = tmp_path / "seen.json"
    frame = spark.range(6).repartition(2)
    frame.write.format("zero-rename-environment").mode("append").save(str(seen))
    assert json.loads(seen.read_text()) == {
        "setup": WORKER_ENVIRONMENT,
        "tasks": [WORKER_ENVIRONMENT, WORKER_ENVIRONMENT],
        "commit": WORKER_ENVIRONMENT,
    }
