"""Daily partitioned write: one day's partition, committed without renames.

    setup_job ──> stage ──> validate ──> resolve_conflicts ──> commit ──┐
        │           └───────────┴──────────────┴────────> abort_job ──┴──> cleanup_job
        └───────────────────────────────────────────────────────────────────────┘ (teardown)

With ``[zero_rename] daily_table_format = iceberg`` (or ``delta``) each committed
day is also published as one commit of that table format, inside ``commit``:
readers of the Iceberg table (``daily_iceberg_catalog``, ``daily_iceberg_table``)
or of the Delta table at the destination see a day whole or not at all. Off
(``none``) by default.

With ``[zero_rename] daily_validate_output = True`` a ``validate_output`` task
follows ``commit`` (before ``cleanup_job``): the output check of the committed
files against ``_SUCCESS``. Its failure fails the run but aborts nothing: the
job stays committed.

The Spark application writes the day's partition (``dt=<day>``) as pending
multipart uploads and saves the job's stage manifest; nothing is visible until
``commit``. Conflict mode ``replace`` swaps the partition's old files for the
new ones at commit, so a re-run or a backfill of a day leaves exactly one copy.
If a step fails for good, ``abort_job`` aborts every upload of the job and
fails the run on purpose, so that the run's colour tells the truth; the
``cleanup_job`` teardown always runs after it.

Scheduled runs are partitioned (``CronPartitionTimetable``): the run at 01:00
UTC writes the day before, named by the run's partition key. A manual run
writes ``params.date``, or the day of its logical date (or of its trigger). The commit emits an
event for the destination's asset with the committed partitions as partition
keys, so downstream DAGs run on committed data only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, CronPartitionTimetable, Param, chain, conf

from zero_rename.airflow.operators import (
    AbortJobOperator,
    CleanupJobOperator,
    CommitJobOperator,
    CommitJobSetupOperator,
    ResolvePartitionConflictsOperator,
    ValidateOutputOperator,
    ValidateTaskManifestsOperator,
)
from zero_rename.airflow.spark import SparkStageSubmitOperator
from zero_rename.core import table_formats

DESTINATION = conf.get("zero_rename", "daily_destination", fallback="s3://warehouse/daily_events")
APPLICATION = conf.get("zero_rename", "daily_application", fallback="") or str(
    Path(__file__).parent / "apps" / "daily_partitioned_write.py"
)
AWS_CONN_ID = conf.get("zero_rename", "aws_conn_id", fallback="aws_default")
SPARK_CONN_ID = conf.get("zero_rename", "spark_conn_id", fallback="spark_default")
# The output check after the commit: off by default, it lists the day's partition.
VALIDATE_OUTPUT = conf.getboolean("zero_rename", "daily_validate_output", fallback=False)
# The options the application's writer uses: setup records them, and the
# writer's own setup must find the same. Two runs of one day (a rerun racing
# a backfill) are serialized by the job commit's partition claim: the second
# commit waits for the first, then replaces its files.
OPTIONS = {"partition_columns": "dt", "conflict_mode": "replace", "on_conflict": "wait"}
# Publish each committed day to a table format (none, iceberg, delta): an option
# of the job's setup, which the writer takes from the job record; each format's
# own options (daily_iceberg_catalog...) as the formats' registry declares them.
TABLE_OPTIONS = {
    "table_format": conf.get("zero_rename", "daily_table_format", fallback="none") or "none",
    **{
        name: conf.get("zero_rename", f"daily_{name}", fallback="")
        for plugin in table_formats().values()
        for name in plugin.option_help
    },
}
if TABLE_OPTIONS["table_format"] != "none":
    OPTIONS.update({k: v for k, v in TABLE_OPTIONS.items() if v})

# A manual run may have no logical date: then the day it was triggered for.
DAY = (
    "{{ params.date or partition_key"
    " or (dag_run.logical_date or dag_run.run_after).strftime('%Y-%m-%d') }}"
)
JOB_ID = "{{ ti.xcom_pull(task_ids='setup_job') }}"
daily_events = Asset(DESTINATION)
common = {"destination": DESTINATION, "aws_conn_id": AWS_CONN_ID}

with DAG(
    dag_id="daily_partitioned_write",
    description="Writes one day's partition through Spark and commits it without renames",
    schedule=CronPartitionTimetable(
        "0 1 * * *", timezone="UTC", run_offset=-1, key_format="%Y-%m-%d"
    ),
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    params={
        "date": Param(
            None,
            type=["null", "string"],
            format="date",
            description="Day to write (YYYY-MM-DD); default: the run's partition",
        ),
        "rows": Param(1000, type="integer", minimum=1, description="Rows to generate"),
        "input": Param("", type="string", description="Input path instead of generated rows"),
        "options": Param(
            {},
            type="object",
            description='Writer options, e.g. {"compression": "zstd", '
            '"max_rows_per_file": 1000000}',
        ),
    },
    tags=["zero-rename"],
    doc_md=__doc__,
) as dag:
    setup = CommitJobSetupOperator(task_id="setup_job", options=OPTIONS, **common)
    stage = SparkStageSubmitOperator(
        task_id="stage",
        application=APPLICATION,
        conn_id=SPARK_CONN_ID,
        name="daily_partitioned_write",
        application_args=[
            "--date",
            DAY,
            "--rows",
            "{{ params.rows }}",
            "{{ '--input=' ~ params.input if params.input else '' }}",
        ],
        options="{{ params.options | tojson }}",
        job_id=JOB_ID,
        # A retry is for a worker that died under the stage: it reattaches to the
        # application, or fences it off and writes the run's next job. An
        # application that failed is not submitted again (Spark retries its own
        # tasks, and a failed write aborts its job): clear the run for a new job.
        retries=1,
        **common,
    )
    validate = ValidateTaskManifestsOperator(task_id="validate", job_id=JOB_ID, **common)
    resolve = ResolvePartitionConflictsOperator(
        task_id="resolve_conflicts", job_id=JOB_ID, **common
    )
    commit = CommitJobOperator(
        task_id="commit", job_id=JOB_ID, asset=daily_events, retries=3, **common
    )
    # Hangs under the steps, never directly under the setup task: Airflow
    # refuses a one_failed task right below a setup.
    abort = AbortJobOperator(task_id="abort_job", job_id=JOB_ID, **common)
    cleanup = CleanupJobOperator(task_id="cleanup_job", job_id=JOB_ID, **common)

    chain(setup, stage, validate, resolve, commit)
    [stage, validate, resolve, commit] >> abort
    last = [commit, abort]
    if VALIDATE_OUTPUT:
        # Downstream of the commit only: a committed job is never aborted.
        check = ValidateOutputOperator(task_id="validate_output", job_id=JOB_ID, **common)
        commit >> check
        last.append(check)
    last >> cleanup.as_teardown(setups=setup)
