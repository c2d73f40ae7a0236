"""Fan-out probe: which way of completing uploads lifts the one-process ceiling.

Standalone (not part of ``make bench``). On an embedded SeaweedFS it prepares
N pending single-part uploads per run (many threads and two processes; not
timed), then times completing them by one method, and records client CPU
(this process and its children: the worker processes), the server's CPU (from
/proc/<pid>/stat of SeaweedFS and its children) and what the rest of the
machine did meanwhile. Methods run interleaved, in a rotated order each round,
so drift in the machine's load falls on all of them alike.

Methods:

- ``floor``: one process, 64 threads, one boto3 client with a pool of 64
  (as ``bench.commit_bench.complete_floor``);
- ``botocore-1``: the same through :func:`zero_rename.core.s3.fanout.complete_uploads`
  in-process, to show what the module itself adds;
- ``procs-K``: K worker processes, boto3 in each, 64 threads shared among them;
- ``light-1``: one process, the light request path (its own signer over its own connections);
- ``light-procs-K``: both.

After each run every upload must be complete: the method reported an ETag for
each, no upload is left pending under the run's prefix, the prefix holds N
objects, and a sample is HEAD-checked against the reported ETags.

``--per-request`` adds a sequential measurement (one thread, no contention for
the GIL) of the client CPU one complete costs by botocore, by a trimmed
botocore client, and by the light path.

Run: ``python -m bench.fanout_probe --files 2000,10000 --rounds 3``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.process import cpu_seconds
from zero_rename.core.s3.client import StoreConfig, make_client
from zero_rename.core.s3.completers import BotocoreCompleter, LightCompleter, LightTarget
from zero_rename.core.s3.fanout import Item, complete_uploads
from zero_rename.core.s3.stats import RequestStats

THREADS = 64
PREPARE_CHUNK = 250
HEAD_SAMPLE = 25
DEFAULT_METHODS = (
    "floor",
    "botocore-1",
    "procs-2",
    "procs-3",
    "procs-4",
    "light-1",
    "light-procs-2",
    "light-procs-3",
    "light-procs-4",
)


@dataclass(frozen=True)
class Probe:
    endpoint_url: str
    bucket: str
    server_pid: int
    file_size: int

    def store_config(self) -> StoreConfig:
        return StoreConfig(endpoint_url=self.endpoint_url, max_pool_connections=THREADS)


@dataclass(frozen=True)
class Run:
    method: str
    files: int
    round: int
    seconds: float
    client_cpu: float  # this process and its reaped children (the workers)
    parent_cpu: float  # this process alone: with workers, what coordinating them costs
    server_cpu: float
    machine_busy: float  # every process on the machine, in CPU seconds
    load: tuple[float, float]  # 1-minute load average before and after
    completed: int
    requests: int  # CompleteMultipartUpload requests, retries included

    @property
    def rate(self) -> float:
        return self.files / self.seconds

    @property
    def other_cpu(self) -> float:
        return max(0.0, self.machine_busy - self.client_cpu - self.server_cpu)


# -- CPU accounting -----------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK")


def client_cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return cpu_seconds() + children.ru_utime + children.ru_stime


def process_tree_cpu(pid: int) -> float:
    """utime + stime of ``pid`` and its descendants (and their reaped children)."""
    total = 0.0
    for child in [pid, *_descendants(pid)]:
        try:
            with open(f"/proc/{child}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        # fields[11:15]: utime, stime, cutime, cstime (fields 14-17 of proc(5)).
        total += sum(int(v) for v in fields[11:15]) / _TICK
    return total


def _descendants(pid: int) -> list[int]:
    found = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    for child in map(int, children):
        found += [child, *_descendants(child)]
    return found


def machine_busy() -> float:
    """CPU seconds all processors spent on anything but idle and iowait since boot."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...; steal is another guest's.
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy / _TICK


