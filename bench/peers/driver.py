"""One write by one method, in a Spark driver process of its own.

The orchestrator (:mod:`bench.peers.run`, or any other caller) starts
``python -m bench.peers.driver`` under ``.venv-peers``, so that every method
runs in a JVM of its own with its own jars, and talks to it in JSON lines: the
driver's stdout carries only these (everything else it or its JVM prints goes
to stderr), its stdin the caller's answers.

1. The caller sends the spec (one JSON line: :class:`Spec`).
2. The driver starts the method's session, writes a few rows in the
   workload's shape to a place of their own (untimed: the JVM's first use of a
   code path is no method's cost; its wall time is reported as ``cold``),
   writes the table a replace replaces in, if any, and persists the workload's
   DataFrame on local disk. It sends ``{"event": "ready"}`` and waits for a
   line ``go``: the caller resets its counters, starts its fault rules...
3. The driver writes, timed, and sends ``{"event": "written", ...}`` with the
   call's start and end (seconds since the epoch), then waits for ``ok``: the
   caller reads its counters.
4. The driver reads the destination back (rows per day, files as the method's
   reader sees them), stops the session, reads Spark's event log and sends
   ``{"event": "result", ...}``. A method that cannot do the write sends
   ``{"event": "unsupported", "reason": ...}``; any failure
   ``{"event": "failed", "error": ...}``, one line.

Also ``python -m bench.peers.driver --resolve METHOD``: start the method's
session once (Ivy resolves its packages into the cache) and print the jars it
got, for later sessions' ``spark.jars``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.peers import eventlog
from bench.peers.sessions import METHODS, Method, Store, start_session
from bench.peers.workloads import Frame, Workload, warm_up
from bench.peers.writes import Unsupported, destination, prefix_of, replace_refusal, write

ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class Spec:
    method: str
    workload: dict[str, Any]  # Workload.to_json()
    name: str  # the destination's name (bench.peers.writes.destination)
    store: dict[str, str]  # Store's fields
    work_dir: str  # event log, Spark's local dir, the format's metrics
    jars: str | None = None  # resolved spark.jars; None: spark.jars.packages through Ivy
    round: int = 0
    warm_up: bool = True
    read_back: bool = True
    driver_memory: str = "2g"
    conf: dict[str, str] = field(default_factory=dict)  # more Spark settings


class Channel:
    """The JSON lines to the caller, on the process's original stdout; from here
    on, fd 1 is stderr, so the JVM and any library printing cannot mix in."""

    def __init__(self) -> None:
        self.out: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def send(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, **fields}) + "\n")
        self.out.flush()

    def expect(self, word: str) -> None:
        line = sys.stdin.readline().strip()
        if line != word:
            raise RuntimeError(f"expected {word!r} from the caller, got {line[:40]!r}")


# -- the process tree's memory and CPU -------------------------------------------


def _status(pid: int, field_name: str) -> int:
    """A ``kB`` field of /proc/PID/status, in bytes (0 if absent)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak(pid: int) -> None:
    """Start a fresh high-water mark of ``pid``'s resident memory (VmHWM): Linux
    resets it to the current RSS on writing 5 to clear_refs."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError as exc:
        print(f"cannot reset the peak RSS of {pid}: {exc}", file=sys.stderr)


def peak_rss(pid: int) -> int:
    return _status(pid, "VmHWM")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of its children it has waited for."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5); fields[0] is field 3.
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds of ``root`` and of every process under it, by pid."""
    tree, found, todo = _children(), {}, [root]
    while todo:
        pid = todo.pop()
        found[pid] = _cpu(pid)
        todo.extend(tree.get(pid, ()))
    return found


def tree_peak(root: int) -> int:
    """The largest VmHWM among ``root``'s descendants (Spark's Python workers)."""
    tree, peak, todo = _children(), 0, list(_children().get(root, ()))
    while todo:
        pid = todo.pop()
        peak = max(peak, peak_rss(pid))
        todo.extend(tree.get(pid, ()))
    return peak


# -- the session and the write ----------------------------------------------------


