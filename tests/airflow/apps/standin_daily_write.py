"""A stand-in for dags/apps/daily_partitioned_write.py with the same command line.

Writes the day's partition through the core directly (no Spark session), in
two task attempts, and saves the stage manifest: what the real application's
driver does in orchestrated mode. ``--fail-after-write`` leaves the uploads
pending and exits non-zero, as a driver killed before its abort would.
"""

from __future__ import annotations

import argparse
import io
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from zero_rename.core.committer import Committer
from zero_rename.core.store import StoreConfig


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--destination", required=True)
    parser.add_argument("--date", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--input", default="")
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--fail-after-write", action="store_true")
    args = parser.parse_args()
    if args.input and not os.path.exists(args.input):
        print(f"input {args.input} does not exist", file=sys.stderr)
        return 2
    options = dict(o.split("=", 1) for o in args.option)
    endpoint = options.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
    committer = Committer(args.destination, StoreConfig(endpoint_url=endpoint))
    job = committer.job(args.job_id)
    manifests = []
    for task, count in enumerate((args.rows // 2, args.rows - args.rows // 2)):
        table = pa.table({"id": list(range(count)), "value": [f"row-{i}" for i in range(count)]})
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        attempt = committer.task_attempt(job, f"{task:05d}")
        with attempt.open({"dt": args.date}) as out:
            out.write(buffer.getvalue())
            out.rows = count
        manifests.append(attempt.commit(publish=False))
    if args.fail_after_write:
        print("failing after the write, leaving the uploads pending", file=sys.stderr)
        return 3
    committer.save_stage_manifest(args.job_id, manifests, engine="stand-in")
    return 0


if __name__ == "__main__":
    sys.exit(main())
