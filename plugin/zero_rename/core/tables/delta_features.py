"""What a Delta table's protocol and settings ask of every writer, against what a
zero-rename commit does: add actions for files already written (no row of them
read), and for a ``replace`` remove actions by path, through delta-rs.

Another engine may have turned on what such commits cannot honour; Spark's Delta
writer does so with one table property. Found at job setup, before anything is
written, the job is refused; found at job commit (the table changed meanwhile),
nothing is committed and the job is rolled back. What each would do otherwise,
as seen with Spark 4.1 and Delta 4.4 reading the table:

- ``columnMapping`` with physical names other than the columns' (every table
  Spark creates with ``delta.columnMapping.mode``): the files' columns and the
  add actions' partition values name the logical columns, so Spark reads nulls;
- ``deletionVectors``: a remove action names no deletion vector, so it does not
  remove a file that has one, and a ``replace`` would keep that file's rows;
- ``delta.appendOnly``: a ``replace`` removes files;
- CHECK constraints, invariants, generated and identity columns, and NOT NULL
  columns the files lack or may leave null: the rows are already written,
  unchecked;
- any other table feature (``inCommitTimestamp``, ``rowTracking``,
  ``v2Checkpoint``, ``catalogManaged``...): a duty of every commit that these
  commits do not carry out; delta-rs refuses some of them only at the log write.
"""

from __future__ import annotations

import json
from typing import Any

from deltalake import DeltaTable, Schema

# Table features whose duties these commits carry out, or which the checks below
# find not in use. Legacy protocol versions (no feature lists) imply only these.
HONOURED = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "identityColumns",
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
    }
)
PHYSICAL_NAME = "delta.columnMapping.physicalName"
# Column metadata by which a table asks writers to check or compute values.
_COLUMN_DUTIES = {
    "delta.invariants": "an invariant",
    "delta.generationExpression": "a generated value",
    "delta.identity.start": "an identity value",
}


def unsupported(table: DeltaTable, replaces: bool, schema: Schema | None) -> str:
    """What the table asks that a commit of this job cannot honour, or "".
    ``schema``: the columns the job writes (its files' and its partition
    columns), None when its files' schema is unknown (then every column counts)."""
    protocol = table.protocol()
    features = set(protocol.reader_features or ()) | set(protocol.writer_features or ())
    unknown = sorted(features - HONOURED)
    if unknown:
        return (
            f"needs table feature{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}, "
            "which zero-rename's commits do not write"
        )
    settings = table.metadata().configuration
    if replaces and settings.get("delta.appendOnly", "").lower() == "true":
        return "is append-only (delta.appendOnly), and a replace removes files"
    if replaces and "deletionVectors" in features:
        return (
            "has deletion vectors (table feature deletionVectors): a replace's remove "
            "actions carry none, so they would not remove a file that has one"
        )
    constraints = sorted(k.split(".", 2)[2] for k in settings if k.startswith("delta.constraints."))
    if constraints:
        return (
            f"has CHECK constraints ({', '.join(constraints)}), which zero-rename does not "
            "check its files' rows against"
        )
    fields = _fields(table.schema())
    written = None if schema is None else _fields(schema)
    for name, field in sorted(fields.items()):
        # A value to check or compute is due in every row, written by the job or not.
        metadata = field.get("metadata") or {}
        what = next((w for key, w in _COLUMN_DUTIES.items() if key in metadata), None)
        if what:
            return f"asks writers for {what} in column {name!r}, which zero-rename does not give"
    for name in sorted(fields if written is None else set(written) & set(fields)):
        problem = _mapping_problem(name, fields[name].get("metadata") or {}, settings)
        if problem:
            return problem
    return _not_null_problem(fields, written)


def _fields(schema: Schema) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in json.loads(schema.to_json())["fields"]}


def _not_null_problem(
    fields: dict[str, dict[str, Any]], written: dict[str, dict[str, Any]] | None
) -> str:
    """A NOT NULL column the job's files lack or may leave null: Delta's writers
    must keep nulls out of it, and these files are written already."""
    if written is None:
        return ""
    for name, field in sorted(fields.items()):
        if field.get("nullable", True):
            continue
        if name not in written:
            return f"has column {name!r} NOT NULL, which the job's files lack"
        if written[name].get("nullable", True):
            return f"has column {name!r} NOT NULL, which the job's files may leave null"
    return ""


def _mapping_problem(name: str, metadata: dict[str, Any], settings: dict[str, str]) -> str:
    mode = settings.get("delta.columnMapping.mode", "none").lower()
    physical = metadata.get(PHYSICAL_NAME, name)
    if mode == "id" or (mode == "name" and physical != name):
        return (
            f"maps column {name!r} to the physical name {physical!r} "
            f"(delta.columnMapping.mode {mode}), while the job's files and partition "
            "values name it by its own name"
        )
    return ""
