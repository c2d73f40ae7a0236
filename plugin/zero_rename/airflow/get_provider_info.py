"""Provider metadata for Airflow's providers manager (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any

_PKG = "zero_rename.airflow"


def get_provider_info() -> dict[str, Any]:
    return {
        # Must equal the distribution name, or Airflow refuses the provider.
        "package-name": "zero-rename",
        "name": "zero-rename",
        "description": "A zero-rename output committer for S3-compatible object stores: "
        "the commit protocol's steps as operators, a sensor and a Commits page.",
        "integrations": [{"integration-name": "zero-rename", "tags": ["aws", "software"]}],
        "operators": [
            {
                "integration-name": "zero-rename",
                "python-modules": [f"{_PKG}.operators", f"{_PKG}.spark"],
            }
        ],
        "sensors": [{"integration-name": "zero-rename", "python-modules": [f"{_PKG}.sensors"]}],
        "hooks": [{"integration-name": "zero-rename", "python-modules": [f"{_PKG}.hooks"]}],
        "triggers": [{"integration-name": "zero-rename", "python-modules": [f"{_PKG}.triggers"]}],
        "extra-links": [f"{_PKG}.links.CommitsLink"],
        # The plugin is registered through the ``airflow.plugins`` entry point only:
        # listed here too, it would be loaded twice when providers load eagerly.
        "config": {
            "zero_rename": {
                "description": "zero-rename's Airflow integration.",
                "options": {
                    "aws_conn_id": {
                        "description": "AWS connection the Commits page and the bundled DAGs use.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": None,
                        "default": "aws_default",
                    },
                    "spark_conn_id": {
                        "description": "Spark connection of the bundled daily DAG.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": None,
                        "default": "spark_default",
                    },
                    "destinations": {
                        "description": "Comma-separated destinations the Commits page lists "
                        "when none is given.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3://warehouse/events,s3://warehouse/orders",
                        "default": "",
                    },
                    "daily_destination": {
                        "description": "Destination of the bundled daily_partitioned_write DAG.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": None,
                        "default": "s3://warehouse/daily_events",
                    },
                    "daily_table_format": {
                        "description": "Table format the bundled daily DAG publishes each "
                        "committed day to, as one commit: none, iceberg or delta.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "delta",
                        "default": "none",
                    },
                    "daily_iceberg_catalog": {
                        "description": "With daily_table_format = iceberg: the PyIceberg "
                        "catalog's name (.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__...); "
                        "empty: the embedded SQL catalog.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "glue",
                        "default": "",
                    },
                    "daily_iceberg_table": {
                        "description": "With daily_table_format = iceberg: namespace.table; "
                        "empty: derived from the destination.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "analytics.daily_events",
                        "default": "",
                    },
                    "daily_application": {
                        "description": "The Spark application of the bundled daily DAG; "
                        "default: apps/daily_partitioned_write.py beside it.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": None,
                        "default": "",
                    },
                },
            },
        },
    }
