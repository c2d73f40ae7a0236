"""PySpark write benchmark: one DataFrame written five ways, side by side.

The same cached DataFrame (about 1 GiB of Parquet in over 1,000 files, Hive
partitioned by day) is written by local Spark to the embedded S3 server:

- ``zero-rename-magic`` and ``zero-rename-staging``: through the
  ``zero-rename`` format, job setup, task attempts, job commit and all;
- ``direct``: the unsafe baseline with no commit protocol: each task writes
  its Parquet files (the same writer, the same layout) straight to their final
  keys, one PutObject per file under the part size, a multipart upload above;
- ``direct-source``: the same tasks inside a Python data source whose job
  setup and commit do nothing (:mod:`bench.direct_source`): what any Python
  data source costs a write, Spark's driver-side workers included;
- ``rename``: what a rename-based committer costs on S3: the tasks write the
  same way under a temporary prefix, then the driver lists it, copies every
  object to its final key and deletes it (CopyObject + DeleteObject per file:
  one rename per file; Hadoop's v1 committer renames twice).

A second, smaller DataFrame is a daily job's write: one day's partition of
10 files (``--daily-methods``), interleaved with the first in every round.
With ``--before TREE``, a zero-rename method named with ``@before`` runs the
code of that checkout (its ``plugin/``, first on the Python path of that
format's workers), so a change is measured against the code before it in
the same run.

For each: wall time of the write as the driver sees it, the peak memory of a
task (the largest peak RSS of the Python workers that ran the tasks, one
fresh worker per task), S3 requests per file, counted per HTTP request
sent (retries included) through botocore's event hooks in every process that
talks to S3: the driver, the planning and commit workers, every task; and for
the driver-side workers of a Python data source, the seconds and the CPU from
each one's start to Spark's call of the format. Results go to the
``## PySpark write`` section of ``docs/benchmarks.md``.

    python -m bench.spark_bench [--rows N] [--tasks N] [--days N] [--methods ...]
        [--daily-methods ...] [--before TREE]
"""

from __future__ import annotations

import argparse
import compileall
import json
import logging
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.counter import RequestTotals
from bench.direct_source import DIRECT_FORMAT, DirectSource
from bench.frames import frame_sql
from bench.objects import objects_under, rename_prefix
from bench.page import load_note, seaweedfs_version, write_section
from bench.process import cpu_seconds, process_cpu_seconds
from bench.spark_source import (
    BEFORE_FORMAT,
    BENCH_FORMAT,
    BeforeSource,
    BenchSource,
    TaskTiming,
    TimedBatches,
    count_requests,
    package_dir,
    requests_since,
    snapshot,
)
from tests.buckets import empty_bucket
from zero_rename.core.data.layout import Destination, is_visible, partition_dir
from zero_rename.core.s3 import probes, profile_record
from zero_rename.core.s3.client import S3Store, StoreConfig, make_client
from zero_rename.spark import register_source
from zero_rename.spark.options import FileOptions
from zero_rename.spark.parquet import PartitionedParquetWriter

MIB = 1024 * 1024
GIB = 1024 * MIB
METHODS = ("zero-rename-magic", "zero-rename-staging", "direct", "direct-source", "rename")
LABELS = {
    "zero-rename-magic": "zero-rename, magic committer",
    "zero-rename-staging": "zero-rename, staging committer",
    "direct": "direct to final keys, no commit protocol (unsafe)",
    "direct-source": "direct to final keys from a Python data source that does nothing "
    "on the driver (unsafe)",
    "rename": "temporary prefix, then copy + delete per file (rename)",
}
# A zero-rename method (or variant) with this suffix runs the code of another
# tree (--before), registered as its own format: before and after in one run.
BEFORE_SUFFIX = "@before"
# --before: the tree's path and its commit, once given.
BEFORE: dict[str, str] = {}
# More methods: name -> (zero-rename method, more writer options), from --variant
# (say magic-sync=zero-rename-magic:upload_threads=0), so that a writer option
# is measured interleaved with the methods it is compared with.
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {}
HEADER = "## PySpark write"
# Arrow batch rows: Spark's default.
ARROW_BATCH = 10_000
# The daily write: one day's partition of DAILY_FILES files, written by as many
# tasks as Spark runs at once here, each rolling to a new file at an equal
# share of the rows (as a job sized for its cluster's task slots would).
DAILY_METHODS = ("zero-rename-magic", "direct", "direct-source")
DAILY_ROWS = 1_000_000
DAILY_TASKS = 2
DAILY_FILES = 10


@dataclass(frozen=True)
class BenchConfig:
    endpoint_url: str
    bucket: str
    metrics_path: str
    server_pid: int | None = None
    rows: int = 8_000_000
    tasks: int = 16
    days: int = 64
    part_size: int = 8 * MIB
    threads: int = 64
    area: str = "spark"  # first element of every key this configuration writes
    max_rows_per_file: int | None = None  # None: one file per task and day

    def prefix(self, method: str) -> str:
        return f"{self.area}/{method}"


def new_client(endpoint_url: str, threads: int) -> Any:
    return count_requests(
        make_client(StoreConfig(endpoint_url=endpoint_url, max_pool_connections=threads))
    )


# -- the baselines: the same Parquet writer, plain uploads -------------------


class PlainUpload:
    """A file uploaded as it is written, with no commit protocol: a PutObject at
    close when it stayed under the part size, else a multipart upload completed
    at close. Visible at its key as soon as it is closed."""

    def __init__(self, client: Any, bucket: str, key: str, part_size: int) -> None:
        self.client, self.bucket, self.key, self.part_size = client, bucket, key, part_size
        self.rows: int | None = None
        self.buffer = bytearray()
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []

    def write(self, data: bytes) -> int:
        self.buffer += data
        while len(self.buffer) >= self.part_size:
            chunk = bytes(self.buffer[: self.part_size])
            del self.buffer[: self.part_size]
            self._part(chunk)
        return len(data)

    def _part(self, chunk: bytes) -> None:
        if self.upload_id is None:
            self.upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key)[
                "UploadId"
            ]
        number = len(self.parts) + 1
        etag = self.client.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=chunk
        )["ETag"]
        self.parts.append({"PartNumber": number, "ETag": etag})

    def close(self) -> None:
        if self.upload_id is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self.buffer))
            return
        if self.buffer:
            self._part(bytes(self.buffer))
        self.client.complete_multipart_upload(
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self.upload_id,
            MultipartUpload={"Parts": self.parts},
        )


