"""Job commit behind a slow store: each request delayed by a fixed latency.

On loopback a request takes about a millisecond, so a commit's time is its
work; on AWS a request takes tens of milliseconds, and a commit's time is its
chain of round trips, each waiting for the one before. This benchmark puts the
suite's S3 proxy (``tests/s3proxy.py``) in front of the embedded SeaweedFS
with a fixed delay on every request (``--delay-ms``, 20 by default) and, for
each file count, side by side in one run:

- ``committer``: the committer's job commit of a job whose task attempts wrote
  the files (written straight to the server, untimed);
- ``completes``: the same number of uploads completed in parallel, the same
  threads, and nothing else: the floor a commit cannot go under.

The proxy notes when each request arrives. Requests that cannot wait for one
another arrive together, a request that waited for an answer arrives at least
one delay later: a silence of more than half a delay between two arrivals
marks one more sequential round trip, where it came at least one delay after
its round's first request (none sooner can have waited for an answer of that
round). Run ``python -m bench.latency_bench --help``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench.commit_bench import prepared_job
from bench.commit_results import BenchConfig
from bench.objects import complete_upload, visible_files
from bench.page import load_note, seaweedfs_version, write_section
from tests.s3proxy import S3Proxy, S3Request, proxy_for, round_trips
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import PendingUpload
from zero_rename.core.s3 import probes
from zero_rename.core.s3.client import make_client
from zero_rename.embedded_s3 import EmbeddedS3

HEADER = "## Job commit behind a slow store"
DEFAULT_FILES = (10, 10_000)
DEFAULT_REPEATS = (5, 1)
DEFAULT_SETUP_REPEAT = 5


@dataclass(frozen=True)
class Timed:
    """One timed run: seconds, the requests that arrived at the proxy, and their rounds."""

    method: str
    files: int
    seconds: float
    requests: int
    rounds: int
    committed: int


class Arrivals:
    """When each request arrived at the proxy, while a run is being watched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: list[float] | None = None

    def __call__(self, request: S3Request) -> bool:
        with self._lock:
            if self._times is not None:
                self._times.append(time.monotonic())
        return True  # every request is delayed

    @contextmanager
    def watching(self) -> Iterator[list[float]]:
        times: list[float] = []
        with self._lock:
            self._times = times
        try:
            yield times
        finally:
            with self._lock:
                self._times = None


def rounds(times: Sequence[float], delay: float) -> int:
    """Sequential round trips among requests that arrived at ``times``
    (:func:`tests.s3proxy.round_trips`)."""
    return len(round_trips([(at, "") for at in times], delay))


@dataclass(frozen=True)
class Slow:
    """The proxy's side of a run: its endpoint, its delay, and the arrivals it notes."""

    cfg: BenchConfig
    delay: float
    arrivals: Arrivals


# Commits in a child process whose ``zero_rename`` comes from the plugin directory
# it is given: this checkout's, or an earlier version's (``--baseline``), so both
# run alike. It prints the commit's seconds; the import is not timed.
_CHILD = """
import sys, time
import zero_rename
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
print("zero_rename from", zero_rename.__file__, file=sys.stderr)
dest, job_id, endpoint, threads = sys.argv[1:5]
committer = Committer(dest, StoreConfig(endpoint_url=endpoint, max_pool_connections=int(threads)))
start = time.perf_counter()
summary = committer.commit_job(job_id)
print(time.perf_counter() - start, summary.files)
"""
HERE = Path(__file__).resolve().parents[1] / "plugin"

# Job setup of a daily job in a fresh process, as Spark's setup worker runs it: the
# profile record its day before left is read, not probed. It prints the setup's seconds.
_SETUP_CHILD = """
import sys, time
import zero_rename
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
print("zero_rename from", zero_rename.__file__, file=sys.stderr)
dest, endpoint = sys.argv[1:3]
committer = Committer(dest, StoreConfig(endpoint_url=endpoint))
start = time.perf_counter()
committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
print(time.perf_counter() - start)
"""