def open_session(method: Method, store: Store, spec: Spec) -> Any:
    work = Path(spec.work_dir)
    (work / "events").mkdir(parents=True, exist_ok=True)
    # Spark's Python workers import bench.spark_source (the reporting format).
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p
    )
    extra = {
        "spark.driver.memory": spec.driver_memory,
        "spark.local.dir": str(work / "local"),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(work / "events"),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
        **spec.conf,
    }
    if spec.jars:
        # The jars Ivy resolved for this method before, as a list: the same
        # class path without resolving again at every start.
        extra.update(
            {"spark.jars.packages": "", "spark.jars.excludes": "", "spark.jars": spec.jars}
        )
    spark = start_session(method, store, extra=extra)
    if method.zero_rename:
        from bench.spark_source import BenchSource

        spark.dataSource.register(BenchSource)
    return spark


def jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def persisted(spark: Any, frame: Frame) -> Any:
    """The frame's rows on the local disk (Spark's DISK_ONLY cache), counted: the
    timed write reads them rather than computing them, and they take no room
    in the JVM's heap, whose peak is measured."""
    from pyspark import StorageLevel

    df = spark.sql(frame.sql()).sortWithinPartitions("dt").persist(StorageLevel.DISK_ONLY)
    df.count()
    return df


class Writer:
    """The method's write of frames to names, as its users would write them."""

    def __init__(self, spark: Any, method: Method, store: Store, spec: Spec) -> None:
        self.spark, self.method, self.store, self.spec = spark, method, store, spec
        self.metrics = str(Path(spec.work_dir) / "zero-rename.jsonl")

    def __call__(self, df: Any, name: str, frame: Frame, mode: str, phase: str) -> None:
        reporting: dict[str, Any] = {}
        if self.method.zero_rename:
            # The format's subclass that records when Spark calls each step (the
            # same writer): what the PySpark write benchmark measures with.
            from bench.spark_source import BENCH_FORMAT

            options = {
                "bench_metrics": self.metrics,
                "bench_method": f"{self.method.name}:{phase}",
                "bench_round": str(self.spec.round),
            }
            reporting = {"zero_rename_format": BENCH_FORMAT, "zero_rename_options": options}
        write(self.spark, self.method, self.store, df, name, mode, frame.rows_per_file, **reporting)

    def workload(self, workload: Workload, name: str, phase: str) -> float:
        """The workload's table first (if any), then its write; the seconds of the
        first of them (in a fresh JVM: the cold start)."""
        writes = [(workload.before, "append", phase + "-before")] if workload.before else []
        writes.append((workload.frame, workload.mode, phase))
        first = 0.0
        for frame, mode, label in writes:
            df = self.spark.sql(frame.sql()).sortWithinPartitions("dt")
            started = time.monotonic()
            self(df, name, frame, mode, label)
            first = first or time.monotonic() - started
        return first


def read_back(spark: Any, method: Method, store: Store, name: str) -> dict[str, Any]:
    """Rows per day and data files, as the method's own reader sees the
    destination (a reader of plain files sees every file under it)."""
    target = destination(method, store, name)
    if method.name == "iceberg-spark":
        df = spark.table(target)
        files = spark.table(f"{target}.files").count()
    elif method.zero_rename:
        from zero_rename.core import StoreConfig
        from zero_rename.read import snapshot

        df = spark.read.format("zero-rename").option("endpoint", store.endpoint_url).load(target)
        files = len(snapshot(target, StoreConfig(endpoint_url=store.endpoint_url)).files)
    else:
        fmt = "delta" if method.name == "delta-spark" else "parquet"
        df = spark.read.format(fmt).load(target)
        files = len(df.inputFiles())
    rows = {str(r["dt"]): int(r["count"]) for r in df.groupBy("dt").count().collect()}
    return {"rows_by_day": dict(sorted(rows.items())), "files": files}


def table_prefix(spark: Any, method: Method, store: Store, name: str) -> str:
    """The key prefix of the destination's files: for Iceberg, the table's own
    location, as its catalog recorded it."""
    if method.name != "iceberg-spark":
        return prefix_of(method, store, name)
    rows = spark.sql(f"describe table extended {destination(method, store, name)}").collect()
    location = next(str(r["data_type"]) for r in rows if r["col_name"] == "Location")
    return location.split(f"/{store.bucket}/", 1)[1].rstrip("/") + "/"


