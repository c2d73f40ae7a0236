"""What each method leaves after a fault, measured at the wire and in the bucket.

Every method of :mod:`bench.peers.sessions` writes through the suite's proxy
(``tests/s3proxy.py``) to the embedded SeaweedFS, in a driver process of its
own (:mod:`bench.peers.fault_driver`), one scenario at a time:

- ``task-kill``: on ``local-cluster`` (executors are processes of their own),
  an upstream stage kills its executor's JVM (SIGKILL, with its Python
  workers) in attempt 0 of one task, after 750 rows were handed to the writer;
  Spark runs the task again elsewhere. The write must hold every row once.
- ``driver-kill``: a destination holding an earlier write (``old``); the job
  (``new``: a replace of its partitions, or an append where the method has no
  such replace) is held at the proxy at the commit's first publishing request
  after ``--through`` of them went through, and its driver is killed (SIGKILL
  to the process group) while the request is held, so the request never
  reaches the store. Then the job is run again from scratch, as a scheduler
  would.
- ``concurrent``: two drivers, a replace (``new``) and an append
  (``appended``) of the same partitions over ``old``, each held at its first
  publishing request until both are there (or one failed before), then
  released together, so their commits overlap.
- ``reader``: the job held part-way (``--through`` publishing requests done)
  while a reader lists and reads the destination, then released.

After each, the bucket is read directly (:mod:`bench.peers.fault_state`). One
command per row::

    python -m bench.peers.faults --scenarios driver-kill --methods s3a-magic --output -

With no ``--output``, a run of the whole table rewrites its section of
``docs/benchmarks.md``; a run of some rows only prints.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.page import seaweedfs_version, write_section
from bench.peers import jars
from bench.peers.fault_driver import MARK, one_line
from bench.peers.fault_state import Inspector, Observed, Rows, describe, expected, leftover_text
from bench.peers.sessions import METHODS, Method, Store
from bench.peers.writes import prefix_of
from tests.s3proxy import Rule, S3Proxy, S3Request, proxy_for
from zero_rename.embedded_s3 import EmbeddedS3

SCENARIOS = ("task-kill", "driver-kill", "concurrent", "reader")
HEADER = "## What each method leaves after a fault"
_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
DEFAULT_PAGE = Path("docs/benchmarks.md")
ROOT = Path(__file__).resolve().parents[2]
ROWS = 4000  # a write: two days of 2,000 rows, two Spark tasks
ROWS_PER_FILE = 500  # so 8 files a write, 4 a partition
KILL_AFTER_ROWS = 750  # the killed attempt's first file closed, its second open
# How long a step may take before the row is given up: a JVM's start with the
# peers' jars, a write of a few thousand rows, on two busy cores.
STEP_TIMEOUT = 600.0
HOLD_TIMEOUT = 300.0
# Methods with no replace of just the partitions written (writes.Unsupported):
# their jobs append instead.
APPEND_ONLY = ("s3a-magic", "s3a-directory")


# -- driver processes ---------------------------------------------------------


class Driver:
    """One driver process, killed as a whole (its process group)."""

    def __init__(self, spec: dict[str, Any], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.fault_driver", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=ROOT,
            text=True,
            start_new_session=True,
        )
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.killed = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                self.messages.put(json.loads(line[len(MARK) :]))
            else:
                self._log.write(line)
        self.messages.put({"kind": "gone", "code": self.proc.wait()})

    def next(self, timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
        """The next message that is not ``started``; ``gone`` once it exited."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.messages.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                return {"kind": "timeout"}
            if message["kind"] != "started":
                return message

    def ready(self) -> bool:
        message = self.next()
        if message["kind"] == "ready":
            return True
        self.note = message
        return False

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
        return self.next(timeout)

    def kill(self) -> None:
        """SIGKILL to the driver, its JVM and their workers at once: every process
        of its session (PySpark's worker daemon makes a process group of its own,
        so a kill of the driver's group would leave the workers running)."""
        self.killed = True
        kill_session(self.proc.pid)
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # no more steps: the driver stops its session
            except OSError:
                pass
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.kill()
        else:  # a JVM or worker left behind by a driver that exited
            kill_session(self.proc.pid)
        self._reader.join(10)
        self._log.close()

    def saw_in_log(self, text: str) -> bool:
        return text in self.log_path.read_text(errors="replace")


