"""Job-commit benchmark: the committer against its floor and against copy-then-delete.

For each file count, each method commits the same number of small files, at
the same concurrency, over a connection pool of that size:

- ``committer``: this committer's job commit, its uploads confirmed pending
  by listing them (the default), and ``committer-noverify`` without that check;
  each runs in a fresh child process so its peak memory is its own;
- ``floor``: a bare loop of parallel CompleteMultipartUpload calls on uploads
  prepared the same way: no committer can complete uploads with fewer requests;
- ``copy-delete`` and ``copy-bulk``: what a rename-based commit costs on S3,
  files written as plain objects under a temporary prefix, then listed, copied
  to their final keys and deleted, one DeleteObject per file (a per-file rename)
  or one DeleteObjects per 1,000 (a directory rename; not run by default).

Writing the files is preparation and is not timed; only the commit is. The
commit's requests are counted, and for the committer the task attempts'
requests too, so the whole protocol's requests per file are known.

``committer-iceberg`` and ``committer-delta`` (not run by default) are the
committer's job commit with ``table_format`` set: the same files, each a real
Parquet file with the statistics of its own footer and the schema in every
task manifest (as the Spark writer leaves them), published as one Iceberg
snapshot (the embedded SQL catalog) or one Delta version, appended to a table
an earlier one-file job created. Their commits'
requests are counted at the wire, through the suite's S3 proxy
(``tests/s3proxy.py``) in front of the server: the formats' own requests
(PyIceberg's pyarrow FileIO, delta-rs' object_store) pass no botocore hook.
``--wire`` sends every method through that proxy, for times comparable with
theirs. ``--methods committer,committer-iceberg,committer-delta --wire`` puts
the three side by side, in a section of their own.

``--before TREE`` (a checkout of earlier code) adds the method ``committer@before``:
the same job commit, run in a child whose ``zero_rename`` is that tree's
(``TREE/plugin`` first on its path), on jobs this run prepared the same way, so
a change is measured against the code before it in one run.

``--scale N,...`` runs the committer alone at larger counts, for its time,
requests and peak memory; with 0-byte files (the default) the files are
written by :mod:`bench.scale_prep`, which leaves what task attempts leave
(pending uploads, task manifests) in minutes rather than hours. Run
``python -m bench.commit_bench --help``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import importlib
import io
import logging
import multiprocessing
import os
import pickle
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import commit_report, scale_prep
from bench.commit_results import TABLE_METHODS, BenchConfig, Run, summarize
from bench.counter import RequestCounter, Step
from bench.objects import complete_upload, object_count, rename_prefix, visible_files
from bench.page import write_section
from bench.process import peak_rss
from tests.s3proxy import S3Proxy, proxy_for
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import FileStats, JobRecord, PendingUpload, TaskManifest
from zero_rename.core.s3.client import DELETE_BATCH, make_client
from zero_rename.embedded_s3 import EmbeddedS3

# The file counts, repeats and methods of ``make bench``: the median of three
# runs of 1,000 files, one run of 10,000. Preparing 10,000 uploads per method
# is the expensive part; ``copy-bulk`` is left to ``--methods`` for the same
# reason. This keeps the whole run near ten minutes on two cores.
DEFAULT_FILES = (1000, 10_000)
DEFAULT_REPEATS = (3, 1)
DEFAULT_METHODS = ("committer", "committer-noverify", "floor", "copy-delete")


Method = Callable[[BenchConfig, int, str], Run]

# The proxy counting requests at the wire while a method runs through it, if any.
_wire: S3Proxy | None = None


@contextmanager
def at_the_wire(cfg: BenchConfig) -> Iterator[BenchConfig]:
    """``cfg`` with its endpoint behind a proxy that counts every request any client
    sends (botocore, pyarrow, object_store), for as long as the block runs."""
    global _wire
    with proxy_for(cfg.endpoint_url) as proxy:
        _wire = proxy
        try:
            yield dataclasses.replace(cfg, endpoint_url=proxy.endpoint_url)
        finally:
            _wire = None


def wire_counts() -> Counter[str]:
    return _wire.counts if _wire is not None else Counter()


# -- preparation (not timed) ---------------------------------------------------
@dataclass(frozen=True)
class TableFiles:
    """What the files of a table-format job are: one real Parquet file (every file of
    the job has its bytes), its footer's statistics, and the schema of the files."""

    body: bytes
    stats: FileStats
    schema: str  # Arrow IPC, base64, as TaskManifest.table_schema