class PlainTask:
    """What each task runs (through mapInArrow) for a baseline: the same Parquet
    writer and layout, files uploaded straight to ``prefix``."""

    def __init__(self, cfg: BenchConfig, method: str, prefix: str, round_number: int) -> None:
        self.cfg, self.method, self.prefix, self.round = cfg, method, prefix, round_number

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        timing = TaskTiming()
        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        timed = TimedBatches(batches)
        files = self._write(partition, timed)
        timing.record(
            self.cfg.metrics_path,
            self.method,
            self.round,
            sum(f.rows for f in files),
            len(files),
            sum(f.bytes for f in files),
            timed.waited,
        )
        yield pa.record_batch({"files": pa.array([len(files)], pa.int64())})

    def _write(self, partition: int, batches: TimedBatches) -> list[Any]:
        task = f"{partition:05d}"
        client = new_client(self.cfg.endpoint_url, self.cfg.threads)
        run_id = uuid.uuid4().hex
        seq: Counter[str] = Counter()

        def open_file(values: dict[str, str | None]) -> PlainUpload:
            directory = partition_dir(("dt",), values)
            name = f"part-{task}-{run_id}.c{seq[directory]:03d}.snappy.parquet"
            seq[directory] += 1
            return PlainUpload(
                client, self.cfg.bucket, f"{self.prefix}/{directory}{name}", self.cfg.part_size
            )

        files = FileOptions(max_rows_per_file=self.cfg.max_rows_per_file)
        writer = PartitionedParquetWriter(open_file, ("dt",), files)
        for batch in batches:
            writer.write(batch)
        return writer.close()


def rename_all(cfg: BenchConfig, source: str, target: str) -> None:
    """Job commit of the rename baseline: list, then copy and delete each object."""
    rename_prefix(
        new_client(cfg.endpoint_url, cfg.threads),
        cfg.bucket,
        source + "/",
        target + "/",
        cfg.threads,
    )


# -- runs ----------------------------------------------------------------------


@dataclass
class Result(RequestTotals):
    method: str
    seconds: float
    round: int = 0
    files: int = 0
    bytes: int = 0
    rows: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    peak_task_rss: int = 0
    median_task_rss: int = 0
    tasks: int = 0
    leftover: int = 0  # pending uploads or temporary objects after the run
    python_cpu: float = 0.0  # task workers (whole life: one task each), driver-side workers, driver
    server_cpu: float = 0.0  # the S3 server
    # The write as the driver sees it, in seconds (see ``timeline``).
    phases: dict[str, float] = field(default_factory=dict)
    # Task time summed over tasks, by where it went (see ``task_split``).
    task_split: dict[str, float] = field(default_factory=dict)
    # Requests of the busiest and quietest task.
    task_requests: tuple[int, int] = (0, 0)
    # Packages of bench.spark_source.HEAVY the driver-side workers had loaded when
    # Spark called the format (writer(), commit()) and when they returned.
    heavy: dict[str, list[str]] = field(default_factory=dict)
    workload: str = "main"


def source_frame(spark: Any, cfg: BenchConfig) -> Any:
    """The rows of :func:`bench.frames.frame_sql`, sorted by day within each task
    as Spark sorts before a partitioned write."""
    from pyspark import StorageLevel

    df = spark.sql(frame_sql(cfg.rows, cfg.days, cfg.tasks)).sortWithinPartitions("dt")
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    df.count()
    return df


def keep_store_profile(cfg: BenchConfig, dest: str) -> None:
    """Leave the store's profile record at ``dest`` as the day before's write would
    have (untimed): a daily job writes one destination every day, where each round
    here writes a new one. Code that keeps no record (``@before``) ignores it."""
    site = Destination.parse(dest)
    store = S3Store.connect(StoreConfig(endpoint_url=cfg.endpoint_url))
    found = probes.detect(store, site)
    profile_record.write_record(store, site, found, probes.PROBE_VERSION, datetime.now(UTC), None)


def run_method(spark: Any, df: Any, cfg: BenchConfig, method: str, round_number: int = 0) -> Result:
    # "@" would read as credentials in the destination's URL.
    prefix = f"{cfg.prefix(method.replace('@', '-'))}/r{round_number}"
    dest = f"s3://{cfg.bucket}/{prefix}"
    name, before = split_before(method)
    base, extra = VARIANTS.get(name, (name, {}))
    if base.startswith("zero-rename-"):
        keep_store_profile(cfg, dest)
    driver_before, driver_cpu = snapshot(), cpu_seconds()
    server_cpu = process_cpu_seconds(cfg.server_pid) if cfg.server_pid else 0.0
    started, wall = time.monotonic(), time.time()
    if base.startswith("zero-rename-"):
        committer = base.removeprefix("zero-rename-")
        writer = (
            df.write.format(BEFORE_FORMAT if before else BENCH_FORMAT)
            .mode("append")
            .option("partition_by", "dt")
            .option("committer", committer)
            .option("part_size", str(cfg.part_size))
            .option("threads", str(cfg.threads))
            .option("endpoint", cfg.endpoint_url)
            .option("bench_metrics", cfg.metrics_path)
            .option("bench_method", method)
            .option("bench_round", str(round_number))
        )
        if cfg.max_rows_per_file:
            writer = writer.option("max_rows_per_file", str(cfg.max_rows_per_file))
        for key, value in extra.items():
            writer = writer.option(key, value)
        writer.save(dest)
    elif method == "direct":
        df.mapInArrow(PlainTask(cfg, method, prefix, round_number), "files long").collect()
    elif method == "direct-source":
        options = {
            "endpoint": cfg.endpoint_url,
            "bucket": cfg.bucket,
            "prefix": prefix,
            "part_size": str(cfg.part_size),
            "threads": str(cfg.threads),
            "bench_metrics": cfg.metrics_path,
            "bench_method": method,
            "bench_round": str(round_number),
            "max_rows_per_file": str(cfg.max_rows_per_file or ""),
        }
        df.write.format(DIRECT_FORMAT).mode("append").options(**options).save()
    elif method == "rename":
        temporary = f"{prefix}/_temporary/{uuid.uuid4().hex}"
        df.mapInArrow(PlainTask(cfg, method, temporary, round_number), "files long").collect()
        rename_all(cfg, temporary, prefix)
    else:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    seconds, ended = time.monotonic() - started, time.time()
    if cfg.server_pid:
        server_cpu = process_cpu_seconds(cfg.server_pid) - server_cpu
    driver_cpu = cpu_seconds() - driver_cpu
    result = summarize(
        cfg, method, round_number, prefix, seconds, requests_since(driver_before), (wall, ended)
    )
    result.python_cpu = round(result.python_cpu + driver_cpu, 1)
    result.server_cpu = round(server_cpu, 1)
    return result


def split_before(method: str) -> tuple[str, bool]:
    """A method's name without ``@before``, and whether it had it."""
    return method.removesuffix(BEFORE_SUFFIX), method.endswith(BEFORE_SUFFIX)


