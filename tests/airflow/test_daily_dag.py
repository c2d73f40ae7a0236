"""The daily DAG end to end: real Airflow (dag.test), real local Spark, real S3.

Every test checks what readers would find on S3 (files, rows, pending
uploads), not only task states. Spark submits take about 20 s each, so each
test runs the DAG as few times as its claims need: the first test's run of a
day is killed half-way through its commit and finished by Airflow's retry, with
the output check on; one Spark submit for all of it. That a second run of a day
is a new job (tests/airflow/test_runs.py) which replaces the first, through the
table format too, is the core's and the Dagster asset's to show
(tests/core/tables, tests/dagster/test_dagster_lifecycle.py). Both tests run
with ``[zero_rename] daily_table_format = iceberg``: each committed day is one
snapshot of the Iceberg table, whatever was killed, and an aborted day none.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.airflow import lineage
from tests.airflow.dagruns import (
    RunResult,
    asset_events,
    fail_orphaned_tasks,
    rendered_fields,
    run_dag,
    schedule_partition_runs,
    unpause,
    xcom,
    xcoms,
)
from tests.faults import CRASH_EXIT_CODE
from tests.helpers import pending, visible
from tests.table_readers import iceberg_catalog, iceberg_snapshots, iceberg_table
from zero_rename.airflow.ui.view import step_views
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.steps import run_job_id
from zero_rename.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.airflow, pytest.mark.spark]  # spark-submit needs Java


DAG_ID = "daily_partitioned_write"
REPO = Path(__file__).resolve().parents[2]
APP = REPO / "dags" / "apps" / "daily_partitioned_write.py"
STEPS = ("setup_job", "stage", "validate", "resolve_conflicts", "commit")


@pytest.fixture
def daily(
    airflow_env: EmbeddedS3,
    spark_env: dict[str, str],
    bucket: str,
    store_config: StoreConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Committer]:
    """Points the DAG at a fresh destination; the DAG file reads it when parsed."""
    destination = f"s3://{bucket}/events"
    monkeypatch.setenv("AIRFLOW__ZERO_RENAME__DAILY_DESTINATION", destination)
    assert APP.is_file(), "the DAG runs the real application"
    yield Committer(destination, store_config)


@pytest.fixture
def daily_table(monkeypatch: pytest.MonkeyPatch) -> str:
    """Each committed day also published to an Iceberg table of the embedded catalog
    (tests/conftest.py: ``ZERO_RENAME_ICEBERG_HOME``), named by the DAG's settings."""
    name = f"daily.events_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("AIRFLOW__ZERO_RENAME__DAILY_TABLE_FORMAT", "iceberg")
    monkeypatch.setenv("AIRFLOW__ZERO_RENAME__DAILY_ICEBERG_TABLE", name)
    return name


def rows_by_file(c: Committer) -> dict[str, int]:
    return {path: pq.read_table(io.BytesIO(body)).num_rows for path, body in visible(c).items()}


def run_id_of(day: str) -> str:
    return f"manual__{day}T00:00:00+00:00"


# A fresh interpreter with Airflow and a Spark submit, then the retry's run: about a
# tenth of make test's CPU on two cores, so make test-extended's.
@pytest.mark.extended
@pytest.mark.timeout(1200)
def test_a_day_killed_half_way_through_its_commit_is_committed_once_and_checked(
    daily: Committer,
    capfd: pytest.CaptureFixture[str],
    s3_server: EmbeddedS3,
    monkeypatch: pytest.MonkeyPatch,
    daily_table: str,
) -> None:
    """A day's run whose worker dies at the commit's 4th completion; Airflow's
    retry finishes it once, one snapshot of the day's Iceberg table, and runs
    the output check after it ([zero_rename] daily_validate_output), with the
    report DAG downstream of its day."""
    day = "2024-01-01"
    unpause("daily_partition_report")
    # Read when the DAG file is parsed: by the killed run's process and by the retry.
    monkeypatch.setenv("AIRFLOW__ZERO_RENAME__DAILY_VALIDATE_OUTPUT", "true")
    crash = crash_the_commit(daily, day)
    result = run_dag(DAG_ID, day, {"rows": ROWS, "options": {"max_rows_per_file": 50}})
    check_the_retry_finished_the_commit(daily, result, crash)
    files = check_the_first_run(daily, result, capfd, s3_server, crash.output, daily_table)
    check_the_output_check(daily, result, files)
    check_the_first_runs_lineage(daily, result, crash.output, daily_table, files)
    # No credential in any event the runs left, nor the endpoint.
    for secret in (s3_server.secret_key, s3_server.endpoint_url):
        assert lineage.leaked(secret) == []