# -- preparation (not timed) ----------------------------------------------------------
def _prepare_chunk(endpoint_url: str, bucket: str, keys: list[str], size: int) -> list[Item]:
    """Runs in a preparation process: create and upload one part per key."""
    client = make_client(StoreConfig(endpoint_url=endpoint_url, max_pool_connections=32))

    def one(key: str) -> tuple[str, str, str]:
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        # Random bytes: SeaweedFS compresses repeated ones.
        etag = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=os.urandom(size)
        )["ETag"]
        return key, upload_id, etag

    with ThreadPoolExecutor(32) as pool:
        return [(0, k, u, [(1, e)]) for k, u, e in pool.map(one, keys)]


def prepare(probe: Probe, preparers: ProcessPoolExecutor, prefix: str, files: int) -> list[Item]:
    keys = [f"{prefix}part-{i:06d}.bin" for i in range(files)]
    chunks = [keys[i : i + PREPARE_CHUNK] for i in range(0, files, PREPARE_CHUNK)]
    futures = [
        preparers.submit(_prepare_chunk, probe.endpoint_url, probe.bucket, c, probe.file_size)
        for c in chunks
    ]
    items = [item for f in futures for item in f.result()]
    return [(i, k, u, p) for i, (_, k, u, p) in enumerate(items)]


# -- the methods ---------------------------------------------------------------------
Method = Callable[[Probe, list[Item]], tuple[dict[int, str], int]]


def floor(probe: Probe, items: list[Item]) -> tuple[dict[int, str], int]:
    client = make_client(probe.store_config())

    def complete(item: Item) -> tuple[int, str]:
        index, key, upload_id, parts = item
        response = client.complete_multipart_upload(
            Bucket=probe.bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
        )
        return index, response["ETag"]

    with ThreadPoolExecutor(THREADS) as pool:
        etags = dict(pool.map(complete, items))
    return etags, len(items)


def fanout(processes: int, path: str, threads: int = THREADS) -> Method:
    def method(probe: Probe, items: list[Item]) -> tuple[dict[int, str], int]:
        stats = RequestStats()
        etags: dict[int, str] = {}
        # A generator, as a job commit would feed it.
        with complete_uploads(
            probe.store_config(),
            probe.bucket,
            (i for i in items),
            processes=processes,
            threads=threads,
            request_path=path,
            stats=stats,
        ) as stream:
            for completion in stream:
                if completion.failure is not None:
                    raise RuntimeError(f"{completion.key}: {completion.failure}")
                etags[completion.index] = str(completion.etag)
        return etags, stats.total_requests

    return method


METHODS: dict[str, Method] = {
    "floor": floor,
    "botocore-1": fanout(1, "botocore"),
    **{f"procs-{k}": fanout(k, "botocore") for k in (2, 3, 4)},
    "light-1": fanout(1, "light"),
    **{f"light-procs-{k}": fanout(k, "light") for k in (2, 3, 4)},
}


def method(name: str) -> Method:
    """A method by name; "NAME@T" runs NAME (not the floor) with T threads in all."""
    base, _, threads = name.partition("@")
    if not threads:
        return METHODS[base]
    if base == "floor":
        raise ValueError("the floor always runs 64 threads")
    processes = 1 if base.endswith("-1") else int(base.rsplit("-", 1)[1])
    return fanout(processes, "light" if base.startswith("light") else "botocore", int(threads))


# -- checks (not timed) --------------------------------------------------------------
def verify(
    probe: Probe, client: Any, prefix: str, items: list[Item], etags: dict[int, str]
) -> None:
    """Every upload complete, none pending, and a sample's ETags as reported."""
    if len(etags) != len(items):
        raise AssertionError(f"{prefix}: {len(etags)} ETags for {len(items)} uploads")
    pending = client.list_multipart_uploads(Bucket=probe.bucket, Prefix=prefix).get("Uploads", [])
    if pending:
        raise AssertionError(f"{prefix}: {len(pending)} upload(s) still pending")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=probe.bucket, Prefix=prefix)
    objects = sum(len(page.get("Contents", [])) for page in pages)
    if objects != len(items):
        raise AssertionError(f"{prefix}: {objects} objects for {len(items)} uploads")
    for index, key, _, _ in random.sample(items, min(HEAD_SAMPLE, len(items))):
        etag = client.head_object(Bucket=probe.bucket, Key=key)["ETag"]
        if etag != etags[index]:
            raise AssertionError(f"{key}: HEAD says {etag}, the method said {etags[index]}")


