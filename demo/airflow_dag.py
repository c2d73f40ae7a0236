"""Run the daily DAG once, end to end, on an embedded S3 server and local Spark.

    python -m demo.airflow_dag [--date 2024-01-01] [--rows 1000] [--dags DIR]
                               [--table-format none|iceberg|delta]

``make demo`` runs it. It starts SeaweedFS on loopback, gives Airflow a
throw-away home with a migrated SQLite database, runs
``daily_partitioned_write`` with ``dag.test()`` for one day, then reads the
table back with pyarrow and prints the committed partitions with their row
counts. With ``--table-format`` (``make demo DEMO_ARGS="--table-format delta"``)
the day is also published as one commit of that format (Iceberg: to the
embedded catalog, kept in the throw-away home), and read back through the
format's own reader. Everything it started is stopped and removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from datetime import UTC, date, datetime
from pathlib import Path

from demo.common import (
    DAILY_DESTINATION,
    ICEBERG_HOME,
    REPOSITORY,
    daily_run,
    day_parser,
    print_committed,
    print_table,
)
from zero_rename.embedded_s3 import EmbeddedS3

DAG_ID = "daily_partitioned_write"


def airflow_environment(
    home: Path, dags: Path, server: EmbeddedS3, table_format: str = "none"
) -> dict[str, str]:
    """What Airflow, the hook and spark-submit need, set before Airflow is imported."""
    spark_conf = home / "spark-conf"
    spark_conf.mkdir()
    # Local Spark: no UI, sockets on loopback, this interpreter for Python workers.
    (spark_conf / "spark-defaults.conf").write_text(
        "spark.ui.enabled false\nspark.ui.showConsoleProgress false\n"
        "spark.driver.bindAddress 127.0.0.1\nspark.driver.host 127.0.0.1\n"
        f"spark.pyspark.python {sys.executable}\n"
    )
    return {
        **server.environment(),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        # The demo prints its own summary; task logs would bury it.
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
        "AIRFLOW__ZERO_RENAME__DAILY_DESTINATION": DAILY_DESTINATION,
        "AIRFLOW__ZERO_RENAME__DAILY_TABLE_FORMAT": table_format,
        ICEBERG_HOME: str(home / "iceberg"),
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
            {
                "conn_type": "aws",
                "login": server.access_key,
                "password": server.secret_key,
                "extra": {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"},
            }
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "SPARK_CONF_DIR": str(spark_conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def run_daily(day: date, rows: int) -> tuple[str, dict[str, str]]:
    """One run of the daily DAG; returns the run's state and each task's."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    if bag.import_errors:
        raise SystemExit(f"the DAGs do not import: {bag.import_errors}")
    moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
    run = bag.get_dag(DAG_ID).test(logical_date=moment, run_after=moment, run_conf={"rows": rows})
    return str(run.state), {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def main(argv: list[str] | None = None) -> int:
    parser = day_parser(__doc__)
    parser.add_argument(
        "--dags",
        type=Path,
        default=REPOSITORY / "dags",
        help="the DAGs folder (default: the repository's dags/)",
    )
    args = parser.parse_args(argv)
    # Airflow's own deprecation notices are not the demo's business.
    warnings.simplefilter("ignore")
    dags = args.dags.resolve()
    if not (dags / f"{DAG_ID}.py").is_file():
        parser.error(f"no {DAG_ID}.py in {dags}")
    with daily_run("airflow") as (home, server):
        os.environ.update(airflow_environment(home, dags, server, args.table_format))
        print(f"S3 at {server.endpoint_url}, Airflow home {home}")
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        print(
            f"database migrated in {time.monotonic() - started:.0f} s; running {DAG_ID} "
            f"for {args.date} ({args.rows} rows) through spark-submit..."
        )
        started = time.monotonic()
        state, tasks = run_daily(args.date, args.rows)
        print(
            f"run {state} in {time.monotonic() - started:.0f} s: "
            + ", ".join(f"{t} {s}" for t, s in tasks.items())
        )
        print_committed(DAILY_DESTINATION, server)
        print_table(DAILY_DESTINATION, server, args.table_format)
        return 0 if state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