def table_files(rows: int = 10) -> TableFiles:
    # Imported here: every committing child imports this module, and pyarrow would
    # add some 55 MiB to the peak memory of commits that never use it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from zero_rename.spark.parquet import file_stats

    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    out = io.BytesIO()
    footers: list[pq.FileMetaData] = []
    with pq.ParquetWriter(out, schema, metadata_collector=footers) as writer:
        writer.write_table(pa.table({"id": range(rows), "name": [f"n{i}" for i in range(rows)]}))
    encoded = base64.b64encode(schema.serialize().to_pybytes()).decode()
    return TableFiles(out.getvalue(), file_stats(footers[0]), encoded)


def task_sizes(files: int, files_per_task: int) -> list[int]:
    """Files per task: full tasks, then the remainder."""
    full, rest = divmod(files, files_per_task)
    return [files_per_task] * full + ([rest] if rest else [])


def write_tasks(
    committer: Committer,
    job: JobRecord,
    files: int,
    cfg: BenchConfig,
    table: TableFiles | None = None,
) -> list[TaskManifest]:
    """Write ``files`` small files in task attempts, ``cfg.threads`` tasks at a time,
    each committed with a published manifest, as a job's tasks would; with
    ``table``, Parquet files with their statistics and schema."""

    def task(index: int, count: int) -> TaskManifest:
        attempt = committer.task_attempt(job, f"{index:05d}")
        if table is not None:
            attempt.table_schema = table.schema
        for _ in range(count):
            with attempt.open() as out:
                out.write(cfg.body if table is None else table.body)
                if table is not None:
                    out.rows, out.stats = 10, table.stats
        return attempt.commit(publish=True)

    sizes = task_sizes(files, cfg.files_per_task)
    with ThreadPoolExecutor(cfg.threads) as pool:
        return list(pool.map(task, range(len(sizes)), sizes))


def job_options(cfg: BenchConfig, verify: bool = True) -> dict[str, Any]:
    return {
        "committer": "magic",
        "threads": cfg.threads,
        "verify_uploads": verify,
        "conflict_mode": cfg.conflict_mode,
    }


def prepared_job(
    cfg: BenchConfig, tag: str, files: int, verify: bool = True, table_format: str = "none"
) -> tuple[Committer, JobRecord, list[TaskManifest], int]:
    """A job whose task attempts wrote ``files`` files, and the requests they sent
    (job setup included): at the wire when a proxy counts them, else botocore's."""
    committer = Committer(f"s3://{cfg.bucket}/{tag}", cfg.store_config())
    table = table_files() if table_format != "none" else None
    before = wire_counts()
    with RequestCounter(committer.store.client) as counter:
        job = committer.setup_job(
            {**job_options(cfg, verify), "table_format": table_format},
            table_schema=table.schema if table else "",
        )
        manifests = write_tasks(committer, job, files, cfg, table)
    if _wire is not None:
        return committer, job, manifests, (wire_counts() - before).total()
    return committer, job, manifests, counter.total


def put_objects(client: Any, bucket: str, keys: Sequence[str], body: bytes, threads: int) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=body), keys))


# -- the methods ---------------------------------------------------------------
@dataclass(frozen=True)
class ChildCommit:
    """What the child process that ran ``commit_job`` reports."""

    seconds: float
    requests: dict[str, int]
    steps: tuple[Step, ...]
    files: int
    peak_rss: int  # bytes


def commit_in_child(
    cfg: BenchConfig, dest: str, job_id: str, table_format: str = "none"
) -> ChildCommit:
    """``commit_job`` in this (fresh, spawned) process, with its requests counted.
    A table format's library is imported first, untimed: a process pays that once
    (PyIceberg's import takes seconds), not at each commit."""
    if table_format != "none":
        importlib.import_module(f"zero_rename.core.tables.{table_format}")
    committer = Committer(dest, cfg.store_config())
    with RequestCounter(committer.store.client) as counter:
        start = time.perf_counter()
        summary = committer.commit_job(job_id)
        seconds = time.perf_counter() - start
        peak = peak_rss()  # before the counter's steps are put together
    return ChildCommit(seconds, dict(counter.counts), tuple(counter.steps()), summary.files, peak)