ROWS = 500  # at most 50 a file: 10 files or more, the worker dies at the 4th completion


@dataclass
class Crash:
    job_id: str
    staged: int  # files in the job's manifests
    half: dict[str, int]  # the files made visible before the worker died
    output: str


def crash_the_commit(daily: Committer, day: str) -> Crash:
    started = time.monotonic()
    # A fresh interpreter, Airflow and a Spark submit: over 300 s on a busy two-core machine.
    crash = subprocess.run(
        [sys.executable, "-m", "tests.airflow.crash_commit", day, str(ROWS), "4"],
        cwd=REPO,
        env=os.environ,
        capture_output=True,
        timeout=900,
    )
    assert crash.returncode == CRASH_EXIT_CODE, crash.stderr.decode()[-3000:]
    job_id = run_job_id(DAG_ID, run_id_of(day), daily.dest.url)
    assert daily.job(job_id).state == "committing"
    staged = sum(len(m.uploads) for m in daily.load_manifests(job_id))
    half = rows_by_file(daily)
    print(f"crashed run: {time.monotonic() - started:.1f} s, {len(half)} of {staged} visible")
    assert staged >= 10 and 0 < len(half) < staged
    assert pending(daily) != []
    assert daily.read_success() is None
    assert fail_orphaned_tasks(DAG_ID, run_id_of(day)) == ["commit"]
    output = (crash.stdout + crash.stderr).decode(errors="replace")
    return Crash(job_id, staged, half, output)


def check_the_retry_finished_the_commit(daily: Committer, result: RunResult, crash: Crash) -> None:
    """Airflow ran the run again: setup found the same job, the stage was not
    submitted again, validation and conflicts were past, the commit resumed."""
    assert result.state == "success"
    assert xcom(DAG_ID, result.run_id, "setup_job") == crash.job_id
    files = rows_by_file(daily)
    assert len(files) == crash.staged and sum(files.values()) == ROWS
    assert set(crash.half) <= set(files)
    assert xcom(DAG_ID, result.run_id, "commit", "summary")["files"] == crash.staged


def check_the_first_run(
    daily: Committer,
    result: RunResult,
    capfd: pytest.CaptureFixture[str],
    s3_server: EmbeddedS3,
    crash_output: str,
    table_name: str,
) -> dict[str, int]:
    assert result.state == "success"
    assert result.states == {
        **{t: "success" for t in STEPS},
        "validate_output": "success",
        "abort_job": "skipped",
        "cleanup_job": "success",
    }
    job_id = xcom(DAG_ID, result.run_id, "setup_job")
    assert job_id == run_job_id(DAG_ID, result.run_id, daily.dest.url)
    files = rows_by_file(daily)
    assert files and all(p.startswith("dt=2024-01-01/") and job_id in p for p in files)
    assert sum(files.values()) == ROWS
    assert pending(daily) == []
    success = daily.read_success()
    assert success is not None and success.job_id == job_id
    assert success.partitions == ("dt=2024-01-01",)
    record = daily.job(job_id)
    assert record.state == "committed"
    # Every step in the record, the Spark stage included, in order.
    assert list(record.steps) == [
        "setup",
        "stage",
        "validate",
        "resolve_conflicts",
        "commit",
        "publish_table",
        "validate_output",
    ]
    assert record.steps["stage"].detail.startswith("spark: 2 task(s)")
    # The killed commit's retry published the day once: one snapshot, all its rows.
    table = iceberg_table(table_name)
    assert record.table_commit is not None and record.table_commit.files == len(files)
    assert iceberg_snapshots(table) == {job_id: record.table_commit.id}
    assert table.scan().to_arrow().num_rows == ROWS

    # Each step's summary is in XCom; the commit's counts match what S3 holds.
    summaries = {t: xcom(DAG_ID, result.run_id, t, "summary") for t in (*STEPS, "cleanup_job")}
    assert all(s and s["job_id"] == job_id for s in summaries.values())
    commit = summaries["commit"]
    assert (commit["state"], commit["files"], commit["rows"]) == ("committed", len(files), ROWS)
    assert commit["partitions"] == ["dt=2024-01-01"]
    assert commit["requests"] > 0 and commit["seconds"] > 0
    assert commit["table_commit"] == record.table_commit.model_dump(mode="json")
    assert summaries["stage"]["rows"] == ROWS and summaries["validate"]["files"] == len(files)

    # The asset event carries the committed partition and the summary.
    ((key, extra),) = asset_events(daily.dest.url)
    assert key == "2024-01-01"  # the day, as the daily schedule keys its runs
    assert extra["job_id"] == job_id and extra["rows"] == ROWS
    assert extra["table_commit"]["id"] == record.table_commit.id  # for downstream readers
    # ... which the scheduler turns into a run of the DAG downstream of the day.
    assert schedule_partition_runs() == [("daily_partition_report", "2024-01-01")]
    report = run_dag("daily_partition_report", "2024-01-01", {"date": "2024-01-01"})
    assert report.state == "success"
    assert xcom("daily_partition_report", report.run_id, "report") == {
        "day": "2024-01-01",
        "files": len(files),
        "bytes": sum(len(body) for body in visible(daily).values()),
        "jobs": [job_id],
    }

    # The extra link opens the Commits page at this job.
    link = xcom(DAG_ID, result.run_id, "commit", "_link_CommitsLink")
    assert link.startswith("/zero-rename/commits?dest=s3%3A%2F%2F") and f"job={job_id}" in link

    # No credential in XCom, in the rendered templates the UI shows, or in the
    # logs (the killed run's among them).
    shown = crash_output + (
        json.dumps(
            [xcoms(DAG_ID, result.run_id), rendered_fields(DAG_ID, result.run_id)], default=str
        )
        + capfd.readouterr().out
    )
    assert s3_server.secret_key not in shown
    return files


