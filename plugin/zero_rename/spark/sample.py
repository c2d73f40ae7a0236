"""The sample table the bundled pipelines write: one day of synthetic events.

Used by the Airflow DAG's Spark application and by the Dagster definitions, so
both orchestrators write the same rows for the same day.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REGIONS = ("eu-west", "eu-central", "us-east", "us-west", "ap-south")


def daily_rows(spark: SparkSession, day: datetime.date, rows: int) -> DataFrame:
    """The day's rows (``id``, ``region``, ``amount``, ``event_time``, ``dt``): the
    same for the same date and count, every run."""
    seed = day.toordinal()
    regions = ", ".join(f"'{r}'" for r in REGIONS)
    return spark.sql(f"""
        select id,
               element_at(array({regions}), cast(pmod(hash(id, {seed}), {len(REGIONS)})
                                                 as int) + 1) as region,
               cast(pmod(hash({seed}, id), 1000000) / 100.0 as decimal(12, 2)) as amount,
               timestamp_seconds(unix_timestamp(date'{day}') + cast(id * 86400 / {rows} as bigint))
                   as event_time,
               date'{day}' as dt
        from range({rows})""")