def timed(
    probe: Probe, name: str, files: int, round_: int, items: list[Item]
) -> tuple[Run, dict[int, str]]:
    load = os.getloadavg()[0]
    cpu0, own0 = client_cpu(), cpu_seconds()
    server0, busy0 = process_tree_cpu(probe.server_pid), machine_busy()
    start = time.perf_counter()
    etags, requests = method(name)(probe, items)
    seconds = time.perf_counter() - start
    return Run(
        name,
        files,
        round_,
        seconds,
        client_cpu() - cpu0,
        cpu_seconds() - own0,
        process_tree_cpu(probe.server_pid) - server0,
        machine_busy() - busy0,
        (load, os.getloadavg()[0]),
        len(etags),
        requests,
    ), etags


def run_all(
    probe: Probe,
    files: Sequence[int],
    rounds: int,
    methods: Sequence[str],
    log: Callable[[str], None],
) -> list[Run]:
    client = make_client(probe.store_config())
    runs: list[Run] = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as preparers:
        for n in files:
            for round_ in range(rounds):
                # Rotate the order, so no method always runs first or last.
                shift = round_ % len(methods)
                order = list(methods[shift:]) + list(methods[:shift])
                for name in order:
                    prefix = f"{name}-{n}-{round_}-{uuid.uuid4().hex[:6]}/"
                    items = prepare(probe, preparers, prefix, n)
                    run, etags = timed(probe, name, n, round_, items)
                    verify(probe, client, prefix, items, etags)
                    runs.append(run)
                    log(
                        f"{n:>6} {name:<14} round {round_ + 1}/{rounds}: {run.rate:7.0f}/s "
                        f"client {run.client_cpu:6.2f} s (parent {run.parent_cpu:5.2f}) "
                        f"server {run.server_cpu:6.2f} s "
                        f"other {run.other_cpu:6.2f} s load {run.load[0]:.1f}-{run.load[1]:.1f}"
                    )
    return runs


# -- sequential per-request cost -----------------------------------------------------
def per_request(
    probe: Probe, files: int, rounds: int, log: Callable[[str], None]
) -> dict[str, list[float]]:
    """Client CPU ms per complete, one thread, each path in turn, interleaved."""
    config = probe.store_config()
    paths: dict[str, Callable[[], Any]] = {
        "botocore": lambda: BotocoreCompleter(config, probe.bucket, RequestStats()),
        "botocore-trimmed": lambda: _trimmed(
            BotocoreCompleter(config, probe.bucket, RequestStats())
        ),
        "light": lambda: LightCompleter(
            config, LightTarget.resolve(config, probe.bucket), RequestStats()
        ),
    }
    results: dict[str, list[float]] = {name: [] for name in paths}
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as preparers:
        for round_ in range(rounds):
            for name, make in paths.items():
                items = prepare(
                    probe, preparers, f"seq-{name}-{round_}-{uuid.uuid4().hex[:6]}/", files
                )
                completer = make()
                own = resource.getrusage(resource.RUSAGE_SELF)
                for _, key, upload_id, parts in items:
                    outcome = completer.complete(key, upload_id, parts)
                    assert outcome.failure is None, outcome.failure
                after = resource.getrusage(resource.RUSAGE_SELF)
                used = (after.ru_utime + after.ru_stime) - (own.ru_utime + own.ru_stime)
                results[name].append(used / files * 1000)
                completer.close()
                log(
                    f"per request, {name:<17} round {round_ + 1}: "
                    f"{results[name][-1]:.3f} ms client CPU"
                )
    return results