def register_before(spark: Any, tree: Path) -> None:
    """Register the ``--before`` format: Spark gives the Python workers of a data
    source the environment its registration saw, so with ``tree``'s package
    first on their path, its job setup, tasks and job commit run that code."""
    context = spark.sparkContext
    saved = dict(context.environment)
    root = str(Path(__file__).resolve().parent.parent)
    context.environment["PYTHONPATH"] = os.pathsep.join([str(tree / "plugin"), root])
    try:
        spark.dataSource.register(BeforeSource)
    finally:
        context.environment.clear()
        context.environment.update(saved)


def check_packages(method: str, records: Sequence[dict[str, Any]]) -> None:
    """Refuse a run whose Python workers imported another tree's package than the
    method's: a ``@before`` method must have run the old code everywhere."""
    _, before = split_before(method)
    expected = str(Path(BEFORE["path"]) / "plugin" / "zero_rename") if before else package_dir()
    found = {r["package"] for r in records if "package" in r}
    if found - {os.path.realpath(expected), expected}:
        raise RuntimeError(f"{method}: workers imported zero_rename from {sorted(found)}")


def timeline(records: Sequence[dict[str, Any]], save: tuple[float, float]) -> dict[str, float]:
    """Where the write's wall time went, as the driver sees it:

    - ``setup``: the driver-side Python worker building the writer (job setup);
    - ``first_task``: from the save (or collect) to the first task's ``write()``;
    - ``tasks``: from the first task's start to the last task's end;
    - ``tail``: from the last task's end until the save returned: the driver's
      serial tail, job commit (``commit``) and Spark's own bookkeeping around it;
    - ``commit``: the job commit inside the driver-side worker, and
      ``commit_start``: from the last task's end to that commit's start, of
      which ``commit_worker`` from the worker's fork to the commit's start
      (imports, unpickling the writer); ``setup_worker`` likewise for setup:
      from the fork to Spark's call of the format's ``writer()``;
    - ``to_setup``: from the save to the setup worker's fork (Spark's planning);
      ``after_setup``: from the writer's return to the first task's start.
    """
    tasks = [r for r in records if r["phase"] == "task"]
    first = min(r["t_start"] for r in tasks)
    last = max(r["t_end"] for r in tasks)
    phases = {"first_task": first - save[0], "tasks": last - first, "tail": save[1] - last}
    for r in records:
        if r["phase"] in ("setup", "commit") and "cpu_at_start" in r:
            # CPU the worker spent before the call (imports, unpickling): unlike
            # the seconds, a busy machine does not stretch it.
            phases[f"{r['phase']}_worker_cpu"] = r["cpu_at_start"]
        if r["phase"] == "setup":
            phases["setup"] = r["t_end"] - r["t_start"]
            phases["setup_worker"] = r["t_start"] - r["t_proc"]
            phases["to_setup"] = r["t_proc"] - save[0]
            phases["after_setup"] = first - r["t_end"]
        if r["phase"] == "commit":
            phases["commit"] = r["t_end"] - r["t_start"]
            phases["commit_start"] = r["t_start"] - last
            phases["commit_worker"] = r["t_start"] - r["t_proc"]
    return {k: round(v, 3) for k, v in phases.items()}


def task_split(tasks: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Task time summed over tasks: ``startup`` (worker fork to ``write()``, imports
    included), ``fed`` (waiting on Spark for batches), S3 calls made by the task's
    own thread (``s3:<Operation>``), and ``encode+other``: the rest of ``write()``,
    mostly splitting by partition and Arrow-to-Parquet encoding, and waiting for
    calls on other threads. Those (``bg:<Operation>``: staging's upload pool,
    background uploads) are summed apart: they overlap the task's own work."""
    split: Counter[str] = Counter()
    for r in tasks:
        split["startup"] += r["t_start"] - r["t_proc"]
        split["fed"] += r["fed_seconds"]
        own = sum(t for op, t in r["s3_seconds"].items() if not op.startswith("bg:"))
        for op, t in r["s3_seconds"].items():
            split[op if op.startswith("bg:") else f"s3:{op}"] += t
        split["encode+other"] += r["seconds"] - r["fed_seconds"] - own
        split["write"] += r["seconds"]
    return {k: round(v, 2) for k, v in split.items()}


def summarize(
    cfg: BenchConfig,
    method: str,
    round_number: int,
    prefix: str,
    seconds: float,
    driver_requests: dict[str, int],
    save: tuple[float, float],
) -> Result:
    """Gather the run's records and check what it left in the bucket."""
    records = [json.loads(line) for line in Path(cfg.metrics_path).read_text().splitlines()]
    mine = [r for r in records if r["method"] == method and r.get("round") == round_number]
    check_packages(method, mine)
    tasks = [r for r in mine if r["phase"] == "task"]
    requests: Counter[str] = Counter(driver_requests)
    for r in mine:
        requests.update(r["requests"])
    rss = [r["peak_rss"] for r in tasks] or [0]
    per_task = [sum(r["requests"].values()) for r in tasks] or [0]
    result = Result(
        method=method,
        round=round_number,
        seconds=round(seconds, 2),
        requests=dict(requests),
        rows=sum(r["rows"] for r in tasks),
        tasks=len(tasks),
        peak_task_rss=max(rss),
        median_task_rss=int(statistics.median(rss)),
        python_cpu=sum(r.get("cpu", 0.0) for r in mine),
        phases=timeline(mine, save),
        task_split=task_split(tasks),
        task_requests=(max(per_task), min(per_task)),
        heavy={
            f"{r['phase']}{when}": r[key]
            for r in mine
            if r["phase"] in ("setup", "commit")
            for when, key in (("_start", "heavy_at_start"), ("", "heavy"))
            if key in r
        },
    )
    check_output(cfg, result, prefix)
    return result


def check_output(cfg: BenchConfig, result: Result, prefix: str) -> None:
    """Count the visible files and anything left behind; refuse an incomplete run."""
    client = make_client(StoreConfig(endpoint_url=cfg.endpoint_url))  # not counted
    prefix += "/"
    leftover = 0
    for obj in objects_under(client, cfg.bucket, prefix):
        relative = obj["Key"][len(prefix) :]
        if is_visible(relative):
            result.files += 1
            result.bytes += obj["Size"]
        elif relative.startswith("_temporary/"):
            leftover += 1
    for page in client.get_paginator("list_multipart_uploads").paginate(
        Bucket=cfg.bucket, Prefix=prefix
    ):
        leftover += len(page.get("Uploads", []))
    result.leftover = leftover
    if result.rows != cfg.rows or leftover:
        raise RuntimeError(
            f"{result.method}: wrote {result.rows} of {cfg.rows} rows, "
            f"{leftover} object(s) or upload(s) left behind"
        )


def start_spark(cfg: BenchConfig, driver_memory: str = "6g") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Tasks import this module; executors find it on PYTHONPATH.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p
    )
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("zero-rename spark bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", str(cfg.tasks))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH))
        # One fresh Python worker per task: its peak RSS is that task's.
        .config("spark.python.worker.reuse", "false")
        .getOrCreate()
    )


