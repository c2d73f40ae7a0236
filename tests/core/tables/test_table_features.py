"""Tables another engine changed in ways a zero-rename commit cannot build on are
refused: at job setup, before anything is written, with a one-line error; at job
commit (changed after the setup), with nothing committed and the job rolled back.

The tables are those Spark's Delta and Iceberg writers leave (tests/peers runs
the writers themselves), made here without a JVM: a Delta log written as Spark
writes it (protocol, table features, settings, column metadata), an Iceberg
table whose metadata another writer moved to format version 3. What each would
have done unrefused, as Spark 4.1 with Delta 4.4 reads it, is in
zero_rename.core.tables.delta_features.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

from tests.helpers import pending_in_bucket, visible
from tests.parquet_files import encoded_schema, write_parquet
from tests.table_jobs import TABLE_SCHEMA, table_job
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.profile_record import RECORD_NAME
from zero_rename.core.tables.iceberg_catalog import HOME_VARIABLE, derived_table_name, embedded_uri
from zero_rename.errors import CommitRolledBackError, ConfigError

pytestmark = pytest.mark.s3

DELTA = {"table_format": "delta", "partition_columns": "dt"}
# The columns of tests.table_jobs' files: id in the files, dt in the path.
FIELDS = [("id", "long"), ("dt", "string")]


def log_version(c: Committer, version: int, actions: list[dict[str, Any]]) -> None:
    """One commit of the Delta log, written as another engine writes it."""
    body = "\n".join(json.dumps(a) for a in actions) + "\n"
    key = f"{c.dest.dir}_delta_log/{version:020d}.json"
    c.store.client.put_object(Bucket=c.dest.bucket, Key=key, Body=body.encode())


def protocol(reader: int, writer: int, writers: str = "", readers: str = "") -> Any:
    """A protocol action; features (comma-separated) with versions 3 and 7."""
    action: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if writer == 7:
        action["writerFeatures"] = writers.split(",")
    if reader == 3:
        action["readerFeatures"] = readers.split(",")
    return {"protocol": action}


def metadata(
    settings: dict[str, str],
    columns: dict[str, dict[str, Any]] | None = None,
    not_null: tuple[str, ...] = (),
) -> Any:
    """The table's metaData: FIELDS and any other column ``columns`` names (a
    long, which the job's files lack), with that column metadata."""
    types = dict(FIELDS)
    names = [*types, *(n for n in columns or {} if n not in types)]
    fields = [
        {
            "name": n,
            "type": types.get(n, "long"),
            "nullable": n not in not_null,
            "metadata": (columns or {}).get(n, {}),
        }
        for n in names
    ]
    return {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": fields}),
            "partitionColumns": ["dt"],
            "configuration": settings,
            "createdTime": 1700000000000,
        }
    }


def spark_column_mapping() -> dict[str, dict[str, Any]]:
    """Column metadata of a table Spark created with delta.columnMapping.mode=name."""
    return {
        name: {
            "delta.columnMapping.id": i,
            "delta.columnMapping.physicalName": f"col-{uuid.uuid4()}",
        }
        for i, (name, _) in enumerate(FIELDS, 1)
    }


def setup(c: Committer, mode: str) -> JobRecord:
    return c.setup_job({**DELTA, "conflict_mode": mode}, table_schema=TABLE_SCHEMA)


def assert_untouched(c: Committer, log_versions: int) -> None:
    """Nothing of a refused job: no file, no pending upload, no job, the log as it was.
    The store's probed profile stays: it is the store's, not the job's."""
    keys = [o.key[len(c.dest.dir) :] for o in c.store.list_objects(c.dest.bucket, c.dest.dir)]
    log = [k for k in keys if k.startswith("_delta_log/")]
    assert len(log) == log_versions, log
    profile = f"_zero_rename/{RECORD_NAME}"
    assert [k for k in keys if not k.startswith("_delta_log/") and k != profile] == []
    assert pending_in_bucket(c) == []


