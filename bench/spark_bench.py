"""PySpark write benchmark: one DataFrame written four ways, side by side.

The same cached DataFrame (about 1 GiB of Parquet in over 1,000 files, Hive
partitioned by day) is written by local Spark to the embedded S3 server:

- ``zero-rename-magic`` and ``zero-rename-staging``: through the
  ``zero-rename`` format, job setup, task attempts, job commit and all;
- ``direct``: the unsafe baseline with no commit protocol: each task writes
  its Parquet files (the same writer, the same layout) straight to their final
  keys, one PutObject per file under the part size, a multipart upload above;
- ``rename``: what a rename-based committer costs on S3: the tasks write the
  same way under a temporary prefix, then the driver lists it, copies every
  object to its final key and deletes it (CopyObject + DeleteObject per file:
  one rename per file; Hadoop's v1 committer renames twice).

For each: wall time of the write as the driver sees it, the peak memory of a
task (the largest ``ru_maxrss`` of the Python workers that ran the tasks, one
fresh worker per task) and S3 requests per file, counted per HTTP request
sent (retries included) through botocore's event hooks in every process that
talks to S3: the driver, the planning and commit workers, every task. Results
go to the ``## PySpark write`` section of ``docs/benchmarks.md``.

    python -m bench.spark_bench [--rows N] [--tasks N] [--days N] [--methods ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.counter import RequestTotals
from bench.objects import objects_under, rename_prefix
from bench.page import load_note, seaweedfs_version, write_section
from bench.process import cpu_seconds, process_cpu_seconds
from bench.spark_source import (
    BENCH_FORMAT,
    BenchSource,
    TaskTiming,
    TimedBatches,
    count_requests,
    requests_since,
    snapshot,
)
from zero_rename.core.data.layout import is_visible, partition_dir
from zero_rename.core.s3.client import StoreConfig, make_client
from zero_rename.spark.options import FileOptions
from zero_rename.spark.parquet import PartitionedParquetWriter

MIB = 1024 * 1024
GIB = 1024 * MIB
METHODS = ("zero-rename-magic", "zero-rename-staging", "direct", "rename")
LABELS = {
    "zero-rename-magic": "zero-rename, magic committer",
    "zero-rename-staging": "zero-rename, staging committer",
    "direct": "direct to final keys, no commit protocol (unsafe)",
    "rename": "temporary prefix, then copy + delete per file (rename)",
}
# More methods: name -> (zero-rename method, more writer options), from --variant
# (say magic-sync=zero-rename-magic:upload_threads=0), so that a writer option
# is measured interleaved with the methods it is compared with.
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {}
HEADER = "## PySpark write"
# Arrow batch rows: Spark's default.
ARROW_BATCH = 10_000


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

        writer = PartitionedParquetWriter(open_file, ("dt",), FileOptions())
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


def source_frame(spark: Any, cfg: BenchConfig) -> Any:
    """Deterministic rows, every task holding every day, sorted by day within each
    task as Spark sorts before a partitioned write. ``payload`` (SHA-512 hex)
    keeps the Parquet about as large as the data."""
    from pyspark import StorageLevel

    df = spark.sql(f"""
        select id,
               date_add(date'2024-01-01', cast(id % {cfg.days} as int)) as dt,
               element_at(array('eu-west', 'eu-central', 'us-east', 'us-west', 'ap-south'),
                          cast(pmod(hash(id), 5) as int) + 1) as region,
               pmod(hash(id, 7), 1000000) / 100.0 as amount,
               timestamp_seconds(1704067200 + id % 86400) as event_time,
               sha2(cast(id as string), 512) as payload
        from range(0, {cfg.rows}, 1, {cfg.tasks})""").sortWithinPartitions("dt")
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    df.count()
    return df


def run_method(spark: Any, df: Any, cfg: BenchConfig, method: str, round_number: int = 0) -> Result:
    prefix = f"{cfg.prefix(method)}/r{round_number}"
    dest = f"s3://{cfg.bucket}/{prefix}"
    driver_before, driver_cpu = snapshot(), cpu_seconds()
    server_cpu = process_cpu_seconds(cfg.server_pid) if cfg.server_pid else 0.0
    started, wall = time.monotonic(), time.time()
    base, extra = VARIANTS.get(method, (method, {}))
    if base.startswith("zero-rename-"):
        committer = base.removeprefix("zero-rename-")
        writer = (
            df.write.format(BENCH_FORMAT)
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
        for key, value in extra.items():
            writer = writer.option(key, value)
        writer.save(dest)
    elif method == "direct":
        df.mapInArrow(PlainTask(cfg, method, prefix, round_number), "files long").collect()
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
      (imports, unpickling the writer); ``setup_worker`` likewise for setup.
    """
    tasks = [r for r in records if r["phase"] == "task"]
    first = min(r["t_start"] for r in tasks)
    last = max(r["t_end"] for r in tasks)
    phases = {"first_task": first - save[0], "tasks": last - first, "tail": save[1] - last}
    for r in records:
        if r["phase"] == "setup":
            phases["setup"] = r["t_end"] - r["t_start"]
            phases["setup_worker"] = r["t_start"] - r["t_proc"]
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