def committer_run(cfg: BenchConfig, slow: Slow, files: int, plugin: Path = HERE) -> Timed:
    committer, job, _, _ = prepared_job(cfg, f"commit-{files}-{uuid.uuid4().hex[:8]}", files)
    child = [committer.dest.url, job.job_id, slow.cfg.endpoint_url, str(cfg.threads)]
    with slow.arrivals.watching() as times:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, *child],
            env={**os.environ, "PYTHONPATH": str(plugin)},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        raise RuntimeError(f"the commit with {plugin} failed:\n{done.stderr[-2000:]}")
    if f"zero_rename from {plugin}" not in done.stderr:
        raise RuntimeError(f"the child did not import zero_rename from {plugin}")
    seconds, reported = done.stdout.split()[-2:]
    committed = min(visible_files(committer.store.client, cfg.bucket, committer.dest.dir), files)
    if int(reported) != files or committed != files:
        raise RuntimeError(f"job {job.job_id}: {committed} of {files} files visible")
    method = "committer" if plugin == HERE else "baseline"
    return Timed(method, files, float(seconds), len(times), rounds(times, slow.delay), committed)


def slowed(cfg: BenchConfig, proxy: S3Proxy, seconds: float) -> Slow:
    """Every request through ``proxy`` delayed by ``seconds``, its arrivals noted."""
    arrivals = Arrivals()
    proxy.add("*", "delay", times=None, seconds=seconds, when=arrivals)
    return Slow(
        BenchConfig(proxy.endpoint_url, cfg.bucket, cfg.threads, cfg.files_per_task),
        seconds,
        arrivals,
    )