def session_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[0] != "Z" and int(fields[3]) == sid:  # stat(5): state, ..., session
            members.append(int(entry.name))
    return members


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``, until none is left (a process
    may fork between the listing and the kills)."""
    for _ in range(20):
        members = session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def outcome(message: dict[str, Any]) -> str:
    kind = message["kind"]
    if kind == "done":
        return "ok"
    if kind in ("failed", "unsupported"):
        return f"{kind}: {message['error']}"
    return kind


# -- one row -----------------------------------------------------------------------


@dataclass
class Lab:
    """What every row of a run shares: the server and a scratch directory."""

    server: EmbeddedS3
    root: Path
    through: int
    trace: bool = False

    def client(self) -> Any:
        return self.server.client()


@dataclass
class RowRun:
    """One scenario x method: its bucket, scratch directory, proxies, drivers."""

    lab: Lab
    scenario: str
    method: Method
    name: str = "events"
    proxies: list[S3Proxy] = field(default_factory=list)
    drivers: list[Driver] = field(default_factory=list)
    trace_lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.bucket = f"f-{self.scenario}-{self.method.name}"[:63]
        self.dir = self.lab.root / f"{self.scenario}-{self.method.name}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lab.server.create_bucket(self.bucket)
        self.local_dirs = {
            "S3A buffer": self.dir / "s3a",
            "S3A staging": self.dir / "staging",
            "spool": self.dir / "tmp",
        }

    def store(self, endpoint: str) -> Store:
        server = self.lab.server
        return Store(
            endpoint_url=endpoint,
            access_key=server.access_key,
            secret_key=server.secret_key,
            bucket=self.bucket,
            catalog_db=str(self.dir / "catalog.db"),
        )

    def inspector(self) -> Inspector:
        return Inspector(
            self.lab.client(), self.store(self.lab.server.endpoint_url), self.method, self.name
        )

    def observe(self) -> Observed:
        observed = self.inspector().observe(self.local_dirs)
        if self.lab.trace:
            self.trace_lines.append(f"# leftovers: {observed.leftover_keys}")
        return observed

    def proxy(self) -> S3Proxy:
        proxy = proxy_for(self.lab.server).start()
        self.proxies.append(proxy)
        if self.lab.trace:
            tag = len(self.proxies)

            def record(request: S3Request) -> bool:
                self.trace_lines.append(f"{tag} {request.op} {request.key}")
                return False

            proxy.add("*", "delay", when=record, times=None)
        return proxy

    def driver(
        self,
        proxy: S3Proxy,
        steps: list[dict[str, Any]],
        master: str = "local[2]",
        conf: dict[str, str] | None = None,
    ) -> Driver:
        for path in self.local_dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        spec = {
            "method": self.method.name,
            "endpoint": proxy.endpoint_url,
            "bucket": self.bucket,
            "catalog_db": str(self.dir / "catalog.db"),
            "name": self.name,
            "master": master,
            "rows_per_file": ROWS_PER_FILE,
            "steps": steps,
            "conf": {
                # Every local file a committer spools goes under the row's own
                # directory, so that what it leaves there can be counted.
                "spark.hadoop.fs.s3a.buffer.dir": str(self.local_dirs["S3A buffer"]),
                "spark.hadoop.fs.s3a.committer.staging.tmp.path": (
                    "file://" + str(self.local_dirs["S3A staging"])
                ),
                "spark.hadoop.hadoop.tmp.dir": str(self.dir / "hadoop"),
                "spark.local.dir": str(self.dir / "spark"),
                **(conf or {}),
            },
        }
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.lab.server.access_key,
            "AWS_SECRET_ACCESS_KEY": self.lab.server.secret_key,
            "AWS_ENDPOINT_URL": proxy.endpoint_url,  # every request through the proxy
            "TMPDIR": str(self.local_dirs["spool"]),
            "PYTHONPATH": str(ROOT),
        }
        driver = Driver(spec, env, self.dir / f"driver-{len(self.drivers)}.log")
        self.drivers.append(driver)
        return driver

    def close(self) -> None:
        for driver in self.drivers:
            driver.close()
        for proxy in self.proxies:
            proxy.stop()
        if self.lab.trace:
            (self.dir / "trace.txt").write_text("\n".join(self.trace_lines) + "\n")


# -- where a commit is held --------------------------------------------------------


def publishing(method: Method, prefix: str) -> tuple[str, Callable[[S3Request], bool]]:
    """The request by which ``method``'s commit publishes (what it is called, and a
    test of a request): a data file completed or copied to a key a listing reader
    reads, for the directory committers and zero-rename; the metadata file a
    table's commit swaps in, for Spark's table writers (their data files are
    written in place by the tasks)."""
    if method.name == "iceberg-spark":
        return (
            "the table metadata PUT (before the catalog swap)",
            lambda r: (
                r.op == "PutObject"
                and r.key.startswith(prefix)
                and r.key.endswith(".metadata.json")
            ),
        )
    if method.name == "delta-spark":
        return (
            "the log entry's PUT",
            lambda r: (
                r.op == "PutObject"
                and r.key.startswith(prefix + "_delta_log/")
                and r.key.endswith(".json")
                and r.key.rsplit("/", 1)[1].split(".")[0].isdigit()
            ),
        )

    def publishes(r: S3Request) -> bool:
        if r.op not in ("CopyObject", "CompleteMultipartUpload") or not r.key.startswith(prefix):
            return False
        relative = r.key[len(prefix) :]
        return relative.endswith(".parquet") and not any(
            p.startswith(("_", ".")) for p in relative.split("/")
        )

    return "a data file copied or completed into place", publishes


def hold(proxy: S3Proxy, method: Method, prefix: str, nth: int) -> tuple[str, Rule]:
    what, test = publishing(method, prefix)
    if method.family == "table":
        nth = 1  # one such request a commit
    where = what if nth == 1 else f"{what}, #{nth}"
    return where, proxy.add("*", "hold", when=test, nth=nth, times=None)


def wait_held(rules: Iterable[Rule], drivers: Iterable[Driver], timeout: float) -> list[bool]:
    """Wait until every rule holds a request, or its driver reported (failed or
    finished without reaching it). Which rules hold one."""
    rules, drivers = list(rules), list(drivers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(
            r.arrived.is_set() or not d.messages.empty()
            for r, d in zip(rules, drivers, strict=True)
        ):
            break
        time.sleep(0.1)
    return [r.arrived.is_set() for r in rules]


# -- the scenarios -----------------------------------------------------------------


def step(version: int, mode: str, **extra: Any) -> dict[str, Any]:
    return {"version": version, "first": 0, "count": ROWS, "mode": mode, **extra}


def job_mode(method: Method) -> str:
    return "append" if method.name in APPEND_ONLY else "replace"


def states_for(mode: str) -> dict[str, Rows]:
    old, new = expected(1, ROWS), expected(2, ROWS)
    if mode == "replace":
        return {"old": old, "new": new}
    return {"old": old, "old + new": old + new}


@dataclass
class Result:
    scenario: str
    method: str
    cells: dict[str, str]
    seconds: float


def look(observed: Observed, states: dict[str, Rows]) -> dict[str, str]:
    return {
        "listing": describe(observed.listing, states),
        "table": describe(observed.table, states),
        "pending": str(observed.pending),
        "leftovers": leftover_text(observed),
    }


def seed(run: RowRun, driver: Driver) -> str | None:
    """Run the driver's first step, the earlier write; why not, if it failed."""
    if not driver.ready():
        return f"driver: {outcome(driver.note)}"
    driver.go()
    message = driver.result()
    return None if message["kind"] == "done" else f"earlier write: {outcome(message)}"