def committer_commit(cfg: BenchConfig, files: int, tag: str, verify: bool = True) -> Run:
    """The committer's job commit: load manifests, validate, plan, complete, _SUCCESS,
    clean up; in a spawned child so that its peak memory is measured alone and no
    memory of the preparation counts."""
    committer, job, _, writes = prepared_job(cfg, tag, files, verify)
    name = "committer" if verify else "committer-noverify"
    return commit_and_check(cfg, committer, job, name, files, writes)


def committer_at_scale(cfg: BenchConfig, files: int, tag: str, tree: Path | None = None) -> Run:
    """The committer's job commit of ``files`` empty files, written by the cheap
    preparation of :mod:`bench.scale_prep` (the files' content plays no part in a
    commit, and task attempts would take hours to write a million); with ``tree``,
    committed with that tree's package (``--before``)."""
    # The whole protocol's count is left out: the preparation sends no fence reads.
    committer, job, _ = scale_prep.prepared_scale_job(
        cfg.store_config(), f"s3://{cfg.bucket}/{tag}", files, cfg.files_per_task, job_options(cfg)
    )
    name = "committer-scale" if tree is None else "committer-scale@before"
    return commit_and_check(cfg, committer, job, name, files, tree=tree)


# --before: the earlier tree whose package ``committer@before`` commits with.
BEFORE: dict[str, Path] = {}
# A child committing with the earlier tree's package: its plugin/ is first on the
# path (PYTHONPATH), then this checkout's root, for bench's own modules.
_BEFORE_CHILD = """
import pickle, sys
import zero_rename
from bench.commit_bench import commit_in_child
print("zero_rename from", zero_rename.__file__, file=sys.stderr)
sys.stdout.buffer.write(pickle.dumps(commit_in_child(*pickle.load(sys.stdin.buffer))))
"""
ROOT = Path(__file__).resolve().parents[1]


def commit_with_tree(tree: Path, args: tuple[Any, ...]) -> ChildCommit:
    """:func:`commit_in_child` in a fresh process importing ``tree``'s package."""
    plugin = tree / "plugin"
    done = subprocess.run(
        [sys.executable, "-c", _BEFORE_CHILD],
        input=pickle.dumps(args),
        env={**os.environ, "PYTHONPATH": f"{plugin}{os.pathsep}{ROOT}"},
        capture_output=True,
        check=False,
    )
    stderr = done.stderr.decode(errors="replace")
    if done.returncode:
        raise RuntimeError(f"the commit with {plugin} failed:\n{stderr[-2000:]}")
    if f"zero_rename from {plugin}" not in stderr:
        raise RuntimeError(f"the child did not import zero_rename from {plugin}")
    result: ChildCommit = pickle.loads(done.stdout)
    return result


# Each commit in a fresh spawned process, so that its peak memory is its own;
# the methods named here commit in this process instead (the machinery's smoke
# test: a spawn importing a table format's library costs seconds of start-up,
# and no memory is compared for those methods there).
IN_PROCESS: set[str] = set()


def commit_and_check(
    cfg: BenchConfig,
    committer: Committer,
    job: JobRecord,
    name: str,
    files: int,
    writes: int = 0,
    tree: Path | None = None,
) -> Run:
    """``commit_job`` in a spawned child, so that its peak memory is measured alone
    (``tree``: with that tree's package); then what is visible and what was left
    pending."""
    before = wire_counts()
    args = (cfg, committer.dest.url, job.job_id, job.options.table_format)
    if tree is not None:
        result = commit_with_tree(tree, args)
    elif name in IN_PROCESS:
        result = commit_in_child(*args)
    else:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
            result = child.submit(commit_in_child, *args).result()
    # At the wire, every client's requests; else those botocore sent in the child.
    requests = dict(wire_counts() - before) if _wire is not None else result.requests
    # A file counts as committed when it is visible and the commit reported it.
    committed = min(
        visible_files(committer.store.client, cfg.bucket, committer.dest.dir), result.files
    )
    return Run(
        name,
        files,
        seconds=result.seconds,
        requests=requests,
        steps=result.steps,
        committed=committed,
        leftover=len(committer.pending_uploads(job.job_id)),
        write_requests=writes,
        peak_rss=result.peak_rss,
    )


def committer_commit_before(cfg: BenchConfig, files: int, tag: str) -> Run:
    """The committer's job commit with the ``--before`` tree's package."""
    committer, job, _, writes = prepared_job(cfg, tag, files)
    return commit_and_check(cfg, committer, job, "committer@before", files, writes, BEFORE["tree"])


