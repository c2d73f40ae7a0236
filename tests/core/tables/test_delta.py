"""Delta Lake: each committed job is one version of the table at its destination.

Jobs write real Parquet files into task attempts, with the statistics and the
schema a writer records (``OutputFile.stats``, ``TaskAttempt.table_schema``),
and the whole protocol runs. Tables are read back with readers nobody here
wrote (``deltalake.DeltaTable``, Polars' ``read_delta``), and every test that
commits checks the three places a job leaves its mark: the log (one version
carrying the job id per committed job, none for an aborted one), the bucket
(the files, no pending upload) and the job record.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from tests.faults import CRASH_EXIT_CODE
from tests.helpers import pending_in_bucket, visible
from tests.s3proxy import S3Proxy
from tests.servers import S3Server
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import is_visible
from zero_rename.core.data.model import ColumnStats, FileStats, JobRecord, TableCommit
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.tables import delta as delta_module
from zero_rename.core.tables.base import JOB_ID_PROPERTY, Publication, TableFile
from zero_rename.errors import (
    CommitRolledBackError,
    ConfigError,
    DestinationError,
    PartitionClaimConflict,
    StoreError,
    TableConflictError,
)

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
SCHEMA_B64 = base64.b64encode(SCHEMA.serialize().to_pybytes()).decode()
Rows = list[tuple[int, str | None]]


# -- writing jobs as a writer would ---------------------------------------------------------


def parquet(ids: list[int]) -> tuple[bytes, pq.FileMetaData]:
    table = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}, SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out)
    data = out.getvalue()
    return data, pq.read_metadata(pa.BufferReader(data))


def file_stats(meta: pq.FileMetaData) -> FileStats:
    """What a writer records from a file's footer: per column, its null count and
    bounds over every row group, as JSON scalars (as Delta's stats write them)."""
    columns = {}
    for c in range(meta.num_columns):
        name = meta.schema.column(c).path
        stats = [meta.row_group(r).column(c).statistics for r in range(meta.num_row_groups)]
        known = [s for s in stats if s is not None]
        bounded = len(known) == len(stats) and all(s.has_min_max for s in known)
        columns[name] = ColumnStats(
            nulls=sum(s.null_count for s in known) if len(known) == len(stats) else None,
            min=_json(min(s.min for s in known)) if bounded and known else None,
            max=_json(max(s.max for s in known)) if bounded and known else None,
        )
    return FileStats(columns=columns)


def _json(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def delta_job(
    c: Committer,
    mode: str,
    files: dict[str | None, list[int]],
    partitioned: bool = True,
    schema: bool = True,
    **options: Any,
) -> JobRecord:
    """Set up a job and write ``files`` (partition value -> ids; one file each) in
    one task attempt, with the stats and schema the Spark writer records."""
    record = c.setup_job(
        {
            "partition_columns": "dt" if partitioned else "",
            "conflict_mode": mode,
            "table_format": "delta",
            **options,
        },
        table_schema=SCHEMA_B64 if schema else "",
    )
    attempt = c.task_attempt(record, "00000")
    attempt.table_schema = SCHEMA_B64 if schema else ""
    for value, ids in files.items():
        data, meta = parquet(ids)
        with attempt.open({"dt": value} if partitioned else None) as out:
            out.write(data)
            out.rows = len(ids)
            out.stats = file_stats(meta) if schema else None
    attempt.commit()
    return record


# -- reading back, with readers nobody here wrote --------------------------------------------


def reader_options(server: S3Server) -> dict[str, str]:
    env = server.environment()
    return {
        "AWS_ENDPOINT_URL": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def _rows(table: pa.Table) -> Rows:
    ids, days = table.column("id").to_pylist(), table.column("dt").to_pylist()
    return sorted(zip(ids, days, strict=True), key=lambda r: (r[0], str(r[1])))


def delta_rows(c: Committer, server: S3Server) -> Rows:
    table = DeltaTable(c.dest.url, storage_options=reader_options(server))
    return _rows(table.to_pyarrow_table())


def polars_rows(c: Committer, server: S3Server) -> Rows:
    frame = pl.read_delta(c.dest.url, storage_options=reader_options(server))
    return _rows(frame.to_arrow())


def expected(*jobs: dict[str | None, list[int]]) -> Rows:
    return sorted(
        ((i, day) for files in jobs for day, ids in files.items() for i in ids),
        key=lambda r: (r[0], str(r[1])),
    )


def log_entries(c: Committer) -> dict[int, list[dict[str, Any]]]:
    """Every commit file of the table's log, by version."""
    out = {}
    for obj in c.store.list_objects(c.dest.bucket, c.dest.dir + "_delta_log/"):
        name = obj.key.rsplit("/", 1)[-1]
        if name.endswith(".json") and name[:-5].isdigit():
            found = c.store.get_object(c.dest.bucket, obj.key)
            assert found is not None
            lines = found[0].decode().splitlines()
            out[int(name[:-5])] = [json.loads(line) for line in lines if line]
    return out


def versions_of(c: Committer, job_id: str) -> list[int]:
    """The versions whose commit info carries the job id."""
    return [
        v
        for v, actions in sorted(log_entries(c).items())
        for a in actions
        if a.get("commitInfo", {}).get(JOB_ID_PROPERTY) == job_id
    ]


def assert_published_once(c: Committer, job: JobRecord) -> int:
    """One version of the table per committed job, adding exactly the job's files
    in the bucket, the record naming it, and no upload left pending; returns the
    version."""
    versions = versions_of(c, job.job_id)
    assert len(versions) == 1, versions
    added = {unquote(a["add"]["path"]) for a in log_entries(c)[versions[0]] if "add" in a}
    keys = (o.key[len(c.dest.dir) :] for o in c.store.list_objects(c.dest.bucket, c.dest.dir))
    assert added == {k for k in keys if job.job_id in k and is_visible(k)}
    record = c.job(job.job_id)
    assert record.state == "committed"
    assert record.table_commit is not None
    assert record.table_commit.format == "delta"
    assert record.table_commit.id == str(versions[0])
    assert record.steps["publish_table"].status == "succeeded"
    assert pending_in_bucket(c) == []
    return versions[0]


def assert_left_nothing(c: Committer, job: JobRecord) -> None:
    """A job rolled back: not in the log, none of its files in the prefix, nothing pending."""
    assert versions_of(c, job.job_id) == []
    assert not any(job.job_id in key for key in visible(c))
    assert pending_in_bucket(c) == []
    assert c.job(job.job_id).state == "aborted"


# -- append and replace ----------------------------------------------------------------------

FIRST = {"2024-01-01": [1, 2], "2024-01-02": [3], None: [4]}
SECOND = {"2024-01-02": [30, 31], None: [40]}
THIRD = {"2024-01-03": [50]}


def test_append_then_replace_read_back(committer: Committer, s3_backend: S3Server) -> None:
    c = committer
    first = delta_job(c, "append", FIRST)
    c.commit_job(first.job_id)
    assert assert_published_once(c, first) == 0
    assert delta_rows(c, s3_backend) == expected(FIRST)
    second = delta_job(c, "replace", SECOND)
    c.commit_job(second.job_id)
    assert assert_published_once(c, second) == 1
    third = delta_job(c, "append", THIRD)
    c.commit_job(third.job_id)
    assert assert_published_once(c, third) == 2
    # The replace left 2024-01-01 alone and replaced 2024-01-02 and the null partition.
    want = expected({"2024-01-01": [1, 2]}, SECOND, THIRD)
    assert delta_rows(c, s3_backend) == want
    assert polars_rows(c, s3_backend) == want
    replace = log_entries(c)[1]
    assert sorted(a["remove"]["partitionValues"]["dt"] or "" for a in replace if "remove" in a) == [
        "",
        "2024-01-02",
    ]
    assert c.job(second.job_id).table_commit.removed_files == 2  # type: ignore[union-attr]
    # Stats from what the writer recorded: the readers can skip files by them.
    add = next(a["add"] for a in replace if "add" in a and a["add"]["partitionValues"]["dt"])
    assert json.loads(add["stats"]) == {
        "numRecords": 2,
        "minValues": {"id": 30, "name": "n30"},
        "maxValues": {"id": 31, "name": "n31"},
        "nullCount": {"id": 0, "name": 0},
    }
    # A replace leaves its replaced files to the table's retention: older
    # versions still read them.
    old = DeltaTable(c.dest.url, version=0, storage_options=reader_options(s3_backend))
    assert _rows(old.to_pyarrow_table()) == expected(FIRST)


def test_unpartitioned_replace_replaces_the_whole_table(
    committer: Committer, s3_backend: S3Server
) -> None:
    c = committer
    first = delta_job(c, "append", {None: [1, 2]}, partitioned=False)
    c.commit_job(first.job_id)
    second = delta_job(c, "replace", {None: [7]}, partitioned=False)
    c.commit_job(second.job_id)
    assert_published_once(c, first), assert_published_once(c, second)
    table = DeltaTable(c.dest.url, storage_options=reader_options(s3_backend))
    assert table.to_pyarrow_table().column("id").to_pylist() == [7]
    assert table.metadata().partition_columns == []


def test_partitioned_replace_writing_nothing_removes_nothing(
    committer: Committer, s3_backend: S3Server
) -> None:
    c = committer
    first = delta_job(c, "append", FIRST)
    c.commit_job(first.job_id)
    empty = delta_job(c, "replace", {})
    c.commit_job(empty.job_id)
    assert assert_published_once(c, empty) == 1
    assert delta_rows(c, s3_backend) == expected(FIRST)


def test_escaped_partition_values(committer: Committer, s3_backend: S3Server) -> None:
    """Spark's escaped directory names are the keys: passed as written, delta-rs
    encodes them in the log and readers find the files."""
    c = committer
    odd, spaced = "a/b=c%d:e", "x y"
    job = delta_job(c, "append", {odd: [1], spaced: [2]})
    c.commit_job(job.job_id)
    assert_published_once(c, job)
    assert any(k.startswith("dt=a%2Fb%3Dc%25d%3Ae/") for k in visible(c))
    assert delta_rows(c, s3_backend) == [(1, odd), (2, spaced)]
    table = DeltaTable(c.dest.url, storage_options=reader_options(s3_backend))
    assert _rows(table.to_pyarrow_table(filters=[("dt", "=", odd)])) == [(1, odd)]
    # Polars 2.1 reads the escaped value, and fails on a key with a space: it
    # fetches the log's percent-encoded path text literally (docs/table-formats.md).
    options = reader_options(s3_backend)
    frame = pl.scan_delta(c.dest.url, storage_options=options).filter(pl.col("dt") == odd)
    assert _rows(frame.collect().to_arrow()) == [(1, odd)]
    with pytest.raises(FileNotFoundError):
        pl.read_delta(c.dest.url, storage_options=options)


def test_writer_without_schema_or_stats(committer: Committer, s3_backend: S3Server) -> None:
    """A writer that records neither: the table takes its schema from a file's
    footer, and its add actions carry no stats."""
    c = committer
    job = delta_job(c, "append", {"2024-01-01": [1, 2]}, schema=False)
    c.commit_job(job.job_id)
    assert_published_once(c, job)
    assert delta_rows(c, s3_backend) == [(1, "2024-01-01"), (2, "2024-01-01")]
    add = next(a["add"] for a in log_entries(c)[0] if "add" in a)
    assert json.loads(add["stats"]) == {"numRecords": 2}


# -- job setup -------------------------------------------------------------------------------


def test_setup_checks_an_existing_table(committer: Committer) -> None:
    c = committer
    first = delta_job(c, "append", FIRST)
    c.commit_job(first.job_id)
    with pytest.raises(ConfigError, match=r"partitioned by \['dt'\], the job by nothing"):
        c.setup_job({"table_format": "delta", "conflict_mode": "append"})
    other = pa.schema([("id", pa.string())])
    with pytest.raises(ConfigError, match="column 'id' of type long, the job's files string"):
        c.setup_job(
            {"table_format": "delta", "partition_columns": "dt", "conflict_mode": "append"},
            table_schema=base64.b64encode(other.serialize().to_pybytes()).decode(),
        )
    narrower = pa.schema([("id", pa.int64())])  # a column fewer reads as nulls
    c.setup_job(
        {"table_format": "delta", "partition_columns": "dt", "conflict_mode": "append"},
        table_schema=base64.b64encode(narrower.serialize().to_pybytes()).decode(),
    )


def test_setup_refuses_a_type_delta_lacks(committer: Committer) -> None:
    halves = pa.schema([("h", pa.float16())])
    with pytest.raises(ConfigError, match="cannot be a Delta table's: .*Float16"):
        committer.setup_job(
            {"table_format": "delta", "conflict_mode": "append"},
            table_schema=base64.b64encode(halves.serialize().to_pybytes()).decode(),
        )


# -- crashes, lost answers, a store that is down ---------------------------------------------


def _crash_child(dest: str, endpoint: str, job_id: str, when: str) -> None:
    """In a spawned interpreter (delta-rs's runtime does not survive a fork): the job
    commit, ended on the spot before or after delta-rs writes the log."""

    def dying(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if when == "before":
                os._exit(CRASH_EXIT_CODE)
            real(*args, **kwargs)
            os._exit(CRASH_EXIT_CODE)

        return call

    DeltaTable.create_write_transaction = dying(DeltaTable.create_write_transaction)  # type: ignore[method-assign]
    delta_module.create_table_with_add_actions = dying(delta_module.create_table_with_add_actions)
    delta_module.create_once = dying(delta_module.create_once)
    Committer(dest, StoreConfig(endpoint_url=endpoint)).commit_job(job_id)
    os._exit(0)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("first", [True, False], ids=["creating", "appending"])
def test_crash_at_the_log_write_then_retry_publishes_once(
    committer: Committer, store_config: StoreConfig, s3_backend: S3Server, when: str, first: bool
) -> None:
    c = committer
    if not first:
        c.commit_job(delta_job(c, "append", FIRST).job_id)
    job = delta_job(c, "replace", SECOND)
    child = multiprocessing.get_context("spawn").Process(
        target=_crash_child, args=(c.dest.url, store_config.endpoint_url, job.job_id, when)
    )
    child.start()
    child.join(120)
    assert child.exitcode == CRASH_EXIT_CODE
    assert c.job(job.job_id).state == "committing"
    assert len(versions_of(c, job.job_id)) == (1 if when == "after" else 0)
    c.commit_job(job.job_id)
    version = assert_published_once(c, job)
    assert version == (0 if first else 1)
    want = expected(SECOND) if first else expected({"2024-01-01": [1, 2]}, SECOND)
    assert delta_rows(c, s3_backend) == want


@pytest.fixture
def impatient(proxy: S3Proxy, dest: str) -> Committer:
    """A committer through ``proxy`` that sends a request twice at most (delta-rs's
    retries of a failing store take seconds otherwise)."""
    return Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url, max_attempts=2))


@pytest.mark.parametrize("then", ["resent", "refused"])
def test_lost_answer_to_the_log_write(
    proxy: S3Proxy, impatient: Committer, caplog: pytest.LogCaptureFixture, then: str
) -> None:
    """The PUT of the commit file lands and its answer is lost. It is sent again:
    it gets 412, or the store refuses every resend; either way the commit reads
    the commit file back and finds its own."""
    c = impatient
    c.commit_job(delta_job(c, "append", FIRST).job_id)
    job = delta_job(c, "append", THIRD)
    key = "_delta_log/00000000000000000001.json"
    lose = proxy.add("PutObject", "lose", key_contains=key)
    if then == "refused":
        refuse = proxy.add("PutObject", "error", key_contains=key, nth=2, times=None, status=503)
    with caplog.at_level(logging.INFO):
        c.commit_job(job.job_id)
    assert lose.fired == 1
    if then == "refused":
        # The outcome unknown, the commit file is read back: the job's own.
        assert refuse.fired >= 1 and "outcome unknown" in caplog.text
    assert assert_published_once(c, job) == 1
    assert len(log_entries(c)) == 2


def test_store_down_at_setup(proxy: S3Proxy, impatient: Committer) -> None:
    proxy.add("*", "error", key_contains="_delta_log", status=503, code="SlowDown", times=None)
    with pytest.raises(DestinationError, match=r"^cannot read the Delta log of s3://") as caught:
        delta_job(impatient, "append", FIRST)
    text = str(caught.value)
    assert "\n" not in text and os.environ["AWS_SECRET_ACCESS_KEY"] not in text
    assert impatient.jobs() == []


def test_store_down_at_commit_then_retry(proxy: S3Proxy, impatient: Committer) -> None:
    c = impatient
    c.commit_job(delta_job(c, "append", FIRST).job_id)
    job = delta_job(c, "append", THIRD)
    rule = proxy.add("PutObject", "error", key_contains="_delta_log/", status=503, times=None)
    with pytest.raises(StoreError, match="cannot commit to the Delta table") as caught:
        c.commit_job(job.job_id)
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(caught.value)
    assert c.job(job.job_id).state == "committing"
    assert versions_of(c, job.job_id) == []
    proxy.remove(rule)
    c.commit_job(job.job_id)
    assert assert_published_once(c, job) == 1


# -- other writers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode,days",
    [("replace", ("2024-01-01", "2024-01-02")), ("append", ("2024-01-01",) * 2)],
    ids=["replaces-of-two-partitions", "appends-to-one-partition"],
)
def test_second_job_racing_both_land(
    committer: Committer,
    store_config: StoreConfig,
    s3_backend: S3Server,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    days: tuple[str, str],
) -> None:
    """Two jobs that their claims let commit side by side (replaces of different
    partitions, appends anywhere) read the same version and commit at once: one
    takes the next version, the other is built again on it and takes the one
    after, and each record names its own."""
    c = committer
    c.commit_job(delta_job(c, "append", FIRST).job_id)
    a = delta_job(c, mode, {days[0]: [10]})
    b = delta_job(c, mode, {days[1]: [20]})
    together = threading.Barrier(2, timeout=60)
    calls: list[int] = []
    # A commit is one conditional write of the version after the log's last read.
    write = delta_module.create_once

    def racing(store: Any, bucket: str, key: str, body: bytes) -> bytes | None:
        calls.append(int(key.rsplit("/", 1)[-1].split(".")[0]) - 1)
        if len(calls) <= 2:
            together.wait()
        return write(store, bucket, key, body)

    monkeypatch.setattr(delta_module, "create_once", racing)
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(Committer(c.dest, store_config).commit_job, j.job_id) for j in (a, b)]
        for future in jobs:
            future.result(timeout=120)
    assert calls == [0, 0, 1]
    assert sorted([assert_published_once(c, a), assert_published_once(c, b)]) == [1, 2]
    kept = {"2024-01-02": [3]} if mode == "append" else {}
    assert delta_rows(c, s3_backend) == expected(
        {"2024-01-01": [1, 2, 10] if mode == "append" else [10]},
        {days[1]: [20]},
        kept,
        {None: [4]},
    )


