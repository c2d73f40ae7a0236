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
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from zero_rename.core.layout import is_visible, partition_dir
from zero_rename.core.store import StoreConfig, make_client
from zero_rename.spark.datasource import (
    ZeroRenameCommitMessage,
    ZeroRenameDataSource,
    ZeroRenameWriter,
)
from zero_rename.spark.options import FileOptions, WriteConfig, parse_writer_options
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
HEADER = "## PySpark write"
TITLE = "# Benchmarks"
BENCH_FORMAT = "zero-rename-bench"
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


# -- counting requests, in every Python process ------------------------------

_REQUESTS: Counter[str] = Counter()
_HOOKED: set[int] = set()


def _count(event_name: str, **_: Any) -> None:
    # A before-send handler that returns a value replaces the response: return None.
    _REQUESTS[event_name.rsplit(".", 1)[-1]] += 1


def count_requests(client: Any) -> Any:
    """Count every request this boto3 client sends into this process's counter."""
    if id(client) not in _HOOKED:
        client.meta.events.register("before-send.s3", _count)
        _HOOKED.add(id(client))
    return client


def snapshot() -> Counter[str]:
    """This process's requests so far (tasks call this, never the global itself:
    a closure would carry a copy of it to the executor)."""
    return Counter(_REQUESTS)


def requests_since(before: Counter[str]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in _REQUESTS.items() if n - before.get(op, 0)}


def peak_rss() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_seconds() -> float:
    """CPU time this process has used, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid: int) -> float:
    """CPU time of another process (the S3 server), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def record(path: str, **fields: Any) -> None:
    """Append one JSON line; lines this short are written atomically with O_APPEND."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")


def new_client(endpoint_url: str, threads: int) -> Any:
    return count_requests(make_client(StoreConfig(endpoint_url=endpoint_url,
                                                  max_pool_connections=threads)))


# -- zero-rename, counted -----------------------------------------------------

class BenchWriter(ZeroRenameWriter):
    """The zero-rename writer, reporting its requests and task memory."""

    def __init__(self, config: WriteConfig, schema: Any, metrics: str, method: str) -> None:
        self.metrics, self.method = metrics, method
        before, cpu = snapshot(), cpu_seconds()
        super().__init__(config, schema)
        record(metrics, method=method, phase="setup", requests=requests_since(before),
               cpu=cpu_seconds() - cpu)

    def _committer(self) -> Any:
        committer = super()._committer()
        count_requests(committer.store.client)
        return committer

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ZeroRenameCommitMessage:
        before = snapshot()
        started = time.monotonic()
        message = super().write(iterator)
        record(self.metrics, method=self.method, phase="task", rows=message.rows,
               files=message.files, bytes=message.bytes, peak_rss=peak_rss(),
               cpu=cpu_seconds(), seconds=time.monotonic() - started,
               requests=requests_since(before))
        return message

    def commit(self, messages: Sequence[Any]) -> None:
        before, cpu = snapshot(), cpu_seconds()
        super().commit(messages)
        record(self.metrics, method=self.method, phase="commit", requests=requests_since(before),
               cpu=cpu_seconds() - cpu)


class BenchSource(ZeroRenameDataSource):
    """``zero-rename`` with two more options: where to report, and the method's name."""

    @classmethod
    def name(cls) -> str:
        return BENCH_FORMAT

    def writer(self, schema: Any, overwrite: bool) -> BenchWriter:
        options = dict(self.options)
        metrics, method = options.pop("bench_metrics"), options.pop("bench_method")
        return BenchWriter(parse_writer_options(options, overwrite), schema, metrics, method)


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
            chunk = bytes(self.buffer[:self.part_size])
            del self.buffer[:self.part_size]
            self._part(chunk)
        return len(data)

    def _part(self, chunk: bytes) -> None:
        if self.upload_id is None:
            self.upload_id = self.client.create_multipart_upload(
                Bucket=self.bucket, Key=self.key)["UploadId"]
        number = len(self.parts) + 1
        etag = self.client.upload_part(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id,
                                       PartNumber=number, Body=chunk)["ETag"]
        self.parts.append({"PartNumber": number, "ETag": etag})

    def close(self) -> None:
        if self.upload_id is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self.buffer))
            return
        if self.buffer:
            self._part(bytes(self.buffer))
        self.client.complete_multipart_upload(Bucket=self.bucket, Key=self.key,
                                              UploadId=self.upload_id,
                                              MultipartUpload={"Parts": self.parts})


