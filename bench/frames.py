"""The DataFrame every Spark benchmark writes: deterministic rows, as Spark SQL.

Shared by the PySpark write benchmark (:mod:`bench.spark_bench`) and the peers'
(:mod:`bench.peers`), so that both write the same rows. Light: no Spark import.
"""

from __future__ import annotations

COLUMNS = ("id", "dt", "region", "amount", "event_time", "payload")
FIRST_DAY = "2024-01-01"


def frame_sql(rows: int, days: int, tasks: int, start: int = 0) -> str:
    """``rows`` rows (ids from ``start``) over ``days`` days from :data:`FIRST_DAY`,
    in ``tasks`` Spark partitions, every one holding rows of every day. ``payload``
    (SHA-512 hex) keeps the Parquet about as large as the data: random bytes, which
    the store cannot compress away."""
    return f"""
        select id,
               date_add(date'{FIRST_DAY}', cast(id % {days} as int)) as dt,
               element_at(array('eu-west', 'eu-central', 'us-east', 'us-west', 'ap-south'),
                          cast(pmod(hash(id), 5) as int) + 1) as region,
               pmod(hash(id, 7), 1000000) / 100.0 as amount,
               timestamp_seconds(1704067200 + id % 86400) as event_time,
               sha2(cast(id as string), 512) as payload
        from range({start}, {start + rows}, 1, {tasks})"""
