"""Dagster definitions: the daily partitioned write, step by step or as one asset.

    dagster dev -f dagster_defs/definitions.py
    dagster-webserver -h 127.0.0.1 -p 3000 -f dagster_defs/definitions.py

- ``daily_events``: a daily partitioned asset. Materializing a day writes it
  through the ``zero-rename`` Spark format and commits it (conflict mode
  ``replace``: a re-run leaves one copy of the day), with the job's metadata.
  ``daily_events_job`` and its schedule (01:00 UTC, the day before) run it.
- ``daily_events_steps``: the same write as one op per protocol step (setup,
  stage, validate, resolve_conflicts, commit, cleanup_job), for those who want
  the steps one by one in the run view; a step that fails for good aborts the job.
- ``manual_abort_job``: aborts and cleans up a job given in the run config.
- ``zero_rename_stale_jobs``: a sensor naming jobs left in setup (stopped by default).

Settings come from the environment: ``ZERO_RENAME_DAGSTER_DESTINATION``
(default ``s3://warehouse/daily_events``), ``ZERO_RENAME_SPARK_MASTER``
(``local[2]``), and boto3's own ``AWS_*`` variables for the store and credentials.
``ZERO_RENAME_DAGSTER_TABLE_FORMAT`` (``none`` by default, ``iceberg`` or
``delta``) publishes each committed day as one commit of that table format,
with ``ZERO_RENAME_DAGSTER_ICEBERG_CATALOG`` and ``..._ICEBERG_TABLE`` naming the
Iceberg catalog and table (default: the embedded catalog, a name from the
destination); the materialization's metadata then names the table and its commit.
"""

import datetime
import os
import sys

from dagster import (
    AssetExecutionContext,
    Backoff,
    Config,
    DailyPartitionsDefinition,
    Definitions,
    OpExecutionContext,
    RetryPolicy,
    asset,
    build_schedule_from_partitioned_job,
    define_asset_job,
)
from dagster_pyspark import PySparkResource

from zero_rename.core import table_formats
from zero_rename.dagster import (
    JobRef,
    ZeroRenameResource,
    commit_lifecycle_job,
    commit_partition,
    manual_abort_job,
    stage_op,
    stale_jobs_sensor,
)
from zero_rename.spark.sample import daily_rows

DESTINATION = os.environ.get("ZERO_RENAME_DAGSTER_DESTINATION", "s3://warehouse/daily_events")
# The same job options as the Airflow DAG: a re-run of a day replaces it, and two
# runs of one day are serialized by the job commit's partition claim.
OPTIONS = {"partition_columns": "dt", "conflict_mode": "replace", "on_conflict": "wait"}
TABLE_FORMAT = os.environ.get("ZERO_RENAME_DAGSTER_TABLE_FORMAT") or "none"
if TABLE_FORMAT != "none":
    OPTIONS["table_format"] = TABLE_FORMAT
    # Each format's own options, as the formats' registry declares them.
    for option in (n for p in table_formats().values() for n in p.option_help):
        if value := os.environ.get(f"ZERO_RENAME_DAGSTER_{option.upper()}"):
            OPTIONS[option] = value
ROWS = 1000

daily = DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC")


class DayConfig(Config):
    rows: int = ROWS


def write_day(spark, day: str, rows: int, options: dict[str, str]) -> None:
    """One day's rows through the zero-rename format, as the orchestrated job's stage."""
    df = daily_rows(spark, datetime.date.fromisoformat(day), rows)
    df.write.format("zero-rename").options(**options).mode("append").save(DESTINATION)


@asset(
    partitions_def=daily,
    retry_policy=RetryPolicy(max_retries=2, delay=10, backoff=Backoff.EXPONENTIAL),
    group_name="zero_rename",
    kinds={"spark", "s3"},
)
def daily_events(
    context: AssetExecutionContext,
    config: DayConfig,
    zero_rename: ZeroRenameResource,
    pyspark: PySparkResource,
):
    """One day of events, committed without renames: all of the day or nothing."""
    day = context.partition_key
    return commit_partition(
        context,
        zero_rename,
        DESTINATION,
        OPTIONS,
        lambda options: write_day(pyspark.spark_session, day, config.rows, options),
    )


def stage_day(context: OpExecutionContext, job: JobRef, options: dict[str, str]) -> None:
    write_day(context.resources.pyspark.spark_session, context.partition_key, ROWS, options)


daily_events_job = define_asset_job(
    "daily_events_job", selection=[daily_events], partitions_def=daily
)
daily_events_steps = commit_lifecycle_job(
    "daily_events_steps",
    DESTINATION,
    stage_op(stage_day, required_resource_keys={"pyspark"}),
    options=OPTIONS,
    partitions_def=daily,
    description="The daily write, one op per step of the commit protocol",
)

defs = Definitions(
    assets=[daily_events],
    jobs=[daily_events_job, daily_events_steps, manual_abort_job],
    schedules=[build_schedule_from_partitioned_job(daily_events_job, hour_of_day=1)],
    sensors=[stale_jobs_sensor([DESTINATION])],
    resources={
        "zero_rename": ZeroRenameResource(),
        "pyspark": PySparkResource(
            spark_config={
                "spark.master": os.environ.get("ZERO_RENAME_SPARK_MASTER", "local[2]"),
                "spark.app.name": "zero-rename-dagster",
                "spark.ui.enabled": "false",
                "spark.sql.session.timeZone": "UTC",
                # Python workers run this interpreter, which has pyarrow and zero_rename.
                "spark.pyspark.python": sys.executable,
            }
        ),
    },
)