class PlainTask:
    """What each task runs (through mapInArrow) for a baseline: the same Parquet
    writer and layout, files uploaded straight to ``prefix``."""

    def __init__(self, cfg: BenchConfig, method: str, prefix: str) -> None:
        self.cfg, self.method, self.prefix = cfg, method, prefix

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        before = snapshot()
        started = time.monotonic()
        context = TaskContext.get()
        task = f"{context.partitionId():05d}" if context else "00000"
        client = new_client(self.cfg.endpoint_url, self.cfg.threads)
        run_id = uuid.uuid4().hex
        seq: Counter[str] = Counter()

        def open_file(values: dict[str, str | None]) -> PlainUpload:
            directory = partition_dir(("dt",), values)
            name = f"part-{task}-{run_id}.c{seq[directory]:03d}.snappy.parquet"
            seq[directory] += 1
            return PlainUpload(client, self.cfg.bucket, f"{self.prefix}/{directory}{name}",
                               self.cfg.part_size)

        writer = PartitionedParquetWriter(open_file, ("dt",), FileOptions())
        for batch in batches:
            writer.write(batch)
        files = writer.close()
        record(self.cfg.metrics_path, method=self.method, phase="task", rows=writer.rows,
               files=len(files), bytes=sum(f.bytes for f in files), peak_rss=peak_rss(),
               cpu=cpu_seconds(), seconds=time.monotonic() - started,
               requests=requests_since(before))
        yield pa.record_batch({"files": pa.array([len(files)], pa.int64())})


def rename_all(cfg: BenchConfig, source: str, target: str) -> None:
    """Job commit of the rename baseline: list, then copy and delete each object."""
    client = new_client(cfg.endpoint_url, cfg.threads)
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=cfg.bucket,
                                                                 Prefix=source + "/"):
        keys += [o["Key"] for o in page.get("Contents", [])]

    def rename(key: str) -> None:
        final = target + key[len(source):]
        client.copy_object(Bucket=cfg.bucket, Key=final,
                           CopySource={"Bucket": cfg.bucket, "Key": key})
        client.delete_object(Bucket=cfg.bucket, Key=key)

    with ThreadPoolExecutor(cfg.threads) as pool:
        list(pool.map(rename, keys))


# -- runs ----------------------------------------------------------------------

@dataclass
class Result:
    method: str
    seconds: float
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

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def requests_per_file(self) -> float:
        return self.total_requests / self.files if self.files else 0.0


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


def run_method(spark: Any, df: Any, cfg: BenchConfig, method: str) -> Result:
    prefix = cfg.prefix(method)
    dest = f"s3://{cfg.bucket}/{prefix}"
    driver_before, driver_cpu = snapshot(), cpu_seconds()
    server_cpu = process_cpu_seconds(cfg.server_pid) if cfg.server_pid else 0.0
    started = time.monotonic()
    if method.startswith("zero-rename-"):
        (df.write.format(BENCH_FORMAT).mode("append").option("partition_by", "dt")
         .option("committer", method.removeprefix("zero-rename-"))
         .option("part_size", str(cfg.part_size)).option("threads", str(cfg.threads))
         .option("endpoint", cfg.endpoint_url)
         .option("bench_metrics", cfg.metrics_path).option("bench_method", method)
         .save(dest))
    elif method == "direct":
        df.mapInArrow(PlainTask(cfg, method, prefix), "files long").collect()
    elif method == "rename":
        temporary = f"{prefix}/_temporary/{uuid.uuid4().hex}"
        df.mapInArrow(PlainTask(cfg, method, temporary), "files long").collect()
        rename_all(cfg, temporary, prefix)
    else:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    seconds = time.monotonic() - started
    if cfg.server_pid:
        server_cpu = process_cpu_seconds(cfg.server_pid) - server_cpu
    driver_cpu = cpu_seconds() - driver_cpu
    result = summarize(cfg, method, seconds, requests_since(driver_before))
    result.python_cpu = round(result.python_cpu + driver_cpu, 1)
    result.server_cpu = round(server_cpu, 1)
    return result