def check_the_output_check(daily: Committer, result: RunResult, files: dict[str, int]) -> None:
    """The output check followed the retried commit, found every file as committed,
    and says so in XCom and in the job's record."""
    job_id = xcom(DAG_ID, result.run_id, "setup_job")
    check = xcom(DAG_ID, result.run_id, "validate_output", "summary")
    assert (check["outcome"], check["files"], check["job_id"]) == ("valid", len(files), job_id)
    record = daily.job(job_id)
    assert record.output_check is not None and record.output_check.outcome == "valid"


def check_the_first_runs_lineage(
    daily: Committer, result: RunResult, crash_output: str, table_name: str, files: dict[str, int]
) -> None:
    """The killed run's steps reported from its worker, the commit from Airflow's retry:
    the destination as output with what the commit made visible, replaced as a whole
    partition (OVERWRITE), the Iceberg table as a symlink and its snapshot as version."""
    events = lineage.events(DAG_ID, result.run_id)
    assert [p for e in events for p in lineage.validate(e)] == []
    # The killed worker's run, then Airflow's: each step twice, the commit finished once.
    tasks = lineage.by_task(events)
    twice = ["START", "COMPLETE"] * 2
    assert {t: tasks[t] for t in STEPS[:-1]} == {t: twice for t in STEPS[:-1]}
    assert tasks["commit"] == ["START", "START", "COMPLETE"]
    # Only the commit names an output, and only the finished one says what it wrote:
    # its START events carry the asset the task declares, which Airflow's provider
    # adds to an event that names no dataset of its own.
    assert {lineage.task_of(e) for e in events if e["outputs"]} == {"commit"}
    commits = [e for e in events if lineage.task_of(e) == "commit"]
    assert [lineage.written(e) for e in commits] == [False, False, True]
    (output,) = lineage.last(events, "commit")["outputs"]
    record = daily.job(xcom(DAG_ID, result.run_id, "setup_job"))
    assert (output["namespace"], output["name"]) == (f"s3://{daily.dest.bucket}", "events")
    statistics = output["outputFacets"]["outputStatistics"]
    assert (statistics["rowCount"], statistics["fileCount"]) == (ROWS, len(files))
    assert statistics["size"] == sum(len(body) for body in visible(daily).values())
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert record.table_commit is not None
    assert output["facets"]["version"]["datasetVersion"] == record.table_commit.id
    ((link),) = output["facets"]["symlinks"]["identifiers"]
    assert (link["namespace"], link["name"]) == ("iceberg://zero_rename", table_name)
    # The DataFrame's columns as the writer recorded them: the files' and the day.
    columns = {f["name"]: f["type"] for f in output["facets"]["schema"]["fields"]}
    body = next(iter(visible(daily).values()))
    assert set(columns) == {*pq.read_schema(io.BytesIO(body)).names, "dt"}
    assert columns["dt"] == "date32[day]"
    # The output check after the retried commit read the destination and asserted it.
    assert tasks["validate_output"] == ["START", "COMPLETE"]
    ((read),) = lineage.last(events, "validate_output")["inputs"]
    assert read["name"] == "events"
    assert read["facets"]["dataQualityAssertions"]["assertions"][0]["success"] is True
    for event in events:
        if event["eventType"] == "COMPLETE" and lineage.task_of(event) in STEPS:
            facet = event["run"]["facets"]["zeroRename"]
            assert facet["jobId"] == record.job_id and facet["destination"] == daily.dest.url
    setup = lineage.last(events, "setup_job")["run"]["facets"]["zeroRename"]
    assert setup["options"] == {
        "conflict_mode": "replace",
        "partition_columns": "dt",
        "table_format": "iceberg",
    }
    # The stage's spark-submit (the killed worker's) carried its run, as
    # SparkSubmitOperator passes it.
    stage = lineage.first(events, "stage")
    assert f"spark.openlineage.parentRunId={stage['run']['runId']}" in crash_output
    assert f"spark.openlineage.parentJobName={DAG_ID}.stage" in crash_output


