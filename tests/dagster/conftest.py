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