def summarize(cfg: BenchConfig, method: str, seconds: float,
              driver_requests: dict[str, int]) -> Result:
    """Gather the run's records and check what it left in the bucket."""
    records = [json.loads(line) for line in Path(cfg.metrics_path).read_text().splitlines()]
    mine = [r for r in records if r["method"] == method]
    tasks = [r for r in mine if r["phase"] == "task"]
    requests: Counter[str] = Counter(driver_requests)
    for r in mine:
        requests.update(r["requests"])
    rss = [r["peak_rss"] for r in tasks] or [0]
    result = Result(method=method, seconds=round(seconds, 2), requests=dict(requests),
                    rows=sum(r["rows"] for r in tasks), tasks=len(tasks),
                    peak_task_rss=max(rss), median_task_rss=int(statistics.median(rss)),
                    python_cpu=sum(r.get("cpu", 0.0) for r in mine))
    check_output(cfg, result)
    return result


def check_output(cfg: BenchConfig, result: Result) -> None:
    """Count the visible files and anything left behind; refuse an incomplete run."""
    client = make_client(StoreConfig(endpoint_url=cfg.endpoint_url))  # not counted
    prefix = cfg.prefix(result.method) + "/"
    leftover = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=cfg.bucket,
                                                                 Prefix=prefix):
        for obj in page.get("Contents", []):
            relative = obj["Key"][len(prefix):]
            if is_visible(relative):
                result.files += 1
                result.bytes += obj["Size"]
            elif relative.startswith("_temporary/"):
                leftover += 1
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=cfg.bucket,
                                                                        Prefix=prefix):
        leftover += len(page.get("Uploads", []))
    result.leftover = leftover
    if result.rows != cfg.rows or leftover:
        raise RuntimeError(f"{result.method}: wrote {result.rows} of {cfg.rows} rows, "
                           f"{leftover} object(s) or upload(s) left behind")


def start_spark(cfg: BenchConfig, driver_memory: str = "6g") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Tasks import this module; executors find it on PYTHONPATH.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("zero-rename spark bench")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", driver_memory)
            .config("spark.sql.shuffle.partitions", str(cfg.tasks))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH))
            # One fresh Python worker per task: its peak RSS is that task's.
            .config("spark.python.worker.reuse", "false")
            .getOrCreate())


def warm_up(spark: Any, cfg: BenchConfig, methods: Sequence[str]) -> None:
    """Run each method once on a few rows, untimed: the first use of a code path
    (class loading in the JVM, the first Python workers) is not any method's cost."""
    small = BenchConfig(cfg.endpoint_url, cfg.bucket, cfg.metrics_path + ".warm-up",
                        server_pid=cfg.server_pid, rows=1000, tasks=2, days=2,
                        area="warm-up")
    df = source_frame(spark, small)
    for method in methods:
        run_method(spark, df, small, method)
    df.unpersist()


def run_benchmark(spark: Any, cfg: BenchConfig, methods: Sequence[str]) -> list[Result]:
    spark.dataSource.register(BenchSource)
    warm_up(spark, cfg, methods)
    df = source_frame(spark, cfg)
    results = []
    try:
        for method in methods:
            progress(f"{method}: writing {cfg.rows:,} rows in {cfg.tasks} tasks...")
            result = run_method(spark, df, cfg, method)
            progress(f"{method}: {result.seconds:.1f} s, {result.files} files, "
                     f"{result.bytes / GIB:.2f} GiB, {result.requests_per_file:.2f} requests "
                     f"a file, task peak {result.peak_task_rss / MIB:.0f} MiB")
            results.append(result)
    finally:
        df.unpersist()
    return results


# -- report --------------------------------------------------------------------

def _mix(result: Result) -> str:
    per_file = sorted(result.requests.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n / result.files:.2f}" for op, n in per_file)


