"""Downstream of the daily write: one run per committed day, on that day's committed files.

    report

Scheduled on the partitions of the destination's asset: the commit of
``daily_partitioned_write`` emits one asset event per committed partition,
keyed by the day (``2026-11-21``, the key the daily schedule gives its runs),
and the scheduler creates a run of this DAG with the same partition key. It
runs only after a job committed, never on a partial day: the report reads the
committed state (files of jobs in progress, aborted or replaced are not in
it). A manual run reports ``params.date``.

Replace the report with the real downstream work; to read the day's rows, use
``zero_rename.read_table(destination, filters=[("dt", "=", day)])`` or
``spark.read.format("zero-rename")``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, Param, PartitionedAssetTimetable, conf, task

from zero_rename.airflow.hooks import ZeroRenameHook

DESTINATION = conf.get("zero_rename", "daily_destination", fallback="s3://warehouse/daily_events")
AWS_CONN_ID = conf.get("zero_rename", "aws_conn_id", fallback="aws_default")
log = logging.getLogger(__name__)

with DAG(
    dag_id="daily_partition_report",
    description="Reports each day daily_partitioned_write committed, once it is committed",
    schedule=PartitionedAssetTimetable(assets=Asset(DESTINATION)),
    start_date=datetime(2024, 1, 1),
    catchup=False,
    params={
        "date": Param(
            None,
            type=["null", "string"],
            format="date",
            description="Day to report (YYYY-MM-DD); default: the run's partition",
        )
    },
    tags=["zero-rename"],
    doc_md=__doc__,
) as dag:

    @task
    def report(params: dict[str, Any], partition_key: str | None = None) -> dict[str, Any]:
        day = params.get("date") or partition_key
        if not day:
            raise ValueError("no day to report: the run has no partition key and no params.date")
        snapshot = ZeroRenameHook(aws_conn_id=AWS_CONN_ID).committer(DESTINATION).snapshot()
        files = [f for f in snapshot.files if dict(f.partition).get("dt") == day]
        if not files:
            raise ValueError(f"{DESTINATION} has no committed files for dt={day}")
        summary = {
            "day": day,
            "files": len(files),
            "bytes": sum(f.size for f in files),
            "jobs": sorted({f.job_id for f in files if f.job_id}),
        }
        log.info(
            "dt=%s: %d committed file(s), %d bytes, by job(s) %s",
            day,
            summary["files"],
            summary["bytes"],
            ", ".join(summary["jobs"]) or "-",
        )
        return summary

    report()
