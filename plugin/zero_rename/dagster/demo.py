"""Materialize one day of the Dagster asset, end to end, on an embedded S3 server and local Spark.

    python -m zero_rename.dagster.demo [--date 2024-01-01] [--rows 1000] [--defs PATH]

Starts SeaweedFS on loopback, loads ``dagster_defs/definitions.py``,
materializes ``daily_events`` for one day in process, then prints the asset's
metadata and the committed partitions with their row counts, as ``make demo``
does for Airflow. Everything it started is stopped and removed at the end.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import sys
import tempfile
import time
import warnings
from datetime import date
from pathlib import Path

from zero_rename.embedded_s3 import EmbeddedS3

BUCKET = "warehouse"
DESTINATION = f"s3://{BUCKET}/daily_events"
SHOWN = ("job_id", "state", "files", "rows", "bytes", "partitions", "s3_requests",
         "success_file", "stage_seconds", "commit_seconds")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", type=date.fromisoformat, default=date(2024, 1, 1))
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--defs", type=Path, default=Path("dagster_defs/definitions.py"),
                        help="the definitions file (default: ./dagster_defs/definitions.py)")
    args = parser.parse_args(argv)
    if not args.defs.is_file():
        parser.error(f"no {args.defs}; run from the repository root or pass --defs")
    warnings.simplefilter("ignore")  # Dagster's beta notices are not the demo's business
    home = Path(tempfile.mkdtemp(prefix="zero-rename-dagster-demo-"))
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # no usage reports
    try:
        with EmbeddedS3(buckets=(BUCKET,)) as server:
            os.environ.update({**server.environment(), "DAGSTER_HOME": str(home),
                               "ZERO_RENAME_DAGSTER_DESTINATION": DESTINATION,
                               "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
            print(f"S3 at {server.endpoint_url}; materializing daily_events for {args.date} "
                  f"({args.rows} rows) with local Spark...")
            started = time.monotonic()
            ok, metadata = materialize(args.defs, str(args.date), args.rows)
            print(f"materialization {'succeeded' if ok else 'failed'} in "
                  f"{time.monotonic() - started:.0f} s: "
                  + ", ".join(f"{k}={metadata[k]}" for k in SHOWN if k in metadata))
            from zero_rename.core.store import StoreConfig
            from zero_rename.demo_report import committed_report

            print("\n".join(committed_report(DESTINATION,
                                             StoreConfig(endpoint_url=server.endpoint_url))))
            return 0 if ok else 1
    finally:
        shutil.rmtree(home, ignore_errors=True)


def materialize(defs_path: Path, day: str, rows: int) -> tuple[bool, dict[str, object]]:
    from dagster import DagsterInstance

    defs = runpy.run_path(str(defs_path))["defs"]
    job = defs.resolve_job_def("daily_events_job")
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            partition_key=day, instance=instance, raise_on_error=False,
            run_config={"ops": {"daily_events": {"config": {"rows": rows}}}})
        found = [m for m in result.asset_materializations_for_node("daily_events")]
    metadata = {k: getattr(v, "value", v) for k, v in (found[-1].metadata if found else {}).items()}
    return result.success, metadata


if __name__ == "__main__":
    sys.exit(main())