def results_table(results: Sequence[Result]) -> str:
    direct = next((r for r in results if r.method == "direct"), None)
    lines = ["| method | wall time (s) | vs direct | Python CPU (s) | S3 server CPU (s) | "
             "peak task memory (MiB) | median task memory (MiB) | files | GiB | S3 requests | "
             "requests per file |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ratio = f"{r.seconds / direct.seconds:.2f}x" if direct else "-"
        lines.append(f"| {LABELS[r.method]} | {r.seconds:.1f} | {ratio} | {r.python_cpu:.1f} | "
                     f"{r.server_cpu:.1f} | {r.peak_task_rss / MIB:.0f} | "
                     f"{r.median_task_rss / MIB:.0f} | {r.files:,} | {r.bytes / GIB:.2f} | "
                     f"{r.total_requests:,} | {r.requests_per_file:.2f} |")
    return "\n".join(lines)


def mix_table(results: Sequence[Result]) -> str:
    lines = ["| method | requests per file, by operation |", "|---|---|"]
    lines += [f"| {LABELS[r.method]} | {_mix(r)} |" for r in results]
    return "\n".join(lines)


def reading(results: Sequence[Result]) -> str:
    by = {r.method: r for r in results}
    out = []
    direct, rename = by.get("direct"), by.get("rename")
    for name in ("zero-rename-magic", "zero-rename-staging", "rename"):
        r = by.get(name)
        if r and direct:
            out.append(
                f"{LABELS[name][0].upper() + LABELS[name][1:]}: {r.seconds / direct.seconds:.2f}x "
                f"the wall time of the unsafe direct write, {r.python_cpu:.0f} s of Python CPU "
                f"against {direct.python_cpu:.0f} s and {r.server_cpu:.0f} s of S3 server CPU "
                f"against {direct.server_cpu:.0f} s, {r.requests_per_file:.2f} requests a file "
                f"against {direct.requests_per_file:.2f}.")
    if rename:
        out.append("The rename baseline's copies move every byte a second time, inside the "
                   "server.")
    out.append(
        "A multipart upload costs at least three requests (create, one part, complete) where a "
        "small file written directly is one PutObject; the committer adds one ListParts per "
        "file when it validates uploads before its point of no return (`verify_uploads`, on by "
        "default), and a few requests per task and per job (the job record, the fence read, "
        "the plan, the journal, `_SUCCESS`, cleanup). It moves no data after the tasks: "
        "CompleteMultipartUpload is a metadata operation whatever the file size, where a "
        "rename copies the data. On this machine S3 is on loopback and shares the two cores "
        "with Spark, so times mostly follow CPU (Parquet encoding, the server's work) rather "
        "than the network; on real S3 per-request latency weighs more, and copies of large "
        "files cost far more than here.")
    out.append(
        "Task memory is the peak resident size of the Python worker that ran the task (one "
        "fresh worker per task), pyarrow and boto3 included; the JVM's share is not in it. "
        "The magic committer buffers at most one part per open file in memory; the staging "
        "committer spools files to local disk and uploads them at task commit.")
    return "\n\n".join(out)


def section(results: Sequence[Result], cfg: BenchConfig, command: str,
            load: tuple[float, float]) -> str:
    import boto3
    import pyarrow
    import pyspark

    from bench.report import seaweedfs_version

    shared = (" The machine was shared with other work during the run, so times are slower "
              "and noisier than an idle machine's; request counts are not affected."
              if max(load) > (os.cpu_count() or 1) else "")
    parts = [
        HEADER, "",
        f"What it measures: one cached DataFrame of {cfg.rows:,} rows (`id`, `dt`, `region`, "
        f"`amount`, `event_time`, a 128-character `payload`), {cfg.tasks} Spark tasks, each "
        f"holding rows of all {cfg.days} days sorted by day, written Hive-partitioned by `dt` "
        "as snappy Parquet, so each task writes one file per day. Every method uses the same "
        "Parquet writer and layout; only the way files reach S3 differs. Wall time is the "
        "write as the driver sees it, job commit (or copies) included. Requests are counted "
        "per HTTP request sent, retries included, through botocore's event hooks in every "
        "process that talks to S3: driver, planning and commit workers, and tasks.", "",
        "- **zero-rename**: `df.write.format(\"zero-rename\").option(\"partition_by\", \"dt\")`, "
        "job setup on the driver, pending multipart uploads from every task attempt, job "
        "commit in the driver's `commit()`.",
        "- **direct**: each task writes its files straight to their final keys (PutObject, or "
        "a multipart upload above the part size): no commit protocol, partial output visible "
        "on failure, duplicates on retries. The floor of what a write can cost.",
        "- **rename**: the same direct writes under `_temporary/`, then the driver lists them "
        "and copies each to its final key and deletes it (CopyObject + DeleteObject, "
        f"{cfg.threads} threads), one rename per file. Hadoop's v1 commit algorithm renames "
        "twice (task and job commit), so this is its lower bound.", "",
        f"Machine: {os.cpu_count()} cores, local Spark `local[2]`, PySpark {pyspark.__version__}, "
        f"pyarrow {pyarrow.__version__}, boto3 {boto3.__version__}, Python "
        f"{platform.python_version()}, SeaweedFS {seaweedfs_version()} (`weed mini`) on "
        f"loopback. Part size {cfg.part_size // MIB} MiB, {cfg.threads} threads. One run each. "
        "Python CPU is the task workers' (each ran one task, imports included), the driver-side "
        "Python workers' (job setup, job commit) and the driver's (the rename baseline's "
        "copies); the JVM's is left out, as it does the same work for every method. "
        f"Load average (1 minute) {load[0]:.1f} at the start and {load[1]:.1f} at the end."
        + shared, "",
        "Reproduce with `make bench-spark`, or:", "", "```", command, "```", "",
        "### Results", "", results_table(results), "",
        "### Requests per file, by operation", "", mix_table(results), "",
        "### Reading", "", reading(results), "",
    ]
    return "\n".join(parts)


def replace_section(text: str, body: str, header: str = HEADER) -> str:
    """``text`` with the ``header`` section replaced by ``body``, or appended;
    every other section stays as it is."""
    if not text.strip():
        return f"{TITLE}\n\n{body.rstrip()}\n"
    lines = text.splitlines()
    if header not in lines:
        return text.rstrip("\n") + "\n\n" + body.rstrip() + "\n"
    start = lines.index(header)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    tail = lines[end:]
    return "\n".join(lines[:start] + body.rstrip().splitlines() + ([""] + tail if tail else [])
                     ) + "\n"


def stdout_table(results: Sequence[Result]) -> str:
    header = (f"{'method':<20} {'seconds':>8} {'files':>6} {'GiB':>6} {'req/file':>9} "
              f"{'task MiB':>9}")
    lines = [header, "-" * len(header)]
    lines += [f"{r.method:<20} {r.seconds:>8.1f} {r.files:>6} {r.bytes / GIB:>6.2f} "
              f"{r.requests_per_file:>9.2f} {r.peak_task_rss / MIB:>9.0f}" for r in results]
    return "\n".join(lines)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=BenchConfig.rows)
    parser.add_argument("--tasks", type=int, default=BenchConfig.tasks)
    parser.add_argument("--days", type=int, default=BenchConfig.days)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--output", default="docs/benchmarks.md",
                        help="page whose '## PySpark write' section is rewritten")
    parser.add_argument("--no-docs", action="store_true", help="print the results only")
    return parser.parse_args(argv)


