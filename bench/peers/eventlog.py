"""Where a Spark write's time went, read from Spark's own event log.

Every method writes through Spark, so Spark's event log (``spark.eventLog``,
one JSON event a line) times them all the same way: the SQL executions the
write ran, their jobs, the tasks of those jobs and the SQL metrics the writers
report. A write's timeline, between the driver's call and its return:

- ``setup``: from the call to the start of the first job whose tasks wrote
  rows (planning, the committer's job setup, a Python data source's
  ``writer()``, a table format's read of its table);
- ``tasks``: from that job's start to the end of the last job that wrote rows;
- ``commit``: from there to the return (the committer's job commit, a table
  format's commit, Spark's bookkeeping after it);
- ``job_commit``: the committer's own ``commitJob``, where Spark times it
  apart (the ``job commit time`` metric of its file writer, which every file
  source, the S3A, manifest and FileOutputCommitter committers and Delta's
  writer go through);
- ``task_commit``: the tasks' commits, summed over tasks (the same writer's
  ``task commit time``).

Light: the orchestrator and the drivers both read it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SQL_START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
SQL_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
SQL_ACCUMS = "org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates"
ADAPTIVE_UPDATE = "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate"
# SQL metrics of Spark's file writer (BasicWriteJobStatsTracker), in ms.
JOB_COMMIT_TIME = "job commit time"
TASK_COMMIT_TIME = "task commit time"


@dataclass
class Job:
    job_id: int
    start: float  # seconds since the epoch
    end: float = 0.0
    execution: int | None = None
    stages: tuple[int, ...] = ()
    tasks: int = 0
    records_written: int = 0
    bytes_written: int = 0
    run_seconds: float = 0.0  # executor run time, summed over tasks
    cpu_seconds: float = 0.0  # executor CPU time (the JVM's threads), summed over tasks
    gc_seconds: float = 0.0
    task_commit_seconds: float = 0.0
    first_launch: float = 0.0
    last_finish: float = 0.0


@dataclass
class Execution:
    execution_id: int
    start: float
    end: float = 0.0
    description: str = ""
    metric_names: dict[int, str] = field(default_factory=dict)  # accumulator id -> name
    metrics: Counter[str] = field(default_factory=Counter)  # driver-side metric values


@dataclass
class EventLog:
    executions: dict[int, Execution] = field(default_factory=dict)
    jobs: dict[int, Job] = field(default_factory=dict)

    def within(self, start: float, end: float) -> tuple[list[Execution], list[Job]]:
        """The executions and jobs that started within ``[start, end]``."""
        executions = [e for e in self.executions.values() if start <= e.start <= end]
        jobs = [j for j in self.jobs.values() if start <= j.start <= end]
        return executions, jobs


def _plan_metrics(plan: dict[str, Any]) -> Iterator[tuple[int, str]]:
    for metric in plan.get("metrics", []):
        yield metric["accumulatorId"], metric["name"]
    for child in plan.get("children", []):
        yield from _plan_metrics(child)


def _events(path: Path) -> Iterator[dict[str, Any]]:
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    for file in files:
        if file.name.startswith("."):
            continue
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def read(path: Path) -> EventLog:
    """The executions and jobs of an uncompressed event log (a file, or the
    directory Spark wrote it into)."""
    log = EventLog()
    stage_job: dict[int, Job] = {}
    for event in _events(path):
        if event["Event"].startswith("org.apache.spark.sql."):
            _sql_event(log, event)
        else:
            _job_event(log, stage_job, event)
    return log


def _sql_event(log: EventLog, event: dict[str, Any]) -> None:
    """An SQL execution's start, end, plan update or driver-side metrics."""
    kind = event["Event"]
    if kind == SQL_START:
        execution = Execution(
            event["executionId"], event["time"] / 1000, description=event.get("description", "")
        )
        execution.metric_names.update(_plan_metrics(event.get("sparkPlanInfo", {})))
        log.executions[execution.execution_id] = execution
        return
    execution = log.executions.get(event.get("executionId", -1))
    if execution is None:
        return
    if kind == ADAPTIVE_UPDATE:
        execution.metric_names.update(_plan_metrics(event.get("sparkPlanInfo", {})))
    elif kind == SQL_END:
        execution.end = event["time"] / 1000
    elif kind == SQL_ACCUMS:
        for accumulator, value in event["accumUpdates"]:
            name = execution.metric_names.get(accumulator)
            if name:
                execution.metrics[name] += value