def _trimmed(completer: BotocoreCompleter) -> BotocoreCompleter:
    """botocore without what a complete can do without: parameter validation,
    the user agent rebuilt per request, the recursion-detection header."""
    old = completer.client
    # Validation is chosen when a client is made: make another without it.
    completer.client = boto3.session.Session().client(
        "s3",
        endpoint_url=old.meta.endpoint_url,
        region_name=old.meta.region_name,
        config=old.meta.config.merge(Config(parameter_validation=False)),
    )
    old.close()
    events = completer.client.meta.events
    emitter = getattr(events, "_emitter", events)
    for event, names in (
        ("request-created.s3.CompleteMultipartUpload", {"rebuild_and_replace_user_agent_handler"}),
        ("before-call.s3.CompleteMultipartUpload", {"add_recursion_detection_header"}),
    ):
        for handler in list(emitter._handlers.prefix_search(event)):
            if getattr(handler, "__name__", "") in names:
                parts = event.split(".")
                for end in range(1, len(parts) + 1):  # registered at one of these
                    events.unregister(".".join(parts[:end]), handler)
    return completer


# -- a canned responder: the client's ceiling without a server's CPU ------------------
_CANNED = b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n"
_CANNED_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult xmlns='
    b'"http://s3.amazonaws.com/doc/2006-03-01/"><ETag>&#34;0-1&#34;</ETag>'
    b"</CompleteMultipartUploadResult>"
)


async def _answer(reader: Any, writer: Any) -> None:
    """Answer every request on a connection with a successful complete."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            writer.write(_CANNED % len(_CANNED_BODY) + _CANNED_BODY)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


def serve_canned(port: int) -> None:
    """A loopback HTTP server that answers every request as a successful
    CompleteMultipartUpload: its CPU per request is a fraction of a real
    server's, so what the client can do shows, not what the server can."""

    async def main() -> None:
        server = await asyncio.start_server(_answer, "127.0.0.1", port, backlog=512)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def canned_items(files: int) -> list[Item]:
    return [(i, f"canned/{i:07d}", f"upload-{i}", [(1, '"0"')]) for i in range(files)]


def run_canned(
    probe: Probe,
    files: Sequence[int],
    rounds: int,
    methods: Sequence[str],
    log: Callable[[str], None],
) -> list[Run]:
    runs: list[Run] = []
    for n in files:
        for round_ in range(rounds):
            order = list(methods[round_ % len(methods) :]) + list(methods[: round_ % len(methods)])
            for name in order:
                run, etags = timed(probe, name, n, round_, canned_items(n))
                if len(etags) != n:
                    raise AssertionError(f"{name}: {len(etags)} answers for {n} completes")
                runs.append(run)
                log(
                    f"canned {n:>6} {name:<14} round {round_ + 1}/{rounds}: {run.rate:7.0f}/s "
                    f"client {run.client_cpu:6.2f} s (parent {run.parent_cpu:5.2f}) "
                    f"server {run.server_cpu:6.2f} s other {run.other_cpu:6.2f} s "
                    f"load {run.load[0]:.1f}-{run.load[1]:.1f}"
                )
    return runs