def committer_commit_noverify(cfg: BenchConfig, files: int, tag: str) -> Run:
    return committer_commit(cfg, files, tag, verify=False)


def table_commit(cfg: BenchConfig, files: int, tag: str, table_format: str) -> Run:
    """The committer's job commit publishing the job as one commit of ``table_format``
    (Iceberg: the embedded catalog, a table named from the destination), appended
    to a table an earlier job of one file created (untimed): the commit of every
    day but a table's first."""
    cfg = dataclasses.replace(cfg, conflict_mode="append")
    first, earlier, _, _ = prepared_job(cfg, tag, 1, table_format=table_format)
    first.commit_job(earlier.job_id)
    committer, job, _, writes = prepared_job(cfg, tag, files, table_format=table_format)
    run = commit_and_check(cfg, committer, job, f"committer-{table_format}", files, writes)
    published = committer.job(job.job_id).table_commit
    if published is None or published.files != files:
        raise RuntimeError(f"job {job.job_id} was not published whole: {published}")
    return run


def iceberg_commit(cfg: BenchConfig, files: int, tag: str) -> Run:
    return table_commit(cfg, files, tag, "iceberg")


def delta_commit(cfg: BenchConfig, files: int, tag: str) -> Run:
    return table_commit(cfg, files, tag, "delta")


def complete_floor(cfg: BenchConfig, files: int, tag: str) -> Run:
    """Parallel CompleteMultipartUpload calls and nothing else, on the same kind of uploads."""
    committer, job, manifests, _ = prepared_job(cfg, tag, files)
    uploads = [u for m in manifests for u in m.uploads]
    client = committer.store.client

    def complete(upload: PendingUpload) -> None:
        complete_upload(client, cfg.bucket, upload)

    with RequestCounter(client) as counter:
        start = time.perf_counter()
        with ThreadPoolExecutor(cfg.threads) as pool:
            list(pool.map(complete, uploads))
        seconds = time.perf_counter() - start
    return Run(
        "floor",
        files,
        seconds,
        dict(counter.counts),
        tuple(counter.steps()),
        committed=visible_files(client, cfg.bucket, committer.dest.dir),
        leftover=len(committer.pending_uploads(job.job_id)),
    )


def copy_then_delete(cfg: BenchConfig, files: int, tag: str, bulk: bool = False) -> Run:
    """A rename-based commit: list the temporary prefix, copy each file to its
    final key, delete the source (per file, or in batches of 1,000 after the copies)."""
    client = make_client(cfg.store_config())
    final = f"{tag}/"
    temporary = f"{tag}/_temporary/0/"
    names = [f"part-{i:05d}.parquet" for i in range(files)]
    put_objects(client, cfg.bucket, [temporary + n for n in names], cfg.body, cfg.threads)

    def delete_batch(keys: Sequence[str]) -> None:
        client.delete_objects(
            Bucket=cfg.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )

    with RequestCounter(client) as counter:
        start = time.perf_counter()
        sources = rename_prefix(client, cfg.bucket, temporary, final, cfg.threads, delete=not bulk)
        if bulk:
            batches = [sources[i : i + DELETE_BATCH] for i in range(0, len(sources), DELETE_BATCH)]
            with ThreadPoolExecutor(cfg.threads) as pool:
                list(pool.map(delete_batch, batches))
        seconds = time.perf_counter() - start
    return Run(
        "copy-bulk" if bulk else "copy-delete",
        files,
        seconds,
        dict(counter.counts),
        tuple(counter.steps()),
        committed=visible_files(client, cfg.bucket, final),
        leftover=object_count(client, cfg.bucket, temporary),
    )


def copy_then_bulk_delete(cfg: BenchConfig, files: int, tag: str) -> Run:
    return copy_then_delete(cfg, files, tag, bulk=True)


METHODS: dict[str, Method] = {
    "committer": committer_commit,
    "committer-noverify": committer_commit_noverify,
    "floor": complete_floor,
    "copy-delete": copy_then_delete,
    "copy-bulk": copy_then_bulk_delete,
    "committer-iceberg": iceberg_commit,
    "committer-delta": delta_commit,
    "committer@before": committer_commit_before,
}
assert set(TABLE_METHODS) <= set(METHODS)


