"""``zero_rename.read_table``: the committed rows of a destination as Arrow."""

from __future__ import annotations

import io
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import zero_rename
from tests.helpers import strip_time_zones, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import ManifestError
from zero_rename.read import filesystem, read_dataset, read_table

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


def test_a_record_is_the_job_its_key_names_for_every_reader(
    committer: Committer, store_config: StoreConfig
) -> None:
    """A backup of a record taken before its commit (under ``jobs/zz-backup/``), a
    copy of it under another job's key, and a task manifest named ``job.json``:
    no reader takes any of them for a job, and each agrees with Committer.job."""
    c = committer
    job = write_job(c, "append", {"2026-11-20": [1, 2]})
    record_key = c.dest.job(job.job_id).record_key
    found = c.store.get_object(c.dest.bucket, record_key)
    assert found is not None
    stale = found[0]  # the record in setup, as a backup taken now keeps it
    c.commit_job(job.job_id)
    staged = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(c, staged, "job", {"2026-11-21": parquet([9])})  # its manifest: tasks/job.json
    other = str(uuid.uuid4())
    backup = c.dest.jobs_dir + "zz-backup/job.json"
    copied = c.dest.job(other).record_key
    for key in (backup, copied):
        c.store.put_object(c.dest.bucket, key, stale)

    states = {job.job_id: "committed", staged.job_id: "setup"}
    assert {r.job_id: r.state for r in c.jobs()} == states
    assert {j: c.job(j).state for j in states} == states
    with pytest.raises(ManifestError, match=f"names job {job.job_id}"):
        c.job(other)
    assert rows(zero_rename.read_table(c.dest.url, store_config=store_config)) == [
        (1, "2026-11-20"),
        (2, "2026-11-20"),
    ]
    assert c.snapshot().committed_jobs == (job.job_id,)
    assert {e.job_id: e.state for e in c.history().entries} == states
    assert [e.job_id for e in c.history(limit=1).entries] == [staged.job_id]
    assert set(c.partitions().records) == set(states)
    strays = c.stray_records()
    assert [(s.key, s.reason) for s in strays] == sorted(
        [
            (backup, "a job.json at a key that names no job"),
            (copied, f"a job record naming job {job.job_id}"),
        ]
    )


@pytest.mark.unit
def test_arrows_client_takes_credentials_and_region_as_botocore_resolves_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """From the environment where it holds a whole static set and no AWS config
    file can name a region; from botocore's session otherwise."""
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CREDENTIAL_EXPIRATION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-north-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    config = StoreConfig(endpoint_url="http://127.0.0.1:9")

    def options(store: StoreConfig) -> dict[str, object]:
        (given,) = filesystem(store).__reduce__()[1]
        return {k: given[k] for k in ("access_key", "region", "anonymous")}

    assert options(config) == {"access_key": "AKIDENV", "region": "eu-north-1", "anonymous": False}
    assert options(replace(config, region="ap-south-1"))["region"] == "ap-south-1"
    # A config file may name the region: botocore's session reads it.
    (tmp_path / "config").write_text("[default]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/config")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert options(config)["region"] == "sa-east-1"
    # No credentials anywhere: anonymous, as before.
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert options(config)["anonymous"] is True
