"""The table commit alone, in CPU seconds: what a table format adds to a job commit.

For each format, a job of ``--files`` files is planned (its plan's shards in the store,
as a job commit leaves them), then the table commit is timed as the job commit makes it
after the completes: ``publish_table``, that is the format's ``find`` and ``publish``,
in this process, given the plan's last shard of uploads decoded as the completes leave
it (any other shard is read from the store), on a table an earlier one-file job created
(untimed). The files need not exist: neither format reads a file whose writer recorded
its rows, statistics and schema, and no upload is completed. What is reported is CPU
seconds of this process (every thread), which a shared machine moves less than wall
seconds, the wall seconds, and the requests sent through botocore (PyIceberg's own
writes are not counted here; the benchmark's ``--wire`` counts them).

The task manifests are what the benchmark's Parquet files leave
(``bench.commit_bench``'s ``table_files``: 10 rows of an int64 and a string column, with
their footer's statistics), handed to the committer's ``validate`` step as Spark's driver
hands them, which writes the plan, uploads not checked (none exists). ``--profile N`` prints
the N costliest functions of the last run by cumulative time (that run with PyIceberg's
thread pool run inline, so that the profile sees its manifest writers).

Run ``python -m bench.table_probe --files 10000 --formats iceberg,delta``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import inspect
import io
import logging
import os
import pstats
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.commit_bench import TableFiles, table_files, task_sizes
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import data_file_name
from zero_rename.core.data.model import JobRecord, Part, PendingUpload, TaskManifest
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import planning
from zero_rename.core.protocol.formats import publish_table
from zero_rename.core.protocol.planning import load_plan
from zero_rename.core.s3.client import StoreConfig
from zero_rename.embedded_s3 import EmbeddedS3


@dataclass(frozen=True)
class Timing:
    format: str
    files: int
    cpu: float
    wall: float
    requests: int
    table_id: str


def manifests(
    committer: Committer, job: JobRecord, files: int, table: TableFiles
) -> list[TaskManifest]:
    """Task manifests of ``files`` files, 10 a task, with the files' rows, statistics
    and schema; their uploads are named, never made."""
    etag = '"' + hashlib.md5(table.body).hexdigest() + '"'
    made = []
    for index, count in enumerate(task_sizes(files, 10)):
        task_id = f"{index:05d}"
        uploads = tuple(
            PendingUpload(
                key=committer.dest.dir + data_file_name(task_id, job.job_id, seq, ".parquet"),
                upload_id=f"probe-{job.job_id}-{task_id}-{seq}",
                parts=(Part(number=1, etag=etag, size=len(table.body)),),
                bytes=len(table.body),
                rows=10,
                stats=table.stats,
            )
            for seq in range(count)
        )
        made.append(
            TaskManifest(
                job_id=job.job_id,
                task_id=task_id,
                attempt=0,
                task_attempt_id=f"attempt_{job.job_id}_{task_id}_0",
                committer=job.options.committer,
                uploads=uploads,
                table_schema=table.schema,
            )
        )
    return made


def planned_job(
    committer: Committer, table_format: str, files: int, table: TableFiles
) -> tuple[JobContext, JobRecord]:
    """A job set up for ``table_format`` whose plan of ``files`` files is in the store."""
    options = {
        "committer": "magic",
        "table_format": table_format,
        "conflict_mode": "append",
        "verify_uploads": False,
    }
    job = committer.setup_job(options, table_schema=table.schema)
    committer.validate(job.job_id, manifests(committer, job, files, table))
    return JobContext(committer.store, committer.dest), committer.job(job.job_id)


class _Inline:
    """An executor that runs what it is given at once, in the caller's thread."""

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        return iter([fn(*args) for args in zip(*iterables, strict=False)])


