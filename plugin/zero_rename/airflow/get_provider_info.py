"""Provider metadata for Airflow's providers manager (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any

from zero_rename.core import AUTO_PROFILE, PROFILES, table_formats

_PKG = "zero_rename.airflow"
# The hook's connection type and its name in the UI (the hook takes them from here:
# the providers manager reads this module without importing the hook).
CONN_TYPE = "zero_rename"
HOOK_NAME = "zero-rename (S3-compatible store)"


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


def _connection_type() -> dict[str, Any]:
    """The connection form, declared as Airflow 3.2+ reads it (no hook is imported to
    draw it): the standard fields relabelled, and the extra fields the hook reads
    (``endpoint_url``, ``region_name``, ``store_profile``), stored in the extra
    under those names. Airflow before 3.2 read a hook's ``get_ui_field_behaviour``
    and ``get_connection_form_widgets`` instead; this provider needs 3.3, so the hook
    has neither."""
    profiles = [AUTO_PROFILE, *sorted(PROFILES)]
    return {
        "connection-type": CONN_TYPE,
        "hook-class-name": f"{_PKG}.hooks.ZeroRenameHook",
        "hook-name": HOOK_NAME,
        "ui-field-behaviour": {
            "hidden-fields": ["host", "schema", "port"],
            "relabeling": {"login": "Access key ID", "password": "Secret access key"},
            "placeholders": {
                "login": "empty: the worker's own AWS credentials (role, environment)",
                "extra": '{"config_kwargs": {"connect_timeout": 5}, '
                '"role_arn": "arn:aws:iam::123456789012:role/writer"}',
            },
        },
        "conn-fields": {
            "endpoint_url": {
                "label": "S3 endpoint URL",
                "description": "An S3-compatible store's endpoint (MinIO, Ceph RGW, "
                "SeaweedFS, R2); empty for AWS S3. Credentials go in the fields above, "
                "never in the URL: a URL that carries them is refused.",
                "schema": {"type": ["string", "null"], "pattern": "^https?://[^@]+$"},
            },
            "region_name": {
                "label": "Region",
                "description": "The bucket's region; us-east-1 for most S3-compatible stores.",
                "schema": {"type": ["string", "null"]},
            },
            "store_profile": {
                "label": "Store profile",
                "description": "The store's family, for its answers to conditional writes: "
                f"{AUTO_PROFILE} probes the store at job setup (zero-rename doctor shows "
                "what it finds).",
                "schema": {"type": "string", "enum": profiles, "default": AUTO_PROFILE},
            },
        },
    }


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
        "connection-types": [_connection_type()],
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
