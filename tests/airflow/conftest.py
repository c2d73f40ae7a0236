"""Airflow for the tests: its own home, a migrated SQLite database, the repo's dags/.

Airflow reads its configuration when it is first imported: ``environment``
sets it up when this file is loaded, before any test module imports Airflow.
Connections come from ``AIRFLOW_CONN_*`` variables once the embedded S3
server is up.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.airflow.environment import AIRFLOW_HOME, SPARK_ENV, VENV_BIN
from zero_rename.embedded_s3 import EmbeddedS3


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """``airflow db migrate`` once per session (about 5-8 s)."""
    started = time.monotonic()
    subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"],
        check=True,
        env=os.environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    print(f"airflow db migrate: {time.monotonic() - started:.1f} s")
    return AIRFLOW_HOME


def aws_connection(server: EmbeddedS3) -> str:
    """The AWS connection as Airflow stores it: keys as login/password, endpoint in extra."""
    return json.dumps(
        {
            "conn_type": "aws",
            "login": server.access_key,
            "password": server.secret_key,
            "extra": {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"},
        }
    )


@pytest.fixture(scope="session")
def airflow_env(s3_server: EmbeddedS3, airflow_db: Path) -> Iterator[EmbeddedS3]:
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = aws_connection(s3_server)
    yield s3_server
    os.environ.pop("AIRFLOW_CONN_AWS_DEFAULT", None)


@pytest.fixture
def spark_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment spark-submit runs with, for one test."""
    for key, value in SPARK_ENV.items():
        monkeypatch.setenv(key, value)
    return SPARK_ENV


@pytest.fixture(autouse=True)
def _keep_root_logging() -> Iterator[None]:
    """Importing Airflow adds a stdout handler to the root logger and lowers its
    level; put both back after each test here, for the tests that run later."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