def run_step(driver: Driver) -> str:
    """Run the driver's next step; its outcome."""
    if not driver.ready():
        return f"driver: {outcome(driver.note)}"
    driver.go()
    return outcome(driver.result())


def worker_dir() -> Path:
    """Where local-cluster's executors work: Spark's own ``work/`` directory,
    which local-cluster does not let be moved (SPARK_WORKER_DIR is read by
    standalone workers only)."""
    import pyspark

    return Path(pyspark.__file__).parent / "work"


def remove_worker_dirs(before: set[str]) -> None:
    """Remove the executors' directories a row's local-cluster made (their logs
    and the jars they fetched), so that rows leave nothing in the environment."""
    root = worker_dir()
    for entry in root.glob("app-*"):
        if entry.name not in before:
            shutil.rmtree(entry, ignore_errors=True)
    if root.exists() and not any(root.iterdir()):
        root.rmdir()


def task_kill(run: RowRun) -> dict[str, str]:
    before = {p.name for p in worker_dir().glob("app-*")}
    proxy = run.proxy()
    states = {"every row once": expected(1, ROWS)}
    kill = {"partition": 1, "after_rows": KILL_AFTER_ROWS}
    driver = run.driver(
        proxy,
        [step(1, "append", partitioned=False, kill_attempt=kill)],
        master="local-cluster[2,1,1024]",
        # A Python data source's writer takes its rows as Arrow batches of this
        # many (10,000 by default: a whole task here): small batches, so that
        # zero-rename's writer has rows to write before the kill, as the JVM's do.
        conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "100"},
    )
    try:
        if not driver.ready():
            return {"write": f"driver: {outcome(driver.note)}"}
        driver.go()
        message = driver.result()
        driver.close()
    finally:
        remove_worker_dirs(before)
    killed = driver.saw_in_log("Lost executor") or driver.saw_in_log("ExecutorLostFailure")
    return {
        "write": outcome(message),
        "killed": "yes" if killed else "no executor lost",
        **look(run.observe(), states),
    }