def command_line(args: argparse.Namespace) -> str:
    text = "python -m bench.spark_bench"
    defaults = parse_args([])
    for name in ("rows", "tasks", "days"):
        if getattr(args, name) != getattr(defaults, name):
            text += f" --{name} {getattr(args, name)}"
    if list(args.methods) != list(METHODS):
        text += " --methods " + " ".join(args.methods)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    from zero_rename.embedded_s3 import EmbeddedS3

    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    load_before = os.getloadavg()[0]
    with EmbeddedS3() as server, tempfile.TemporaryDirectory(prefix="zr-spark-bench-") as tmp:
        # Spark's workers and the store layer find credentials in the environment.
        os.environ.update(server.environment())
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        server.create_bucket(bucket)
        cfg = BenchConfig(server.endpoint_url, bucket, str(Path(tmp) / "metrics.jsonl"),
                          server_pid=server.pid, rows=args.rows, tasks=args.tasks, days=args.days)
        spark = start_spark(cfg)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            results = run_benchmark(spark, cfg, args.methods)
        finally:
            spark.stop()
    load = (load_before, os.getloadavg()[0])
    print(stdout_table(results))
    if not args.no_docs:
        target = Path(args.output)
        current = target.read_text() if target.exists() else ""
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(replace_section(current, section(results, cfg, command_line(args),
                                                           load)))
        progress(f"wrote the '{HEADER}' section of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