def zero_rename_records(path: str, method: Method) -> list[dict[str, Any]]:
    """The reporting format's records of the timed write (bench.spark_source)."""
    if not Path(path).exists():
        return []
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return [r for r in records if r.get("method") == f"{method.name}:timed"]


def run(spec: Spec, channel: Channel) -> None:
    method = METHODS[spec.method]
    workload = Workload.from_json(spec.workload)
    store = Store(**spec.store)
    if workload.mode == "replace" and (refusal := replace_refusal(method)):
        channel.send("unsupported", reason=refusal)
        return
    spark = open_session(method, store, spec)
    writer = Writer(spark, method, store, spec)
    try:
        jvm = jvm_pid(spark)
        cold = (
            writer.workload(warm_up(workload), f"warm-up-{spec.name}", "warm-up")
            if spec.warm_up
            else None
        )
        if workload.before is not None:
            writer(
                persisted(spark, workload.before), spec.name, workload.before, "append", "before"
            )
        df = persisted(spark, workload.frame)
        cpu_before, driver_cpu = tree_cpu(jvm), _cpu(os.getpid())
        for pid in (*cpu_before, os.getpid()):  # the JVM and the Python workers it keeps
            reset_peak(pid)
        channel.send("ready", jvm_pid=jvm)
        channel.expect("go")
        call = time.time()
        writer(df, spec.name, workload.frame, workload.mode, "timed")
        returned = time.time()
        memory = {
            "jvm_peak": peak_rss(jvm),
            "driver_peak": peak_rss(os.getpid()),
            "workers_peak": tree_peak(jvm),
        }
        cpu = cpu_split(jvm, cpu_before, _cpu(os.getpid()) - driver_cpu)
        channel.send("written", call=call, returned=returned)
        channel.expect("ok")
        df.unpersist()
        found = read_back(spark, method, store, spec.name) if spec.read_back else {}
        prefix = table_prefix(spark, method, store, spec.name)
    finally:
        spark.stop()
    log = eventlog.read(Path(spec.work_dir) / "events")
    channel.send(
        "result",
        seconds=round(returned - call, 3),
        cold=round(cold, 3) if cold is not None else None,
        call=call,
        returned=returned,
        phases=eventlog.timeline(log, call, returned),
        memory=memory,
        cpu=cpu,
        read_back=found,
        prefix=prefix,
        zero_rename=zero_rename_records(writer.metrics, method),
    )


def cpu_split(jvm: int, before: dict[int, float], driver: float) -> dict[str, float]:
    """CPU seconds the write took: the JVM (driver and executor threads), the
    Python processes under it (Spark's daemon and workers: a Python data
    source's tasks, setup and commit) and the Python driver."""
    after = tree_cpu(jvm)
    workers = sum(t - before.get(pid, 0.0) for pid, t in after.items() if pid != jvm)
    return {
        "jvm": round(after.get(jvm, 0.0) - before.get(jvm, 0.0), 2),
        "python_workers": round(workers, 2),
        "python_driver": round(driver, 2),
    }


def resolve(name: str) -> str:
    """The jars ``name``'s session gets from Ivy (its ``spark.jars``)."""
    method = METHODS[name]
    store = Store("http://127.0.0.1:9", "unused", "unused", "unused", "/nonexistent")
    spark = start_session(method, store)
    try:
        return str(spark.conf.get("spark.jars", ""))
    finally:
        spark.stop()


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resolve", metavar="METHOD", help="print the jars of METHOD's session")
    args = parser.parse_args(argv)
    channel = Channel()
    try:
        if args.resolve:
            channel.send(
                "resolved",
                jars=resolve(args.resolve),
                packages=list(METHODS[args.resolve].packages),
            )
            return 0
        spec = Spec(**json.loads(sys.stdin.readline()))
        run(spec, channel)
    except Unsupported as exc:
        channel.send("unsupported", reason=str(exc))
    except Exception as exc:  # one line to the caller; the traceback to stderr
        traceback.print_exc()
        channel.send("failed", error=one_line(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
