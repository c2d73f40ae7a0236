"""What Airflow makes of an environment: the DAG's connections, config and tasks.

Run in a subprocess with the environment to probe (the compose services' or
the plain stack's); prints one JSON document. Airflow reads its configuration
at import, so this cannot run inside the test process, whose Airflow is set
up for other tests.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(dags: str) -> None:
    from airflow.configuration import conf
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import BaseHook

    from zero_rename.airflow.hooks import ZeroRenameHook

    bag = DagBag(dag_folder=dags)
    dag = bag.dags["daily_partitioned_write"]
    stage = dag.get_task("stage")
    commit = dag.get_task("commit")
    # What spark-submit is run with: the operator's connection as the hook reads it.
    spark = SparkSubmitHook(conn_id=stage._conn_id)._connection  # noqa: SLF001
    aws = BaseHook.get_connection(stage.aws_conn_id)
    hook = ZeroRenameHook(aws_conn_id=stage.aws_conn_id)
    print(
        json.dumps(
            {
                "import_errors": {str(k): str(v)[:500] for k, v in bag.import_errors.items()},
                "destination_conf": conf.get("zero_rename", "daily_destination", fallback=None),
                "stage": {
                    "conn_id": stage._conn_id,
                    "aws_conn_id": stage.aws_conn_id,  # noqa: SLF001
                    "destination": stage.destination,
                    "application": str(Path(stage.application).relative_to(dags)),
                },
                "commit": {"aws_conn_id": commit.aws_conn_id, "destination": commit.destination},
                "spark": {
                    "master": spark["master"],
                    "deploy_mode": spark["deploy_mode"],
                    "binary": spark["spark_binary"],
                },
                "aws": {
                    "conn_type": aws.conn_type,
                    "login": aws.login,
                    "password": aws.password,
                    "endpoint_url": hook.endpoint_url,
                    "region": hook.conn_config.region_name,
                },
                "execution_api": conf.get("core", "execution_api_server_url"),
                "jwt_secret_set": bool(conf.get("api_auth", "jwt_secret", fallback="")),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
