"""Write one day's partition (``dt=<date>``) through the zero-rename format.

    spark-submit --master local[2] dags/apps/daily_partitioned_write.py \\
        --destination s3://bucket/table --date 2024-01-01 \\
        [--job-id UUID] [--rows N] [--input PATH_OR_URL] [--option key=value ...]

Without ``--input`` the day's rows are generated, deterministically for the
date: columns ``id``, ``region``, ``amount``, ``event_time`` and ``dt``. With
it, a Parquet file or directory is read: rows whose ``dt`` is another day are
dropped, and a ``dt`` column is added when the input has none.

The rows are written partitioned by ``dt`` with conflict mode ``replace``, so
a re-run or backfill of a day leaves one copy of it. With ``--job-id`` (an
orchestrator, Airflow, ran job setup) the write saves the job's stage manifest
and publishes nothing: the orchestrator validates and commits. Without it the
write commits the job itself.

Writer options pass through ``--option key=value`` (``endpoint``,
``committer``, ``part_size``, ``max_file_size``...); the S3 endpoint defaults to
``AWS_ENDPOINT_URL``. Credentials come from the environment, never from
arguments. Exit codes: 0 written, 1 the write failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("daily_partitioned_write")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# Fixed by this application: the partition layout and what a re-run does.
FIXED_OPTIONS = {"partition_by": "dt", "conflict_mode": "replace"}


class UsageError(Exception):
    pass


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--destination", required=True, help="s3://bucket/table (s3a:// too)")
    parser.add_argument("--date", required=True, type=_date, help="the day, YYYY-MM-DD")
    parser.add_argument(
        "--job-id", default=None, help="job set up by an orchestrator: save the stage manifest only"
    )
    parser.add_argument(
        "--rows",
        type=_positive,
        default=1000,
        help="rows to generate when there is no --input (default 1000)",
    )
    parser.add_argument("--input", default=None, help="Parquet file or directory to read")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="writer option of the zero-rename format; repeatable",
    )
    return parser.parse_args(argv)


def _date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def writer_options(args: argparse.Namespace) -> dict[str, str]:
    """The format's options: --option pairs, the fixed ones, the job id."""
    options: dict[str, str] = {}
    for pair in args.option:
        key, sep, value = pair.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise UsageError(f"--option {pair!r} must be key=value")
        if key in FIXED_OPTIONS or key in ("job_id", "path"):
            raise UsageError(
                f"--option {key} is fixed by this application (use --job-id and --destination)"
            )
        options[key] = value
    options.update(FIXED_OPTIONS)
    if args.job_id:
        options["job_id"] = args.job_id
    return options


def check_options(destination: str, options: dict[str, str]) -> None:
    """Parse the options as the writer will, before a Spark session is started."""
    from zero_rename.errors import ConfigError
    from zero_rename.spark.options import parse_writer_options

    try:
        parse_writer_options({**options, "path": destination}, overwrite=True)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def start_spark(day: datetime.date) -> Any:
    # Python workers must run this interpreter (pyarrow, zero_rename), unless
    # the submitter chose one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # No register(spark): Spark finds the format through the installed
    # pyspark_zero_rename module, as any application's session does.
    return (
        SparkSession.builder.appName(f"daily_partitioned_write {day}")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def generated_rows(spark: Any, day: datetime.date, rows: int) -> Any:
    """The day's synthetic rows: the same for the same date and count, every run."""
    from zero_rename.spark.sample import daily_rows

    return daily_rows(spark, day, rows)


def input_rows(spark: Any, url: str, day: datetime.date, endpoint: str | None = None) -> Any:
    """One day of a Parquet input; ``dt`` added when missing."""
    from pyspark.sql import functions as F

    df = read_parquet(spark, url, endpoint)
    if "dt" in df.columns:
        return df.where(F.col("dt").cast("date") == F.lit(day)).withColumn(
            "dt", F.col("dt").cast("date")
        )
    return df.withColumn("dt", F.lit(day))


def read_parquet(spark: Any, url: str, endpoint: str | None = None) -> Any:
    """Spark reads the input; an s3:// input without an S3A connector in the
    session is read with pyarrow on the driver (one day's data), from the same
    store the output goes to (the ``endpoint`` option, else AWS_ENDPOINT_URL)."""
    if url.startswith(("s3://", "s3a://")) and not has_s3a(spark):
        import pyarrow.dataset as pads

        from zero_rename.core.s3.client import StoreConfig
        from zero_rename.read import filesystem
        from zero_rename.spark.options import resolve_endpoint

        fs = filesystem(StoreConfig(endpoint_url=resolve_endpoint(endpoint)))
        table = pads.dataset(
            url.split("://", 1)[1], filesystem=fs, format="parquet", partitioning="hive"
        ).to_table()
        return spark.createDataFrame(table)
    return spark.read.parquet(url)


def has_s3a(spark: Any) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(  # noqa: SLF001
            "org.apache.hadoop.fs.s3a.S3AFileSystem"
        )
        return True
    except Exception:  # py4j raises the JVM's ClassNotFoundException
        return False


def report(args: argparse.Namespace, options: dict[str, str], seconds: float) -> dict[str, Any]:
    """What was written, read back from the job's own records."""
    from zero_rename.core.committer import Committer
    from zero_rename.spark.options import parse_writer_options

    config = parse_writer_options({**options, "path": args.destination}, overwrite=True)
    committer = Committer(config.destination, config.store)
    summary: dict[str, Any] = {
        "destination": config.destination.url,
        "date": str(args.date),
        "seconds": round(seconds, 3),
    }
    if args.job_id:
        manifests = committer.load_manifests(args.job_id)
        uploads = [u for m in manifests for u in m.uploads]
        summary.update(
            job_id=args.job_id,
            state="staged",
            tasks=len(manifests),
            files=len(uploads),
            rows=sum(u.rows or 0 for u in uploads),
        )
    else:
        success = committer.read_success()
        if success is not None:
            summary.update(
                job_id=success.job_id,
                state="committed",
                files=success.metrics.get("committer_files_committed", 0),
                rows=success.metrics.get("committer_rows_committed", 0),
            )
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    options = writer_options(args)
    check_options(args.destination, options)
    started = time.monotonic()
    spark = start_spark(args.date)
    try:
        df = (
            input_rows(spark, args.input, args.date, options.get("endpoint"))
            if args.input
            else generated_rows(spark, args.date, args.rows)
        )
        log.info(
            "writing %s for %s to %s%s",
            "input " + args.input if args.input else f"{args.rows} generated rows",
            args.date,
            args.destination,
            f" as job {args.job_id} (stage manifest only)" if args.job_id else "",
        )
        writer = df.write.format("zero-rename").mode("overwrite")
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save(args.destination)
    finally:
        spark.stop()
    return report(args, options, time.monotonic() - started)


def reason(exc: BaseException) -> str:
    """The line that says what failed: Spark wraps a writer's error in its Python
    traceback, whose last ``SomeError: message`` line is the writer's own."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Conflict): ", line)]
    if causes:
        return causes[-1]
    return lines[0] if lines else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    args = parse_args(argv)
    try:
        summary = run(args)
    except UsageError as exc:
        log.error("%s", exc)
        return EXIT_USAGE
    except Exception as exc:
        log.error("write of %s to %s failed: %s", args.date, args.destination, reason(exc))
        log.error("details of the failure", exc_info=True)
        return EXIT_FAILED
    log.info("written: %s", json.dumps(summary, sort_keys=True))
    print(json.dumps(summary, sort_keys=True))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