@dataclass
class HeldJob:
    """The job under test over an earlier write, its commit held at the proxy."""

    proxy: S3Proxy
    driver: Driver
    mode: str
    states: dict[str, Rows]
    where: str
    rule: Rule
    held: bool


def held_job(run: RowRun) -> HeldJob | str:
    """Write ``old``, then start the job and wait until its commit is held after
    ``through`` publishing requests; what went wrong, if it could not."""
    proxy = run.proxy()
    mode = job_mode(run.method)
    driver = run.driver(proxy, [step(1, "append"), step(2, mode)])
    failed = seed(run, driver)
    if failed:
        return failed
    if not driver.ready():
        return f"driver: {outcome(driver.note)}"
    prefix = prefix_of(run.method, run.store(proxy.endpoint_url), run.name)
    where, rule = hold(proxy, run.method, prefix, run.lab.through + 1)
    driver.go()
    (held,) = wait_held([rule], [driver], HOLD_TIMEOUT)
    return HeldJob(proxy, driver, mode, states_for(mode), where, rule, held)


def driver_kill(run: RowRun) -> dict[str, str]:
    job = held_job(run)
    if isinstance(job, str):
        return {"mode": job_mode(run.method), "killed": job}
    if job.held:
        job.driver.kill()
        killed = f"at {job.where}"
    else:
        killed = f"not held: {outcome(job.driver.result(5))}"
    job.proxy.release(job.rule, forward=False)
    job.driver.close()
    after = look(run.observe(), job.states)
    again = run.driver(job.proxy, [step(2, job.mode)])
    rerun = run_step(again)
    again.close()
    if run.method.zero_rename and rerun != "ok":
        rerun = f"{rerun}; {recover(run, job.proxy, job.mode)}"
    final = look(run.observe(), job.states)
    return {
        "mode": job.mode,
        "killed": killed,
        **{f"after {k}": v for k, v in after.items()},
        "rerun": rerun,
        **{f"final {k}": v for k, v in final.items()},
    }


