"""A published table as the formats' own readers read it: deltalake, PyIceberg and
Polars, none of them through zero-rename's code. Each is pointed at the test's S3
server by the session's environment (``AWS_ENDPOINT_URL`` and the keys), and
PyIceberg at the embedded catalog by ``ZERO_RENAME_ICEBERG_HOME``
(tests/conftest.py: a directory of the session's)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from zero_rename.core.tables.base import JOB_ID_PROPERTY

# The embedded catalog's name and file, as docs/table-formats.md gives them.
EMBEDDED_CATALOG = "zero_rename"
CATALOG_FILE = "catalog.db"


def delta_options() -> dict[str, str]:
    """delta-rs' (and Polars') storage options for the test's S3 server."""
    return {
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def delta_table(dest: str) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(dest, storage_options=delta_options())


def delta_versions(dest: str) -> dict[str, str]:
    """Job id -> the Delta version whose commit carries it, for every commit that
    carries one (a job published twice would show as a duplicate)."""
    found: dict[str, str] = {}
    for entry in delta_table(dest).history():
        job = entry.get(JOB_ID_PROPERTY)
        if job is not None:
            assert job not in found, f"job {job} is in versions {found[job]} and {entry['version']}"
            found[job] = str(entry["version"])
    return found


def iceberg_catalog() -> Any:
    """The embedded catalog (PyIceberg's SQL catalog on SQLite), loaded by PyIceberg."""
    from pyiceberg.catalog import load_catalog

    home = Path(os.environ["ZERO_RENAME_ICEBERG_HOME"])
    return load_catalog(
        EMBEDDED_CATALOG,
        type="sql",
        uri=f"sqlite:///{home / CATALOG_FILE}",
        **{
            "s3.endpoint": os.environ["AWS_ENDPOINT_URL"],
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
            "s3.region": "us-east-1",
        },
    )


def iceberg_table(name: str) -> Any:
    return iceberg_catalog().load_table(name)


def iceberg_snapshots(table: Any) -> dict[str, str]:
    """Job id -> the snapshot whose summary carries it, for every snapshot of the table."""
    found: dict[str, str] = {}
    for snapshot in table.snapshots():
        job = snapshot.summary.get(JOB_ID_PROPERTY) if snapshot.summary else None
        if job is not None:
            assert job not in found, f"job {job} is in snapshots {found[job]} and {snapshot}"
            found[job] = str(snapshot.snapshot_id)
    return found


def polars_options() -> dict[str, str]:
    return {k.lower(): v for k, v in delta_options().items()}


def read(format: str, where: str, reader: str) -> pa.Table:
    """The table's current rows through ``reader``: ``own`` (deltalake's DeltaTable,
    PyIceberg's scan) or ``polars`` (read_delta, scan_iceberg). ``where``: the
    destination for Delta, the table's name for Iceberg."""
    if format == "delta":
        if reader == "own":
            return delta_table(where).to_pyarrow_table()
        import polars as pl

        return pl.read_delta(where, storage_options=polars_options()).to_arrow()
    table = iceberg_table(where)
    if reader == "own":
        return table.scan().to_arrow()
    import polars as pl

    os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
    return pl.scan_iceberg(table, storage_options=polars_options()).collect().to_arrow()


def rows(table: pa.Table, schema: pa.Schema) -> list[tuple[Any, ...]]:
    """The rows of ``table``, its columns cast to ``schema``'s, in order: what two
    readers must agree on, whatever types (large strings, time zones) each gives."""
    columns = [table.column(f.name).cast(f.type) for f in schema]
    normalized = pa.table(columns, schema=schema)
    return sorted(tuple(r.values()) for r in normalized.to_pylist())


def data_keys(store: Any, bucket: str, prefix: str) -> list[str]:
    """Every data file under ``prefix`` as a plain listing reader sees it (the
    format's and the protocol's own folders, ``_...``, skipped)."""
    return sorted(
        o.key
        for o in store.list_objects(bucket, prefix)
        if o.key.endswith(".parquet") and not _hidden(o.key[len(prefix) :])
    )


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def assert_same_rows(tables: Sequence[tuple[str, pa.Table]], schema: pa.Schema) -> None:
    """Every reader's table holds the same rows; names the one that differs."""
    (first_name, first), *others = tables
    expected = rows(first, schema)
    for name, table in others:
        assert rows(table, schema) == expected, f"{name} reads other rows than {first_name}"
