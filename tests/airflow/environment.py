"""The environment Airflow reads at import: its home, its database, the repo's dags/.

Imported by conftest.py before any test module, so that Airflow, imported
later, sees it. Test modules import names from here, never from conftest.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.jvm import JAVA_OPTIONS

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
VENV_BIN = Path(sys.executable).parent
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="zero-rename-airflow-"))
atexit.register(shutil.rmtree, AIRFLOW_HOME, ignore_errors=True)
SPARK_CONF_DIR = AIRFLOW_HOME / "spark-conf"
# OpenLineage (Airflow's provider): every task's events as JSON files, one an event,
# read back by the DAG tests (tests/airflow/lineage.py).
OPENLINEAGE_EVENTS = AIRFLOW_HOME / "openlineage"


SPARK_CONF_DIR.mkdir(parents=True, exist_ok=True)
# Local Spark for the DAG tests: no UI, every socket on loopback, this interpreter.
(SPARK_CONF_DIR / "spark-defaults.conf").write_text(
    "\n".join(
        [
            "spark.ui.enabled false",
            "spark.ui.showConsoleProgress false",
            "spark.driver.bindAddress 127.0.0.1",
            "spark.driver.host 127.0.0.1",
            f"spark.driver.extraJavaOptions {JAVA_OPTIONS}",
            f"spark.pyspark.python {sys.executable}",
            f"spark.pyspark.driver.python {sys.executable}",
        ]
    )
    + "\n"
)
# What spark-submit needs, set only while a test runs a DAG (see spark_env):
# the rest of the session's Spark tests keep their own settings.
SPARK_ENV = {
    "SPARK_CONF_DIR": str(SPARK_CONF_DIR),
    "SPARK_LOCAL_IP": "127.0.0.1",
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
    # spark-submit lives beside the interpreter.
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
}
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(AIRFLOW_HOME / "logs"),
        "AIRFLOW__ZERO_RENAME__AWS_CONN_ID": "aws_default",
        "AIRFLOW__ZERO_RENAME__SPARK_CONN_ID": "spark_default",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "zero-rename-tests",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(OPENLINEAGE_EVENTS / "event"), "append": False}
        ),
        # Emitted from a thread of the task: a fork of a process that runs Airflow and
        # Spark could deadlock on the locks its threads hold.
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        # The stage passes its run to the Spark application, as SparkSubmitOperator does.
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
    }
)
OPENLINEAGE_EVENTS.mkdir()