def _job_event(log: EventLog, stage_job: dict[int, Job], event: dict[str, Any]) -> None:
    """A job's start or end, or a task's end (added to its job)."""
    kind = event["Event"]
    if kind == "SparkListenerJobStart":
        execution = event.get("Properties", {}).get("spark.sql.execution.id")
        job = Job(
            event["Job ID"],
            event["Submission Time"] / 1000,
            execution=int(execution) if execution is not None else None,
            stages=tuple(event.get("Stage IDs", ())),
        )
        log.jobs[job.job_id] = job
        for stage in job.stages:
            stage_job[stage] = job
    elif kind == "SparkListenerJobEnd" and event["Job ID"] in log.jobs:
        log.jobs[event["Job ID"]].end = event["Completion Time"] / 1000
    elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_job:
        _add_task(stage_job[event["Stage ID"]], event)


def _add_task(job: Job, event: dict[str, Any]) -> None:
    info = event.get("Task Info", {})
    metrics = event.get("Task Metrics") or {}
    job.tasks += 1
    launch, finish = info.get("Launch Time", 0) / 1000, info.get("Finish Time", 0) / 1000
    job.first_launch = min(job.first_launch or launch, launch)
    job.last_finish = max(job.last_finish, finish)
    job.run_seconds += metrics.get("Executor Run Time", 0) / 1000
    job.cpu_seconds += metrics.get("Executor CPU Time", 0) / 1e9
    job.gc_seconds += metrics.get("JVM GC Time", 0) / 1000
    output = metrics.get("Output Metrics") or {}
    job.records_written += output.get("Records Written", 0)
    job.bytes_written += output.get("Bytes Written", 0)
    for accumulable in info.get("Accumulables", ()):
        if accumulable.get("Name") == TASK_COMMIT_TIME:
            job.task_commit_seconds += float(accumulable.get("Update", 0)) / 1000


def write_jobs(jobs: Iterable[Job]) -> list[Job]:
    """The jobs whose tasks wrote the rows: those that wrote records, or, where
    no job reports any (a writer that keeps no output metrics), the one with
    the most tasks."""
    jobs = list(jobs)
    writing = [j for j in jobs if j.records_written]
    if writing or not jobs:
        return writing
    most = max(j.tasks for j in jobs)
    return [j for j in jobs if j.tasks == most][:1]


def timeline(log: EventLog, call: float, returned: float) -> dict[str, float]:
    """The write's phases in seconds (see the module's documentation), and its
    jobs and tasks: ``jobs``, ``other_jobs`` (jobs that wrote no rows: a table
    format reading its log, say), ``tasks_run`` and ``tasks_cpu`` (the JVM's
    executor time over the writing tasks), ``gc``."""
    executions, jobs = log.within(call, returned)
    writing = write_jobs(jobs)
    if not writing:
        return {}
    first, last = min(j.start for j in writing), max(j.end for j in writing)
    phases = {
        "setup": first - call,
        "tasks": last - first,
        "commit": returned - last,
        "jobs": float(len(jobs)),
        "other_jobs": float(len(jobs) - len(writing)),
        "other_jobs_seconds": sum(j.end - j.start for j in jobs if j not in writing),
        "task_count": float(sum(j.tasks for j in writing)),
        "tasks_run": sum(j.run_seconds for j in writing),
        "tasks_cpu": sum(j.cpu_seconds for j in writing),
        "gc": sum(j.gc_seconds for j in writing),
        "records_written": float(sum(j.records_written for j in writing)),
    }
    commit_ms = sum(e.metrics.get(JOB_COMMIT_TIME, 0) for e in executions)
    if any(JOB_COMMIT_TIME in e.metric_names.values() for e in executions):
        phases["job_commit"] = commit_ms / 1000
        phases["task_commit"] = sum(j.task_commit_seconds for j in writing)
    ends = [e.end for e in executions if e.end]
    if ends:
        phases["last_execution_end"] = max(ends) - last
    return {k: round(v, 3) for k, v in phases.items()}
