"""The repository's Dagster definitions, pointed at a fresh destination on the embedded S3."""

from __future__ import annotations

import logging
import os
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.embedded_s3 import EmbeddedS3

DEFS = Path(__file__).resolve().parents[2] / "dagster_defs" / "definitions.py"


def day_config(rows: int) -> dict[str, Any]:
    """The run config of a materialization of ``daily_events`` writing ``rows`` rows."""
    return {"ops": {"daily_events": {"config": {"frame_options": {"rows": rows}}}}}


def materialize(defs: Any, instance: Any, day: str, rows: int) -> Any:
    """``daily_events_job`` for one day (the asset and its checks), not raising."""
    return defs.resolve_job_def("daily_events_job").execute_in_process(
        partition_key=day, instance=instance, raise_on_error=False, run_config=day_config(rows)
    )


def load_defs(destination: str) -> Any:
    """The definitions file parsed afresh: it reads its destination when loaded."""
    os.environ["ZERO_RENAME_DAGSTER_DESTINATION"] = destination
    try:
        return runpy.run_path(str(DEFS))["defs"]
    finally:
        os.environ.pop("ZERO_RENAME_DAGSTER_DESTINATION", None)


@pytest.fixture
def dagster_spark(spark: Any) -> Any:
    """The suite's local Spark session (tests/conftest.py), which the definitions'
    PySparkResource finds running: ``getOrCreate`` returns it, applying only the
    runtime settings (its time zone, UTC, as the suite's), so no test starts a JVM
    of its own."""
    return spark


@pytest.fixture
def daily(s3_server: EmbeddedS3, bucket: str, store_config: StoreConfig) -> Committer:
    return Committer(f"s3://{bucket}/events", store_config)


@pytest.fixture
def instance() -> Iterator[Any]:
    from dagster import DagsterInstance

    with DagsterInstance.ephemeral() as found:
        yield found


@pytest.fixture(autouse=True)
def _keep_root_logging() -> Iterator[None]:
    """Dagster adds handlers to the root logger; put them back for later tests."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