def recover(run: RowRun, proxy: S3Proxy, mode: str) -> str:
    """zero-rename's documented way out of a job its driver left past the point of
    no return (docs/failure-modes.md): retry that job's commit, then run the job
    again."""
    from zero_rename.core import Committer, StoreConfig
    from zero_rename.core.tables.iceberg_catalog import HOME_VARIABLE as ICEBERG_HOME_VARIABLE

    # The embedded Iceberg catalog the drivers publish to is the row's, found
    # (as in the drivers, by sessions.start_session) through this variable.
    os.environ[ICEBERG_HOME_VARIABLE] = str(run.dir)
    config = StoreConfig(endpoint_url=run.lab.server.endpoint_url)
    committer = Committer(f"s3://{run.bucket}/{run.name}", config)
    stuck = [r.job_id for r in committer.jobs() if r.state.value == "committing"]
    if not stuck:
        return "no job left committing"
    for job_id in stuck:
        committer.commit_job(job_id)
    again = run.driver(proxy, [step(2, mode)])
    second = run_step(again)
    again.close()
    return f"the killed job's commit retried (`commit_job`): ok; run again: {second}"


def concurrent(run: RowRun) -> dict[str, str]:
    if run.method.name in APPEND_ONLY:
        return {"replace": "no replace of a partition", "append": "-"}
    old, new, added = expected(1, ROWS), expected(2, ROWS), expected(3, ROWS)
    states = {"old": old, "new": new, "new + appended": new + added, "old + appended": old + added}
    replacer_proxy, appender_proxy = run.proxy(), run.proxy()
    replacer = run.driver(replacer_proxy, [step(1, "append"), step(2, "replace")])
    appender = run.driver(appender_proxy, [step(3, "append")])
    failed = seed(run, replacer)
    if failed or not replacer.ready() or not appender.ready():
        return {"replace": failed or "driver failed", "append": "-"}
    prefix = prefix_of(run.method, run.store(replacer_proxy.endpoint_url), run.name)
    _, r_rule = hold(replacer_proxy, run.method, prefix, 1)
    _, a_rule = hold(appender_proxy, run.method, prefix, 1)
    replacer.go()
    appender.go()
    held = wait_held([r_rule, a_rule], [replacer, appender], HOLD_TIMEOUT)
    replacer_proxy.release(r_rule)
    appender_proxy.release(a_rule)
    r_result, a_result = outcome(replacer.result()), outcome(appender.result())
    observed = run.observe()
    cells = look(observed, states)
    return {
        "replace": r_result,
        "append": a_result,
        "overlap": "both held, released together" if all(held) else "one reached no commit",
        "commits": "-" if observed.commits is None else str(observed.commits - 1),
        "verdict": serial_verdict(observed, states, r_result == "ok", a_result == "ok"),
        **cells,
    }


def serial_verdict(
    observed: Observed, states: dict[str, Rows], replaced: bool, appended: bool
) -> str:
    """Whether what readers see is what running the jobs that succeeded one after
    the other would leave (by rows and, for a table, by its count of commits)."""
    serial = {
        (True, True): {"new + appended": "replace, then append", "new": "append, then replace"},
        (True, False): {"new": "the replace alone"},
        (False, True): {"old + appended": "the append alone"},
        (False, False): {"old": "neither"},
    }[(replaced, appended)]
    seen = observed.table if observed.table is not None else observed.listing
    name = describe(seen, states)
    if name not in serial:
        return f"no serial order: {name}"
    if observed.commits is not None and observed.commits - 1 != replaced + appended:
        return (
            f"no serial order: both reported success, {observed.commits - 1} commit(s) "
            "after the earlier write"
        )
    return f"serial: {serial[name]}"


def reader(run: RowRun) -> dict[str, str]:
    job = held_job(run)
    if isinstance(job, str):
        return {"mode": job_mode(run.method), "held": job}
    during = look(run.observe(), job.states) if job.held else {}
    job.proxy.release(job.rule)
    result = job.driver.result()
    final = look(run.observe(), job.states)
    return {
        "mode": job.mode,
        "held": f"at {job.where}" if job.held else "not held",
        "saw listing": during.get("listing", "-"),
        "saw table": during.get("table", "-"),
        "write": outcome(result),
        **{f"final {k}": v for k, v in final.items()},
    }


RUNNERS: dict[str, Callable[[RowRun], dict[str, str]]] = {
    "task-kill": task_kill,
    "driver-kill": driver_kill,
    "concurrent": concurrent,
    "reader": reader,
}