def warm_up(spark: Any, cfg: BenchConfig, methods: Sequence[str]) -> None:
    """Run each method once on a few rows, untimed: the first use of a code path
    (class loading in the JVM, the first Python workers) is not any method's cost."""
    small = BenchConfig(
        cfg.endpoint_url,
        cfg.bucket,
        cfg.metrics_path + ".warm-up",
        server_pid=cfg.server_pid,
        rows=1000,
        tasks=2,
        days=2,
        area="warm-up",
    )
    df = source_frame(spark, small)
    for method in methods:
        run_method(spark, df, small, method)
    df.unpersist()


@dataclass(frozen=True)
class Workload:
    """One DataFrame and the methods that write it, each once a round."""

    name: str  # "main": the 1 GiB write; "daily": one day's partition
    cfg: BenchConfig
    methods: tuple[str, ...]


def daily_config(cfg: BenchConfig, rows: int, tasks: int, files: int) -> BenchConfig:
    """The daily write: ``rows`` of one day in ``tasks`` tasks, ``files`` files of
    equal rows among them."""
    return BenchConfig(
        cfg.endpoint_url,
        cfg.bucket,
        cfg.metrics_path + ".daily",
        server_pid=cfg.server_pid,
        rows=rows,
        tasks=tasks,
        days=1,
        part_size=cfg.part_size,
        threads=cfg.threads,
        area="daily",
        max_rows_per_file=-(-rows // files),
    )


def run_benchmark(
    spark: Any, workloads: Sequence[Workload], rounds: int = 1, unregistered: bool = False
) -> list[Result]:
    """Every method of every workload once a round, in an order shuffled each
    round, so that no method always runs first or after the same neighbour (a
    write right after the 1 GiB rename, whose deletes the server still works
    off, is slower), and slow spells of a shared machine spread over all
    methods. The shuffle is seeded: a run can be repeated in the same order."""
    if unregistered:
        # As Spark's own lookup of installed pyspark_* modules registers the format
        # (the daily DAG's application, Dagster's): its workers get no environment
        # of the format's (no PYDANTIC_DISABLE_PLUGINS).
        spark.dataSource.register(BenchSource)
    else:
        register_source(spark, BenchSource)  # as register(spark) registers the format
    spark.dataSource.register(DirectSource)
    if BEFORE:
        register_before(spark, Path(BEFORE["path"]))
    warm_up(spark, workloads[0].cfg, sorted({m for w in workloads for m in w.methods}))
    frames = [source_frame(spark, w.cfg) for w in workloads]
    runs = [(w, df, m) for w, df in zip(workloads, frames, strict=True) for m in w.methods]
    results = []
    try:
        for round_number in range(rounds):
            order = random.Random(round_number).sample(runs, len(runs))
            bucket = round_bucket(workloads[0].cfg, round_number)
            for workload, df, method in order:
                cfg = replace(workload.cfg, bucket=bucket)
                progress(
                    f"round {round_number + 1}/{rounds}, {workload.name} {method}: writing "
                    f"{cfg.rows:,} rows in {cfg.tasks} tasks (load {os.getloadavg()[0]:.1f})"
                )
                result = run_method(spark, df, cfg, method, round_number)
                result.workload = workload.name
                progress(
                    f"{method}: {result.seconds:.1f} s, {result.files} files, "
                    f"{result.bytes / GIB:.2f} GiB, {result.requests_per_file:.2f} requests "
                    f"a file, task peak {result.peak_task_rss / MIB:.0f} MiB, "
                    f"phases {result.phases}, heavy {result.heavy}"
                )
                results.append(result)
            drop_bucket(workloads[0].cfg, bucket)
    finally:
        for df in frames:
            df.unpersist()
    # Reported in the order the methods were given, whatever order they ran in.
    given = {(w.name, m): i for i, (w, _, m) in enumerate(runs)}
    return sorted(results, key=lambda r: (given[(r.workload, r.method)], r.round))


def round_bucket(cfg: BenchConfig, round_number: int) -> str:
    """A bucket of the round's own, its first volume grown by one small object.

    The embedded store keeps every byte written (a round of the 1 GiB write with
    the six methods is about 7 GiB, and SeaweedFS reclaims deleted objects' space
    only when it compacts a volume), so each round writes to a bucket of its own,
    dropped after the round, which frees its volumes at once. SeaweedFS makes a
    new bucket's first volumes on its first write (about 0.2 s); that happens
    here, untimed, rather than in the round's first method.
    """
    bucket = f"{cfg.bucket}-r{round_number}"
    client = new_client(cfg.endpoint_url, 4)
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="warm-up/first-volume", Body=b"0")
    return bucket


def drop_bucket(cfg: BenchConfig, bucket: str) -> None:
    """Delete a round's bucket: its pending uploads, its objects, the bucket."""
    client = new_client(cfg.endpoint_url, 4)
    empty_bucket(client, bucket)
    client.delete_bucket(Bucket=bucket)


# -- report --------------------------------------------------------------------


def label(method: str) -> str:
    name, before = split_before(method)
    if before:
        return f"{label(name)}, before (commit {BEFORE['commit']})"
    if name in VARIANTS:
        base, extra = VARIANTS[name]
        return f"{LABELS[base]}, " + ", ".join(f"{k}={v}" for k, v in extra.items())
    return LABELS[name]


def parse_variant(text: str) -> tuple[str, tuple[str, dict[str, str]]]:
    """``name=zero-rename-magic:key=value,key=value``."""
    name, _, rest = text.partition("=")
    base, _, options = rest.partition(":")
    if not name or base not in METHODS or not base.startswith("zero-rename-"):
        raise argparse.ArgumentTypeError(f"--variant {text!r}: want NAME=zero-rename-...:k=v,...")
    extra = dict(o.split("=", 1) for o in options.split(",") if o)
    return name, (base, extra)


def by_method(results: Sequence[Result]) -> dict[str, list[Result]]:
    """Each method's runs, methods in the order first seen."""
    runs: dict[str, list[Result]] = {}
    for r in results:
        runs.setdefault(r.method, []).append(r)
    return runs


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def ratios(runs: Sequence[Result], direct: Sequence[Result]) -> list[float]:
    """Wall time over the direct write's of the same round: runs of one round
    met the same spell of a shared machine."""
    base = {r.round: r.seconds for r in direct}
    return [r.seconds / base[r.round] for r in runs if r.round in base]