# -- running -------------------------------------------------------------------
Progress = Callable[[str], None]


def scale_runs(
    cfg: BenchConfig, scale_counts: Sequence[int], scale_file_size: int, progress: Progress | None
) -> list[Run]:
    """The committer alone, once for each of ``scale_counts`` (and with ``--before``,
    the earlier tree's too, on a job prepared alike)."""
    runs: list[Run] = []
    for files in scale_counts:
        # Preparing the files is most of the cost at this size: one method only.
        tag = f"scale-{files}-{uuid.uuid4().hex[:8]}"
        start = time.monotonic()
        if scale_file_size:
            run = committer_commit(dataclasses.replace(cfg, file_size=scale_file_size), files, tag)
            run = dataclasses.replace(run, method="committer-scale")
        else:
            run = committer_at_scale(cfg, files, tag)
        runs.append(run)
        if "tree" in BEFORE and not scale_file_size:
            # The same commit with the earlier tree's package, on a job prepared alike.
            runs.append(committer_at_scale(cfg, files, f"{tag}-before", BEFORE["tree"]))
        if progress:
            progress(
                f"{files:>7} files  committer (scale, {scale_file_size}-byte files): "
                f"{run.seconds:7.2f} s, {run.total_requests} requests, "
                f"{run.peak_rss / 2**20:.0f} MiB, {run.committed} committed "
                f"({time.monotonic() - start:.0f} s with preparation)"
            )
            for step in sorted(run.steps, key=lambda s: -s.seconds)[:5]:
                progress(f"    {step.op}: {step.requests} requests, {step.seconds:.1f} s")
            if runs[-1] is not run:
                progress(
                    f"{files:>7} files  committer@before (scale): {runs[-1].seconds:7.2f} s, "
                    f"{runs[-1].total_requests} requests, {runs[-1].peak_rss / 2**20:.0f} MiB"
                )
    return runs


def run_benchmark(
    cfg: BenchConfig,
    file_counts: Sequence[int],
    repeats: Sequence[int],
    methods: Sequence[str] = DEFAULT_METHODS,
    progress: Progress | None = None,
    scale_counts: Sequence[int] = (),
    scale_file_size: int = 0,
    wire: bool = False,
) -> list[Run]:
    """Every method for every file count, ``repeats[i]`` times for ``file_counts[i]``;
    then the committer alone, once for each of ``scale_counts``, with files of
    ``scale_file_size`` bytes: its time, requests and memory at scale.

    Each method prepares its own files right before its timed phase, so no
    method's pending uploads or temporary objects are on the server during
    another's commit. The table-format methods run through a counting proxy
    (:func:`at_the_wire`); with ``wire`` every method does.
    """
    runs = scale_runs(cfg, scale_counts, scale_file_size, progress)
    for files, repeat in zip(file_counts, repeats, strict=True):
        for round_ in range(repeat):
            for name in methods:
                # A key of the tag's: no "@" (committer@before), which reads as credentials.
                tag = f"{name.replace('@', '-')}-{files}-{round_}-{uuid.uuid4().hex[:8]}"
                if wire or name in TABLE_METHODS:
                    with at_the_wire(cfg) as counted:
                        run = METHODS[name](counted, files, tag)
                else:
                    run = METHODS[name](cfg, files, tag)
                runs.append(run)
                if progress:
                    progress(
                        f"{files:>6} files  {name:<19} round {round_ + 1}/{repeat}: "
                        f"{run.seconds:7.2f} s, {run.total_requests} requests, "
                        f"{run.committed} committed"
                    )
    return runs