# -- summary ------------------------------------------------------------------------
def summary(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Medians per (files, method); ratio to the floor's median rate."""
    groups: dict[tuple[int, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.files, run.method), []).append(run)
    rows = []
    for (files, method), group in groups.items():
        floor_rate = statistics.median(r.rate for r in groups.get((files, "floor"), group))
        rate = statistics.median(r.rate for r in group)
        rows.append(
            {
                "files": files,
                "method": method,
                "runs": len(group),
                "rate": rate,
                "rate_min": min(r.rate for r in group),
                "rate_max": max(r.rate for r in group),
                "client_cpu": statistics.median(r.client_cpu for r in group),
                "parent_cpu": statistics.median(r.parent_cpu for r in group),
                "server_cpu": statistics.median(r.server_cpu for r in group),
                "other_cpu": statistics.median(r.other_cpu for r in group),
                "client_ms": statistics.median(r.client_cpu / r.files * 1000 for r in group),
                "server_ms": statistics.median(r.server_cpu / r.files * 1000 for r in group),
                "ratio": rate / floor_rate,
                "load": (min(r.load[0] for r in group), max(r.load[1] for r in group)),
                "requests": max(r.requests for r in group),
            }
        )
    return rows


def markdown(rows: Sequence[dict[str, Any]], files: int) -> str:
    lines = [
        f"N = {files:,}",
        "",
        "| method | completes/s (median; min-max) | client CPU s (parent) | server CPU s | "
        "other CPU s | client ms/complete | server ms/complete | x floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted((r for r in rows if r["files"] == files), key=lambda r: -r["ratio"]):
        lines.append(
            f"| {r['method']} | {r['rate']:.0f} ({r['rate_min']:.0f}-{r['rate_max']:.0f})"
            f" | {r['client_cpu']:.2f} ({r['parent_cpu']:.2f}) | {r['server_cpu']:.2f} | "
            f"{r['other_cpu']:.2f} | "
            f"{r['client_ms']:.2f} | {r['server_ms']:.2f} | {r['ratio']:.2f} |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fanout_probe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--files", default="2000,10000", help="upload counts, comma-separated (default: 2000,10000)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--methods",
        default=",".join(DEFAULT_METHODS),
        help=f"comma-separated from {','.join(METHODS)}",
    )
    parser.add_argument("--file-size", type=int, default=1024, help="bytes per file (0 or more)")
    parser.add_argument(
        "--per-request",
        type=int,
        default=0,
        metavar="N",
        help="also measure sequential client CPU per complete on N uploads",
    )
    parser.add_argument("--json", help="write every run and the summary to this file")
    parser.add_argument(
        "--canned",
        action="store_true",
        help="complete against a canned responder instead of SeaweedFS "
        "(nothing prepared, nothing stored: the client's ceiling)",
    )
    parser.add_argument("--serve-canned", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.files = [int(v) for v in args.files.split(",") if v]
    args.methods = [m for m in args.methods.split(",") if m]
    unknown = {m for m in args.methods if m.partition("@")[0] not in METHODS}
    if unknown:
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    return args


def canned(args: argparse.Namespace, log: Callable[[str], None]) -> list[Run]:
    from zero_rename.embedded_s3 import free_ports

    port = free_ports(1)[0]
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.fanout_probe", "--serve-canned", str(port)]
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # Any credentials do: the responder checks no signature.
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": "canned",
                "AWS_SECRET_ACCESS_KEY": "canned",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        os.environ.pop("AWS_ENDPOINT_URL", None)
        probe = Probe(f"http://127.0.0.1:{port}", "canned", server.pid, 0)
        return run_canned(probe, args.files, args.rounds, args.methods, log)
    finally:
        server.terminate()
        server.wait()


def main(argv: Sequence[str] | None = None) -> int:
    from zero_rename.embedded_s3 import EmbeddedS3

    args = parse_args(argv)
    if args.serve_canned:
        serve_canned(args.serve_canned)
        return 0
    logging.basicConfig(level=logging.WARNING)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    load_before = os.getloadavg()
    sequential: dict[str, list[float]] = {}
    if args.canned:
        runs = canned(args, log)
    else:
        with EmbeddedS3() as server:
            # Credentials reach every worker through boto3's standard chain: the environment.
            os.environ.update(server.environment())
            bucket = f"fanout-{uuid.uuid4().hex[:8]}"
            server.create_bucket(bucket)
            assert server.pid is not None
            probe = Probe(server.endpoint_url, bucket, server.pid, args.file_size)
            if args.per_request:
                sequential = per_request(probe, args.per_request, args.rounds, log)
            runs = run_all(probe, args.files, args.rounds, args.methods, log)
    rows = summary(runs)
    load_after = os.getloadavg()
    print(
        f"cores: {os.cpu_count()}, load average (1/5/15 min) before "
        f"{'/'.join(f'{v:.1f}' for v in load_before)}, after "
        f"{'/'.join(f'{v:.1f}' for v in load_after)}\n"
    )
    for name, values in sequential.items():
        print(
            f"sequential client CPU per complete, {name}: median "
            f"{statistics.median(values):.3f} ms ({', '.join(f'{v:.3f}' for v in values)})"
        )
    for n in args.files:
        print("\n" + markdown(rows, n))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "runs": [asdict(r) for r in runs],
                    "summary": rows,
                    "sequential": sequential,
                    "load": [load_before, load_after],
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
