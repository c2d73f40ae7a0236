"""Dagster definitions: the daily partitioned write, as a component's asset or step by step.

    dagster dev -f dagster_defs/definitions.py          (from the repository's root)
    dagster-webserver -h 127.0.0.1 -p 3000 -f dagster_defs/definitions.py
    dg dev                                               (dg.toml names this project)

- ``daily_events``: a daily partitioned asset, declared in
  ``dagster_defs/defs/daily_events/defs.yaml`` with the package's component
  (``zero_rename.dagster.DailyPartitionedAssetComponent``). Materializing a day
  writes it through the ``zero-rename`` Spark format and commits it (conflict
  mode ``replace``: a re-run leaves one copy of the day), with the job's
  metadata and Dagster's standard keys; its checks ``manifests_valid`` and
  ``output_valid`` are blocking. ``daily_events_job`` and its schedule (01:00
  UTC, the day before) run it.
- ``daily_events_steps``: the same write as one op per protocol step (setup,
  stage, validate, resolve_conflicts, commit, cleanup_job), for those who want
  the steps one by one in the run view; a step that fails for good aborts the job.
- ``manual_abort_job``: aborts and cleans up a job given in the run config.
- ``zero_rename_stale_jobs``: a sensor naming jobs left in setup (stopped by default).

Settings come from the environment: ``ZERO_RENAME_DAGSTER_DESTINATION``
(default ``s3://warehouse/dagster_daily_events``, a table of its own beside the
Airflow DAG's ``daily_events``), ``ZERO_RENAME_SPARK_MASTER`` (``local[2]``),
and boto3's own ``AWS_*`` variables for the store and credentials.
``ZERO_RENAME_DAGSTER_TABLE_FORMAT`` (``none`` by default, ``iceberg`` or
``delta``) publishes each committed day as one commit of that table format,
with ``ZERO_RENAME_DAGSTER_ICEBERG_CATALOG`` and ``..._ICEBERG_TABLE`` naming the
Iceberg catalog and table (default: the embedded catalog, a name from the
destination); the materialization's metadata then names the table and its commit.
"""

import datetime
import os
import sys
from pathlib import Path

from dagster import Definitions, OpExecutionContext, load_from_defs_folder
from dagster_pyspark import PySparkResource

from zero_rename.core import table_formats
from zero_rename.dagster import (
    JobRef,
    ZeroRenameResource,
    commit_lifecycle_job,
    manual_abort_job,
    stage_op,
    stale_jobs_sensor,
)
from zero_rename.spark.sample import daily_rows

# The component's asset, its checks, job and schedule, from the defs folder beside this
# file; the rest joins them below (one Definitions object at module scope: `defs`).
defs = load_from_defs_folder(path_within_project=Path(__file__).parent)
daily_events = defs.resolve_assets_def("daily_events")
# The steps job writes where the asset does (defs.yaml decides), with the same options.
DESTINATION = str(daily_events.specs_by_key[daily_events.key].metadata["dagster/uri"])
OPTIONS = {"partition_columns": "dt", "conflict_mode": "replace", "on_conflict": "wait"}
TABLE_FORMAT = os.environ.get("ZERO_RENAME_DAGSTER_TABLE_FORMAT") or "none"
if TABLE_FORMAT != "none":
    OPTIONS["table_format"] = TABLE_FORMAT
    # Each format's own options, as the formats' registry declares them.
    for option in (n for p in table_formats().values() for n in p.option_help):
        if value := os.environ.get(f"ZERO_RENAME_DAGSTER_{option.upper()}"):
            OPTIONS[option] = value
ROWS = 1000


def stage_day(context: OpExecutionContext, job: JobRef, options: dict[str, str]) -> None:
    """One day's rows through the zero-rename format, as the steps job's stage."""
    spark = context.resources.pyspark.spark_session
    df = daily_rows(spark, datetime.date.fromisoformat(context.partition_key), ROWS)
    df.write.format("zero-rename").options(**options).mode("append").save(DESTINATION)


daily_events_steps = commit_lifecycle_job(
    "daily_events_steps",
    DESTINATION,
    stage_op(stage_day, required_resource_keys={"pyspark"}),
    options=OPTIONS,
    partitions_def=daily_events.partitions_def,
    description="The daily write, one op per step of the commit protocol",
)

defs = Definitions.merge(
    defs,
    Definitions(
        jobs=[daily_events_steps, manual_abort_job],
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
    ),
)
