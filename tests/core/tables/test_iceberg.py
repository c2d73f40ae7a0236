"""Each committed job is one Iceberg snapshot, exactly once, whatever was killed or lost.

Jobs run the whole protocol (setup, task attempts writing real Parquet files with
pyarrow and recording their statistics and schema as the Spark writer does, job
commit) against SeaweedFS, publishing through PyIceberg's SQL catalog on SQLite
in the test's own directory (the embedded default). Tables are read back with
PyIceberg's scan and Polars' ``scan_iceberg``, through a catalog loaded as a user
would load it. Each failure test ends by checking the catalog (one snapshot per
committed job, none for an aborted one), the bucket (the files, nothing
pending) and the job record.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import EqualTo
from pyiceberg.io.pyarrow import StatisticsCollector, match_metrics_mode
from pyiceberg.table import Table
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from tests.faults import CRASH_EXIT_CODE, inject, run_until_crash
from tests.helpers import pending_in_bucket, visible
from tests.parquet_files import encoded_schema, write_parquet
from zero_rename.core.committer import Committer
from zero_rename.core.data import shards
from zero_rename.core.data.layout import Destination
from zero_rename.core.data.model import ColumnStats, JobRecord
from zero_rename.core.data.options import parse_options
from zero_rename.core.protocol import claims
from zero_rename.core.protocol.rollback import roll_back
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.tables import iceberg_catalog, iceberg_io
from zero_rename.core.tables.base import JOB_ID_PROPERTY
from zero_rename.core.tables.iceberg import IcebergFormat
from zero_rename.core.tables.iceberg_catalog import (
    EMBEDDED_CATALOG,
    HOME_VARIABLE,
    derived_table_name,
    embedded_uri,
    file_io_properties,
)
from zero_rename.core.tables.iceberg_files import column_bounds
from zero_rename.core.tables.iceberg_io import PY_IO_IMPL, SINGLE_REQUEST_IO
from zero_rename.errors import (
    CommitRolledBackError,
    CommitStateUnknownError,
    ConfigError,
    DestinationError,
    RollbackRefusedError,
)

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
SCHEMA_B64 = encoded_schema(SCHEMA)
OPTIONS = {"partition_columns": "dt", "table_format": "iceberg", "threads": 2}
Rows = list[tuple[str | None, int]]


@pytest.fixture(autouse=True)
def iceberg_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The embedded catalog of this test alone (forked children inherit it)."""
    home = tmp_path / "iceberg"
    monkeypatch.setenv(HOME_VARIABLE, str(home))
    # Polars plans through PyIceberg here, and says so in a warning unless told.
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    return home


def data(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"row {i}" for i in ids]})


def setup(c: Committer, mode: str = "append", **options: Any) -> JobRecord:
    return c.setup_job({**OPTIONS, "conflict_mode": mode, **options}, table_schema=SCHEMA_B64)


def written(
    c: Committer, mode: str, files: dict[str | None, list[int]], **options: Any
) -> JobRecord:
    """A job whose one task wrote a file per partition, not yet committed."""
    job = setup(c, mode, **options)
    write_parquet(c, job, "00000", {day: data(ids) for day, ids in files.items()})
    return job


def run(c: Committer, mode: str, files: dict[str | None, list[int]], **options: Any) -> JobRecord:
    job = written(c, mode, files, **options)
    c.commit_job(job.job_id)
    return job


def user_table(c: Committer) -> Table:
    """The table as a PyIceberg user loads it from the embedded catalog."""
    catalog = load_catalog(
        EMBEDDED_CATALOG,
        **{
            "type": "sql",
            "uri": embedded_uri(),
            "s3.endpoint": c.store.endpoint_url,
            "s3.region": "us-east-1",
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        },
    )
    return catalog.load_table(derived_table_name(c.dest))


def ordered(rows: Iterable[tuple[str | None, int]]) -> Rows:
    """Rows in one order, Spark's null partition first."""
    return sorted(rows, key=lambda r: (r[0] is not None, r[0] or "", r[1]))


def pyiceberg_rows(table: Table) -> Rows:
    return ordered((r["dt"], r["id"]) for r in table.scan().to_arrow().to_pylist())


def polars_rows(c: Committer, table: Table) -> Rows:
    storage = {
        "aws_endpoint_url": c.store.endpoint_url,
        "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "aws_region": "us-east-1",
        "aws_allow_http": "true",
    }
    frame = pl.scan_iceberg(table, storage_options=storage).collect()
    return ordered(zip(frame["dt"].to_list(), frame["id"].to_list(), strict=True))