def run_row(lab: Lab, scenario: str, method: Method) -> Result:
    started = time.monotonic()
    run = RowRun(lab, scenario, method)
    try:
        cells = RUNNERS[scenario](run)
    except Exception as exc:  # the row says so; the others still run
        cells = {"error": one_line(exc)}
    finally:
        run.close()
    return Result(scenario, method.name, cells, round(time.monotonic() - started, 1))


# -- the report -------------------------------------------------------------------

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "task-kill": [
        ("write", "the write"),
        ("killed", "an executor killed"),
        ("listing", "listing reader"),
        ("table", "table reader"),
        ("pending", "pending uploads"),
        ("leftovers", "leftovers"),
    ],
    "driver-kill": [
        ("mode", "job"),
        ("killed", "driver killed"),
        ("after listing", "then: listing reader"),
        ("after table", "table reader"),
        ("after pending", "pending uploads"),
        ("after leftovers", "leftovers"),
        ("rerun", "job run again"),
        ("final listing", "then: listing reader"),
        ("final table", "table reader"),
        ("final pending", "pending uploads"),
        ("final leftovers", "leftovers"),
    ],
    "concurrent": [
        ("replace", "replace"),
        ("append", "append"),
        ("overlap", "their commits"),
        ("verdict", "result"),
        ("commits", "table commits"),
        ("listing", "listing reader"),
        ("table", "table reader"),
        ("pending", "pending uploads"),
        ("leftovers", "leftovers"),
    ],
    "reader": [
        ("mode", "job"),
        ("held", "commit held"),
        ("saw listing", "listing reader saw"),
        ("saw table", "table reader saw"),
        ("write", "the write, released"),
        ("final listing", "then: listing reader"),
        ("final table", "table reader"),
        ("final pending", "pending uploads"),
        ("final leftovers", "leftovers"),
    ],
}


def _cell(text: str) -> str:
    """A cell's text, made short: job ids cut to their first 8 digits, the
    claim's time and host and the refusal's closing sentence (cut off in the
    one-line error) left out."""
    text = _UUID.sub(r"\1", text)
    text = re.sub(r"job [0-9a-f]{8} \(\w+\) cannot claim .*? at s3://\S+: ", "", text)
    text = re.sub(r"s3a?://f-[\w-]+/", "", text)  # the row's own bucket
    text = text.replace("a data file copied or completed into place, #", "data file published, #")
    text = re.sub(r", claimed [^)]*\)", ")", text)
    text = re.sub(r"\. Nothing of job [^;]*", "", text)
    return text.replace("|", "\\|").replace("\n", " ")


