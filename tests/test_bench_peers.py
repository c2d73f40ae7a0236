"""The peers' benchmark, its parts that need no Spark: the workloads' expected
rows and files, Spark's event log read into phases, the checks of a write's
output and the report. The drivers themselves run Spark 4.1 in .venv-peers
(``make bench-peers --quick`` runs every path)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.peers import eventlog, report
from bench.peers.run import Run, hidden_kind, judge, split_requests, zero_rename_phases
from bench.peers.workloads import WORKLOADS, Frame, small_files, warm_up
from bench.peers.writes import iceberg_target_bytes


def test_workloads_expect_the_rows_and_files_of_the_benchmarks_page() -> None:
    main, daily, replace = WORKLOADS["main"], WORKLOADS["daily"], WORKLOADS["replace"]
    assert main.expected_files() == 1_024
    assert main.label == "1,024 files (16 tasks x 64 days), 8,000,000 rows"
    assert small_files(10_000).label == "10,000 files of 10 rows (100 tasks x 100 days)"
    assert sum(main.expected_rows_by_day().values()) == 8_000_000
    assert daily.expected_files() == 10
    assert daily.expected_rows_by_day() == {"2024-01-01": 1_000_000}
    # Three days of 10 files; the first replaced by the daily write.
    assert replace.expected_rows_by_day() == {
        "2024-01-01": 1_000_000,
        "2024-01-02": 100_000,
        "2024-01-03": 100_000,
    }
    assert replace.expected_files() == 30
    assert small_files(10_000).expected_files() == 10_000
    assert Frame(rows=7, tasks=1, days=3, start=5).rows_by_day() == {
        "2024-01-01": 2,
        "2024-01-02": 2,
        "2024-01-03": 3,
    }
    scaled = daily.scaled(0.01)
    assert scaled.frame.rows == 10_000 and scaled.expected_files() == 10
    shape = warm_up(replace)
    assert shape.mode == "replace" and shape.before is not None
    assert set(shape.frame.rows_by_day()) <= set(shape.before.rows_by_day())


def test_iceberg_target_sizes_roll_at_a_tenth_more_rows() -> None:
    # Measured: a 9 MB target rolled at 109,000 rows of the benchmarks' frame.
    assert 8_900_000 < iceberg_target_bytes(100_000) < 9_100_000
    assert iceberg_target_bytes(1_000) == 1  # Iceberg's least: a roll every 1,000 rows


def _event(kind: str, **fields: object) -> str:
    return json.dumps({"Event": kind, **fields})


def test_event_log_gives_setup_tasks_and_commit(tmp_path: Path) -> None:
    plan = {
        "nodeName": "Execute InsertIntoHadoopFsRelationCommand",
        "metrics": [
            {"name": "job commit time", "accumulatorId": 7},
            {"name": "task commit time", "accumulatorId": 8},
        ],
        "children": [],
    }
    task = {
        "Launch Time": 11_000,
        "Finish Time": 13_000,
        "Accumulables": [{"ID": 8, "Name": "task commit time", "Update": "250"}],
    }
    metrics = {
        "Executor Run Time": 1_900,
        "Executor CPU Time": 1_500_000_000,
        "JVM GC Time": 20,
        "Output Metrics": {"Records Written": 100, "Bytes Written": 5_000},
    }
    lines = [
        _event(eventlog.SQL_START, executionId=3, time=10_200, sparkPlanInfo=plan),
        _event(
            "SparkListenerJobStart",
            **{"Job ID": 1, "Submission Time": 10_500, "Stage IDs": [4]},
            Properties={"spark.sql.execution.id": "3"},
        ),
        _event(
            "SparkListenerTaskEnd", **{"Stage ID": 4, "Task Info": task, "Task Metrics": metrics}
        ),
        _event("SparkListenerJobEnd", **{"Job ID": 1, "Completion Time": 13_100}),
        _event(eventlog.SQL_ACCUMS, executionId=3, accumUpdates=[[7, 600]]),
        _event(eventlog.SQL_END, executionId=3, time=13_800),
    ]
    (tmp_path / "app").write_text("\n".join(lines) + "\n")
    phases = eventlog.timeline(eventlog.read(tmp_path), 10.0, 14.0)
    assert phases["setup"] == 0.5 and phases["tasks"] == 2.6 and phases["commit"] == 0.9
    assert phases["job_commit"] == 0.6 and phases["task_commit"] == 0.25
    assert phases["tasks_cpu"] == 1.5 and phases["records_written"] == 100
    assert split_requests(
        [(10.1, "HeadObject"), (11.0, "PutObject"), (13.5, "CopyObject")], 10.0, phases
    ) == {
        "setup": {"HeadObject": 1},
        "tasks": {"PutObject": 1},
        "commit": {"CopyObject": 1},
    }


def test_checks_name_what_a_write_left() -> None:
    assert hidden_kind("dt=2024-01-01/part-0.parquet") is None
    assert hidden_kind("_temporary/0/task/part-0.parquet") == "_temporary"
    assert hidden_kind("__magic_job-1/x.pending") == "__magic"
    assert hidden_kind(".spark-staging-9/dt=1/p.parquet") == ".spark-staging"
    assert hidden_kind("_delta_log/00000.json") == "_delta_log"
    assert hidden_kind("metadata/v1.metadata.json") == "metadata"
    assert hidden_kind("dt=2024-01-01/") == "directory marker"

    replace = WORKLOADS["replace"].scaled(0.01)
    appended = Run("replace", "manifest", 0)
    appended.read_back = {
        "rows_by_day": {"2024-01-01": 11_000, "2024-01-02": 1_000, "2024-01-03": 1_000},
        "files": 40,
    }
    judge(appended, replace)
    assert appended.status == "not replaced"
    assert "2024-01-01: 11,000 rows, not 10,000" in appended.reason
    pending = Run("daily", "s3a-magic", 0, pending=2)
    pending.read_back = {"rows_by_day": {"2024-01-01": 1_000_000}, "files": 10}
    judge(pending, WORKLOADS["daily"])
    assert pending.status == "check failed" and "2 upload(s) left pending" in pending.reason


def _runs() -> list[Run]:
    runs = []
    for method, seconds in (("zero-rename-magic", 3.0), ("s3a-magic", 2.0), ("iceberg-spark", 4.0)):
        for round_number, extra in enumerate((0.0, 0.4)):
            r = Run("daily", method, round_number, seconds=seconds + extra, cold=9.0, written=10)
            r.phases = {"setup": 0.5, "tasks": seconds - 1.0 + extra, "commit": 0.5}
            r.requests = {"PutObject": 10, "CompleteMultipartUpload": 10}
            r.by_phase = {"tasks": {"PutObject": 10}, "commit": {"CompleteMultipartUpload": 10}}
            r.read_back = {"rows_by_day": {"2024-01-01": 1_000_000}, "files": 10}
            r.memory = {"jvm_peak": 800 * 2**20, "driver_peak": 60 * 2**20}
            r.cpu = {"jvm": 2.0, "python_workers": 1.0, "server": 0.5, "proxy": 0.1}
            runs.append(r)
    runs.append(Run("daily", "s3a-directory", 0, status="failed", reason="a reason"))
    return runs


def test_report_and_chart_from_runs(tmp_path: Path) -> None:
    runs = _runs()
    meta = report_meta()
    page, chart = tmp_path / "benchmarks.md", tmp_path / "peers.svg"
    report.write(meta, runs, str(page), str(chart))
    text = page.read_text()
    assert text.count(report.HEADER) == 1 and "![" in text and "(peers.svg)" in text
    assert "| S3A magic | 2.20 | 2.00-2.40 | 0.69x |" in text
    assert "Ahead of zero-rename, magic (3.20 s): S3A magic (2.20 s)" in text
    assert "S3A staging, directory, daily: failed. a reason" in text
    assert "2 rounds. A daily job's write" in text
    # A run stopped before its last round: the rounds each method ran are said.
    stopped = [r for r in runs if not (r.method == "iceberg-spark" and r.round == 1)]
    report.write(meta, stopped, str(page), str(chart))
    assert "stopped before its last round reached Spark's Iceberg writer (1)" in page.read_text()
    svg = ET.fromstring(chart.read_text())
    assert svg.tag.endswith("svg")
    assert "not supported" not in chart.read_text() and "failed" in chart.read_text()


def report_meta() -> dict[str, object]:
    return {
        "cores": 2,
        "python": "3.11",
        "pyspark": "4.1.2",
        "java": "openjdk 17",
        "seaweedfs": "4.48",
        "hadoop": "3.4.2",
        "iceberg": "1.12.0",
        "delta": "4.4.0",
        "command": "python -m bench.peers.run --quick",
        "minutes": 3.0,
        "load": [0.5, 1.0],
        "seed": 0,
        "workloads": {"daily": WORKLOADS["daily"].to_json()},
        "rounds": {"daily": 2},
    }


def test_zero_rename_steps_from_its_records() -> None:
    records = [
        {"phase": "setup", "t_proc": 5.0, "t_start": 10.3, "t_end": 10.4},
        {"phase": "commit", "t_proc": 12.9, "t_start": 13.2, "t_end": 13.6},
        {
            "phase": "task",
            "seconds": 2.0,
            "fed_seconds": 0.5,
            "s3_seconds": {"GetObject": 0.1, "bg:UploadPart": 1.0},
            "peak_rss": 100,
        },
    ]
    steps = zero_rename_phases(records, 10.0, {"setup": 0.5, "tasks": 2.5})
    assert steps["to_setup"] == 0.3 and steps["setup_fresh"] == 0.0
    assert steps["to_commit"] == 0.2 and steps["commit_fresh"] == 1.0
    assert steps["task_encode"] == 1.4