@contextmanager
def inline_pyiceberg() -> Iterator[None]:
    """PyIceberg's thread pool replaced by :class:`_Inline`, so that a profile of this
    thread sees its manifest writers (cProfile follows one thread)."""
    from pyiceberg.utils.concurrent import ExecutorFactory

    saved = ExecutorFactory.get_or_create
    ExecutorFactory.get_or_create = staticmethod(lambda: _Inline())  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        ExecutorFactory.get_or_create = saved  # type: ignore[method-assign]


def table_commit(
    ctx: JobContext, record: JobRecord, profile: cProfile.Profile | None = None
) -> tuple[float, float, str]:
    """``publish_table`` on the job's plan, read from the store; (CPU, wall, table id)."""
    assert record.prepared_plan is not None
    plan = load_plan(ctx, record.job_id, record.prepared_plan, record.prepared_plan_digest)
    # What the job commit hands the table commit: the last shard the completes decoded.
    kept: dict[str, Any] = {}
    if "decoded" in inspect.signature(publish_table).parameters and plan.upload_shards:
        number = plan.upload_shards - 1
        kept["decoded"] = (number, planning.upload_shard(ctx, plan, number))
    cpu, wall = time.process_time(), time.perf_counter()
    if profile is None:
        published = publish_table(ctx, record, plan, **kept)
    else:
        with inline_pyiceberg():
            profile.enable()
            published = publish_table(ctx, record, plan, **kept)
            profile.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert published is not None and published.files == plan.files, published
    return cpu, wall, published.id


def probe(
    endpoint: str, bucket: str, table_format: str, files: int, repeat: int, profile: int
) -> list[Timing]:
    table = table_files()
    committer = Committer(
        f"s3://{bucket}/{table_format}-{uuid.uuid4().hex[:6]}", StoreConfig(endpoint_url=endpoint)
    )
    table_commit(*planned_job(committer, table_format, 1, table))  # creates the table
    timings = []
    for run in range(repeat):
        ctx, record = planned_job(committer, table_format, files, table)
        profiler = cProfile.Profile() if profile and run == repeat - 1 else None
        before = ctx.store.stats.total_requests
        cpu, wall, table_id = table_commit(ctx, record, profiler)
        requests = ctx.store.stats.total_requests - before
        timings.append(Timing(table_format, files, cpu, wall, requests, table_id))
        print(
            f"{table_format:>8} {files:>7} files: {cpu:6.2f} s CPU, {wall:6.2f} s wall, "
            f"{requests} botocore requests",
            file=sys.stderr,
            flush=True,
        )
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
            print(out.getvalue(), file=sys.stderr)
    return timings


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="files a job (default: 10000)")
    parser.add_argument("--formats", default="iceberg,delta", help="default: iceberg,delta")
    parser.add_argument("--repeat", type=int, default=3, help="timed jobs a format (default: 3)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="print the last run's N costliest functions",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg()[0]
    timings: list[Timing] = []
    with EmbeddedS3() as server, tempfile.TemporaryDirectory(prefix="probe-iceberg-") as home:
        os.environ.update({**server.environment(), "ZERO_RENAME_ICEBERG_HOME": home})
        bucket = f"probe-{uuid.uuid4().hex[:8]}"
        server.create_bucket(bucket)
        for table_format in args.formats.split(","):
            timings += probe(
                server.endpoint_url, bucket, table_format, args.files, args.repeat, args.profile
            )
    print(f"load average (1 minute): {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print("| format | files | runs | CPU s (median; min-max) | wall s (median) |")
    print("|---|---:|---:|---:|---:|")
    for table_format in args.formats.split(","):
        mine = [t for t in timings if t.format == table_format]
        cpu = sorted(t.cpu for t in mine)
        wall = sorted(t.wall for t in mine)
        print(
            f"| {table_format} | {args.files:,} | {len(mine)} | "
            f"{cpu[len(cpu) // 2]:.2f} ({cpu[0]:.2f}-{cpu[-1]:.2f}) | {wall[len(wall) // 2]:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
