"""Materialize one day of the Dagster asset, end to end, on an embedded S3 server and local Spark.

    python -m demo.dagster_asset [--date 2024-01-01] [--rows 1000] [--defs PATH]
                                 [--table-format none|iceberg|delta]

``make demo-dagster`` runs it. It starts SeaweedFS on loopback, loads
``dagster_defs/definitions.py``, materializes ``daily_events`` for one day in
process (to ``s3://warehouse/dagster_daily_events``), then prints the asset's
metadata, its checks, and the committed partitions with their row counts, as
``make demo`` does for Airflow. With ``--table-format``
the day is also published as one commit of that format and read back through
the format's own reader, the metadata naming the table and its commit.
Everything it started is stopped and removed at the end.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from demo.common import (
    DAGSTER_DESTINATION,
    ICEBERG_HOME,
    REPOSITORY,
    daily_run,
    day_parser,
    print_committed,
    print_table,
)

SHOWN = (
    "job_id",
    "state",
    "files",
    "rows",
    "bytes",
    "partitions",
    "s3_requests",
    "success_file",
    "dagster/row_count",
    "dagster/partition_row_count",
    "seconds",
    "stage_seconds",
    "commit_seconds",
    "table_format",
    "table",
    "table_commit",
)


def main(argv: list[str] | None = None) -> int:
    parser = day_parser(__doc__)
    parser.add_argument(
        "--defs",
        type=Path,
        default=REPOSITORY / "dagster_defs" / "definitions.py",
        help="the definitions file (default: the repository's dagster_defs/definitions.py)",
    )
    args = parser.parse_args(argv)
    if not args.defs.is_file():
        parser.error(f"no {args.defs}")
    warnings.simplefilter("ignore")  # Dagster's beta notices are not the demo's business
    with daily_run("dagster") as (home, server):
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # no usage reports
        os.environ.update(
            {
                "DAGSTER_HOME": str(home),
                "ZERO_RENAME_DAGSTER_DESTINATION": DAGSTER_DESTINATION,
                "ZERO_RENAME_DAGSTER_TABLE_FORMAT": args.table_format,
                ICEBERG_HOME: str(home / "iceberg"),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,
            }
        )
        print(
            f"S3 at {server.endpoint_url}; materializing daily_events for {args.date} "
            f"({args.rows} rows) with local Spark..."
        )
        started = time.monotonic()
        log = home / "materialize.log"
        with stderr_to(log):
            ok, metadata, checks = materialize(args.defs, str(args.date), args.rows)
        if not ok:
            print(f"the materialization failed; the end of its log:\n{tail(log)}")
        print(
            f"materialization {'succeeded' if ok else 'failed'} in "
            f"{time.monotonic() - started:.0f} s: "
            + ", ".join(f"{k}={metadata[k]}" for k in SHOWN if k in metadata)
        )
        print(
            "checks: "
            + ", ".join(f"{name} {'passed' if ok else 'failed'}" for name, ok in checks.items())
        )
        print_committed(DAGSTER_DESTINATION, server)
        print_table(DAGSTER_DESTINATION, server, args.table_format)
        return 0 if ok else 1


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """The process's standard error (file descriptor 2) into ``path`` meanwhile: the
    demo prints its own summary, as ``make demo`` does, and the JVM that local Spark
    starts writes its notices and progress bars there, not through Python."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log, for a failure."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def materialize(
    defs_path: Path, day: str, rows: int
) -> tuple[bool, dict[str, object], dict[str, bool]]:
    """The asset's job for one day: success, the materialization's metadata, and
    whether each of the asset's checks passed."""
    from dagster import DagsterInstance

    defs = runpy.run_path(str(defs_path))["defs"]
    job = defs.resolve_job_def("daily_events_job")
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            partition_key=day,
            instance=instance,
            raise_on_error=False,
            run_config={
                "ops": {"daily_events": {"config": {"frame_options": {"rows": rows}}}},
                # Dagster's event lines (DEBUG by default) would bury the summary.
                "loggers": {"console": {"config": {"log_level": "ERROR"}}},
            },
        )
        found = [m for m in result.asset_materializations_for_node("daily_events")]
        checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    metadata = {k: getattr(v, "value", v) for k, v in (found[-1].metadata if found else {}).items()}
    return result.success, metadata, checks


if __name__ == "__main__":
    sys.exit(main())
