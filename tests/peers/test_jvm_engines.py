"""JVM engines read what zero-rename publishes, and zero-rename builds on what they write.

zero-rename writes through the ``zero-rename`` format on the suite's Spark (4.2),
as its users run it; the JVM engine is Spark 4.1.2 with Iceberg 1.12.0's runtime
and Delta 4.4.0 in a process of its own (``tests/peers/peer.py``), as a
consumer's cluster runs beside the producer: Iceberg through a JDBC catalog on
the embedded catalog's SQLite file (the tables PyIceberg's SQL catalog keeps),
Delta by the table's path over S3A. Every check is of rows: the JVM's, and
those of the formats' Python readers (PyIceberg, deltalake).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tests.helpers import pending_in_bucket
from tests.peers.engine import JvmEngine
from tests.spark.test_table_formats import SCHEMA
from tests.table_readers import delta_table, iceberg_table, rows
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig

pytestmark = pytest.mark.peers

# The rows are tests/spark's table-format rows (SCHEMA), partitioned by day (dt).
D1, D2, D3 = "2024-01-01", "2024-01-02", "2024-01-03"
Row = tuple[Any, ...]


def batch(days: dict[str, range]) -> pa.Table:
    """Rows of ``days`` (day -> ids); every fifth name null."""
    out: list[Row] = []
    for day, ids in days.items():
        start = datetime.fromisoformat(day).replace(tzinfo=UTC)
        for i in ids:
            name = None if i % 5 == 0 else f"n{i}"
            amount = Decimal(i * 125).scaleb(-2)
            out.append((i, name, amount, start + timedelta(minutes=i), date.fromisoformat(day)))
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in out], SCHEMA)


def expected(*tables: pa.Table) -> list[Row]:
    return sorted(r for t in tables for r in rows(t, SCHEMA))


class Table:
    """One table at ``s3://<bucket>/<name>``, as zero-rename, the JVM and the
    formats' Python readers name it."""

    def __init__(self, spark: Any, bucket: str, table_format: str, store: StoreConfig) -> None:
        self.spark, self.bucket, self.format = spark, bucket, table_format
        self.name = f"events_{uuid.uuid4().hex[:8]}"
        self.committer = Committer(f"s3://{bucket}/{self.name}", store)
        # Iceberg: zero_rename.peers.<name> in the JVM's catalog, the name Spark's
        # writer gives it (bench.peers.writes); Delta: the path.
        self.jvm_name = (
            f"zero_rename.peers.{self.name}"
            if table_format == "iceberg"
            else f"delta.`s3a://{bucket}/{self.name}`"
        )

    def write(self, data: pa.Table, mode: str = "append") -> str:
        """A zero-rename job of ``data``: ``append`` or ``replace`` (its partitions);
        returns its job id."""
        writer = (
            self.spark.createDataFrame(data)
            .write.format("zero-rename")
            .option("table_format", self.format)
            .option("partition_by", "dt")
            .mode("overwrite" if mode == "replace" else "append")
        )
        if self.format == "iceberg":
            writer = writer.option("iceberg_table", f"peers.{self.name}")
        before = {j.job_id for j in self.committer.jobs()}
        writer.save(self.committer.dest.url)
        (job,) = [j for j in self.committer.jobs() if j.job_id not in before]
        assert job.state == "committed", job
        return job.job_id

    def commit_of(self, job_id: str) -> str:
        commit = self.committer.job(job_id).table_commit
        assert commit is not None
        return commit.id

    def jvm_rows(self, jvm: JvmEngine, version: str | None = None) -> list[Row]:
        at = f" VERSION AS OF {version}" if version is not None else ""
        return rows(jvm.sql(f"SELECT * FROM {self.jvm_name}{at}"), SCHEMA)

    def jvm_state(self, jvm: JvmEngine) -> tuple[list[Any], list[Any]]:
        """Every row, whatever the table's columns are now, and every version."""
        data = jvm.sql(f"SELECT * FROM {self.jvm_name}").to_pylist()
        if self.format == "iceberg":
            versions = jvm.sql(f"SELECT snapshot_id FROM {self.jvm_name}.snapshots")
        else:
            versions = jvm.sql(f"DESCRIBE HISTORY {self.jvm_name}").select(["version"])
        return sorted(data, key=repr), sorted(versions.to_pylist(), key=repr)

    def python_rows(self) -> list[Row]:
        """The rows as PyIceberg or deltalake reads them."""
        if self.format == "iceberg":
            return rows(iceberg_table(f"peers.{self.name}").scan().to_arrow(), SCHEMA)
        return rows(delta_table(self.committer.dest.url).to_pyarrow_table(), SCHEMA)

    def objects(self) -> list[str]:
        dest = self.committer.dest
        return sorted(o.key for o in self.committer.store.list_objects(dest.bucket, dest.dir))

    def assert_refused(self, jvm: JvmEngine, data: pa.Table, mode: str, reason: str) -> None:
        """The write fails at job setup, saying ``reason`` in one line of its own,
        and leaves nothing: no object, no pending upload, the table as it was."""
        keys, before = self.objects(), self.jvm_state(jvm)
        with pytest.raises(Exception, match=reason) as refused:
            self.write(data, mode)
        said = [line for line in str(refused.value).splitlines() if re.search(reason, line)]
        assert said and said[0].strip().startswith("zero_rename.errors.ConfigError: "), said
        assert self.objects() == keys
        assert pending_in_bucket(self.committer) == []
        assert self.jvm_state(jvm) == before