def run_benchmark(
    spark: Any, cfg: BenchConfig, methods: Sequence[str], rounds: int = 1
) -> list[Result]:
    """Every method once a round, in an order rotated each round, so that no
    method always runs first or after the same neighbour, and slow spells of a
    shared machine spread over all methods."""
    spark.dataSource.register(BenchSource)
    warm_up(spark, cfg, methods)
    df = source_frame(spark, cfg)
    results = []
    try:
        for round_number in range(rounds):
            shift = round_number % len(methods)
            for method in list(methods[shift:]) + list(methods[:shift]):
                progress(
                    f"round {round_number + 1}/{rounds}, {method}: writing "
                    f"{cfg.rows:,} rows in {cfg.tasks} tasks (load {os.getloadavg()[0]:.1f})"
                )
                result = run_method(spark, df, cfg, method, round_number)
                progress(
                    f"{method}: {result.seconds:.1f} s, {result.files} files, "
                    f"{result.bytes / GIB:.2f} GiB, {result.requests_per_file:.2f} requests "
                    f"a file, task peak {result.peak_task_rss / MIB:.0f} MiB, "
                    f"phases {result.phases}"
                )
                results.append(result)
    finally:
        df.unpersist()
    return results


# -- report --------------------------------------------------------------------


def label(method: str) -> str:
    if method in VARIANTS:
        base, extra = VARIANTS[method]
        return f"{LABELS[base]}, " + ", ".join(f"{k}={v}" for k, v in extra.items())
    return LABELS[method]


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
        "fresh worker per task), pyarrow and boto3 included; the JVM's share is not in it. "
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
        f"starting it, mostly importing botocore, pydantic and pyarrow, "
        f"{phase(runs, 'setup'):.1f} s in job setup itself) and {after:.1f} s more after the "
        f"last task ends (another such worker for the job commit, which took "
        f"{phase(runs, 'commit'):.1f} s for {runs[0].files:,} files). The tasks took "
        f"{phase(runs, 'tasks'):.1f} s against {phase(direct, 'tasks'):.1f} s. A larger write "
        "pays the same fixed cost, so its ratio to the direct write is smaller."
    )


def section(
    results: Sequence[Result],
    cfg: BenchConfig,
    command: str,
    load: tuple[float, float],
    rounds: int = 1,
) -> str:
    import boto3
    import pyarrow
    import pyspark

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
        f"pyarrow {pyarrow.__version__}, boto3 {boto3.__version__}, Python "
        f"{platform.python_version()}, SeaweedFS {seaweedfs_version()} (`weed mini`) on "
        f"loopback. Part size {cfg.part_size // MIB} MiB, {cfg.threads} threads. "
        + (
            "One run each. "
            if rounds == 1
            else f"{rounds} rounds, every method once a round in an order rotated each round; "
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
    return "\n".join(parts)


def stdout_table(results: Sequence[Result]) -> str:
    header = (
        f"{'method':<30} {'round':>5} {'seconds':>8} {'files':>6} {'GiB':>6} "
        f"{'req/file':>9} {'task MiB':>9} {'tail':>6}"
    )
    lines = [header, "-" * len(header)]
    lines += [
        f"{r.method:<30} {r.round:>5} {r.seconds:>8.1f} {r.files:>6} "
        f"{r.bytes / GIB:>6.2f} {r.requests_per_file:>9.2f} "
        f"{r.peak_task_rss / MIB:>9.0f} {r.phases.get('tail', 0.0):>6.2f}"
        for r in results
    ]
    return "\n".join(
        lines
        + [
            "",
            results_table(results),
            "",
            phases_table(results),
            "",
            split_table(results),
            "",
            mix_table(results),
        ]
    )


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
        help=f"among {', '.join(METHODS)} and the --variant names",
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
        help="runs of every method, interleaved, order rotated each round",
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
    for name in ("rows", "tasks", "days", "rounds"):
        if getattr(args, name) != getattr(defaults, name):
            text += f" --{name} {getattr(args, name)}"
    for name, (base, extra) in args.variant:
        text += f" --variant {name}={base}:" + ",".join(f"{k}={v}" for k, v in extra.items())
    if list(args.methods) != list(METHODS):
        text += " --methods " + " ".join(args.methods)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    from zero_rename.embedded_s3 import EmbeddedS3

    args = parse_args(argv)
    VARIANTS.update(args.variant)
    unknown = [m for m in args.methods if m not in METHODS and m not in VARIANTS]
    if unknown:
        raise SystemExit(
            f"unknown method(s) {unknown}: choose from {', '.join(METHODS)} or a --variant name"
        )
    logging.basicConfig(level=logging.WARNING)
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
        spark = start_spark(cfg)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            results = run_benchmark(spark, cfg, args.methods, args.rounds)
        finally:
            spark.stop()
    load = (load_before, os.getloadavg()[0])
    print(stdout_table(results))
    print(f"load average (1 minute): {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    if not args.no_docs:
        write_section(
            args.output, HEADER, section(results, cfg, command_line(args), load, args.rounds)
        )
        progress(f"wrote the '{HEADER}' section of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