def table(scenario: str, results: list[Result]) -> str:
    columns = COLUMNS[scenario]
    lines = [
        "| method | " + " | ".join(title for _, title in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for result in results:
        cells = [_cell(result.cells.get(key, "-")) for key, _ in columns]
        lines.append(f"| `{result.method}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


INTRO = """\
What it measures: what each method's output is after a fault, read from the
bucket itself rather than from what the writer reported. Every method of
`bench/peers/sessions.py` writes in a Spark driver process of its own (Spark
{spark}, local mode) through the suite's S3 proxy (`tests/s3proxy.py`) to the
embedded SeaweedFS; the proxy holds the request at which a commit publishes,
so that a process is killed, or a reader reads, at the same point of the commit
every time. See [failure modes](failure-modes.md#what-the-peers-leave-after-a-fault)
for zero-rename's guarantees beside these rows.

Every write is 4,000 rows of `(id, version, payload, dt)`: two days (`dt`), two
Spark tasks, 500 rows a file (8 files, 4 a partition). `version` names the write
(1 `old`, the write already there; 2 `new`, the job under test; 3 `appended`,
the job beside it) and `id` is unique within a write, so each reader's rows are
counted: a cell naming a state (`old`, `new`, `old + new`, `nothing`) means
exactly those rows, each once; otherwise it says how many of each write's rows
were seen (`old 4,000/4,000 + new 1,000/4,000`) and how many were seen twice.

- **listing reader**: what a Hive-style directory reader reads
  (`spark.read.parquet`, a pyarrow dataset, Athena): every `.parquet` object
  under the destination none of whose path elements starts with `_` or `.`.
- **table reader**: the data files the table's current state names: Iceberg
  through PyIceberg on the shared catalog, Delta through `deltalake`,
  zero-rename's committed state through `zero_rename.read` (what
  `spark.read.format("zero-rename")` reads); `-` for a plain directory.
- **pending uploads**: multipart uploads under the destination, invisible and
  billed.
- **leftovers**: objects under the destination that neither the current state
  nor its kept history needs (`_temporary/`, `__magic/`, `.spark-staging/`,
  zero-rename's job objects other than a decided job's record, file list and
  plan header; for a table, data files its current version does not name:
  orphans of a failed commit, or files a replace dropped from the table but
  keeps for its older versions until expired or vacuumed), and files left on
  local disk by a committer's spool (`local ...`).

Jobs are a `replace` of the partitions written (Spark's dynamic partition
overwrite; the S3A partitioned committer's `replace` conflict mode; Iceberg's
`overwritePartitions`; zero-rename's `overwrite`), or an `append` for the S3A
magic and directory committers, which have no replace of just the partitions
written (`bench/peers/writes.py` says why).
"""

SCENARIO_TEXT = {
    "task-kill": """\
On `local-cluster[2,1,1024]` (executors are processes of their own), a
Python UDF upstream of the writer kills its executor's JVM (SIGKILL; its Python
workers, zero-rename's writer among them, die with it) in attempt 0 of one
task, 10 s after 750 of its rows went on to the writer: the attempt's first
file is closed, its second open. Spark runs the task again on another executor.
The write is unpartitioned (Spark's partitioned writes sort their input first,
so no file would be open yet). Expected: every row once, nothing left.""",
    "driver-kill": """\
Over `old`, the job is held at its commit's first publishing request after
{through} such requests went through (see "held at"), and its driver is killed
(SIGKILL to every process of its session: the Python driver, the JVM and their
Python workers) while the request is held, so it never reaches the store. Then
the job is run again from scratch, as a scheduler would; where zero-rename's
rerun is refused, its documented way out follows (retry the killed job's
commit, then run the job again). The first four columns are the state after
the kill, the last four after the rerun.""",
    "concurrent": """\
Over `old`, two drivers: a replace (`new`) and an append (`appended`) of the
same two partitions, each held at its first publishing request until both are
held (or one failed before reaching its commit), then released together.
"one reached no commit": one job failed before its first publishing request.
"result" compares what the table reader (else the listing reader) sees, and the
table's count of new commits, with what running the jobs that reported success
one after the other would leave.""",
    "reader": """\
Over `old`, the job is held after {through} publishing requests; meanwhile both
readers read the destination ("saw"), then the commit is released and the job
finishes ("then").""",
}

HELD_AT = """\
Held at: the directory committers and zero-rename, a data file copied
(CopyObject) or completed (CompleteMultipartUpload) to a key a listing reader
reads (for FileOutputCommitter v2's appends that is its task commit); Spark's
Iceberg writer, the PUT of the table's new metadata file (the catalog swap
follows it); Spark's Delta writer, the PUT of the log entry."""


def report(results: list[Result], meta: dict[str, Any]) -> str:
    through = meta.get("through", 2)
    seconds = sum(r.seconds for r in results)
    load = meta.get("load", [0.0, 0.0])
    parts = [HEADER, "", INTRO.format(spark=meta.get("spark", "?")), HELD_AT, ""]
    parts += [
        f"Run {meta.get('date', '?')} on {meta.get('cores', '?')} cores: Spark "
        f"{meta.get('spark', '?')}, Hadoop {meta.get('hadoop', '?')}, Iceberg "
        f"{meta.get('iceberg', '?')}, Delta {meta.get('delta', '?')}, SeaweedFS "
        f"{meta.get('seaweedfs', '?')}, Python {meta.get('python', '?')}. The {len(results)} "
        f"rows took {seconds / 60:.0f} minutes in all, one to four minutes each (load "
        f"average {load[0]:.1f} at the start and {load[1]:.1f} at the end of the last "
        "run: a machine shared with other work, so the times are slow; the holds make "
        "the outcomes the same at any speed). Run the table with `make bench-peers-faults`, "
        "a scenario with `--scenarios`, one row with:",
        "",
        "```",
        "python -m bench.peers.faults --scenarios driver-kill --methods s3a-magic",
        "```",
        "",
    ]
    for scenario in SCENARIOS:
        mine = [r for r in results if r.scenario == scenario]
        if mine:
            text = SCENARIO_TEXT[scenario].format(through=through)
            parts += [f"### {scenario}", "", text, "", table(scenario, mine), ""]
    return "\n".join(parts)


def print_results(results: list[Result]) -> None:
    for scenario in SCENARIOS:
        mine = [r for r in results if r.scenario == scenario]
        if mine:
            print(f"\n{scenario}\n")
            print(table(scenario, mine))


# -- the command ------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.faults", description=__doc__)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument(
        "--through",
        type=int,
        default=2,
        help="publishing requests a held commit lets through first (driver-kill, reader)",
    )
    parser.add_argument(
        "--output",
        help="the page whose section to rewrite ('-': print only); by default the "
        "benchmarks page for a run of the whole table, else print only",
    )
    parser.add_argument("--results", help="append each row's result to this JSON-lines file")
    parser.add_argument(
        "--render",
        nargs="+",
        metavar="RESULTS",
        help="run nothing: write the section from these results files (a later row "
        "of a scenario and method replaces an earlier one)",
    )
    parser.add_argument("--trace", action="store_true", help="keep each row's requests")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [s for s in args.scenarios if s not in SCENARIOS]
    bad += [m for m in args.methods if m not in METHODS]
    if bad:
        parser.error(f"unknown scenario or method: {', '.join(bad)}")
    return args


def load_results(paths: list[str]) -> tuple[list[Result], dict[str, Any]]:
    rows: dict[tuple[str, str], Result] = {}
    meta: dict[str, Any] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            item = json.loads(line)
            if "meta" in item:
                meta.update(item["meta"])
                continue
            result = Result(**item)
            rows[(result.scenario, result.method)] = result
    order = {(s, m): i for i, (s, m) in enumerate((s, m) for s in SCENARIOS for m in METHODS)}
    return sorted(rows.values(), key=lambda r: order[(r.scenario, r.method)]), meta


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        results, meta = load_results(args.render)
        output = args.output or str(DEFAULT_PAGE)
        write_section(output, HEADER, report(results, meta))
        print(f"wrote {HEADER!r} into {output} from {len(results)} rows")
        return 0
    whole = args.scenarios == list(SCENARIOS) and args.methods == list(METHODS)
    output = args.output or (str(DEFAULT_PAGE) if whole else "-")
    root = Path(tempfile.mkdtemp(prefix="zero-rename-faults-"))
    results_path = Path(args.results) if args.results else root / "results.jsonl"
    started = time.monotonic()
    load = os.getloadavg()[0]
    results: list[Result] = []
    with EmbeddedS3() as server:
        # zero-rename's reader and PyIceberg in this process find the store's
        # keys where their users' jobs do.
        os.environ.update(server.environment())
        lab = Lab(server, root, args.through, args.trace)
        for scenario in args.scenarios:
            for name in args.methods:
                result = run_row(lab, scenario, METHODS[name])
                results.append(result)
                with results_path.open("a") as out:
                    out.write(json.dumps(result.__dict__) + "\n")
                print(f"{scenario} {name} ({result.seconds:.0f} s): {result.cells}", flush=True)
    meta = run_meta(time.monotonic() - started, (load, os.getloadavg()[0]), args.through)
    with results_path.open("a") as out:
        out.write(json.dumps({"meta": meta}) + "\n")
    print_results(results)
    if output != "-":
        write_section(output, HEADER, report(results, meta))
        print(f"\nwrote {HEADER!r} into {output}")
    if args.keep:
        print(f"scratch directory kept: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def run_meta(seconds: float, load: tuple[float, float], through: int) -> dict[str, Any]:
    import pyspark

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "seconds": round(seconds),
        "load": list(load),
        "through": through,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "spark": pyspark.__version__,
        "seaweedfs": seaweedfs_version(),
        "hadoop": jars.HADOOP_VERSION,
        "iceberg": jars.ICEBERG_VERSION,
        "delta": jars.DELTA_VERSION,
    }


if __name__ == "__main__":
    sys.exit(main())