def test_two_replaces_of_one_empty_partition_cannot_both_land(
    committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the claims (two processes that do not share them, say): two replaces
    of a partition the table does not hold yet read one version and commit at
    once. Neither removes a file the other reads, so delta-rs's own check would
    let both land; the loser finds the winner's files (and its per-partition
    app transaction) in that partition and publishes nothing."""
    c = committer
    c.commit_job(delta_job(c, "append", FIRST).job_id)
    options = c.jobs()[0].options.model_copy(update={"conflict_mode": "replace"})
    together = threading.Barrier(2, timeout=60)
    real = DeltaTable.create_write_transaction

    def racing(self: DeltaTable, *args: Any, **kwargs: Any) -> None:
        if self.version() == 0:
            together.wait()
        real(self, *args, **kwargs)

    def publish(job_id: str, ids: list[int]) -> TableCommit:
        data, meta = parquet(ids)
        key = f"{c.dest.dir}dt=2024-03-01/part-00000-{job_id}.c000.parquet"
        c.store.put_object(c.dest.bucket, key, data)
        files = [TableFile(key[len(c.dest.dir) :], len(data), len(ids), {"dt": "2024-03-01"})]
        table = delta_module.DeltaFormat(c.ctx, options)
        assert table.find(job_id) is None
        return table.publish(
            Publication(
                job_id=job_id,
                destination=c.dest.url,
                conflict_mode="replace",
                partition_columns=("dt",),
                partitions=({"dt": "2024-03-01"},),
                table_schema=SCHEMA_B64,
                files=iter(files),
            )
        )

    monkeypatch.setattr(DeltaTable, "create_write_transaction", racing)
    with ThreadPoolExecutor(2) as pool:
        racers = [pool.submit(publish, job, [n]) for job, n in (("racer-a", 1), ("racer-b", 2))]
        outcomes = []
        for future in racers:
            try:
                outcomes.append(future.result(timeout=60).id)
            except TableConflictError as exc:
                outcomes.append(str(exc))
    assert outcomes.count("1") == 1
    lost = next(o for o in outcomes if o != "1")
    assert "version 1 of the Delta table" in lost and "dt=2024-03-01" in lost
    assert len(log_entries(c)) == 2


def test_second_job_on_the_same_partition_waits_for_the_claim(
    committer: Committer,
    store_config: StoreConfig,
    s3_backend: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = committer
    a = delta_job(c, "replace", {"2024-01-01": [10]})
    b = delta_job(c, "replace", {"2024-01-01": [20]})
    publishing, resume = threading.Event(), threading.Event()
    real = delta_module.create_table_with_add_actions

    def held(*args: Any, **kwargs: Any) -> None:
        publishing.set()
        assert resume.wait(60)
        real(*args, **kwargs)

    monkeypatch.setattr(delta_module, "create_table_with_add_actions", held)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(Committer(c.dest, store_config).commit_job, a.job_id)
        assert publishing.wait(60)
        with pytest.raises(PartitionClaimConflict):
            c.commit_job(b.job_id)
        resume.set()
        first.result(timeout=60)
    c.commit_job(b.job_id)
    assert [assert_published_once(c, a), assert_published_once(c, b)] == [0, 1]
    assert delta_rows(c, s3_backend) == [(20, "2024-01-01")]


def test_outside_writer_between_two_jobs(committer: Committer, s3_backend: S3Server) -> None:
    c = committer
    first = delta_job(c, "append", FIRST)
    c.commit_job(first.job_id)
    outside = pa.table({"id": [99], "name": ["x"], "dt": ["2024-01-02"]})
    write_deltalake(c.dest.url, outside, mode="append", storage_options=reader_options(s3_backend))
    second = delta_job(c, "replace", {"2024-01-01": [11]})
    c.commit_job(second.job_id)
    assert assert_published_once(c, second) == 2
    want = expected({"2024-01-01": [11], "2024-01-02": [3, 99], None: [4]})
    assert delta_rows(c, s3_backend) == want


@pytest.mark.parametrize("partition", ["2024-01-01", "2024-01-02"], ids=["same", "other"])
def test_outside_overwrite_while_publishing(
    committer: Committer, s3_backend: S3Server, monkeypatch: pytest.MonkeyPatch, partition: str
) -> None:
    """Another writer overwrites a partition between the job's read of the table
    and its commit: the same partition is a conflict (the job is rolled back and
    the error names that version); another one is not (the job lands after it)."""
    c = committer
    c.commit_job(delta_job(c, "append", FIRST).job_id)
    job = delta_job(c, "replace", {"2024-01-01": [11]})
    real = delta_module.create_once
    outside = pa.table({"id": [77], "name": ["x"], "dt": [partition]})

    def interleaved(store: Any, bucket: str, key: str, body: bytes) -> bytes | None:
        if key.endswith("/00000000000000000001.json"):
            write_deltalake(
                c.dest.url,
                outside,
                mode="overwrite",
                predicate=f"dt = '{partition}'",
                storage_options=reader_options(s3_backend),
            )
        return real(store, bucket, key, body)

    monkeypatch.setattr(delta_module, "create_once", interleaved)
    if partition == "2024-01-02":
        c.commit_job(job.job_id)
        assert assert_published_once(c, job) == 2
        assert delta_rows(c, s3_backend) == [(4, None), (11, "2024-01-01"), (77, "2024-01-02")]
        return
    with pytest.raises(
        CommitRolledBackError, match=r"version 1 of the Delta table .* files in dt=2024-01-01"
    ) as caught:
        c.commit_job(job.job_id)
    assert "WRITE" in str(caught.value)
    assert_left_nothing(c, job)
    assert "version 1" in c.job(job.job_id).error
    assert delta_rows(c, s3_backend) == [(3, "2024-01-02"), (4, None), (77, "2024-01-01")]


def test_readers_racing_commits_see_whole_jobs(committer: Committer, s3_backend: S3Server) -> None:
    """Appends and replaces commit while readers read: every read is exactly the
    rows of one committed state."""
    c = committer
    plan = [
        ("append", {"a": [1, 2], "b": [3]}),
        ("replace", {"a": [4, 5, 6]}),
        ("append", {"b": [7], "c": [8, 9]}),
        ("replace", {"b": [10], "c": [11]}),
        ("append", {"a": [12]}),
    ]
    states: list[Rows] = [[]]
    current: dict[str, list[int]] = {}
    for mode, files in plan:
        for day, ids in files.items():
            current[day] = ids if mode == "replace" else current.get(day, []) + ids
        states.append(expected({d: ids for d, ids in current.items()}))
    jobs = [delta_job(c, mode, files) for mode, files in plan]
    done = threading.Event()
    seen: list[Rows] = []

    def read(how: Callable[[Committer, S3Server], Rows]) -> None:
        while not done.is_set():
            try:
                seen.append(how(c, s3_backend))
            except TableNotFoundError:  # before the first job created it
                seen.append([])

    with ThreadPoolExecutor(2) as pool:
        readers = [pool.submit(read, delta_rows), pool.submit(read, polars_rows)]
        for job in jobs:
            c.commit_job(job.job_id)
        done.set()
        for reader in readers:
            reader.result(timeout=60)
    assert seen and all(rows in states for rows in seen)
    assert delta_rows(c, s3_backend) == states[-1]
    for job in jobs:
        assert_published_once(c, job)


# -- retention -------------------------------------------------------------------------------


def test_expire_deletes_what_replaces_removed(committer: Committer, s3_backend: S3Server) -> None:
    c = committer
    c.commit_job(delta_job(c, "append", FIRST).job_id)
    replacing = delta_job(c, "replace", SECOND)
    c.commit_job(replacing.job_id)
    before = set(visible(c))
    table = delta_module.DeltaFormat(c.ctx, c.job(replacing.job_id).options)
    assert table.expire(timedelta(days=1)) == 0  # younger than that
    assert table.expire(timedelta(0)) == 2
    assert before - set(visible(c)) == {k for k in before if "2024-01-02" in k or "HIVE" in k} - {
        k for k in before if replacing.job_id in k
    }
    assert delta_rows(c, s3_backend) == expected({"2024-01-01": [1, 2]}, SECOND)
    assert c.job(replacing.job_id).state == "committed"  # _zero_rename/ is not the table's
    assert table.expire(timedelta(0)) == 0


# -- cost ------------------------------------------------------------------------------------


def test_publishing_costs_no_request_per_file(
    proxy: S3Proxy, bucket: str, s3_backend: S3Server
) -> None:
    """What publishing adds to a job commit, counted at the wire, the same jobs
    committed to a destination without a table format the baseline, for jobs of
    2 and of 20 files on tables of two versions: an append lists the log after
    the version its setup checked and writes the next (If-None-Match), and the
    record says the table commit may start (its fence against a rollback by
    hand); a replace of a partition also reads the log since its last checkpoint
    (here versions 0 and 1) for the files it removes. The tables read right."""
    config = StoreConfig(endpoint_url=proxy.endpoint_url)
    added: dict[str, list[int]] = {"append": [], "replace": []}
    for n in (2, 20):
        tables = {f: Committer(f"s3://{bucket}/{f}-{n}", config) for f in ("none", "delta")}
        for f, c in tables.items():
            c.commit_job(delta_job(c, "append", {"2024-01-01": [1]}, table_format=f).job_id)
        for mode, day in (("append", "2024-02"), ("replace", "2024-01")):
            days: dict[str | None, list[int]] = {f"{day}-{d:02d}": [d] for d in range(1, n + 1)}
            counts = []
            for f, c in tables.items():
                job = delta_job(c, mode, days, table_format=f)
                proxy.reset_counts()
                c.commit_job(job.job_id)
                counts.append(sum(proxy.counts.values()))
            added[mode].append(counts[1] - counts[0])
            assert assert_published_once(tables["delta"], job) == (1 if mode == "append" else 2)
        appended = {f"2024-02-{d:02d}": [d] for d in range(1, n + 1)}
        replaced = {f"2024-01-{d:02d}": [d] for d in range(1, n + 1)}
        assert delta_rows(tables["delta"], s3_backend) == expected(appended, replaced)
    print(f"requests a commit adds to publish to Delta, for 2 and 20 files: {added}")
    assert added["append"] == [3, 3], added
    # Besides: the log's two commit files read. The baseline's replace deletes the
    # replaced file (a DeleteObjects; the table keeps it for its readers' history).
    assert added["replace"] == [3, 3], added