def new_table(spark: Any, bucket: str, server: Any, table_format: str) -> Table:
    return Table(spark, bucket, table_format, StoreConfig(endpoint_url=server.endpoint_url))


@pytest.fixture(params=["iceberg", "delta"])
def table(request: pytest.FixtureRequest, spark: Any, bucket: str, s3_server: Any) -> Table:
    return new_table(spark, bucket, s3_server, request.param)


# The JVM engine first in each test's fixtures: its start overlaps Spark's.


def test_the_jvm_reads_what_zero_rename_publishes(jvm: JvmEngine, table: Table) -> None:
    """Two appends and a replace of one partition: the JVM reads all rows, then only
    the replaced partition's new ones, and the version before the replace by time
    travel; each Iceberg snapshot carries its job's id."""
    first, second, new = (
        batch({D1: range(0, 6), D2: range(6, 9)}),
        batch({D3: range(9, 12)}),
        batch({D1: range(100, 103)}),
    )
    jobs = [table.write(first), table.write(second)]
    before = table.commit_of(jobs[-1])
    assert table.jvm_rows(jvm) == expected(first, second)
    jobs.append(table.write(new, "replace"))
    after = expected(new, batch({D2: range(6, 9)}), second)
    assert table.jvm_rows(jvm) == after
    assert table.python_rows() == after
    assert table.jvm_rows(jvm, before) == expected(first, second)
    if table.format == "iceberg":
        history = jvm.sql(
            f"SELECT snapshot_id, operation, summary['zero-rename.job-id'] AS job "
            f"FROM {table.jvm_name}.snapshots ORDER BY committed_at"
        ).to_pylist()
        assert [(h["operation"], h["job"]) for h in history] == [
            ("append", jobs[0]),
            ("append", jobs[1]),
            ("overwrite", jobs[2]),
        ]
        assert [str(h["snapshot_id"]) for h in history] == [table.commit_of(j) for j in jobs]
    else:
        history = jvm.sql(f"DESCRIBE HISTORY {table.jvm_name}").to_pylist()
        assert sorted(h["version"] for h in history) == [0, 1, 2]
        assert [table.commit_of(j) for j in jobs] == ["0", "1", "2"]


def test_zero_rename_commits_on_top_of_the_jvm_writer(jvm: JvmEngine, table: Table) -> None:
    """Spark's own Iceberg or Delta writer appends to a table zero-rename created;
    zero-rename then appends, and replaces a partition holding both writers' rows."""
    ours, theirs_d2, theirs_d3 = (
        batch({D1: range(0, 3), D2: range(3, 6)}),
        batch({D2: range(50, 53)}),
        batch({D3: range(53, 55)}),
    )
    table.write(ours)
    jvm.append(table.format, table.bucket, table.name, pa.concat_tables([theirs_d2, theirs_d3]))
    assert table.jvm_rows(jvm) == expected(ours, theirs_d2, theirs_d3)
    assert table.python_rows() == expected(ours, theirs_d2, theirs_d3)
    more = batch({D3: range(200, 202)})
    before = table.commit_of(table.write(more))
    new = batch({D2: range(300, 302)})
    table.write(new, "replace")
    after = expected(batch({D1: range(0, 3)}), theirs_d3, more, new)
    assert table.jvm_rows(jvm) == after
    assert table.python_rows() == after
    assert table.jvm_rows(jvm, before) == expected(ours, theirs_d2, theirs_d3, more)