def plant_stray_upload(c: Committer, job_id: str, day: str) -> str:
    """The pending upload an executor killed mid-write leaves behind, unknown to any manifest."""
    key = f"{c.dest.dir}dt={day}/part-00007-{job_id}.c000.snappy.parquet"
    upload_id = c.store.create_upload(c.dest.bucket, key)
    c.store.upload_part(c.dest.bucket, key, upload_id, 1, b"half a file")
    return key


def test_a_failed_stage_is_aborted_and_the_run_fails(
    daily: Committer, capfd: pytest.CaptureFixture[str], daily_table: str
) -> None:
    day = "2024-02-01"
    job_id = run_job_id(DAG_ID, run_id_of(day), daily.dest.url)
    stray = plant_stray_upload(daily, job_id, day)
    assert pending(daily) == [stray]

    # A writer option the application refuses makes it fail at once, before Spark starts.
    result = run_dag(DAG_ID, day, {"rows": 10, "options": {"compression": "no-such-codec"}})

    assert result.states["stage"] == "failed"
    # For the reason given, with the day's arguments rendered as the application expects.
    assert "no-such-codec" in capfd.readouterr().out
    (stage,) = [f for f in rendered_fields(DAG_ID, result.run_id) if "application_args" in f]
    assert stage["application_args"][:2] == ["--date", day]
    assert result.states["validate"] == result.states["commit"] == "upstream_failed"
    # The abort worked, and fails on purpose so that the run shows the failure.
    assert result.states["abort_job"] == "failed"
    assert xcom(DAG_ID, result.run_id, "abort_job", "summary")["state"] == "aborted"
    assert result.states["cleanup_job"] == "success"
    assert result.state == "failed"
    record = daily.job(job_id)
    assert record.state == "aborted"
    # The record says why, for jobs show and the Commits page: the step that failed
    # (not those that never ran because of it), and its own error, one line.
    stage_error = record.steps["stage"].error
    assert record.steps["stage"].status == "failed"
    # Final (Spark retried its tasks), with the application's own error line.
    assert stage_error.startswith("AirflowFailException: the Spark application writing job")
    assert "spark-submit exited with code 2: " in stage_error
    assert "no-such-codec" in stage_error and "\n" not in stage_error
    assert record.error == (
        f"step(s) stage failed (DAG {DAG_ID}, run {result.run_id}): stage: {stage_error}"
    )
    assert record.failed_steps == {"stage": stage_error}
    # XCom carries both; the Commits page shows the step's error.
    outcome = xcom(DAG_ID, result.run_id, "abort_job", "summary")
    assert (outcome["reason"], outcome["failed_steps"]) == (record.error, {"stage": stage_error})
    assert {s.name: s.error for s in step_views(record)}["stage"] == stage_error
    assert visible(daily) == {}
    assert pending(daily) == []
    # Nothing of an aborted day reaches the table: there is none.
    options = daily.job(job_id).options
    assert (options.table_format, options.iceberg_table) == ("iceberg", daily_table)
    assert not iceberg_catalog().table_exists(daily_table)
    # Its lineage: no output anywhere, the abort saying what it aborted.
    events = lineage.events(DAG_ID, result.run_id)
    assert [p for e in events for p in lineage.validate(e)] == []
    assert [e for e in events if e["outputs"]] == []
    assert lineage.by_task(events)["stage"] == ["START", "FAIL"]
    assert "commit" not in lineage.by_task(events)
    abort = lineage.last(events, "abort_job")
    facet = abort["run"]["facets"]["zeroRename"]
    assert (abort["eventType"], facet["state"], facet["abortedUploads"]) == ("FAIL", "aborted", 1)