def job_ids(table: Table) -> list[str | None]:
    """The job id of each snapshot, oldest first (None: another writer's)."""
    return [s.summary.get(JOB_ID_PROPERTY) if s.summary else None for s in table.snapshots()]


def rows_of(files: dict[str | None, list[int]]) -> Rows:
    return ordered((day, i) for day, ids in files.items() for i in ids)


def assert_published(c: Committer, jobs: list[JobRecord], expected: Rows) -> Table:
    """Each job committed, one snapshot each in commit order, its record naming
    that snapshot; the table reads exactly ``expected`` through both readers."""
    table = user_table(c)
    assert job_ids(table) == [j.job_id for j in jobs]
    for job, snapshot in zip(jobs, table.snapshots(), strict=True):
        record = c.job(job.job_id)
        assert record.state == "committed"
        assert record.table_commit is not None
        assert record.table_commit.id == str(snapshot.snapshot_id)
        assert record.steps["publish_table"].status == "succeeded"
    assert pyiceberg_rows(table) == expected
    assert polars_rows(c, table) == expected
    assert pending_in_bucket(c) == []
    return table


def own_files(c: Committer, job: JobRecord) -> list[str]:
    return [name for name in visible(c) if job.job_id in name]


# -- publishing -------------------------------------------------------------
def test_append_then_replace_read_back_exactly(
    committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Plans of several upload shards: the table commit is handed the last one the
    # completes decoded and reads the others again.
    monkeypatch.setattr(shards, "SHARD_SIZE", 2)
    c = committer
    odd = "a b/c=d%e"  # escaped in the path (dt=a b%2Fc%3Dd%25e/), verbatim in the table
    first = run(c, "append", {"2024-01-01": [1, 2], "2024-01-02": [3], odd: [4], None: [8]})
    second = run(c, "append", {"2024-01-02": [5]})
    replace = run(c, "replace", {"2024-01-02": [6, 7], None: [9]})
    table = assert_published(
        c,
        [first, second, replace],
        rows_of({"2024-01-01": [1, 2], "2024-01-02": [6, 7], odd: [4], None: [9]}),
    )
    operations = [s.summary.operation.value for s in table.snapshots() if s.summary]
    assert operations == ["append", "append", "overwrite"]
    summary = table.snapshots()[-1].summary
    assert summary is not None
    assert (summary.get("added-data-files"), summary.get("deleted-data-files")) == ("2", "3")
    record = c.job(replace.job_id).table_commit
    assert record is not None and (record.files, record.removed_files) == (2, 3)
    # The table's own layout: metadata under _iceberg/, the partition an identity
    # on a string column the files do not have, a name mapping for their columns.
    assert table.location() == c.dest.url
    assert all(
        k.startswith(("_iceberg/metadata/", "_zero_rename/", "_SUCCESS")) or k.startswith("dt=")
        for k in (o.key[len(c.dest.dir) :] for o in c.store.list_objects(c.dest.bucket, c.dest.dir))
    )
    assert [f.name for f in table.schema().fields] == ["id", "name", "dt"]
    assert str(table.spec().fields[0].transform) == "identity"
    assert table.metadata.name_mapping() is not None
    # Replaced files stay for readers of the older snapshots until expiry.
    assert len(visible(c)) == 7
    before = table.scan(snapshot_id=table.snapshots()[1].snapshot_id).to_arrow()
    assert ordered((r["dt"], r["id"]) for r in before.to_pylist()) == rows_of(
        {"2024-01-01": [1, 2], "2024-01-02": [3, 5], odd: [4], None: [8]}
    )


def test_data_files_carry_bounds_so_filters_skip_files(committer: Committer) -> None:
    c = committer
    run(c, "append", {"2024-01-01": [1, 2], "2024-01-02": [30, 40]})
    table = user_table(c)
    files = {t.file.partition[0]: t.file for t in table.scan().plan_files()}
    id_field = table.schema().find_field("id").field_id
    assert files["2024-01-02"].record_count == 2
    assert files["2024-01-02"].null_value_counts[id_field] == 0
    assert [t.file.partition[0] for t in table.scan(row_filter="id > 10").plan_files()] == [
        "2024-01-02"
    ]
    assert [
        t.file.partition[0] for t in table.scan(row_filter="dt = '2024-01-01'").plan_files()
    ] == ["2024-01-01"]


def test_files_without_statistics_rows_or_schema_still_publish(committer: Committer) -> None:
    """A library user who sets none of them: the table is made from a file's
    footer, the rows read from the footers, and only the partition bounded."""
    c = committer
    job = c.setup_job({**OPTIONS, "conflict_mode": "append"})
    attempt = c.task_attempt(job, "00000")
    for day, ids in {"2024-01-01": [1], "2024-01-02": [2, 3]}.items():
        with attempt.open({"dt": day}) as out:
            sink = pa.BufferOutputStream()
            pq.write_table(data(ids), sink)
            out.write(sink.getvalue().to_pybytes())
    attempt.commit()
    c.commit_job(job.job_id)
    table = assert_published(c, [job], [("2024-01-01", 1), ("2024-01-02", 2), ("2024-01-02", 3)])
    one = next(iter(table.scan().plan_files())).file
    assert set(one.lower_bounds) == {table.schema().find_field("dt").field_id}


def test_unpartitioned_replace_replaces_the_table(committer: Committer) -> None:
    c = committer
    options = {"partition_columns": ""}
    first = run(c, "append", {None: [1, 2]}, **options)
    second = run(c, "replace", {None: [3]}, **options)
    table = user_table(c)
    assert job_ids(table) == [first.job_id, second.job_id]
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [3]
    assert table.spec().is_unpartitioned()


# -- job setup ---------------------------------------------------------------
def test_setup_checks_an_existing_table(committer: Committer) -> None:
    c = committer
    run(c, "append", {"2024-01-01": [1]})
    # int32 ids read as the table's long: fine; no schema given: fine.
    narrower = pa.schema([("id", pa.int32()), ("name", pa.string())])
    c.setup_job({**OPTIONS}, table_schema=encoded_schema(narrower))
    c.setup_job({**OPTIONS})
    wider = pa.schema([("id", pa.int64()), ("name", pa.string()), ("extra", pa.float64())])
    with pytest.raises(ConfigError, match="column 'extra' is not in the table"):
        c.setup_job({**OPTIONS}, table_schema=encoded_schema(wider))
    other_type = pa.schema([("id", pa.string()), ("name", pa.string())])
    with pytest.raises(ConfigError, match="column 'id' is string in the files, long in the table"):
        c.setup_job({**OPTIONS}, table_schema=encoded_schema(other_type))
    with pytest.raises(
        ConfigError, match=r"partitioned by identity\(dt\), the job by identity\(region\)"
    ):
        c.setup_job({**OPTIONS, "partition_columns": "region"})
    elsewhere = Committer(f"s3://{c.dest.bucket}/other", c.store.config)
    with pytest.raises(ConfigError, match="its location is"):
        elsewhere.setup_job({**OPTIONS, "iceberg_table": derived_table_name(c.dest)})
    nanos = pa.schema([("ts", pa.timestamp("ns"))])
    with pytest.raises(ConfigError, match="no Iceberg equivalent"):
        elsewhere.setup_job({**OPTIONS}, table_schema=encoded_schema(nanos))
    assert [j.job_id for j in elsewhere.jobs()] == []


def test_a_catalog_that_cannot_be_reached(
    committer: Committer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c = committer
    secret = "s3cr3t-Passw0rd"
    monkeypatch.setenv("PYICEBERG_CATALOG__DOWN__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_CATALOG__DOWN__URI", f"http://user:{secret}@127.0.0.1:9")
    with pytest.raises(DestinationError) as raised:
        c.setup_job({**OPTIONS, "iceberg_catalog": "down"})
    assert "cannot be reached" in str(raised.value) and secret not in str(raised.value)
    assert "\n" not in str(raised.value)
    with pytest.raises(ConfigError, match="iceberg_catalog 'nowhere' is not configured"):
        c.setup_job({**OPTIONS, "iceberg_catalog": "nowhere"})

    # PyIceberg quotes the properties in some errors: the store's secret is masked
    # there, and the original error is not chained to be printed in a traceback.
    def quoting(name: str, **properties: str) -> None:
        raise ValueError(
            f"Could not initialize catalog with the following properties: {properties}"
        )

    monkeypatch.setattr(iceberg_catalog, "load_catalog", quoting)
    with pytest.raises(DestinationError) as raised:
        c.setup_job({**OPTIONS})
    key = os.environ["AWS_SECRET_ACCESS_KEY"]
    failure = raised.value.__cause__
    assert failure is not None and failure.__context__ is None and "'***'" in str(failure)
    assert key not in str(raised.value) and key not in str(failure)
    assert c.jobs() == []


def test_a_catalog_down_at_commit_publishes_once_when_back(
    committer: Committer, iceberg_home: Path
) -> None:
    c = committer
    first = run(c, "append", {"2024-01-01": [1]})
    job = written(c, "replace", {"2024-01-01": [2]})
    database = iceberg_home / "catalog.db"
    saved = database.read_bytes()
    database.write_bytes(b"not a database" * 100)
    with pytest.raises(CommitStateUnknownError, match="cannot tell whether job"):
        c.commit_job(job.job_id)
    assert c.job(job.job_id).state == "committing"
    database.write_bytes(saved)
    c.commit_job(job.job_id)
    assert_published(c, [first, job], [("2024-01-01", 2)])


# -- crashes and lost answers at the catalog commit -----------------------------
def _job_of(updates: tuple[Any, ...]) -> str | None:
    for update in updates:
        snapshot = getattr(update, "snapshot", None)
        if snapshot is not None and snapshot.summary is not None:
            found: str | None = snapshot.summary.get(JOB_ID_PROPERTY)
            return found
    return None


@contextmanager
def at_catalog_commit(
    job_id: str, before: Callable[[], None] = lambda: None, after: Callable[[], None] = lambda: None
) -> Iterator[list[int]]:
    """Runs ``before`` and ``after`` around the catalog commit that publishes
    ``job_id`` (its first attempt only); yields the list of the attempts seen."""
    original = SqlCatalog.commit_table
    seen: list[int] = []

    def commit_table(self: SqlCatalog, table: Table, requirements: Any, updates: Any) -> Any:
        if _job_of(updates) != job_id:
            return original(self, table, requirements, updates)
        seen.append(1)
        if len(seen) > 1:
            return original(self, table, requirements, updates)
        before()
        response = original(self, table, requirements, updates)
        after()
        return response

    SqlCatalog.commit_table = commit_table  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        SqlCatalog.commit_table = original  # type: ignore[method-assign]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_at_the_catalog_commit_then_a_retry_publishes_once(
    committer: Committer, store_config: StoreConfig, when: str
) -> None:
    c = committer
    first = run(c, "append", {"2024-01-01": [1], "2024-01-02": [2]})
    job = written(c, "replace", {"2024-01-02": [3, 4]})

    def child() -> None:
        def die() -> None:
            os._exit(CRASH_EXIT_CODE)

        hooks = {"before": die} if when == "before" else {"after": die}
        with at_catalog_commit(job.job_id, **hooks):
            Committer(c.dest, store_config).commit_job(job.job_id)

    assert run_until_crash(child) == CRASH_EXIT_CODE
    assert c.job(job.job_id).state == "committing"
    landed = job_ids(user_table(c)).count(job.job_id)
    assert landed == (1 if when == "after" else 0)
    if when == "after":
        # In the table: a rollback would leave it naming deleted files.
        with pytest.raises(RollbackRefusedError, match="published to the iceberg table"):
            roll_back(c.ctx, job.job_id, "by hand")
    c.commit_job(job.job_id)
    assert_published(c, [first, job], [("2024-01-01", 1), ("2024-01-02", 3), ("2024-01-02", 4)])


def test_a_lost_answer_from_the_catalog_commit(committer: Committer) -> None:
    c = committer
    job = written(c, "append", {"2024-01-01": [1]})

    def lose() -> None:
        raise ConnectionResetError("connection reset by peer")

    with at_catalog_commit(job.job_id, after=lose), pytest.raises(CommitStateUnknownError):
        c.commit_job(job.job_id)
    assert job_ids(user_table(c)) == [job.job_id]
    c.commit_job(job.job_id)
    assert_published(c, [job], [("2024-01-01", 1)])


# -- other writers -------------------------------------------------------------
def test_jobs_racing_on_different_partitions_both_land(
    committer: Committer, store_config: StoreConfig
) -> None:
    """The first job is held at its catalog commit while the second commits
    whole: the first's compare-and-swap fails, PyIceberg retries it on the new
    state, and the partition bounds tell it the two do not conflict."""
    c = committer
    base = run(c, "append", {"2024-01-01": [1], "2024-01-02": [2]})
    held = written(c, "replace", {"2024-01-01": [10]})
    racer = written(c, "replace", {"2024-01-02": [20]})
    reached, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        reached.set()
        assert go.wait(60)

    def commit_held() -> None:
        try:
            Committer(c.dest, store_config).commit_job(held.job_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with at_catalog_commit(held.job_id, before=hold) as attempts:
        thread = threading.Thread(target=commit_held)
        thread.start()
        assert reached.wait(60)
        c.commit_job(racer.job_id)
        go.set()
        thread.join(60)
    assert errors == [] and len(attempts) == 2
    assert_published(c, [base, racer, held], [("2024-01-01", 10), ("2024-01-02", 20)])


def test_two_commits_of_one_job_racing_publish_it_once(
    committer: Committer, store_config: StoreConfig
) -> None:
    """A commit resumed beside its retry: both find nothing in the table and reach
    the catalog together. The job's snapshot id is the same in both, so the
    loser's retry finds it landed and stops."""
    c = committer
    first = run(c, "append", {"2024-01-01": [1]})
    job = written(c, "append", {"2024-01-01": [2], "2024-01-02": [3]})
    together = threading.Barrier(2, timeout=60)
    original = SqlCatalog.commit_table
    errors: list[BaseException] = []

    calls: list[int] = []

    def commit_table(self: SqlCatalog, table: Table, requirements: Any, updates: Any) -> Any:
        if _job_of(updates) == job.job_id:
            calls.append(1)
            if len(calls) <= 2:  # the two commits' first attempts, together
                together.wait()
        return original(self, table, requirements, updates)

    def commit() -> None:
        try:
            Committer(c.dest, store_config).commit_job(job.job_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    SqlCatalog.commit_table = commit_table  # type: ignore[method-assign]
    try:
        threads = [threading.Thread(target=commit) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        SqlCatalog.commit_table = original  # type: ignore[method-assign]
    # The loser's retry found the id landed: it sent no second commit.
    assert errors == [] and len(calls) == 2
    assert_published(c, [first, job], [("2024-01-01", 1), ("2024-01-01", 2), ("2024-01-02", 3)])


def test_jobs_on_one_partition_are_serialized_by_their_claims(
    committer: Committer, store_config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claims, "WAIT_POLL_SECONDS", 0.05)
    c = committer
    held = written(c, "replace", {"2024-01-01": [1]})
    later = written(c, "replace", {"2024-01-01": [2]}, on_conflict="wait", wait_timeout=60)
    reached, go = threading.Event(), threading.Event()

    def hold() -> None:
        reached.set()
        assert go.wait(60)

    with at_catalog_commit(held.job_id, before=hold):
        first = threading.Thread(
            target=lambda: Committer(c.dest, store_config).commit_job(held.job_id)
        )
        first.start()
        assert reached.wait(60)
        second = threading.Thread(
            target=lambda: Committer(c.dest, store_config).commit_job(later.job_id)
        )
        second.start()
        time.sleep(0.3)
        assert c.job(later.job_id).state != "committed"  # waiting for the claim
        go.set()
        first.join(60)
        second.join(60)
    assert_published(c, [held, later], [("2024-01-01", 2)])


def test_an_outside_commit_between_two_jobs(committer: Committer) -> None:
    c = committer
    first = run(c, "append", {"2024-01-01": [1]})
    outside = user_table(c)
    outside.append(
        pa.table(
            {
                "id": pa.array([50, 60], pa.int64()),
                "name": ["x", "y"],
                "dt": ["2024-01-01", "2024-01-09"],
            }
        )
    )
    second = run(c, "replace", {"2024-01-01": [2]})
    table = user_table(c)
    assert job_ids(table) == [first.job_id, None, second.job_id]
    # The replace dropped the outside writer's rows of its partition too.
    assert pyiceberg_rows(table) == [("2024-01-01", 2), ("2024-01-09", 60)]
    assert polars_rows(c, table) == pyiceberg_rows(table)


def test_an_outside_replace_that_conflicts_rolls_the_job_back(committer: Committer) -> None:
    c = committer
    first = run(c, "append", {"2024-01-01": [1], "2024-01-02": [2]})
    job = written(c, "replace", {"2024-01-02": [3]})
    outside = user_table(c)

    def replace_outside() -> None:
        outside.overwrite(
            pa.table({"id": pa.array([99], pa.int64()), "name": ["z"], "dt": ["2024-01-02"]}),
            overwrite_filter=EqualTo("dt", "2024-01-02"),
        )

    with (
        at_catalog_commit(job.job_id, before=replace_outside),
        pytest.raises(CommitRolledBackError, match="conflicts with job") as raised,
    ):
        c.commit_job(job.job_id)
    table = user_table(c)
    others = [s for s in table.snapshots() if not (s.summary and s.summary.get(JOB_ID_PROPERTY))]
    assert str(others[-1].snapshot_id) in str(raised.value)
    assert job_ids(table) == [first.job_id, None, None]  # the outside delete and append
    assert pyiceberg_rows(table) == [("2024-01-01", 1), ("2024-01-02", 99)]
    record = c.job(job.job_id)
    assert record.state == "aborted" and record.table_commit is None
    assert "conflicts" in record.error
    assert own_files(c, job) == [] and pending_in_bucket(c) == []


def test_a_table_that_cannot_take_the_job_rolls_it_back(committer: Committer) -> None:
    """Refusals no retry can change, found at commit: the job is rolled back (with
    every file complete, it could not be rolled back by hand otherwise)."""
    c = committer
    first = run(c, "append", {"2024-01-01": [1]})
    changed = written(c, "append", {"2024-01-02": [2]})
    with user_table(c).update_spec() as spec:  # another writer, after the job's setup
        spec.add_identity("name")
    with pytest.raises(CommitRolledBackError, match=r"partitioned by identity\(dt\), identity"):
        c.commit_job(changed.job_id)
    csv = setup(c, "append", partition_columns="dt,name")  # fits the table as it is now
    attempt = c.task_attempt(csv, "00000")
    with attempt.open({"dt": "2024-01-03", "name": "x"}, extension=".csv") as out:
        out.write(b"id\n1\n")
        out.rows = 1
    attempt.commit()
    with pytest.raises(CommitRolledBackError, match="is not a Parquet, ORC or Avro file"):
        c.commit_job(csv.job_id)
    assert job_ids(user_table(c)) == [first.job_id]
    for job in (changed, csv):
        assert c.job(job.job_id).state == "aborted" and own_files(c, job) == []
    assert pending_in_bucket(c) == []


def test_readers_see_one_committed_state_at_a_time(
    committer: Committer, store_config: StoreConfig
) -> None:
    c = committer
    jobs = [
        ("append", {"2024-01-01": [1, 2], "2024-01-02": [3]}),
        ("replace", {"2024-01-02": [4, 5, 6]}),
        ("append", {"2024-01-01": [7], "2024-01-03": [8]}),
        ("replace", {"2024-01-01": [9], "2024-01-03": [10, 11]}),
    ]
    states: list[Rows] = [[]]
    current: dict[str | None, list[int]] = {}
    for mode, files in jobs:
        current = (
            {**current, **files}
            if mode == "replace"
            else {d: current.get(d, []) + files.get(d, []) for d in {*current, *files}}
        )
        states.append(rows_of(current))
    first = run(c, "append", {"2024-01-05": [0]})  # the table exists before readers start
    states = [[*s, ("2024-01-05", 0)] for s in states]
    stop = threading.Event()
    seen: list[Rows] = []
    wrong: list[Rows] = []

    def read(reader: Callable[[Table], Rows]) -> None:
        while not stop.is_set():
            rows = reader(user_table(c))
            (seen if rows in states else wrong).append(rows)

    readers = [
        threading.Thread(target=read, args=(pyiceberg_rows,)),
        threading.Thread(target=read, args=(lambda t: polars_rows(c, t),)),
    ]
    for thread in readers:
        thread.start()
    committed = [first]
    for mode, files in jobs:
        committed.append(run(Committer(c.dest, store_config), mode, files))
    stop.set()
    for thread in readers:
        thread.join(60)
    assert wrong == [] and len(seen) >= 2
    assert_published(c, committed, states[-1])


# -- retention -----------------------------------------------------------------
def test_expire_deletes_the_files_only_expired_snapshots_read(committer: Committer) -> None:
    c = committer
    first = run(c, "append", {"2024-01-01": [1], "2024-01-02": [2]})
    second = run(c, "replace", {"2024-01-02": [3]})
    third = run(c, "append", {"2024-01-03": [4]})
    tables = IcebergFormat(c.ctx, parse_options({**OPTIONS}))
    assert tables.expire(timedelta(days=1)) == 0
    replaced = own_files(c, first)
    assert len(replaced) == 2
    # A dry run names the file the expiry will delete, and changes nothing.
    snapshots = len(user_table(c).metadata.snapshots)
    would = tables.expirable(timedelta(0))
    assert would == [f for f in replaced if f.startswith("dt=2024-01-02/")]
    assert tables.expirable(timedelta(days=1)) == []
    assert len(user_table(c).metadata.snapshots) == snapshots and own_files(c, first) == replaced
    assert tables.expire(timedelta(0)) == 1
    table = user_table(c)
    assert job_ids(table) == [third.job_id]  # the current snapshot is never expired
    assert pyiceberg_rows(table) == [("2024-01-01", 1), ("2024-01-02", 3), ("2024-01-03", 4)]
    assert own_files(c, first) == [f for f in replaced if f.startswith("dt=2024-01-01/")]
    assert len(own_files(c, second)) == 1 and len(own_files(c, third)) == 1
    metadata = [o.key for o in c.store.list_objects(c.dest.bucket, c.dest.dir + "_iceberg/")]
    assert len([k for k in metadata if "/snap-" in k]) == 1  # the current one's manifest list
    # A retry of an expired job's commit can no longer find it in the table.
    assert tables.find(first.job_id) is None and tables.find(third.job_id) is not None
    assert polars_rows(c, table) == pyiceberg_rows(table)


def test_an_expiry_that_died_before_its_deletes_is_finished_by_the_next(
    committer: Committer, store_config: StoreConfig
) -> None:
    c = committer
    first = run(c, "append", {"2024-01-01": [1]})
    run(c, "replace", {"2024-01-01": [2]})
    options = parse_options({**OPTIONS})

    def child() -> None:
        dying = Committer(c.dest, store_config)
        inject(dying.store.client, "DeleteObjects", action="exit")
        IcebergFormat(dying.ctx, options).expire(timedelta(0))

    assert run_until_crash(child) == CRASH_EXIT_CODE
    assert len(job_ids(user_table(c))) == 1  # expired: nothing names the file any more
    assert len(own_files(c, first)) == 1
    journal = c.dest.dir + "_iceberg/expiry/"
    assert len(list(c.store.list_objects(c.dest.bucket, journal))) == 1
    # What the journal names is what a dry run says the next expiry deletes.
    assert IcebergFormat(c.ctx, options).expirable(timedelta(days=1)) == own_files(c, first)
    assert IcebergFormat(c.ctx, options).expire(timedelta(days=1)) == 1
    assert own_files(c, first) == []
    assert list(c.store.list_objects(c.dest.bucket, journal)) == []
    assert pyiceberg_rows(user_table(c)) == [("2024-01-01", 2)]


# -- requests ------------------------------------------------------------------
def test_requests_per_commit_do_not_grow_with_files(proxy: Any, dest: str) -> None:
    """What publishing adds to a job commit, counted on the wire: the same job
    committed without a table format is the baseline. Each commit starts as a
    fresh process does, with no metadata object kept from an earlier one."""
    c = Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url))
    run(c, "append", {"2024-01-01": [0]})  # the table exists
    added: dict[str, list[int]] = {}
    for mode in ("append", "replace"):
        for n in (1, 12):
            files: dict[str | None, list[int]] = {f"2024-02-{d:02d}": [d] for d in range(1, n + 1)}
            commits = []
            for table_format in ("none", "iceberg"):
                job = written(c, mode, files, table_format=table_format)
                iceberg_io.forget()
                proxy.reset_counts()
                c.commit_job(job.job_id)
                commits.append(sum(proxy.counts.values()))
            added.setdefault(mode, []).append(commits[1] - commits[0])
    print(f"requests a commit adds to publish to Iceberg, for 1 and 12 files: {added}")
    # An append reads the table's metadata and its manifest list and writes a
    # manifest, a manifest list and a metadata.json, a request each; the record
    # says the table commit may start (its fence against a rollback by hand). A
    # replace also reads the manifest of the partitions it replaces (the 12 files
    # of the append above are in one) and writes their files' deleted entries.
    # The catalog's swap is SQLite's. The table folder's uploads are in the
    # cleanup's one listing of the destination.
    assert added["append"] == [6, 6], added
    assert added["replace"] == [8, 8], added


# -- a user's own catalog --------------------------------------------------------
def test_a_catalog_configured_as_pyiceberg_users_do(
    committer: Committer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog in .pyiceberg.yaml with no S3 settings of its own: the job's
    store's are added. Settings it has are its own (here an endpoint: ours)."""
    c = committer
    home = tmp_path / "pyiceberg"
    home.mkdir()
    uri = f"sqlite:///{tmp_path / 'mine.db'}"
    (home / ".pyiceberg.yaml").write_text(f"catalog:\n  mine:\n    type: sql\n    uri: {uri}\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    job = run(c, "append", {"2024-01-01": [1]}, iceberg_catalog="mine", iceberg_table="db.events")
    assert c.job(job.job_id).table_commit is not None
    # A region, or PyArrow asks AWS for the bucket's: zero-rename always gives one.
    s3 = {"s3.endpoint": c.store.endpoint_url, "s3.region": "us-east-1"}
    catalog = load_catalog("mine", uri=uri, **s3)
    assert job_ids(catalog.load_table("db.events")) == [job.job_id]
    assert not (tmp_path / "iceberg").exists()  # the embedded catalog was not used
    mine = {"type": "sql", "uri": uri, "s3.endpoint": "http://mine", "s3.access-key-id": "k"}
    added = file_io_properties(c.store, mine)
    assert added == {"s3.region": "us-east-1", PY_IO_IMPL: SINGLE_REQUEST_IO}
    assert set(file_io_properties(c.store, {"type": "sql"})) == {
        PY_IO_IMPL,
        "s3.endpoint",
        "s3.region",
        "s3.access-key-id",
        "s3.secret-access-key",
    }
    # A FileIO the configuration names is its own.
    assert PY_IO_IMPL not in file_io_properties(c.store, {PY_IO_IMPL: "x.Y"})


# -- naming and bounds, without a store -----------------------------------------
@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("s3://my-bucket/warehouse/events", "my_bucket.warehouse_events"),
        ("s3://2024-data/7days", "n_2024_data.t_7days"),
        ("s3://b.c--d/Daily Events/v2", "b_c_d.daily_events_v2"),
    ],
)
def test_table_names_derived_from_the_destination(url: str, name: str) -> None:
    assert derived_table_name(Destination.parse(url)) == name
    parse_options({"iceberg_table": name})  # a name the option takes


def test_a_long_destination_gets_a_short_distinct_name() -> None:
    long = "events/" + "x" * 300
    names = {derived_table_name(Destination.parse(f"s3://bucket/{long}{i}")) for i in (1, 2)}
    assert len(names) == 2
    for name in names:
        assert len(name.split(".")[1]) == 128
        parse_options({"iceberg_table": name})


def _bounds(kind: Any, low: Any, high: Any, mode: str = "full") -> tuple[Any, Any]:
    collector = StatisticsCollector(
        field_id=1, iceberg_type=kind, mode=match_metrics_mode(mode), column_name="c"
    )
    lower, upper = column_bounds(collector, ColumnStats(nulls=0, min=low, max=high))
    return (
        from_bytes(kind, lower) if lower is not None else None,
        from_bytes(kind, upper) if upper is not None else None,
    )


def test_bounds_never_narrower_than_the_data() -> None:
    base = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in microseconds
    # Milliseconds (Delta's statistics): the max is raised to the end of its millisecond.
    assert _bounds(TimestamptzType(), "2024-01-01T00:00:00.123Z", "2024-01-01T00:00:00.456Z") == (
        base + 123_000,
        base + 456_999,
    )
    assert _bounds(TimestampType(), "2024-01-01T00:00:00.000001", "2024-01-01T00:00:01") == (
        base + 1,
        base + 1_999_999,
    )
    assert _bounds(DateType(), "2024-01-01", "2024-01-03") == (19723, 19725)
    assert _bounds(DecimalType(5, 2), "1.005", "2.001") == (Decimal("1.00"), Decimal("2.01"))
    assert _bounds(StringType(), "a" * 20, "b" * 20, "truncate(16)") == ("a" * 16, "b" * 15 + "c")
    assert _bounds(FloatType(), 0.5, 0.1) == (0.5, None)  # 0.1 is no float32
    assert _bounds(IntegerType(), True, 2**31) == (None, None)
    assert _bounds(LongType(), -5, "7") == (-5, None)
    assert _bounds(DoubleType(), float("nan"), 1.5) == (None, 1.5)
    assert _bounds(BinaryType(), "aa", "bb") == (None, None)
    assert _bounds(TimestampType(), "not a time", "2024-01-01T00:00:00") == (None, base + 999_999)


@pytest.mark.unit
def test_spark_partition_directories_of_dates_and_timestamps_are_read_as_values() -> None:
    """Spark names date and timestamp partitions by their text; and a partition
    column the DataFrame calls not-null is optional in the table (it is in the
    path only, and a scan would look for a required one in the files)."""
    import pyarrow as pa
    from pyiceberg.types import DateType as D
    from pyiceberg.types import TimestampType as T

    from zero_rename.core.tables.iceberg_files import iceberg_schema, partition_value

    files = pa.schema([pa.field("id", pa.int64()), pa.field("dt", pa.date32(), nullable=False)])
    schema = iceberg_schema(files, ["dt", "hour"])
    assert not schema.find_field("dt").required and isinstance(
        schema.find_field("dt").field_type, D
    )
    assert partition_value(schema, "dt", "2024-01-01") == 19723
    assert partition_value(schema, "dt", None) is None
    ts = iceberg_schema(pa.schema([pa.field("at", pa.timestamp("us"))]), ["at"])
    assert isinstance(ts.find_field("at").field_type, T)
    assert partition_value(ts, "at", "2024-01-01 10:00:00") == 1_704_103_200_000_000
