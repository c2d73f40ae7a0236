"""What the demos share: their options, the embedded S3 server they run on,
and the committed job and rows per partition they print at the end."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

from zero_rename.core import Committer, StoreConfig, table_formats
from zero_rename.embedded_s3 import EmbeddedS3

# The repository the demos run from: its dags/ and dagster_defs/.
REPOSITORY = Path(__file__).resolve().parent.parent
# Where the daily DAG and the Dagster asset write, as in the deployed stack: a table each.
WAREHOUSE = "warehouse"
DAILY_DESTINATION = f"s3://{WAREHOUSE}/daily_events"
DAGSTER_DESTINATION = f"s3://{WAREHOUSE}/dagster_daily_events"
TABLE_FORMATS = ("none", *table_formats())
# The embedded Iceberg catalog's variable: the demos keep it in their throw-away home.
ICEBERG_HOME = "ZERO_RENAME_ICEBERG_HOME"


def day_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a demo that writes one day: ``--date`` and ``--rows``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--date",
        type=date.fromisoformat,
        default=date(2024, 1, 1),
        help="the day to write (default: 2024-01-01)",
    )
    parser.add_argument("--rows", type=int, default=1000, help="rows to write (default: 1000)")
    parser.add_argument(
        "--table-format",
        choices=TABLE_FORMATS,
        default="none",
        help="also publish each committed day as one commit of this table format, and "
        "read it back through the format's own reader (default: none)",
    )
    return parser


@contextmanager
def embedded_s3(*buckets: str) -> Iterator[EmbeddedS3]:
    """SeaweedFS on loopback with ``buckets``, its endpoint and credentials in the
    environment (for boto3, Airflow, Spark's workers) until it stops; the
    environment is restored afterwards."""
    with EmbeddedS3(buckets=buckets) as server:
        values = server.environment()
        saved = {name: os.environ.get(name) for name in [*values, "AWS_PROFILE"]}
        os.environ.pop("AWS_PROFILE", None)  # a profile would win over these credentials
        os.environ.update(values)
        try:
            yield server
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@contextmanager
def daily_run(name: str) -> Iterator[tuple[Path, EmbeddedS3]]:
    """What a demo of the daily write runs in: a throw-away home directory for
    the orchestrator, and the embedded S3 with the warehouse bucket; both gone
    at the end."""
    with (
        tempfile.TemporaryDirectory(
            prefix=f"zero-rename-{name}-demo-", ignore_cleanup_errors=True
        ) as home,
        embedded_s3(WAREHOUSE) as server,
    ):
        yield Path(home), server


def committed_report(destination: str, config: StoreConfig, column: str = "dt") -> list[str]:
    """Lines naming the last committed job, pending uploads, and rows per ``column``
    value, read as a reader reads the table (:func:`zero_rename.read_table`): so
    only committed rows."""
    from zero_rename.read import read_table

    committer = Committer(destination, config)
    success = committer.read_success()
    pending = committer.pending_uploads()
    if success is None:
        return [f"nothing committed at {destination}; {len(pending)} upload(s) pending"]
    values = read_table(destination, columns=[column], store_config=config).column(column)
    counts: dict[str, int] = {}
    for value in values.to_pylist():
        counts[str(value)] = counts.get(str(value), 0) + 1
    lines = [
        f"committed job {success.job_id} at {destination} "
        f"({success.file_count or len(success.files)} file(s), "
        f"{len(pending)} upload(s) pending):"
    ]
    lines += [f"  {column}={value}: {rows} row(s)" for value, rows in sorted(counts.items())]
    return lines


def print_committed(destination: str, server: EmbeddedS3) -> None:
    print("\n".join(committed_report(destination, StoreConfig(endpoint_url=server.endpoint_url))))


def table_report(destination: str, server: EmbeddedS3) -> list[str]:
    """The table the last published job went to, read back through the format's own
    reader (deltalake's ``DeltaTable``, PyIceberg's scan): rows per ``dt``, and
    the commit it reads (the Delta version, the Iceberg snapshot)."""
    committer = Committer(destination, StoreConfig(endpoint_url=server.endpoint_url))
    published = [r.table_commit for r in committer.jobs() if r.table_commit is not None]
    if not published:
        return [f"no job at {destination} was published to a table format"]
    commit = published[-1]
    if commit.format == "delta":
        from deltalake import DeltaTable

        delta = DeltaTable(destination, storage_options=_delta_options(server))
        values = delta.to_pyarrow_table(columns=["dt"]).column("dt")
        reader, current = "deltalake", f"version {delta.version()}"
    else:
        table = _iceberg_catalog(server).load_table(commit.table)
        values = table.scan(selected_fields=("dt",)).to_arrow().column("dt")
        snapshot = table.current_snapshot()
        reader, current = "PyIceberg", f"snapshot {snapshot.snapshot_id if snapshot else '-'}"
    counts: dict[str, int] = {}
    for value in values.to_pylist():
        counts[str(value)] = counts.get(str(value), 0) + 1
    lines = [
        f"{commit.format} table {commit.table}, read through {reader} ({current}; the last "
        f"job's commit: {commit.version}):"
    ]
    lines += [f"  dt={value}: {rows} row(s)" for value, rows in sorted(counts.items())]
    return lines


def _delta_options(server: EmbeddedS3) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def _iceberg_catalog(server: EmbeddedS3) -> Any:
    """The embedded catalog, opened by PyIceberg itself from where the demo keeps it."""
    from pyiceberg.catalog import load_catalog

    return load_catalog(
        "zero_rename",
        type="sql",
        uri=f"sqlite:///{Path(os.environ[ICEBERG_HOME]) / 'catalog.db'}",
        **{
            "s3.endpoint": server.endpoint_url,
            "s3.access-key-id": server.access_key,
            "s3.secret-access-key": server.secret_key,
            "s3.region": "us-east-1",
        },
    )


def print_table(destination: str, server: EmbeddedS3, table_format: str) -> None:
    if table_format != "none":
        print("\n".join(table_report(destination, server)))
