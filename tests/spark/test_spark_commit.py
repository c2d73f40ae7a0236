"""The driver's side: plain job commit, orchestrated stage manifests, and two live
attempts of one task with Spark's commit decision played by the test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tests.helpers import history_only, pending, pending_in_bucket
from zero_rename.core.committer import Committer
from zero_rename.errors import ZeroRenameError
from zero_rename.spark.datasource import (
    ZeroRenameCommitMessage,
    ZeroRenameDataSource,
    ZeroRenameWriter,
)

from spark_support import assert_exactly, assert_nothing, data_files

pytestmark = pytest.mark.spark

DAY_SQL = """select id, concat('row-', id) as value, '2024-01-0' || cast(1 + id % 2 as string) as dt
             from range(0, {n}, 1, {parts})"""


def day_rows(spark: Any, n: int = 400, parts: int = 4) -> Any:
    return spark.sql(DAY_SQL.format(n=n, parts=parts))


def save(df: Any, dest: str, mode: str = "append", **options: str) -> None:
    writer = df.write.format("zero-rename").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(dest)


def test_plain_write_commits_the_job_itself(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    df = day_rows(spark)
    save(df, dest, partition_by="dt")
    [job] = committer.jobs()
    assert job.state == "committed" and job.summary is not None
    assert job.summary.rows == 400 and job.summary.tasks == 4
    assert job.summary.tasks == 4 and job.plan_key is not None
    assert set(job.steps) >= {"setup", "commit"}
    success = committer.read_success()
    assert success is not None and success.job_id == job.job_id
    assert sorted(f.path for f in success.files) == data_files(committer)
    assert_exactly(spark, committer, tmp_path, df.collect(), df.columns, df.schema)
    # Job commit removes its manifests and plans; its history stays.
    assert history_only(committer, job.job_id)
    assert job.claimed == ("dt=2024-01-01/", "dt=2024-01-02/")


def test_orchestrated_write_saves_the_stage_manifest_and_publishes_nothing(
    spark: Any, dest: str, committer: Committer, tmp_path: Path
) -> None:
    save(day_rows(spark, 100).where("dt = '2024-01-01'"), dest, partition_by="dt")
    old = data_files(committer)
    # What the Airflow DAG's setup step does before submitting the application.
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    df = day_rows(spark)
    save(df, dest, mode="overwrite", partition_by="dt", job_id=job.job_id)

    assert data_files(committer) == old
    assert committer.job(job.job_id).state == "setup"
    manifests = committer.load_manifests(job.job_id)
    assert sorted(m.task_id for m in manifests) == ["00000", "00001", "00002", "00003"]
    assert len(pending(committer, job.job_id)) == sum(len(m.uploads) for m in manifests) == 8

    # The later steps, as the orchestrator runs them.
    assert committer.validate(job.job_id, expected=4).rows == 400
    assert committer.resolve_conflicts(job.job_id).replaced_files == len(old)
    committer.commit_job(job.job_id)
    assert_exactly(spark, committer, tmp_path, df.collect(), df.columns, df.schema)
    assert not set(old) & set(data_files(committer))


def test_orchestrated_options_must_agree_with_the_job(
    spark: Any, dest: str, committer: Committer
) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    with pytest.raises(Exception, match='option conflict_mode="append" disagrees with job'):
        save(
            day_rows(spark, 10), dest, partition_by="dt", conflict_mode="append", job_id=job.job_id
        )
    with pytest.raises(Exception, match='option partition_columns="value" disagrees'):
        save(day_rows(spark, 10), dest, mode="overwrite", partition_by="value", job_id=job.job_id)
    with pytest.raises(Exception, match="no job 6f1c"):
        save(day_rows(spark, 10), dest, job_id="6f1c0c3a-6a2b-4c1e-9a57-1c1f4c1e9a57")
    assert committer.job(job.job_id).state == "setup"
    assert_nothing(committer)
    # Options left out are taken from the job record.
    save(day_rows(spark, 10), dest, job_id=job.job_id)
    assert {m.task_id for m in committer.load_manifests(job.job_id)} == {
        "00000",
        "00001",
        "00002",
        "00003",
    }


# -- two live attempts of one task, driven directly ------------------------------

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("value", StringType()),
        StructField("dt", StringType()),
    ]
)


def batches(start: int, n: int) -> list[pa.RecordBatch]:
    ids = list(range(start, start + n))
    return [
        pa.record_batch(
            {
                "id": pa.array(ids[i : i + 50], pa.int64()),
                "value": [f"row-{j}" for j in ids[i : i + 50]],
                "dt": ["2024-01-01"] * len(ids[i : i + 50]),
            }
        )
        for i in range(0, n, 50)
    ]


def new_writer(dest: str, committer_mode: str) -> ZeroRenameWriter:
    # What Spark does on the driver: the data source builds the writer (job setup).
    source = ZeroRenameDataSource({"path": dest, "partition_by": "dt", "committer": committer_mode})
    return source.writer(SCHEMA, False)


def expected_rows() -> list[tuple[int, str, str]]:
    return [(i, f"row-{i}", "2024-01-01") for i in range(200)]


@pytest.mark.parametrize("mode", ["magic", "staging"])
def test_two_finished_attempts_of_a_task_only_the_chosen_one_is_committed(
    spark: Any, dest: str, committer: Committer, tmp_path: Path, mode: str
) -> None:
    writer = new_writer(dest, mode)
    first = writer.write_attempt(0, 100, iter(batches(0, 100)))
    speculative = writer.write_attempt(0, 101, iter(batches(0, 100)))
    other = writer.write_attempt(1, 102, iter(batches(100, 100)))
    # Both attempts of task 0 left uploads for the same file name.
    assert len(pending(committer, writer.job_id)) == 3

    writer.commit([speculative, other])  # Spark's coordinator let attempt 101 commit

    attempts = committer.committed_attempts(writer.job_id)
    assert attempts == tuple(
        sorted([speculative.manifest().task_attempt_id, other.manifest().task_attempt_id])
    )
    assert first.manifest().task_attempt_id not in attempts
    assert_exactly(spark, committer, tmp_path, expected_rows(), ["id", "value", "dt"], SCHEMA)
    assert len(data_files(committer)) == 2


def _gated(
    items: list[pa.RecordBatch], reached: threading.Event, go: threading.Event
) -> Iterator[pa.RecordBatch]:
    yield items[0]
    reached.set()
    go.wait(60)
    yield from items[1:]


@pytest.mark.parametrize("mode", ["magic", "staging"])
def test_an_attempt_still_writing_after_the_job_commit_adds_nothing(
    spark: Any, dest: str, committer: Committer, tmp_path: Path, mode: str
) -> None:
    writer = new_writer(dest, mode)
    reached, go = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def straggler() -> None:
        try:
            outcome["message"] = writer.write_attempt(0, 200, _gated(batches(0, 100), reached, go))
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=straggler)
    thread.start()
    assert reached.wait(60)
    speculative = writer.write_attempt(0, 201, iter(batches(0, 100)))
    other = writer.write_attempt(1, 202, iter(batches(100, 100)))
    writer.commit([speculative, other])  # the straggler lost; the job is committed
    go.set()
    thread.join(60)

    assert isinstance(outcome.get("error"), ZeroRenameError), outcome
    assert_exactly(spark, committer, tmp_path, expected_rows(), ["id", "value", "dt"], SCHEMA)
    assert pending_in_bucket(committer) == []


def test_spark_abort_aborts_the_job_even_for_attempts_without_a_message(
    spark: Any, dest: str, committer: Committer
) -> None:
    writer = new_writer(dest, "magic")
    done = writer.write_attempt(0, 300, iter(batches(0, 100)))
    # An attempt that wrote but never reported (its executor was lost).
    lost = committer.task_attempt(writer.job, "00001", 301)
    with lost.open({"dt": "2024-01-01"}) as out:
        out.write(b"partial")
    writer.abort([done, None])
    assert committer.job(writer.job_id).state == "aborted"
    assert_nothing(committer)
    # A late attempt is fenced off by the aborted job record.
    with pytest.raises(ZeroRenameError, match="aborted"):
        writer.write_attempt(1, 302, iter(batches(100, 100)))
    assert_nothing(committer)


def test_commit_message_reports_the_task(dest: str, committer: Committer, s3_server: Any) -> None:
    writer = new_writer(dest, "staging")
    message = writer.write_attempt(3, 7, iter(batches(0, 120)))
    assert isinstance(message, ZeroRenameCommitMessage)
    manifest = message.manifest()
    assert (manifest.task_id, manifest.attempt, message.rows, message.files) == ("00003", 7, 120, 1)
    assert message.bytes == manifest.bytes > 0 and message.peak_rss_bytes > 0
    assert manifest.uploads[0].rows == 120
    assert manifest.uploads[0].partition == {"dt": "2024-01-01"}
    writer.abort([message])