# A table as another engine left it -> (append refused?, replace refused?, the reason).
CASES = {
    "column mapping by name, Spark's physical names": (
        [protocol(2, 7, "columnMapping,invariants,appendOnly")],
        {"delta.columnMapping.mode": "name"},
        spark_column_mapping(),
        ("maps column 'dt' to the physical name 'col-", "maps column 'dt'"),
    ),
    "column mapping by id": (
        [protocol(2, 5)],
        {"delta.columnMapping.mode": "id"},
        spark_column_mapping(),
        ("mode id", "mode id"),
    ),
    "deletion vectors": (
        [protocol(3, 7, "deletionVectors,invariants,appendOnly", "deletionVectors")],
        {"delta.enableDeletionVectors": "true"},
        None,
        (None, "has deletion vectors"),
    ),
    "append-only": (
        [protocol(1, 2)],
        {"delta.appendOnly": "true"},
        None,
        (None, "is append-only"),
    ),
    "in-commit timestamps": (
        [protocol(1, 7, "inCommitTimestamp,invariants,appendOnly")],
        {"delta.enableInCommitTimestamps": "true"},
        None,
        ("needs table feature inCommitTimestamp", "inCommitTimestamp"),
    ),
    "row tracking": (
        [protocol(1, 7, "domainMetadata,rowTracking,invariants,appendOnly")],
        {"delta.enableRowTracking": "true"},
        None,
        ("features domainMetadata, rowTracking", "rowTracking"),
    ),
    "a CHECK constraint": (
        [protocol(1, 3)],
        {"delta.constraints.positive": "id > 0"},
        None,
        ("CHECK constraints \\(positive\\)", "CHECK"),
    ),
    "an identity column the files lack": (
        [protocol(1, 6)],
        {},
        {"key": {"delta.identity.start": 1, "delta.identity.step": 1}},
        ("an identity value in column 'key'", "identity"),
    ),
    "a generated column": (
        [protocol(1, 4)],
        {},
        {"id": {"delta.generationExpression": "42"}},
        ("a generated value in column 'id'", "generated"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_setup_refuses_a_table_it_cannot_commit_to(committer: Committer, case: str) -> None:
    actions, settings, columns, (on_append, on_replace) = CASES[case]
    c = committer
    log_version(c, 0, [*actions, metadata(settings, columns)])
    for mode, reason in (("append", on_append), ("replace", on_replace)):
        if reason is None:
            continue
        with pytest.raises(ConfigError, match=reason) as refused:
            setup(c, mode)
        assert "\n" not in str(refused.value)
        assert_untouched(c, 1)
    if on_append is None:  # appends add files, which such a table takes
        job = table_job(c, {"2024-01-01": [1]}, **DELTA)
        assert c.job(job.job_id).state == "committed"


def test_column_mapping_keeping_the_columns_names_is_built_upon(committer: Committer) -> None:
    """Mapping turned on for an existing table keeps its columns' names as their
    physical names: the files' columns are the ones readers look for."""
    c = committer
    same = {
        n: {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": n}
        for i, (n, _) in enumerate(FIELDS, 1)
    }
    log_version(c, 0, [protocol(2, 5), metadata({"delta.columnMapping.mode": "name"}, same)])
    job = table_job(c, {"2024-01-01": [1]}, "replace", **DELTA)
    assert c.job(job.job_id).table_commit is not None


def test_a_not_null_column_takes_only_files_that_keep_nulls_out(committer: Committer) -> None:
    """Spark's CREATE TABLE (id BIGINT NOT NULL): a job whose files' id may be null is
    refused (Delta's writers keep nulls out, and the files are written already);
    one whose files' id is not nullable is taken."""
    c = committer
    log_version(c, 0, [protocol(1, 2), metadata({}, not_null=("id",))])
    with pytest.raises(ConfigError, match="has column 'id' NOT NULL, which the job's files may"):
        setup(c, "append")
    assert_untouched(c, 1)
    required = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string())])
    c.setup_job({**DELTA, "conflict_mode": "append"}, table_schema=encoded_schema(required))


def test_a_feature_turned_on_after_setup_rolls_the_job_back(committer: Committer) -> None:
    """Another engine turns on in-commit timestamps between the job's setup and its
    commit: nothing is committed (delta-rs refused each such commit as a lost race,
    20 times, then left the job committing), the job is rolled back."""
    c = committer
    first = table_job(c, {"2024-01-01": [1]}, **DELTA)
    job = c.setup_job({**DELTA, "conflict_mode": "append"}, table_schema=TABLE_SCHEMA)
    write_parquet(c, job, "00000", {"2024-01-02": pa.table({"id": pa.array([2], pa.int64())})})
    log_version(
        c,
        1,
        [
            {
                "commitInfo": {
                    "operation": "SET TBLPROPERTIES",
                    "engineInfo": "Apache-Spark/4.1.2 Delta-Lake/4.4.0",
                }
            },
            protocol(1, 7, "inCommitTimestamp,invariants,appendOnly"),
        ],
    )
    with pytest.raises(CommitRolledBackError, match="needs table feature inCommitTimestamp"):
        c.commit_job(job.job_id)
    record = c.job(job.job_id)
    assert record.state == "aborted" and record.table_commit is None
    assert [k for k in visible(c) if job.job_id in k] == []
    assert pending_in_bucket(c) == []
    assert c.job(first.job_id).state == "committed"


# -- Iceberg ---------------------------------------------------------------------------------


@pytest.fixture
def iceberg_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "iceberg"
    monkeypatch.setenv(HOME_VARIABLE, str(home))
    return home


def to_format_version_3(c: Committer) -> None:
    """What Spark's ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3') leaves:
    a metadata file of version 3 (next-row-id added), committed to the catalog."""
    namespace, name = derived_table_name(c.dest).split(".")
    where = {"ns": namespace, "t": name}
    with create_engine(embedded_uri()).begin() as db:
        old = db.execute(
            text(
                "select metadata_location from iceberg_tables "
                "where table_namespace = :ns and table_name = :t"
            ),
            where,
        ).scalar_one()
        bucket, key = old[len("s3://") :].split("/", 1)
        found = c.store.get_object(bucket, key)
        assert found is not None
        body = {**json.loads(found[0]), "format-version": 3, "next-row-id": 0}
        new_key = key.replace(".metadata.json", "-v3.metadata.json")
        c.store.client.put_object(Bucket=bucket, Key=new_key, Body=json.dumps(body).encode())
        db.execute(
            text(
                "update iceberg_tables set metadata_location = :new, "
                "previous_metadata_location = :old where table_namespace = :ns and table_name = :t"
            ),
            {**where, "new": f"s3://{bucket}/{new_key}", "old": old},
        )


ICEBERG = {"table_format": "iceberg", "partition_columns": "dt"}


def test_iceberg_format_version_3_is_refused(committer: Committer, iceberg_home: Path) -> None:
    """PyIceberg writes manifests of versions 1 and 2 only: a version 3 table made
    the commit fail with its outcome unknown, the job left committing with every
    file complete. Now refused at setup, or at commit with the job rolled back."""
    c = committer
    first = table_job(c, {"2024-01-01": [1]}, **ICEBERG)
    job = c.setup_job({**ICEBERG, "conflict_mode": "append"}, table_schema=TABLE_SCHEMA)
    write_parquet(c, job, "00000", {"2024-01-02": pa.table({"id": pa.array([2], pa.int64())})})
    to_format_version_3(c)
    with pytest.raises(CommitRolledBackError, match="format version is 3"):
        c.commit_job(job.job_id)
    assert c.job(job.job_id).state == "aborted"
    assert [k for k in visible(c) if job.job_id in k] == []
    assert pending_in_bucket(c) == []
    with pytest.raises(ConfigError, match="format version is 3") as refused:
        c.setup_job({**ICEBERG, "conflict_mode": "append"}, table_schema=TABLE_SCHEMA)
    assert "\n" not in str(refused.value)
    assert c.job(first.job_id).state == "committed"