def test_iceberg_changes_zero_rename_builds_on_or_refuses(
    jvm: JvmEngine, spark: Any, bucket: str, s3_server: Any
) -> None:
    """A column Spark added is built upon (read as nulls in zero-rename's files);
    a partition field Spark added, a column of the job's that Spark renamed, and
    format version 3 (which PyIceberg does not write) are refused at job setup."""
    table = new_table(spark, bucket, s3_server, "iceberg")
    ours = batch({D1: range(0, 3)})
    table.write(ours)
    jvm.sql(f"ALTER TABLE {table.jvm_name} ADD COLUMN note string")
    more = batch({D2: range(3, 5)})
    table.write(more)
    assert table.jvm_rows(jvm) == table.python_rows() == expected(ours, more)
    notes = jvm.sql(f"SELECT count(*) AS n FROM {table.jvm_name} WHERE note IS NOT NULL")
    assert notes.to_pylist() == [{"n": 0}]
    jvm.sql(f"ALTER TABLE {table.jvm_name} ADD PARTITION FIELD bucket(4, id)")
    table.assert_refused(
        jvm, batch({D3: range(5, 7)}), "append", r"partitioned by identity\(dt\), bucket\[4\]\(id\)"
    )
    jvm.sql(f"ALTER TABLE {table.jvm_name} DROP PARTITION FIELD bucket(4, id)")
    jvm.sql(f"ALTER TABLE {table.jvm_name} RENAME COLUMN name TO label")
    table.assert_refused(
        jvm, batch({D3: range(5, 7)}), "append", "column 'name' is not in the table"
    )
    jvm.sql(f"ALTER TABLE {table.jvm_name} RENAME COLUMN label TO name")
    jvm.sql(f"ALTER TABLE {table.jvm_name} SET TBLPROPERTIES ('format-version' = '3')")
    table.assert_refused(jvm, batch({D3: range(5, 7)}), "append", "format version is 3")


def test_delta_changes_zero_rename_builds_on_or_refuses(
    jvm: JvmEngine, spark: Any, bucket: str, s3_server: Any
) -> None:
    """A column Spark added is built upon. On a table with deletion vectors (Spark's
    DELETE wrote one) zero-rename still appends, but refuses a replace, whose
    remove actions would carry no deletion vector and so would not remove that
    file: Spark kept its rows. A table Spark's writer created is built upon; one
    Spark created with column mapping (physical names of its own) is refused,
    where Spark read zero-rename's rows as nulls."""
    table = new_table(spark, bucket, s3_server, "delta")
    ours = batch({D1: range(0, 4), D2: range(4, 6)})
    table.write(ours)
    jvm.sql(f"ALTER TABLE {table.jvm_name} ADD COLUMNS (note STRING)")
    jvm.sql(
        f"ALTER TABLE {table.jvm_name} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    jvm.sql(f"DELETE FROM {table.jvm_name} WHERE id = 1")
    assert any("/deletion_vector_" in k for k in table.objects())
    more = batch({D3: range(6, 8)})
    table.write(more)
    kept = [r for r in expected(ours, more) if r[0] != 1]
    assert table.jvm_rows(jvm) == kept
    table.assert_refused(jvm, batch({D1: range(9, 11)}), "replace", "has deletion vectors")

    # A table Spark's writer created: its empty _delta_log/_staged_commits/ does
    # not make it catalog-managed, and zero-rename builds on it.
    created = new_table(spark, bucket, s3_server, "delta")
    theirs = batch({D1: range(0, 2)})
    jvm.append("delta", created.bucket, created.name, theirs)
    assert f"{created.committer.dest.dir}_delta_log/_staged_commits/" in created.objects()
    ours = batch({D2: range(2, 4)})
    created.write(ours)
    assert created.jvm_rows(jvm) == created.python_rows() == expected(theirs, ours)

    mapped = new_table(spark, bucket, s3_server, "delta")
    jvm.sql(
        f"CREATE TABLE {mapped.jvm_name} (id BIGINT, name STRING, amount DECIMAL(10, 2), "
        "at TIMESTAMP, dt DATE) USING delta PARTITIONED BY (dt) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    theirs = batch({D1: range(0, 2)})
    jvm.append("delta", mapped.bucket, mapped.name, theirs)
    mapped.assert_refused(
        jvm, batch({D1: range(2, 4)}), "append", "maps column 'amount' to the physical name"
    )