def setup_run(cfg: BenchConfig, slow: Slow, plugin: Path = HERE) -> Timed:
    """One daily job's setup behind the delay, at a destination whose day before
    (untimed, through the same endpoint: the record names the store it describes)
    left the store's profile record."""
    dest = f"s3://{cfg.bucket}/setup-{uuid.uuid4().hex[:8]}"
    daily = {"partition_columns": "dt", "conflict_mode": "replace"}
    # Forget this process's profile of the store, so that the day before writes the
    # record beside the new destination, as a fresh process would.
    probes._DETECTED.clear()
    Committer(dest, slow.cfg.store_config()).setup_job(daily)
    with slow.arrivals.watching() as times:
        done = subprocess.run(
            [sys.executable, "-c", _SETUP_CHILD, dest, slow.cfg.endpoint_url],
            env={**os.environ, "PYTHONPATH": str(plugin)},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode or f"zero_rename from {plugin}" not in done.stderr:
        raise RuntimeError(f"the setup with {plugin} failed:\n{done.stderr[-2000:]}")
    method = "committer" if plugin == HERE else "baseline"
    seconds = float(done.stdout.split()[-1])
    return Timed(method, 0, seconds, len(times), rounds(times, slow.delay), 0)


def setup_runs(
    cfg: BenchConfig, proxy: S3Proxy, seconds: float, repeat: int, baseline: Path | None
) -> dict[str, list[Timed]]:
    """Job setup, ``repeat`` times by each tree, alternating, behind the delay."""
    slow = slowed(cfg, proxy, seconds)
    plugins = [HERE, *([baseline] if baseline is not None else [])]
    runs: dict[str, list[Timed]] = {}
    for _ in range(repeat):
        for plugin in plugins:
            timed = setup_run(cfg, slow, plugin)
            runs.setdefault(timed.method, []).append(timed)
    return runs


def setup_lines(runs: dict[str, list[Timed]], baseline: str) -> list[str]:
    """The setup's table: median seconds, fewest (median) rounds, requests."""
    lines = [
        "Job setup of a daily job (partitioned, `replace`) in a fresh process, as Spark's "
        "setup worker runs it, at a destination whose day before left the store's profile "
        "record:",
        "",
        "| tree | runs | job setup (s) | rounds, fewest (median) | requests |",
        "|---|---:|---:|---:|---:|",
    ]
    for method, label in (("committer", "this one"), ("baseline", f"before ({baseline})")):
        ts = runs.get(method)
        if ts:
            lines.append(
                f"| {label} | {len(ts)} | {statistics.median(t.seconds for t in ts):.3f} "
                f"| {min(t.rounds for t in ts)} ({round(statistics.median(t.rounds for t in ts))}) "
                f"| {round(statistics.median(t.requests for t in ts))} |"
            )
    return [*lines, ""]


def completes_run(cfg: BenchConfig, slow: Slow, files: int) -> Timed:
    committer, _, manifests, _ = prepared_job(cfg, f"floor-{files}-{uuid.uuid4().hex[:8]}", files)
    uploads = [u for m in manifests for u in m.uploads]
    client = make_client(slow.cfg.store_config())

    def complete(upload: PendingUpload) -> None:
        complete_upload(client, cfg.bucket, upload)

    with slow.arrivals.watching() as times, ThreadPoolExecutor(cfg.threads) as pool:
        start = time.perf_counter()
        list(pool.map(complete, uploads))
        seconds = time.perf_counter() - start
    committed = visible_files(committer.store.client, cfg.bucket, committer.dest.dir)
    return Timed("completes", files, seconds, len(times), rounds(times, slow.delay), committed)


def run(
    cfg: BenchConfig,
    proxy: S3Proxy,
    seconds: float,
    counts: Sequence[int],
    repeats: Sequence[int],
    baseline: Path | None,
    progress: logging.Logger,
) -> list[Timed]:
    slow = slowed(cfg, proxy, seconds)
    methods: list[Callable[[BenchConfig, Slow, int], Timed]] = [committer_run, completes_run]
    if baseline is not None:
        methods.insert(1, partial(committer_run, plugin=baseline))
    timed: list[Timed] = []
    for files, repeat in zip(counts, repeats, strict=True):
        for round_number in range(repeat):
            for method in methods:
                result = method(cfg, slow, files)
                timed.append(result)
                progress.info(
                    "%6d files  %-10s %d/%d: %.3f s, %d requests, %d rounds",
                    files,
                    result.method,
                    round_number + 1,
                    repeat,
                    result.seconds,
                    result.requests,
                    result.rounds,
                )
    return timed


@dataclass(frozen=True)
class Row:
    """The medians of one file count's runs, by method (seconds, rounds, requests),
    and the fewest rounds of any run: the chain of round trips itself, since a
    machine busy elsewhere can only add rounds to a run, never take one away."""

    files: int
    runs: int
    seconds: dict[str, float]
    rounds: dict[str, int]
    requests: dict[str, int]
    fewest: dict[str, int]

    def ratio(self, method: str) -> float:
        return self.seconds[method] / self.seconds["completes"]


def summarize(timed: Sequence[Timed]) -> list[Row]:
    rows = []
    for files in sorted({t.files for t in timed}):
        by: dict[str, list[Timed]] = {}
        for t in timed:
            if t.files == files:
                by.setdefault(t.method, []).append(t)
        rows.append(
            Row(
                files,
                len(by["committer"]),
                {m: statistics.median(t.seconds for t in ts) for m, ts in by.items()},
                {m: round(statistics.median(t.rounds for t in ts)) for m, ts in by.items()},
                {m: round(statistics.median(t.requests for t in ts)) for m, ts in by.items()},
                {m: min(t.rounds for t in ts) for m, ts in by.items()},
            )
        )
    return rows


def _cell(row: Row, method: str) -> str:
    if method not in row.seconds:
        return "| | | "
    return (
        f"| {row.seconds[method]:.3f} ({row.ratio(method):.2f}x) | {row.fewest[method]} "
        f"({row.rounds[method]}) | {row.requests[method]:,} "
    )


def section(
    rows: Sequence[Row],
    seconds: float,
    command: str,
    load: tuple[float, float],
    baseline: str,
    setup: Sequence[str] = (),
) -> str:
    ms = round(seconds * 1000)
    lines = [
        HEADER,
        "",
        f"What it measures: the job commit with every request delayed by {ms} ms at the "
        "suite's S3 proxy, in front of the embedded SeaweedFS, beside the same number of "
        "uploads completed in parallel and nothing else (the floor: no commit makes files "
        "visible with less). On loopback a commit's time is its work; behind a delay it is "
        "its chain of round trips, as on AWS. The task attempts write the files straight "
        "to the server, untimed; each commit runs in a process of its own, its imports "
        "untimed. Rounds are sequential round trips, counted from when the requests arrive "
        f"at the proxy: one more wherever the proxy hears nothing for more than {ms // 2} ms "
        f"and the request came at least {ms} ms after its round's first (no sooner can it "
        "have waited for an answer of that round: a client slowed by a busy machine "
        "between requests it sends together adds no round).",
        "",
        f"Machine: {os.cpu_count()} cores, SeaweedFS {seaweedfs_version()} (`weed mini`) on "
        f"loopback, {ms} ms a request at the proxy. {load_note(load)}",
        "",
        f"Reproduce: `{command}`",
        "",
    ]
    if baseline:
        lines += [f"Before: {baseline}, committing jobs prepared the same way in the same run.", ""]
    lines += [
        "| files | runs | completes alone (s) | job commit (s, x completes) "
        "| rounds, fewest (median) | requests "
        + ("| before (s, x completes) | rounds, fewest (median) | requests " if baseline else "")
        + "|",
        "|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if baseline else ""),
    ]
    for r in rows:
        lines.append(
            f"| {r.files:,} | {r.runs} | {r.seconds['completes']:.3f} "
            + _cell(r, "committer")
            + (_cell(r, "baseline") if baseline else "")
            + "|"
        )
    return "\n".join(lines + ["", *reading(rows, ms), "", *setup]).rstrip("\n") + "\n"


def reading(rows: Sequence[Row], ms: int) -> list[str]:
    """What the table says, in words, from its own numbers."""
    small, large = rows[0], rows[-1]
    lines = [
        f"- A {small.files:,}-file commit is {small.fewest['committer']} sequential round "
        f"trips (the fewest of its {small.runs} runs, the median {small.rounds['committer']}: "
        "a machine busy elsewhere only adds rounds), "
        f"{small.ratio('committer'):.1f}x its completes, which are one round: what "
        "stays sequential is what a step truly needs of the one before (the seal before the "
        "listing of manifests that counts, the claim before the conflicting files are "
        "trusted, the plan's header before the point of no return, that before the "
        "completes, the file list before `_SUCCESS` names it, the swap to `committed` "
        "before the claim is released); everything else goes beside it. See the "
        'architecture\'s "Round trips".',
    ]
    if "baseline" in small.rounds:
        lines.append(
            f"- Before: {small.fewest['baseline']} rounds (the median "
            f"{small.rounds['baseline']}) and "
            f"{small.requests['baseline']} requests for the {small.files:,}-file commit, "
            f"{small.seconds['baseline'] / small.seconds['committer']:.1f}x the time."
        )
    if large is not small and large.ratio("committer") < 1:
        lines.append(
            f"- At {large.files:,} files the commit is {large.ratio('committer'):.2f}x the "
            "bare completes: the completes are most of it, and the commit sends them on its "
            "light request path, whose client work per request is smaller than botocore's "
            "that the bare loop uses."
        )
    elif large is not small:
        before = (
            f" (before: {large.ratio('baseline'):.2f}x, {large.requests['baseline']:,} requests)"
            if "baseline" in large.seconds
            else ""
        )
        lines.append(
            f"- At {large.files:,} files the commit took {large.ratio('committer'):.2f}x the "
            f"bare completes in {large.runs} run(s){before}, {large.requests['committer']:,} "
            "requests: there the time is the completes and the client's work per request, "
            "which a machine busy elsewhere stretches (the load above), not the commit's "
            'round trips; "Job commit" above times the commit alone.'
        )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.latency_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--delay-ms", type=int, default=20, help="per request (default: 20)")
    parser.add_argument(
        "--files",
        type=lambda t: [int(v) for v in t.split(",") if v],
        default=list(DEFAULT_FILES),
        help="file counts, comma-separated (default: 10,10000)",
    )
    parser.add_argument(
        "--repeat",
        type=lambda t: [int(v) for v in t.split(",") if v],
        default=None,
        help="runs per count, one number or one per count (default: 5,1)",
    )
    parser.add_argument("--threads", type=int, default=64, help="(default: 64)")
    parser.add_argument(
        "--setup-repeat",
        type=int,
        default=DEFAULT_SETUP_REPEAT,
        help=f"job setups by each tree, after the commits (default: {DEFAULT_SETUP_REPEAT})",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of an earlier version: its commit runs too, side by side",
    )
    parser.add_argument(
        "--baseline-name",
        default="",
        help="what the baseline is, for the report (default: its directory)",
    )
    parser.add_argument(
        "--output",
        default="docs/benchmarks.md",
        help=f"Markdown file whose '{HEADER}' section is replaced; '-' for none",
    )
    args = parser.parse_args(argv)
    if args.setup_repeat < 0:
        parser.error("--setup-repeat takes a number of runs, 0 for none")
    if args.delay_ms < 1 or not args.files or min(args.files) < 1:
        parser.error("--delay-ms and --files take positive numbers")
    if args.repeat is None:
        args.repeat = list(DEFAULT_REPEATS) if args.files == list(DEFAULT_FILES) else [1]
    if len(args.repeat) == 1:
        args.repeat = args.repeat * len(args.files)
    if len(args.repeat) != len(args.files) or min(args.repeat) < 1:
        parser.error("--repeat takes one positive number, or one per --files count")
    return args


def command_line(args: argparse.Namespace) -> str:
    parts = ["python -m bench.latency_bench"]
    if args.delay_ms != 20:
        parts.append(f"--delay-ms {args.delay_ms}")
    if args.files != list(DEFAULT_FILES) or args.repeat != list(DEFAULT_REPEATS):
        parts.append(f"--files {','.join(map(str, args.files))}")
        parts.append(f"--repeat {','.join(map(str, args.repeat))}")
    if args.threads != 64:
        parts.append(f"--threads {args.threads}")
    if args.setup_repeat != DEFAULT_SETUP_REPEAT:
        parts.append(f"--setup-repeat {args.setup_repeat}")
    if args.baseline is not None:
        parts.append("--baseline CHECKOUT")
    return " ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plugin = None
    if args.baseline is not None:
        plugin = args.baseline.resolve() / "plugin"
        if not (plugin / "zero_rename").is_dir():
            print(f"--baseline: no plugin/zero_rename in {args.baseline}", file=sys.stderr)
            return 2
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    progress = logging.getLogger("bench.latency")
    progress.setLevel(logging.INFO)
    load_before = os.getloadavg()[0]
    with EmbeddedS3() as server:
        os.environ.update(server.environment())
        bucket = f"latency-{uuid.uuid4().hex[:8]}"
        server.create_bucket(bucket)
        cfg = BenchConfig(server.endpoint_url, bucket, args.threads)
        with proxy_for(server) as proxy:
            timed = run(cfg, proxy, args.delay_ms / 1000, args.files, args.repeat, plugin, progress)
        with proxy_for(server) as proxy:
            setups = setup_runs(cfg, proxy, args.delay_ms / 1000, args.setup_repeat, plugin)
    for method, ts in setups.items():
        progress.info(
            "job setup, %s: %s s, rounds %s",
            method,
            ", ".join(f"{t.seconds:.3f}" for t in ts),
            ", ".join(str(t.rounds) for t in ts),
        )
    rows = summarize(timed)
    for r in rows:
        progress.info(
            "%6d files: %s",
            r.files,
            ", ".join(
                f"{m} {r.seconds[m]:.3f} s ({r.ratio(m):.2f}x) in {r.rounds[m]} rounds"
                for m in r.seconds
            ),
        )
    if args.output != "-":
        load = (load_before, os.getloadavg()[0])
        name = args.baseline_name or (str(args.baseline) if args.baseline else "")
        setup = setup_lines(setups, name)
        body = section(rows, args.delay_ms / 1000, command_line(args), load, name, setup)
        write_section(args.output, HEADER, body)
        progress.info("wrote the '%s' section of %s", HEADER, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
