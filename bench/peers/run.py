"""``make bench-peers``: zero-rename beside Spark's committers and table writers.

The same DataFrames (:mod:`bench.peers.workloads`) written by every method
(:mod:`bench.peers.sessions`) on one embedded SeaweedFS, through the suite's
counting proxy (``tests/s3proxy.py``), in one run: every write in a driver
process of its own (:mod:`bench.peers.driver`), so that each method has its
own JVM with its own jars, in rounds whose order is shuffled (seeded). Around
each timed write the proxy's counts are reset and read: S3 requests by
operation and by the write's phase, bytes copied inside the store; the
driver reports Spark's own timeline of the write (its event log), the JVM's
and the Python processes' peak memory and CPU. After each write the
destination is checked: rows per day and files as the method's reader sees
them, data files and temporary objects in the store, uploads left pending.
Each write gets a bucket of its own, dropped after it: SeaweedFS keeps deleted
bytes until it compacts a volume, and a round of the 1 GiB write is over
10 GiB.

Results go to the ``## Spark's committers and table writers`` section of
``docs/benchmarks.md`` and a chart beside it (:mod:`bench.peers.report`); the
raw results to a JSON file, from which ``--report-only`` writes them again.

    python -m bench.peers.run [--quick] [--methods ...] [--workloads ...]
        [--rounds N] [--rounds-for WORKLOAD=N] [--scale F] [--small-files N]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.peers.driver import Spec
from bench.peers.launch import DriverFailed, drive, resolved_jars
from bench.peers.sessions import METHODS, Store
from bench.peers.workloads import WORKLOADS, Workload, small_files
from bench.peers.writes import replace_refusal

DEFAULT_WORKLOADS = ("main", "daily", "replace", "small")
# Rounds of each workload by default: 3, but 1 for the 1 GiB write and the
# 10,000 files, the two longest, so that a run keeps to about 90 minutes on 2 cores.
DEFAULT_ROUNDS = {"main": 1, "small": 1}
# Methods whose 1 GiB write also runs straight to the store, not through the
# proxy, in the same rounds: what the proxy costs.
PROXY_CHECK = ("zero-rename-magic", "s3a-magic")
# Temporary areas of the committers: what a finished job must not leave.
TEMPORARY = ("_temporary", "__magic", ".spark-staging", "_staging")


@dataclass
class Run:
    """One write by one method, as measured and checked."""

    workload: str
    method: str
    round: int
    via_proxy: bool = True
    status: str = "ok"  # ok, unsupported, failed, not replaced, check failed
    reason: str = ""
    seconds: float = 0.0
    cold: float | None = None  # the warm-up write in a fresh JVM
    phases: dict[str, float] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    by_phase: dict[str, dict[str, int]] = field(default_factory=dict)
    copied: dict[str, int] = field(default_factory=dict)
    written: int = 0  # files the timed write writes (what requests are counted per)
    files: int = 0  # data files in the store under the destination
    bytes: int = 0
    pending: int = 0  # uploads left pending under the destination
    hidden: dict[str, int] = field(default_factory=dict)  # other objects, by kind
    read_back: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    zero_rename: dict[str, float] = field(default_factory=dict)
    load: float = 0.0

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def reader_files(self) -> int:
        return int(self.read_back.get("files", 0))


@dataclass(frozen=True)
class Planned:
    workload: Workload
    method: str
    via_proxy: bool = True

    @property
    def name(self) -> str:
        return f"{self.workload.name}-{self.method}" + ("" if self.via_proxy else "-direct")


# -- the checks -------------------------------------------------------------------


def hidden_kind(relative: str) -> str | None:
    """What a non-data object under a destination is, by its first hidden path
    element (``_temporary``, ``__magic``, ``_delta_log``...), or ``metadata`` (an
    Iceberg table's), or None for a data file."""
    if not relative or relative.endswith("/"):
        return "directory marker"
    for part in relative.split("/"):
        if part.startswith(("_", ".")):
            for area in TEMPORARY:
                if part.startswith(area):
                    return area
            return part
    if relative.endswith(".parquet"):
        return None
    return "metadata" if "/metadata/" in f"/{relative}" else "other"


def check_store(run: Run, client: Any, bucket: str, prefix: str) -> None:
    """Data files, other objects and pending uploads under the destination."""
    hidden: Counter[str] = Counter()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            kind = hidden_kind(obj["Key"][len(prefix) :])
            if kind is None:
                run.files += 1
                run.bytes += obj["Size"]
            else:
                hidden[kind] += 1
    run.hidden = dict(sorted(hidden.items()))
    for page in client.get_paginator("list_multipart_uploads").paginate(
        Bucket=bucket, Prefix=prefix
    ):
        run.pending += len(page.get("Uploads", []))


def judge(run: Run, workload: Workload) -> None:
    """The run's status from what was found: every row, nothing pending; for a
    replace, whether the days written were replaced."""
    expected_rows = workload.expected_rows_by_day()
    run.expected = {"rows_by_day": expected_rows, "files": workload.expected_files()}
    found = run.read_back.get("rows_by_day")
    problems = []
    if run.pending:
        problems.append(f"{run.pending} upload(s) left pending")
    if found is not None and found != expected_rows:
        wrong = {d: (found.get(d, 0), n) for d, n in expected_rows.items() if found.get(d, 0) != n}
        extra = sorted(set(found) - set(expected_rows))
        text = ", ".join(f"{d}: {got:,} rows, not {want:,}" for d, (got, want) in wrong.items())
        problems.append(text + (f"; unexpected days {extra}" if extra else ""))
    if not problems:
        return
    if workload.mode == "replace" and not run.pending:
        run.status, run.reason = "not replaced", "; ".join(problems)
    else:
        run.status, run.reason = "check failed", "; ".join(problems)


def split_requests(
    arrivals: Sequence[tuple[float, str]], call: float, phases: dict[str, float]
) -> dict[str, dict[str, int]]:
    """Requests by the write's phase (setup, tasks, commit: see
    :mod:`bench.peers.eventlog`), from when each arrived at the proxy."""
    if "setup" not in phases:
        return {}
    tasks_from = call + phases["setup"]
    commit_from = tasks_from + phases["tasks"]
    split: dict[str, Counter[str]] = {p: Counter() for p in ("setup", "tasks", "commit")}
    for at, op in arrivals:
        phase = "setup" if at < tasks_from else "tasks" if at < commit_from else "commit"
        split[phase][op] += 1
    return {p: dict(c) for p, c in split.items()}


# -- running ----------------------------------------------------------------------


class Bench:
    """The server, the proxy and the runs of one benchmark."""

    def __init__(self, server: Any, proxy: Any, work: Path, timeout: float) -> None:
        self.server, self.proxy, self.work, self.timeout = server, proxy, work, timeout
        self.client = server.client()  # straight to the store: checks are not counted
        self.jars: dict[str, str | None] = {}
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def resolve(self, methods: Sequence[str]) -> None:
        """Every method's jars, untimed, before the first run."""
        for method in methods:
            progress(f"jars of {method}")
            self.jars[method] = resolved_jars(method, self.logs / f"resolve-{method}.log")

    def new_bucket(self) -> str:
        """A bucket of the write's own, its first volume grown by one small object
        (SeaweedFS makes a bucket's first volumes on its first write, 0.2 s)."""
        bucket = f"peers-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=bucket)
        self.client.put_object(Bucket=bucket, Key="first-volume", Body=b"0")
        return bucket

    def drop_bucket(self, bucket: str) -> None:
        from tests.buckets import empty_bucket

        empty_bucket(self.client, bucket)
        self.client.delete_bucket(Bucket=bucket)

    def run(self, planned: Planned, round_number: int) -> Run:
        run = Run(planned.workload.name, planned.method, round_number, planned.via_proxy)
        run.written = planned.workload.frame.files
        run.load = round(os.getloadavg()[0], 1)
        bucket = self.new_bucket()
        work = Path(tempfile.mkdtemp(prefix=f"{planned.name}-", dir=self.work))
        endpoint = self.proxy.endpoint_url if planned.via_proxy else self.server.endpoint_url
        store = Store(
            endpoint,
            self.server.access_key,
            self.server.secret_key,
            bucket,
            str(work / "catalog.db"),
        )
        spec = Spec(
            method=planned.method,
            workload=planned.workload.to_json(),
            name=planned.workload.name,
            store=asdict(store),
            work_dir=str(work),
            jars=self.jars.get(planned.method),
            round=round_number,
        )
        log = self.logs / f"r{round_number}-{planned.name}.log"
        try:
            event = self._drive(spec, log, run)
            self._finish(run, event, planned, bucket)
        except DriverFailed as exc:
            run.status, run.reason = "failed", str(exc)
        finally:
            try:
                self.drop_bucket(bucket)
            except Exception as exc:  # the next write has a bucket of its own
                progress(f"  could not drop bucket {bucket}: {exc}")
            shutil.rmtree(work, ignore_errors=True)
        if run.status == "ok":
            log.unlink(missing_ok=True)
        return run

    def _drive(self, spec: Spec, log: Path, run: Run) -> dict[str, Any]:
        from bench.process import process_cpu_seconds

        marks: dict[str, float] = {}

        def ready(_: dict[str, Any]) -> None:
            self.proxy.reset_counts()
            marks["server"] = process_cpu_seconds(self.server.pid)
            marks["proxy"] = own_cpu()

        def written(_: dict[str, Any]) -> None:
            run.cpu["server"] = round(process_cpu_seconds(self.server.pid) - marks["server"], 2)
            run.cpu["proxy"] = round(own_cpu() - marks["proxy"], 2)
            run.requests = dict(self.proxy.counts)
            run.copied = dict(self.proxy.copied_bytes)
            self._arrivals = self.proxy.arrivals

        self._arrivals: list[tuple[float, str]] = []
        return drive(spec, log, ready, written, self.timeout)

    def _finish(self, run: Run, event: dict[str, Any], planned: Planned, bucket: str) -> None:
        kind = event["event"]
        if kind == "unsupported":
            run.status, run.reason = "unsupported", event["reason"]
            return
        if kind != "result":
            run.status, run.reason = "failed", event.get("error", str(event))
            return
        run.seconds, run.cold = event["seconds"], event["cold"]
        run.phases, run.memory, run.read_back = event["phases"], event["memory"], event["read_back"]
        run.cpu.update(event["cpu"])
        run.zero_rename = zero_rename_phases(event["zero_rename"], event["call"], run.phases)
        if planned.via_proxy:
            run.by_phase = split_requests(self._arrivals, event["call"], run.phases)
        check_store(run, self.client, bucket, event["prefix"])
        judge(run, planned.workload)


def own_cpu() -> float:
    """CPU seconds of this process: the proxy's threads, nearly all of it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def zero_rename_phases(
    records: Sequence[dict[str, Any]], call: float, phases: dict[str, float]
) -> dict[str, float]:
    """zero-rename's own steps of the timed write, from its records
    (bench.spark_source): from the call to Spark's call of the format's
    ``writer()`` (``to_setup``: planning and the driver-side Python worker),
    job setup, from the last task's end to Spark's call of ``commit()``
    (``to_commit``), job commit; whether each driver-side worker was a fresh
    process (Spark reuses idle ones); and the tasks' time by where it went,
    summed over tasks."""
    out: dict[str, float] = {}
    tasks_end = call + phases.get("setup", 0.0) + phases.get("tasks", 0.0)
    for r in records:
        if r["phase"] in ("setup", "commit"):
            since = call if r["phase"] == "setup" else tasks_end
            out[f"to_{r['phase']}"] = r["t_start"] - since
            out[r["phase"]] = r["t_end"] - r["t_start"]
            out[f"{r['phase']}_fresh"] = float(r["t_proc"] >= call)
    tasks = [r for r in records if r["phase"] == "task"]
    if tasks:
        out["task_write"] = sum(r["seconds"] for r in tasks)
        out["task_fed"] = sum(r["fed_seconds"] for r in tasks)
        own = sum(t for r in tasks for op, t in r["s3_seconds"].items() if not op.startswith("bg:"))
        out["task_s3"] = own
        out["task_encode"] = out["task_write"] - out["task_fed"] - own
        out["task_peak_rss"] = max(r["peak_rss"] for r in tasks)
    return {k: round(v, 3) for k, v in out.items()}


def plan(args: argparse.Namespace) -> list[tuple[Planned, int]]:
    """Every (write, rounds) of the run."""
    planned = []
    for name in args.workloads:
        workload = workload_for(name, args)
        rounds = args.rounds_for.get(name, args.rounds)
        for method in args.methods:
            planned.append((Planned(workload, method), rounds))
            if name == "main" and method in args.proxy_check:
                planned.append((Planned(workload, method, via_proxy=False), rounds))
    return planned


def workload_for(name: str, args: argparse.Namespace) -> Workload:
    if name == "small":
        return small_files(args.small_files)
    workload = WORKLOADS[name]
    return workload.scaled(args.scale) if args.scale != 1 else workload


def run_benchmark(
    bench: Bench,
    planned: Sequence[tuple[Planned, int]],
    seed: int,
    done: Callable[[list[Run]], None] = lambda _: None,
) -> list[Run]:
    """Every write once a round, in an order shuffled each round (seeded: a run
    can be repeated in the same order), so that no method always runs first or
    after the same neighbour, and slow spells of a shared machine spread over
    all methods. A method that cannot do a workload runs once, to say why.
    ``done`` gets the runs so far after each one (to save them as they come)."""
    runs: list[Run] = []
    for round_number in range(max(r for _, r in planned)):
        due = [p for p, rounds in planned if round_number < rounds]
        due = [p for p in due if round_number == 0 or not refused(p)]
        order = random.Random(seed * 1000 + round_number).sample(due, len(due))
        for i, p in enumerate(order, 1):
            progress(
                f"round {round_number + 1}, {i}/{len(order)}: {p.name} "
                f"(load {os.getloadavg()[0]:.1f})"
            )
            run = bench.run(p, round_number)
            progress(
                f"  {run.status}: {run.seconds:.1f} s, {run.files} files, "
                f"{run.total_requests:,} requests{', ' + run.reason if run.reason else ''}"
            )
            runs.append(run)
            done(runs)
    return runs


def refused(p: Planned) -> bool:
    return p.workload.mode == "replace" and replace_refusal(METHODS[p.method]) is not None


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_rounds(text: str) -> tuple[str, int]:
    name, _, rounds = text.partition("=")
    if name not in WORKLOADS or not rounds.isdigit() or int(rounds) < 1:
        raise argparse.ArgumentTypeError(f"--rounds-for {text!r}: want WORKLOAD=N, N >= 1")
    return name, int(rounds)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument(
        "--workloads", nargs="+", default=list(DEFAULT_WORKLOADS), choices=list(WORKLOADS)
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every workload")
    parser.add_argument(
        "--rounds-for",
        type=parse_rounds,
        action="append",
        default=[],
        metavar="WORKLOAD=N",
        help="rounds of one workload (default: main=1, small=1)",
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="rows of main, daily and replace, times this"
    )
    parser.add_argument("--small-files", type=int, default=10_000)
    parser.add_argument(
        "--proxy-check",
        nargs="*",
        default=list(PROXY_CHECK),
        help="methods whose 1 GiB write also runs straight to the store",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every path on tiny sizes: --scale 0.01 --small-files 400 --rounds 1",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a write may take")
    parser.add_argument("--output", default="docs/benchmarks.md")
    parser.add_argument("--chart", default="docs/benchmarks-peers.svg")
    parser.add_argument("--results", default=".state/bench-peers/results.json")
    parser.add_argument("--no-docs", action="store_true", help="print the results only")
    parser.add_argument(
        "--report-only", action="store_true", help="write the docs from --results, run nothing"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.small_files, args.rounds = 0.01, 400, 1
        args.rounds_for = []
    given = dict(args.rounds_for)
    defaults = {} if args.quick else {k: min(v, args.rounds) for k, v in DEFAULT_ROUNDS.items()}
    args.rounds_for = defaults | given
    args.proxy_check = [m for m in args.proxy_check if m in args.methods]
    return args


def command_line(args: argparse.Namespace) -> str:
    """The command that repeats this run, its options as given."""
    text = "python -m bench.peers.run"
    if args.quick:
        return text + " --quick"
    defaults = parse_args([])
    for name in ("rounds", "scale", "small_files", "seed"):
        if getattr(args, name) != getattr(defaults, name):
            text += f" --{name.replace('_', '-')} {getattr(args, name)}"
    for name, rounds in args.rounds_for.items():
        if defaults.rounds_for.get(name) != rounds:
            text += f" --rounds-for {name}={rounds}"
    for name in ("methods", "workloads", "proxy_check"):
        if list(getattr(args, name)) != list(getattr(defaults, name)):
            text += f" --{name.replace('_', '-')} " + " ".join(getattr(args, name))
    return text


def save(path: Path, meta: dict[str, Any], runs: Sequence[Run]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "runs": [asdict(r) for r in runs]}, indent=1))


def load(path: Path) -> tuple[dict[str, Any], list[Run]]:
    data = json.loads(path.read_text())
    return data["meta"], [Run(**r) for r in data["runs"]]


def main(argv: Sequence[str] | None = None) -> int:
    from bench.peers import report

    args = parse_args(argv)
    results = Path(args.results)
    if args.report_only:
        meta, runs = load(results)
    else:
        meta, runs = measure(args)
        save(results, meta, runs)
        progress(f"results saved to {results}")
    print(report.stdout_tables(meta, runs))
    if not args.no_docs:
        report.write(meta, runs, args.output, args.chart)
        progress(f"wrote the '{report.HEADER}' section of {args.output} and {args.chart}")
    return 0


def compile_package() -> None:
    """Byte-compile zero-rename and the bench's sources, as installing a wheel does:
    Spark's fresh Python workers would otherwise compile every module whose
    bytecode is missing or stale, a cost no deployment pays."""
    import zero_rename

    for tree in (Path(zero_rename.__file__).parent, Path(__file__).parent.parent):
        if not compileall.compile_dir(str(tree), quiet=1):
            raise SystemExit(f"could not byte-compile {tree}")


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[Run]]:
    from bench.peers import report
    from tests.s3proxy import proxy_for
    from zero_rename.embedded_s3 import EmbeddedS3

    planned = plan(args)
    compile_package()
    started, load_before = time.time(), os.getloadavg()[0]
    machine = report.environment()

    def meta(failed_logs: Sequence[str] = ()) -> dict[str, Any]:
        return machine | {
            "command": command_line(args),
            "minutes": round((time.time() - started) / 60, 1),
            "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "workloads": {p.workload.name: p.workload.to_json() for p, _ in planned},
            "rounds": {p.workload.name: r for p, r in planned},
            "seed": args.seed,
            "methods": list(args.methods),
            "failed_logs": list(failed_logs),
        }

    results = Path(args.results)
    with (
        EmbeddedS3() as server,
        proxy_for(server) as proxy,
        tempfile.TemporaryDirectory(prefix="zr-bench-peers-") as tmp,
    ):
        proxy.measure_copies = True
        proxy.record_arrivals()
        bench = Bench(server, proxy, Path(tmp), args.timeout)
        bench.resolve(args.methods)
        runs = run_benchmark(
            bench, planned, args.seed, lambda so_far: save(results, meta(), so_far)
        )
        failed_logs = keep_logs(bench.logs, results.parent / "logs")
    return meta(failed_logs), runs


def keep_logs(logs: Path, keep: Path) -> list[str]:
    """The drivers' logs of writes that did not succeed, kept beside the results."""
    kept = []
    for log in sorted(logs.glob("*.log")):
        if log.name.startswith("resolve-"):
            continue
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, keep / log.name)
        kept.append(str(keep / log.name))
    return kept


if __name__ == "__main__":
    sys.exit(main())
