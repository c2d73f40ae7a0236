"""Provider metadata for Airflow's providers manager (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any

from zero_rename.core import table_formats

_PKG = "zero_rename.airflow"


def _table_format_options() -> dict[str, dict[str, Any]]:
    """The bundled daily DAG's table format and each format's options, as the
    table formats' registry declares them."""
    formats = table_formats()
    names = ["none", *formats]
    found: dict[str, dict[str, Any]] = {
        "daily_table_format": {
            "description": "Table format the bundled daily DAG publishes each "
            f"committed day to, as one commit: {', '.join(names[:-1])} or {names[-1]}.",
            "version_added": "0.1.0",
            "type": "string",
            "example": names[-1],
            "default": "none",
        }
    }
    for plugin in formats.values():
        for name, option in plugin.option_help.items():
            found[f"daily_{name}"] = {
                "description": f"With daily_table_format = {plugin.name}: {option.description}",
                "version_added": "0.1.0",
                "type": "string",
                "example": option.example,
                "default": "",
            }
    return found


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
                    **_table_format_options(),
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
