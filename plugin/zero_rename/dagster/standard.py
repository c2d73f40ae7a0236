"""Dagster's standard metadata keys for a committed job, beside the package's own.

Dagster's asset catalog, its column-schema checks and its lineage read a few
keys of the ``dagster/`` namespace; a committed job fills them in:

- ``dagster/uri``: the destination (``s3://bucket/prefix``);
- ``dagster/column_schema``: the files' schema as the job's task manifests
  recorded it (the decided plan keeps it), partition columns marked;
- ``dagster/table_name``: the Iceberg table (catalog-qualified when a catalog
  is named), when the job is published to Iceberg; a Delta table has no name
  but its path, which ``dagster/uri`` already is;
- ``dagster/row_count`` and ``dagster/partition_row_count``: the rows readers
  read now in the whole destination, and in the partitions this job wrote
  (from :meth:`~zero_rename.core.Committer.partitions`: the job records and one
  listing of the destination). A destination of more than
  :data:`ROW_COUNT_OBJECTS` objects, or one holding files no job recorded rows
  for, gets neither rather than a wrong number; nor does one the store fails
  to list (logged: the job is committed all the same).
"""

from __future__ import annotations

import logging
from typing import Any

from dagster import MetadataValue, TableColumn, TableColumnConstraints, TableSchema

from zero_rename.core import Committer, JobRecord, files_schema
from zero_rename.dagster.failures import protocol_errors

log = logging.getLogger(__name__)

# The row counts list the destination: above this many objects they are left out.
ROW_COUNT_OBJECTS = 100_000


def standard_metadata(
    committer: Committer, record: JobRecord, row_counts: bool = True
) -> dict[str, Any]:
    """The ``dagster/`` keys of a committed job (``record``, as read after its commit)."""
    values: dict[str, Any] = {"dagster/uri": MetadataValue.text(committer.dest.url)}
    with protocol_errors():
        schema = column_schema(committer.table_schema(record), record.options.partition_columns)
    if schema is not None:
        values["dagster/column_schema"] = MetadataValue.table_schema(schema)
    if name := table_name(record):
        values["dagster/table_name"] = MetadataValue.text(name)
    if row_counts:
        values.update(row_count_metadata(committer, record.job_id))
    return values


def column_schema(encoded: str, partition_columns: tuple[str, ...] = ()) -> TableSchema | None:
    """The files' Arrow schema (base64 IPC, as the task manifests carry it) as Dagster's
    ``TableSchema``: each column's Arrow type and whether it may be null."""
    arrow = files_schema(encoded)
    if arrow is None:
        return None
    return TableSchema(
        columns=[
            TableColumn(
                name=field.name,
                type=str(field.type),
                description="partition column" if field.name in partition_columns else None,
                constraints=TableColumnConstraints(nullable=field.nullable),
            )
            for field in arrow
        ]
    )


def table_name(record: JobRecord) -> str | None:
    """The Iceberg table a job was published to, qualified by its catalog's name."""
    table = record.table_commit
    if table is None or table.format != "iceberg":
        return None
    catalog = getattr(record.options, "iceberg_catalog", "")
    return f"{catalog}.{table.table}" if catalog else table.table


def row_count_metadata(committer: Committer, job_id: str) -> dict[str, Any]:
    """``dagster/row_count`` (the destination's rows) and ``dagster/partition_row_count``
    (the rows of the partitions whose last writer is ``job_id``), as readers read
    them now; empty when the destination is too large to list, or holds files
    whose rows no job recorded."""
    try:
        view = committer.partitions(max_objects=ROW_COUNT_OBJECTS)
    except Exception:
        # The job is committed; a count the store would not list is left out, not
        # a reason to fail (and retry) its materialization.
        log.warning("no row counts for %s", committer.dest.url, exc_info=True)
        return {}
    if not view.complete:
        log.info("%s holds over %d objects: no row counts", committer.dest.url, ROW_COUNT_OBJECTS)
        return {}
    values: dict[str, Any] = {}
    rows = [p.rows for p in view.partitions]
    if None not in rows:
        values["dagster/row_count"] = MetadataValue.int(sum(r or 0 for r in rows))
    written = [p.rows for p in view.partitions if p.job_id == job_id]
    if written and None not in written:
        values["dagster/partition_row_count"] = MetadataValue.int(sum(r or 0 for r in written))
    return values
