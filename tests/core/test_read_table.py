"""``zero_rename.read_table``: the committed rows of a destination as Arrow."""

from __future__ import annotations

import io
from datetime import timedelta

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import zero_rename
from tests.helpers import strip_time_zones
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.client import StoreConfig
from zero_rename.read import read_dataset, read_table

pytestmark = pytest.mark.s3


def parquet(ids: list[int]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}), out)
    return out.getvalue()


def write_job(c: Committer, mode: str, days: dict[str | None, list[int]]) -> JobRecord:
    record = c.setup_job({"partition_columns": "dt", "conflict_mode": mode})
    attempt = c.task_attempt(record, "00000")
    for day, ids in days.items():
        with attempt.open({"dt": day}) as out:
            out.write(parquet(ids))
            out.rows = len(ids)
    attempt.commit()
    return record


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(
        zip(*(table.column(n).to_pylist() for n in ("id", "dt")), strict=True),
        key=lambda r: (r[0], str(r[1])),
    )


def test_reads_committed_rows_with_partition_columns(
    committer: Committer, store_config: StoreConfig
) -> None:
    c = committer
    first = write_job(c, "append", {"2026-11-20": [1, 2], "2026-11-21": [3]})
    c.commit_job(first.job_id)
    write_job(c, "append", {"2026-11-21": [99]})  # never committed
    table = zero_rename.read_table(c.dest.url, store_config=store_config)
    assert table.num_rows == 3
    assert table.schema.field("id").type == pa.int64()
    assert rows(table) == [(1, "2026-11-20"), (2, "2026-11-20"), (3, "2026-11-21")]


def test_filters_and_columns(committer: Committer, store_config: StoreConfig) -> None:
    c = committer
    job = write_job(c, "append", {"a": [1], "b": [2, 3]})
    c.commit_job(job.job_id)
    table = read_table(
        c.dest.url, filters=[("dt", "=", "b")], columns=["id"], store_config=store_config
    )
    assert table.column_names == ["id"]
    assert sorted(table.column("id").to_pylist()) == [2, 3]
    dataset = read_dataset(c.dest.url, store_config=store_config)
    assert isinstance(dataset, ds.Dataset)
    assert sorted(dataset.to_table(filter=ds.field("dt") == "a").column("id").to_pylist()) == [1]


def test_integer_partitions_and_nulls(committer: Committer, store_config: StoreConfig) -> None:
    c = committer
    job = write_job(c, "append", {"7": [1], None: [2]})
    c.commit_job(job.job_id)
    table = read_table(c.dest.url, store_config=store_config)
    assert pa.types.is_integer(table.schema.field("dt").type)
    assert rows(table) == [(1, 7), (2, None)]
    named = read_table(
        c.dest.url,
        store_config=store_config,
        schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("dt", pa.string())]),
    )
    assert rows(named) == [(1, "7"), (2, None)]


def test_replace_and_as_of(committer: Committer, store_config: StoreConfig) -> None:
    c = committer
    first = write_job(c, "append", {"d1": [1], "d2": [2]})
    c.commit_job(first.job_id)
    second = write_job(c, "replace", {"d1": [10, 11]})
    c.commit_job(second.job_id)
    assert rows(read_table(c.dest.url, store_config=store_config)) == [
        (2, "d2"),
        (10, "d1"),
        (11, "d1"),
    ]
    third = write_job(c, "append", {"d3": [30]})
    c.commit_job(third.job_id)
    assert rows(read_table(c.dest.url, store_config=store_config, as_of_job=second.job_id)) == [
        (2, "d2"),
        (10, "d1"),
        (11, "d1"),
    ]


def test_empty_destination(committer: Committer, store_config: StoreConfig) -> None:
    assert read_table(committer.dest.url, store_config=store_config).num_rows == 0


def test_endpoint_from_the_environment(
    committer: Committer, store_config: StoreConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = write_job(committer, "append", {"a": [1]})
    committer.commit_job(job.job_id)
    # No store settings: botocore and Arrow both take AWS_ENDPOINT_URL.
    monkeypatch.setenv("AWS_ENDPOINT_URL", str(store_config.endpoint_url))
    assert read_table(committer.dest.url).num_rows == 1


def test_job_times_without_a_zone_are_read_as_utc(
    committer: Committer, store_config: StoreConfig
) -> None:
    """Records whose times carry no zone (written by hand or by another tool) are
    read as UTC, so the snapshot can still order them against S3's times."""
    c = committer
    done = write_job(c, "append", {"a": [1]})
    c.commit_job(done.job_id)
    running = write_job(c, "append", {"a": [2]})
    for job in (done, running):
        strip_time_zones(c, job.job_id)
    record = c.job(done.job_id)
    times = [
        record.created,
        record.updated,
        *(t for s in record.steps.values() for t in (s.started, s.finished)),
    ]
    assert all(t is not None and t.utcoffset() == timedelta(0) for t in times)
    assert rows(read_table(c.dest.url, store_config=store_config)) == [(1, "a")]
    assert [r.job_id for r in c.jobs()] == [done.job_id, running.job_id]
