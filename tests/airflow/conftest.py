"""Airflow for the tests: its own home, a migrated SQLite database, the repo's dags/.

Airflow reads its configuration when it is first imported, so everything it
needs is put into the environment here, at import, before any test module
imports it. Connections come from ``AIRFLOW_CONN_*`` variables once the
embedded S3 server is up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from zero_rename.embedded_s3 import EmbeddedS3

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
VENV_BIN = Path(sys.executable).parent
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="zero-rename-airflow-"))
SPARK_CONF_DIR = AIRFLOW_HOME / "spark-conf"


def _spark_defaults() -> str:
    # Local Spark for tests: no UI, every socket on loopback, the venv's Python.
    return "\n".join([
        "spark.ui.enabled false",
        "spark.ui.showConsoleProgress false",
        "spark.driver.bindAddress 127.0.0.1",
        "spark.driver.host 127.0.0.1",
        f"spark.pyspark.python {sys.executable}",
        f"spark.pyspark.driver.python {sys.executable}",
        "spark.sql.shuffle.partitions 2",
    ]) + "\n"


SPARK_CONF_DIR.mkdir(parents=True, exist_ok=True)
(SPARK_CONF_DIR / "spark-defaults.conf").write_text(_spark_defaults())
os.environ.update({
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(AIRFLOW_HOME / "logs"),
    "AIRFLOW__ZERO_RENAME__AWS_CONN_ID": "aws_default",
    "AIRFLOW__ZERO_RENAME__SPARK_CONN_ID": "spark_default",
    "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    "SPARK_CONF_DIR": str(SPARK_CONF_DIR),
    "SPARK_LOCAL_IP": "127.0.0.1",
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
    # spark-submit and the weed binary live beside the interpreter.
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here) and not item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.airflow)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """``airflow db migrate`` once per session (about 5-8 s)."""
    started = time.monotonic()
    subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], check=True, env=os.environ,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    print(f"airflow db migrate: {time.monotonic() - started:.1f} s")
    return AIRFLOW_HOME


def aws_connection(server: EmbeddedS3) -> str:
    """The AWS connection as Airflow stores it: keys as login/password, endpoint in extra."""
    return json.dumps({"conn_type": "aws", "login": server.access_key,
                       "password": server.secret_key,
                       "extra": {"endpoint_url": server.endpoint_url,
                                 "region_name": "us-east-1"}})


@pytest.fixture(scope="session")
def airflow_env(s3_server: EmbeddedS3, airflow_db: Path) -> Iterator[EmbeddedS3]:
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = aws_connection(s3_server)
    yield s3_server
    os.environ.pop("AIRFLOW_CONN_AWS_DEFAULT", None)
