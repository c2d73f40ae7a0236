"""A driver of the fault scenarios (:mod:`bench.peers.faults`): one method's
Spark session in a process of its own, so that the harness can kill it
(SIGKILL to its process group: the Python driver, its JVM and their Python
workers) at a request it holds at the proxy.

It runs the writes its spec lists one by one, each when the harness says
``go`` on standard input, and reports on standard output, one JSON line a
message, each marked with :data:`MARK` (Spark and Java may print there too)::

    python -m bench.peers.fault_driver '{"method": "s3a-magic", ...}'

Credentials come from the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``), never from the command line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.peers.sessions import METHODS, Store, start_session
from bench.peers.writes import Unsupported, write

MARK = "@@fault-driver "
PAYLOAD_BYTES = 1500
# Seconds the doomed attempt waits before the kill, for its writer to take the
# rows handed over: a new executor's first S3 write (the S3A connector and AWS
# SDK starting) took more than 2 s here.
KILL_DELAY = 10.0


# "package.Name: message", the last line of a Python traceback; Spark's and
# py4j's own wrappers say nothing of the cause.
_CAUSE = re.compile(r"^([A-Za-z_][\w.$]*(?:Error|Exception|Conflict|Refused)\w*): (.+)$")
_JAVA_PREFIX = re.compile(r"^(: |Caused by: )")
_WRAPPERS = ("py4j", "org.apache.spark.SparkException", "java.util.concurrent")


def say(kind: str, **fields: Any) -> None:
    sys.stdout.write(MARK + json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


def one_line(exc: BaseException) -> str:
    """The error as one line: the last Python error a Spark error carries (the
    writer's own, raised in a Python worker), else the first Java exception in
    it that is not Spark's or py4j's wrapper, else its first line."""
    lines = [_JAVA_PREFIX.sub("", line.strip()) for line in str(exc).splitlines()]
    found = [m for m in map(_CAUSE.match, lines) if m]
    python = [m for m in found if "." not in m.group(1) or m.group(1).startswith("zero_rename")]
    java = [m for m in found if m.group(1).startswith(("java.", "org.")) and m not in python]
    java = [m for m in java if not m.group(1).startswith(_WRAPPERS)]
    chosen = python[-1] if python else (java[0] if java else None)
    if chosen:
        name, message = chosen.groups()
        return f"{name.rsplit('.', 1)[-1]}: {message}"[:300]
    first = next((line for line in lines if line), "")
    return f"{type(exc).__name__}: {first}"[:300]


def rows(spark: Any, step: dict[str, Any]) -> Any:
    """``count`` rows from ``first``: ``id``, ``version`` (which write made the
    row), ``dt`` (two days, alternating) and a payload; two Spark partitions."""
    first, count, version = step["first"], step["count"], step["version"]
    df = spark.range(first, first + count, numPartitions=2).selectExpr(
        "id",
        f"cast({version} as int) as version",
        f"repeat('x', {PAYLOAD_BYTES}) as payload",
        "concat('2024-01-0', cast(id % 2 + 1 as string)) as dt",
    )
    kill = step.get("kill_attempt")
    if kill:
        from pyspark.sql.functions import col, udf

        passing = udf(_killer(kill["partition"], kill["after_rows"]), "string", useArrow=False)
        df = df.withColumn("payload", passing(col("payload")))
    return df


def _killer(partition: int, after_rows: int) -> Any:
    """A pass-through of each row's payload that, in attempt 0 of
    ``partition``, kills its executor's JVM (and so every Python worker of it,
    the writer's too) once ``after_rows`` rows have gone on to the writer: a task
    attempt killed mid-write, as a lost node or the OOM killer would. (A plain
    Python UDF, not ``mapInArrow``, which needs pandas; the payload it returns
    fills the worker's output buffer every few dozen rows, so the rows before the
    kill have reached the writer.)"""
    seen: dict[tuple[int, int], int] = {}

    def run(payload: str) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = (context.partitionId(), context.attemptNumber())
        seen[attempt] = seen.get(attempt, 0) + 1
        if attempt == (partition, 0) and seen[attempt] > after_rows:
            time.sleep(KILL_DELAY)  # the writer takes what it was handed
            _kill_executor()
        return payload

    return run


def _kill_executor() -> None:
    """SIGKILL the executor JVM this Python worker belongs to (a parent of it)."""
    pid = os.getppid()
    while pid > 1:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"CoarseGrainedExecutorBackend" in cmdline:
            os.kill(pid, signal.SIGKILL)
            time.sleep(60)  # the daemon ends this worker once its JVM is gone
            return
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no executor JVM above this worker: run on local-cluster")


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    method = METHODS[spec["method"]]
    store = Store(
        endpoint_url=spec["endpoint"],
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        bucket=spec["bucket"],
        catalog_db=spec["catalog_db"],
    )
    spark = start_session(method, store, master=spec["master"], extra=spec.get("conf"))
    say("started", pid=os.getpid())
    try:
        for index, step in enumerate(spec["steps"]):
            say("ready", step=index)
            if sys.stdin.readline().strip() != "go":
                break
            started = time.monotonic()
            try:
                write(
                    spark,
                    method,
                    store,
                    rows(spark, step),
                    spec["name"],
                    step["mode"],
                    max_rows_per_file=spec.get("rows_per_file"),
                    partitioned=step.get("partitioned", True),
                )
            except Unsupported as exc:
                say("unsupported", step=index, error=str(exc))
            except Exception as exc:  # reported, not raised: the harness decides
                say("failed", step=index, error=one_line(exc))
            else:
                say("done", step=index, seconds=round(time.monotonic() - started, 2))
    finally:
        spark.stop()
    say("exit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