# -- command line --------------------------------------------------------------
def _counts(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got {text!r}"
        )
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.commit_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--files",
        type=_counts,
        default=list(DEFAULT_FILES),
        help="file counts, comma-separated (default: 1000,10000)",
    )
    parser.add_argument(
        "--repeat",
        type=_counts,
        default=None,
        help="runs per file count, one number for all or one per count; "
        "the median is reported (default: 3,1 for the default counts, "
        "else 1)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=64,
        help="threads and connection pool size of every method (default: 64)",
    )
    parser.add_argument(
        "--files-per-task",
        type=int,
        default=10,
        help="files each task attempt writes (default: 10)",
    )
    parser.add_argument(
        "--file-size", type=int, default=1024, help="bytes per file (default: 1024)"
    )
    parser.add_argument(
        "--methods",
        type=lambda t: [m for m in t.split(",") if m],
        default=list(DEFAULT_METHODS),
        help=f"comma-separated, from {','.join(METHODS)}; ratios need floor "
        f"(default: {','.join(DEFAULT_METHODS)})",
    )
    parser.add_argument(
        "--scale",
        type=_counts,
        default=[],
        help="file counts, comma-separated, at which the committer runs "
        "alone, once, for its time, requests and peak memory at scale "
        "(default: none)",
    )
    parser.add_argument(
        "--scale-file-size",
        type=int,
        default=0,
        help="bytes per file of the --scale runs (default: 0)",
    )
    parser.add_argument(
        "--wire",
        action="store_true",
        help="send every method's requests through the counting S3 proxy, as the "
        "table-format methods always are, and count them there (default: off)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        metavar="TREE",
        help="a checkout of earlier code, for the method committer@before (default: none)",
    )
    parser.add_argument(
        "--output",
        default="docs/benchmarks.md",
        help="Markdown file whose '## Job commit' section is replaced; "
        "'-' to write none (default: docs/benchmarks.md)",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown or not args.methods:
        parser.error(
            f"--methods must name only {', '.join(METHODS)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    if ("committer@before" in args.methods) != (args.before is not None):
        parser.error("--before TREE and the method committer@before go together")
    if args.before is not None:
        if not (args.before / "plugin" / "zero_rename").is_dir():
            parser.error(f"--before {args.before}: no plugin/zero_rename there")
        BEFORE["tree"] = args.before.resolve()
    if args.repeat is None:
        args.repeat = list(DEFAULT_REPEATS) if args.files == list(DEFAULT_FILES) else [1]
    if len(args.repeat) == 1:
        args.repeat = args.repeat * len(args.files)
    if len(args.repeat) != len(args.files):
        parser.error("--repeat takes one number, or one per --files count")
    return args


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this run (``make bench`` for the defaults)."""
    parts = ["python -m bench.commit_bench"]
    defaults = parse_args([])
    for flag in (
        "files",
        "repeat",
        "threads",
        "files_per_task",
        "file_size",
        "methods",
        "scale",
        "scale_file_size",
    ):
        value = getattr(args, flag)
        if value != getattr(defaults, flag):
            text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
            parts.append(f"--{flag.replace('_', '-')} {text}")
    if args.wire:
        parts.append("--wire")
    if args.before is not None:
        parts.append("--before TREE")
    return " ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The committer's own progress logs would drown the table.
    logging.basicConfig(level=logging.WARNING)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.monotonic()
    load_before = os.getloadavg()[0]
    with EmbeddedS3() as server, tempfile.TemporaryDirectory(prefix="bench-iceberg-") as home:
        # The store layer finds credentials through boto3's standard chain; the
        # embedded Iceberg catalog lives for the run only.
        os.environ.update({**server.environment(), "ZERO_RENAME_ICEBERG_HOME": home})
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        server.create_bucket(bucket)
        cfg = BenchConfig(
            server.endpoint_url,
            bucket,
            args.threads,
            args.files_per_task,
            args.file_size,
            # A table format's job appends to the table an earlier one created.
            "append" if set(args.methods) & set(TABLE_METHODS) else "fail",
        )
        runs = run_benchmark(
            cfg,
            args.files,
            args.repeat,
            args.methods,
            progress,
            args.scale,
            args.scale_file_size,
            args.wire,
        )
    rows = summarize(runs)
    print(commit_report.stdout_table(rows))
    progress(f"whole run: {time.monotonic() - started:.0f} s")
    if args.output != "-":
        load = (load_before, os.getloadavg()[0])
        elapsed = time.monotonic() - started
        tables = [r for r in rows if r.method in TABLE_METHODS]
        if tables:
            section = commit_report.table_section(rows, cfg, args, command_line(args), load)
            write_section(
                args.output, commit_report.TABLE_HEADER, section, commit_report.TABLE_GENERATED
            )
            progress(f"wrote the '{commit_report.TABLE_HEADER}' section of {args.output}")
        if any(r.method == "floor" for r in rows):
            rest = [r for r in rows if r.method not in TABLE_METHODS]
            section = commit_report.section(rest, cfg, args, command_line(args), load, elapsed)
            write_section(args.output, commit_report.HEADER, section, commit_report.GENERATED)
            progress(f"wrote the '{commit_report.HEADER}' section of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