def _mix(runs: Sequence[Result]) -> str:
    requests: Counter[str] = Counter()
    for r in runs:
        requests.update(r.requests)
    files = sum(r.files for r in runs)
    per_file = sorted(requests.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n / files:.2f}" for op, n in per_file)


def results_table(results: Sequence[Result]) -> str:
    grouped = by_method(results)
    direct = grouped.get("direct", [])
    lines = [
        "| method | wall time, median (s) | range (s) | vs direct, median (range) | "
        "Python CPU (s) | S3 server CPU (s) | peak task memory (MiB) | "
        "files | GiB | S3 requests | requests per file |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method, runs in grouped.items():
        seconds = [r.seconds for r in runs]
        vs = ratios(runs, direct)
        ratio = f"{median(vs):.2f}x ({min(vs):.2f}-{max(vs):.2f})" if vs else "-"
        r = runs[0]
        lines.append(
            f"| {label(method)} | {median(seconds):.1f} | {min(seconds):.1f}-"
            f"{max(seconds):.1f} | {ratio} | {median([x.python_cpu for x in runs]):.1f} | "
            f"{median([x.server_cpu for x in runs]):.1f} | "
            f"{max(x.peak_task_rss for x in runs) / MIB:.0f} | {r.files:,} | "
            f"{r.bytes / GIB:.2f} | {r.total_requests:,} | {r.requests_per_file:.2f} |"
        )
    return "\n".join(lines)


PHASES = (
    ("first_task", "save to first task"),
    ("setup_worker", "setup worker start-up"),
    ("setup", "job setup (writer)"),
    ("tasks", "first task to last task end"),
    ("tail", "last task end to save return"),
    ("commit_start", "of which, to commit start"),
    ("commit_worker", "commit worker start-up"),
    ("commit", "job commit"),
)


def phases_table(results: Sequence[Result]) -> str:
    """Medians over rounds of the timeline of each write (see ``timeline``)."""
    lines = [
        "| method | wall time | " + " | ".join(label for _, label in PHASES) + " |",
        "|---|" + "---:|" * (len(PHASES) + 1),
    ]
    for method, runs in by_method(results).items():
        cells = []
        for key, _ in PHASES:
            values = [r.phases[key] for r in runs if key in r.phases]
            cells.append(f"{median(values):.2f}" if values else "-")
        lines.append(
            f"| {label(method)} | {median([r.seconds for r in runs]):.2f} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def split_table(results: Sequence[Result]) -> str:
    """Task time summed over a run's tasks, medians over rounds (see ``task_split``)."""
    lines = [
        "| method | task write() | startup (fork, imports) | waiting on Spark | "
        "encode + other | S3 calls, task's thread | by operation | "
        "S3 calls, other threads |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for method, runs in by_method(results).items():

        def med(key: str) -> float:
            # Called only within this iteration, so the loop's ``runs`` is the right one.
            return median([r.task_split.get(key, 0.0) for r in runs])  # noqa: B023

        keys = {k for r in runs for k in r.task_split}
        own = sorted((k for k in keys if k.startswith("s3:")), key=lambda k: -med(k))
        other = sorted((k for k in keys if k.startswith("bg:")), key=lambda k: -med(k))
        lines.append(
            f"| {label(method)} | {med('write'):.1f} | {med('startup'):.1f} | "
            f"{med('fed'):.1f} | {med('encode+other'):.1f} | {sum(med(k) for k in own):.1f} | "
            + ", ".join(f"{k[3:]} {med(k):.1f}" for k in own)
            + " | "
            + (", ".join(f"{k[3:]} {med(k):.1f}" for k in other) or "-")
            + " |"
        )
    return "\n".join(lines)


def mix_table(results: Sequence[Result]) -> str:
    lines = ["| method | requests per file, by operation |", "|---|---|"]
    lines += [f"| {label(m)} | {_mix(runs)} |" for m, runs in by_method(results).items()]
    return "\n".join(lines)


def reading(results: Sequence[Result]) -> str:
    grouped = by_method(results)
    out = []
    direct, rename = grouped.get("direct"), grouped.get("rename")
    for name, runs in grouped.items():
        if direct and name != "direct":
            d = direct[0]
            out.append(
                f"{label(name)[0].upper() + label(name)[1:]}: {median(ratios(runs, direct)):.2f}x "
                f"the wall time of the unsafe direct write, "
                f"{median([r.python_cpu for r in runs]):.0f} s of Python CPU against "
                f"{median([r.python_cpu for r in direct]):.0f} s and "
                f"{median([r.server_cpu for r in runs]):.0f} s of S3 server CPU against "
                f"{median([r.server_cpu for r in direct]):.0f} s, "
                f"{runs[0].requests_per_file:.2f} requests a file against "
                f"{d.requests_per_file:.2f}."
            )
    if rename:
        out.append("The rename baseline's copies move every byte a second time, inside the server.")
    magic = grouped.get("zero-rename-magic")
    if magic and direct:
        out.append(fixed_cost(magic, direct))
    out.append(
        "A multipart upload costs at least three requests (create, one part, complete) where a "
        "small file written directly is one PutObject; the committer confirms its uploads "
        "are pending by listing them (ListMultipartUploads, 1,000 a page) before its point of "
        "no return (`verify_uploads`, on by default), and adds a few requests per task and per "
        "job (the job record, the fence read, "
        "the plan, the journal, `_SUCCESS`, cleanup). It moves no data after the tasks: "
        "CompleteMultipartUpload is a metadata operation whatever the file size, where a "
        "rename copies the data. On this machine S3 is on loopback and shares the two cores "
        "with Spark, so times mostly follow CPU (Parquet encoding, the server's work) rather "
        "than the network; on real S3 per-request latency weighs more, and copies of large "
        "files cost far more than here."
    )
    out.append(
        "Task memory is the peak resident size of the Python worker that ran the task (one "
        "fresh worker per task), pyarrow and botocore included; the JVM's share is not in it. "
        "The magic committer buffers at most one part per open file in memory, and hands "
        "full parts and closed files to its upload threads (`upload_threads`, 4 by default), "
        "which hold at most that many parts; the staging committer spools files to local disk "
        "and uploads each once it is closed on those threads (at task commit with "
        "`upload_threads=0`)."
    )
    return "\n\n".join(out)


def fixed_cost(runs: Sequence[Result], direct: Sequence[Result]) -> str:
    """Where the zero-rename write's time beyond the direct write's goes (medians)."""

    def phase(group: Sequence[Result], key: str) -> float:
        return median([r.phases.get(key, 0.0) for r in group])

    before = phase(runs, "first_task") - phase(direct, "first_task")
    after = phase(runs, "tail") - phase(direct, "tail")
    return (
        f"Most of the gap to the direct write is a cost per write, not per file: "
        f"{before:.1f} s more before the first task starts (Spark runs the format's job setup "
        f"in a Python worker it starts on the driver: {phase(runs, 'setup_worker'):.1f} s "
        f"from its start to the call of the format's `writer()`, "
        f"{phase(runs, 'setup'):.1f} s in job setup itself) and {after:.1f} s more after the "
        f"last task ends (another such worker for the job commit: "
        f"{phase(runs, 'commit_worker'):.1f} s from its start to the call of `commit()`, which "
        f"took {phase(runs, 'commit'):.1f} s for {runs[0].files:,} files). The tasks took "
        f"{phase(runs, 'tasks'):.1f} s against {phase(direct, 'tasks'):.1f} s. A larger write "
        "pays the same fixed cost, so its ratio to the direct write is smaller. The driver-side "
        "workers are measured in the last table below."
    )


STARTUP = (
    ("setup_worker", "setup worker: start to `writer()`"),
    ("setup_worker_cpu", "of it, CPU"),
    ("setup", "job setup"),
    ("commit_worker", "commit worker: start to `commit()`"),
    ("commit_worker_cpu", "of it, CPU"),
    ("commit", "job commit"),
)


def startup_table(results: Sequence[Result]) -> str:
    """The driver-side workers of each write through a Python data source (medians):
    from the worker's start (its fork by Spark's daemon, on Spark's request) to
    Spark's call of the format, what that call took, the whole write, and the
    packages of ``HEAVY`` the worker had loaded when Spark called the format."""
    lines = [
        "| write | method | "
        + " | ".join(label for _, label in STARTUP)
        + " | whole write | vs direct | loaded at `writer()` | loaded at `commit()` |",
        "|---|---|" + "---:|" * (len(STARTUP) + 2) + "---|---|",
    ]
    for workload in ("main", "daily"):
        mine = [r for r in results if r.workload == workload]
        direct = by_method(mine).get("direct", [])
        for method, runs in by_method(mine).items():
            if "setup_worker" not in runs[0].phases:
                continue
            cells = [
                f"{median(found):.2f}"
                if (found := [r.phases[k] for r in runs if k in r.phases])
                else "-"
                for k, _ in STARTUP
            ]
            vs = ratios(runs, direct)
            heavy = runs[0].heavy
            lines.append(
                f"| {workload_name(runs)} | {label(method)} | "
                + " | ".join(cells)
                + f" | {median([r.seconds for r in runs]):.2f} | "
                + (f"{median(vs):.2f}x" if vs else "-")
                + f" | {', '.join(heavy.get('setup_start', [])) or 'none'} | "
                f"{', '.join(heavy.get('commit_start', [])) or 'none'} |"
            )
    return "\n".join(lines)


def workload_name(results: Sequence[Result]) -> str:
    """``1,024 files`` for the large write, ``one day, 10 files`` for the daily one."""
    files = f"{results[0].files:,} files"
    return files if results[0].workload == "main" else f"one day, {files}"


def comparison(results: Sequence[Result]) -> str:
    """Before and after, from the ``@before`` methods and their counterparts."""
    out = []
    for workload in ("main", "daily"):
        grouped = by_method([r for r in results if r.workload == workload])
        direct = grouped.get("direct", [])
        for method, old in grouped.items():
            name, before = split_before(method)
            new = grouped.get(name)
            if not before or not new:
                continue

            def med(group: Sequence[Result], key: str) -> float:
                return median([r.phases.get(key, 0.0) for r in group])

            start_old = med(old, "setup_worker") + med(old, "commit_worker")
            start_new = med(new, "setup_worker") + med(new, "commit_worker")
            whole_old = median([r.seconds for r in old])
            whole_new = median([r.seconds for r in new])
            ratio = (
                f" ({median(ratios(old, direct)):.2f}x and {median(ratios(new, direct)):.2f}x "
                "the direct write)"
                if direct
                else ""
            )
            cpu_old = med(old, "setup_worker_cpu") + med(old, "commit_worker_cpu")
            cpu_new = med(new, "setup_worker_cpu") + med(new, "commit_worker_cpu")
            where = workload_name(new)
            out.append(
                f"{where[0].upper() + where[1:]}, {label(name)}: the two driver-side workers' "
                f"start-up {start_old:.2f} s before, {start_new:.2f} s after "
                f"({med(old, 'setup_worker'):.2f} + {med(old, 'commit_worker'):.2f} s, then "
                f"{med(new, 'setup_worker'):.2f} + {med(new, 'commit_worker'):.2f} s), of which "
                f"CPU {cpu_old:.2f} s before and {cpu_new:.2f} s after; the "
                f"whole write {whole_old:.2f} s before, {whole_new:.2f} s after{ratio}; task "
                f"workers' start-up summed over tasks {med_split(old, 'startup'):.1f} s before, "
                f"{med_split(new, 'startup'):.1f} s after; peak task memory "
                f"{max(r.peak_task_rss for r in old) / MIB:.0f} MiB before, "
                f"{max(r.peak_task_rss for r in new) / MIB:.0f} MiB after."
            )
    return "\n\n".join(out)


def med_split(runs: Sequence[Result], key: str) -> float:
    return median([r.task_split.get(key, 0.0) for r in runs])


# The subsections :func:`section` writes; any other is carried over (written by hand).
GENERATED = (
    "### Results",
    "### Where the time went",
    "### Requests per file, by operation",
    "### Reading",
    "### One partition a day",
    "### Start-up of the driver-side workers",
)


def section(
    results: Sequence[Result],
    cfg: BenchConfig,
    command: str,
    load: tuple[float, float],
    rounds: int = 1,
    daily: BenchConfig | None = None,
) -> str:
    import botocore
    import pyarrow
    import pyspark

    everything, results = results, [r for r in results if r.workload == "main"]
    day = [r for r in everything if r.workload == "daily"]

    parts = [
        HEADER,
        "",
        f"What it measures: one cached DataFrame of {cfg.rows:,} rows (`id`, `dt`, `region`, "
        f"`amount`, `event_time`, a 128-character `payload`), {cfg.tasks} Spark tasks, each "
        f"holding rows of all {cfg.days} days sorted by day, written Hive-partitioned by `dt` "
        "as snappy Parquet, so each task writes one file per day. Every method uses the same "
        "Parquet writer and layout; only the way files reach S3 differs. Wall time is the "
        "write as the driver sees it, job commit (or copies) included. Requests are counted "
        "per HTTP request sent, retries included, through botocore's event hooks in every "
        "process that talks to S3: driver, planning and commit workers, and tasks.",
        "",
        '- **zero-rename**: `df.write.format("zero-rename").option("partition_by", "dt")`, '
        "job setup on the driver, pending multipart uploads from every task attempt, job "
        "commit in the driver's `commit()`. A method with writer options after its name "
        "(`upload_threads=0`) is the same write with those options.",
        "- **direct**: each task writes its files straight to their final keys (PutObject, or "
        "a multipart upload above the part size): no commit protocol, partial output visible "
        "on failure, duplicates on retries. The floor of what a write can cost.",
        "- **rename**: the same direct writes under `_temporary/`, then the driver lists them "
        "and copies each to its final key and deletes it (CopyObject + DeleteObject, "
        f"{cfg.threads} threads), one rename per file. Hadoop's v1 commit algorithm renames "
        "twice (task and job commit), so this is its lower bound.",
        "",
        f"Machine: {os.cpu_count()} cores, local Spark `local[2]`, PySpark {pyspark.__version__}, "
        f"pyarrow {pyarrow.__version__}, botocore {botocore.__version__}, Python "
        f"{platform.python_version()}, SeaweedFS {seaweedfs_version()} (`weed mini`) on "
        f"loopback. Part size {cfg.part_size // MIB} MiB, {cfg.threads} threads. "
        + (
            "One run each. "
            if rounds == 1
            else f"{rounds} rounds, every method once a round in an order shuffled each round "
            "(seeded, the same in every run); "
            "times are medians, ratios the median of each round's ratio to the direct write. "
        )
        + "Python CPU is the task workers' (each ran one task, imports included), the driver-side "
        "Python workers' (job setup, job commit) and the driver's (the rename baseline's "
        "copies); the JVM's is left out, as it does the same work for every method. "
        + load_note(load),
        "",
        "Reproduce with `make bench-spark`, or:",
        "",
        "```",
        command,
        "```",
        "",
        "### Results",
        "",
        results_table(results),
        "",
        "### Where the time went",
        "",
        "The write as the driver sees it (medians, seconds): job setup in the writer, the "
        "tasks from the first one's start to the last one's end, then the driver's serial "
        "tail until the save returned, which holds the job commit.",
        "",
        phases_table(results),
        "",
        "Task time summed over all tasks (two run at a time): worker start-up, waiting on "
        "Spark for batches, S3 calls by operation, and the rest (splitting by partition, "
        "Arrow-to-Parquet encoding).",
        "",
        split_table(results),
        "",
        "### Requests per file, by operation",
        "",
        mix_table(results),
        "",
        "### Reading",
        "",
        reading(results),
        "",
    ]
    if day and daily:
        parts += daily_part(day, daily)
    parts += startup_part(everything)
    return "\n".join(parts)


def daily_part(results: Sequence[Result], cfg: BenchConfig) -> list[str]:
    files = results[0].files
    return [
        "### One partition a day",
        "",
        f"A daily job's write: {cfg.rows:,} rows of one day (the same columns), "
        f"{files} files of about {results[0].bytes / files / MIB:.0f} MiB in one partition, "
        f"written by {cfg.tasks} tasks (the task slots of `local[2]`), each rolling to a new "
        f"file every {cfg.max_rows_per_file:,} rows (`max_rows_per_file`, the same for every "
        "method), interleaved with the writes above in the same rounds.",
        "",
        results_table(results),
        "",
        phases_table(results),
        "",
        *([daily_gap(results), ""] if daily_gap(results) else []),
    ]


def daily_gap(results: Sequence[Result]) -> str:
    """Where the daily write's seconds beyond the direct write's go (medians): what
    any Python data source pays, and the format's own share, step by step."""

    def of(method: str) -> list[Result]:
        return [r for r in results if r.method == method]

    ours, direct, source = of("zero-rename-magic"), of("direct"), of("direct-source")
    if not (ours and direct and source):
        return ""

    def phase(group: Sequence[Result], key: str) -> float:
        return median([r.phases.get(key, 0.0) for r in group])

    def wall(group: Sequence[Result]) -> float:
        return median([r.seconds for r in group])

    workers = sum(phase(ours, k) - phase(source, k) for k in ("setup_worker", "commit_worker"))
    steps = phase(ours, "setup") + phase(ours, "commit")
    return (
        f"The daily write took {wall(ours):.2f} s against the direct write's "
        f"{wall(direct):.2f} s, {wall(ours) - wall(direct):+.2f} s (medians). A Python data "
        f"source that does nothing on the driver took {wall(source):.2f} s: its two "
        f"driver-side workers started in {phase(source, 'setup_worker'):.2f} s and "
        f"{phase(source, 'commit_worker'):.2f} s. The format's workers took {workers:.2f} s "
        "longer to start than those, between them: they import the committer, its "
        "signer and HTTP client (botocore's base, http.client) and the commit data's models "
        "(pydantic), which a data source that sends no request does not. Job setup and job "
        f"commit took {phase(ours, 'setup'):.2f} s and {phase(ours, 'commit'):.2f} s "
        f"({steps:.2f} s): the store's client made in each (the light client where it "
        "applies, else botocore's, which loads the S3 model) and, at setup, the store's "
        "profile read from the destination's record (probed where it is missing or stale) "
        "unless `store_profile` names it. Every one of these is paid once a write, whatever "
        "its size."
    )


def startup_part(results: Sequence[Result]) -> list[str]:
    import datetime

    compared = comparison(results)
    return [
        "### Start-up of the driver-side workers",
        "",
        "Spark runs a Python data source's `writer()` (job setup) and `commit()` (job commit) "
        "in Python workers its daemon forks on the driver for the write (with "
        "`spark.python.worker.reuse` off, as here, a fresh one every write, as an "
        "application's first write gets). A worker imports Spark's worker module, unpickles "
        "the data source class (`writer()`) or the writer and the tasks' commit messages "
        "(`commit()`), importing the modules they need, and then calls the format. Below, the "
        "seconds from the worker's start to that call and what the call took, and the "
        "packages among pyarrow, pandas, numpy, pyiceberg, deltalake and polars the worker "
        "had loaded by then (after `writer()` returns, Spark's worker imports pyarrow itself, "
        "to build the tasks' function). The data source that does nothing on the driver "
        "measures what any Python data source costs a write.",
        "",
        startup_table(results),
        "",
        *(
            [
                f"**Before and after ({datetime.date.today().isoformat()})**, in this run: "
                f"the code before the change at commit {BEFORE['commit']} (`{BEFORE_SUFFIX}`), "
                "interleaved with the code after it in every round.",
                "",
                compared,
                "",
            ]
            if compared
            else []
        ),
    ]


def stdout_table(results: Sequence[Result]) -> str:
    header = (
        f"{'write':<6} {'method':<30} {'round':>5} {'seconds':>8} {'files':>6} {'GiB':>6} "
        f"{'req/file':>9} {'task MiB':>9} {'tail':>6}"
    )
    lines = [header, "-" * len(header)]
    lines += [
        f"{r.workload:<6} {r.method:<30} {r.round:>5} {r.seconds:>8.1f} {r.files:>6} "
        f"{r.bytes / GIB:>6.2f} {r.requests_per_file:>9.2f} "
        f"{r.peak_task_rss / MIB:>9.0f} {r.phases.get('tail', 0.0):>6.2f}"
        for r in results
    ]
    for workload in ("main", "daily"):
        mine = [r for r in results if r.workload == workload]
        if mine:
            lines += ["", f"{workload_name(mine)}:", "", results_table(mine), ""]
            lines += [phases_table(mine), "", split_table(mine), "", mix_table(mine)]
    lines += ["", startup_table(results), "", comparison(results)]
    return "\n".join(lines)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=BenchConfig.rows)
    parser.add_argument("--tasks", type=int, default=BenchConfig.tasks)
    parser.add_argument("--days", type=int, default=BenchConfig.days)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        help=f"among {', '.join(METHODS)} and the --variant names; a zero-rename one "
        f"with {BEFORE_SUFFIX} runs the --before tree's code",
    )
    parser.add_argument(
        "--daily-methods",
        nargs="*",
        default=list(DAILY_METHODS),
        help="methods of the daily write (one partition, --daily-rows in --daily-tasks "
        "files); none: no daily write",
    )
    parser.add_argument("--daily-rows", type=int, default=DAILY_ROWS)
    parser.add_argument("--daily-tasks", type=int, default=DAILY_TASKS)
    parser.add_argument("--daily-files", type=int, default=DAILY_FILES)
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of the code to compare with (its plugin/ is put first on the "
        f"Python path of the {BEFORE_SUFFIX} methods' workers)",
    )
    parser.add_argument(
        "--unregistered",
        action="store_true",
        help="register the format as Spark's lookup of installed pyspark_* modules does, "
        "its workers without the environment register(spark) gives them",
    )
    parser.add_argument(
        "--variant",
        action="append",
        type=parse_variant,
        default=[],
        help="an extra method: NAME=zero-rename-magic:key=value,... "
        "(the zero-rename method with more writer options)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of every method, interleaved, in an order shuffled each round",
    )
    parser.add_argument(
        "--output",
        default="docs/benchmarks.md",
        help="page whose '## PySpark write' section is rewritten",
    )
    parser.add_argument("--no-docs", action="store_true", help="print the results only")
    return parser.parse_args(argv)


def command_line(args: argparse.Namespace) -> str:
    text = "python -m bench.spark_bench"
    defaults = parse_args([])
    for name in ("rows", "tasks", "days", "rounds", "daily_rows", "daily_tasks", "daily_files"):
        if getattr(args, name) != getattr(defaults, name):
            text += f" --{name.replace('_', '-')} {getattr(args, name)}"
    if args.before:
        text += " --before ../before"
    if args.unregistered:
        text += " --unregistered"
    for name, (base, extra) in args.variant:
        text += f" --variant {name}={base}:" + ",".join(f"{k}={v}" for k, v in extra.items())
    if list(args.methods) != list(METHODS):
        text += " --methods " + " ".join(args.methods)
    if list(args.daily_methods) != list(DAILY_METHODS):
        text += " --daily-methods " + " ".join(args.daily_methods)
    return text


def check_methods(args: argparse.Namespace) -> None:
    """Refuse unknown methods, and ``@before`` ones without ``--before`` or on a
    method that does not write through the format."""
    for method in [*args.methods, *args.daily_methods]:
        name, before = split_before(method)
        if name not in METHODS and name not in VARIANTS:
            raise SystemExit(
                f"unknown method {method!r}: choose from {', '.join(METHODS)} or a --variant name"
            )
        if before and not VARIANTS.get(name, (name,))[0].startswith("zero-rename-"):
            raise SystemExit(f"{method}: only a zero-rename method runs the code before")
        if before and not args.before:
            raise SystemExit(f"{method} needs --before, a checkout of the code before")


def tree_commit(tree: Path) -> str:
    """The short commit a checkout is at."""
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def compile_packages() -> None:
    """Byte-compile the code each method's workers import, as installing a wheel
    does: a fresh worker would otherwise compile every module whose bytecode is
    missing or stale (about 60 ms of a driver-side worker's start-up after a
    change, with PYTHONDONTWRITEBYTECODE set not even once), which no
    deployment pays."""
    trees = [Path(package_dir()), Path(__file__).parent]  # the bench's sources too
    if BEFORE:
        trees.append(Path(BEFORE["path"]) / "plugin" / "zero_rename")
    for tree in trees:
        if not compileall.compile_dir(str(tree), quiet=1, force=False):
            raise SystemExit(f"could not byte-compile {tree}")


def main(argv: Sequence[str] | None = None) -> int:
    from zero_rename.embedded_s3 import EmbeddedS3

    args = parse_args(argv)
    VARIANTS.update(args.variant)
    check_methods(args)
    if args.before:
        BEFORE.update(path=str(args.before.resolve()), commit=tree_commit(args.before))
    logging.basicConfig(level=logging.WARNING)
    compile_packages()
    load_before = os.getloadavg()[0]
    with EmbeddedS3() as server, tempfile.TemporaryDirectory(prefix="zr-spark-bench-") as tmp:
        # Spark's workers and the store layer find credentials in the environment.
        os.environ.update(server.environment())
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        server.create_bucket(bucket)
        cfg = BenchConfig(
            server.endpoint_url,
            bucket,
            str(Path(tmp) / "metrics.jsonl"),
            server_pid=server.pid,
            rows=args.rows,
            tasks=args.tasks,
            days=args.days,
        )
        workloads = [Workload("main", cfg, tuple(args.methods))]
        if args.daily_methods:
            daily = daily_config(cfg, args.daily_rows, args.daily_tasks, args.daily_files)
            workloads.append(Workload("daily", daily, tuple(args.daily_methods)))
        spark = start_spark(cfg)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            results = run_benchmark(spark, workloads, args.rounds, args.unregistered)
        finally:
            spark.stop()
    load = (load_before, os.getloadavg()[0])
    print(stdout_table(results))
    print(f"load average (1 minute): {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    if not args.no_docs:
        body = section(
            results,
            cfg,
            command_line(args),
            load,
            args.rounds,
            workloads[-1].cfg if len(workloads) > 1 else None,
        )
        write_section(args.output, HEADER, body, GENERATED)
        progress(f"wrote the '{HEADER}' section of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
