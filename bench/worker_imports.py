"""What the format costs a fresh Spark Python worker, CPU, beside another checkout.

Spark forks a fresh Python worker for each step of a Python data source on the
driver (a read's schema and planning, a write's setup and commit) and, without
worker reuse, for each task; whatever the format loads there is paid again by
every one. Each case below runs in a fresh interpreter after Spark's own worker
module, with each tree's package first on ``PYTHONPATH``, alternating the trees
round by round, and reports the CPU of the format's part alone:

- ``read``: a read's worker, the reader module imported and Arrow's S3 client
  made for the store (credentials a static set in the environment);
- ``task``: a write task's first batch of 10,000 rows over 3 partitions split
  by partition.

    python -m bench.worker_imports --before CHECKOUT --rounds 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parents[1]

READ = """
import sys, time
import pyspark.worker
start = time.process_time()
import zero_rename.spark.reader
from zero_rename.core import StoreConfig
from zero_rename.read import filesystem
filesystem(StoreConfig(endpoint_url="http://127.0.0.1:9"))
print(time.process_time() - start)
"""

TASK = """
import sys, time
import pyarrow as pa
import pyspark.worker
start = time.process_time()
from zero_rename.spark.partitions import split_by_partition
batch = pa.ipc.open_stream(sys.stdin.buffer.read()).read_next_batch()
parts = list(split_by_partition(batch, ["dt"]))
print(time.process_time() - start)
"""

CASES = {"read": READ, "task": TASK}


def batch_stream(rows: int = 10_000, partitions: int = 3) -> bytes:
    """Arrow IPC: a batch of ``rows`` whose ``dt`` cycles through ``partitions`` values."""
    batch = pa.record_batch(
        {"id": list(range(rows)), "dt": [f"2024-01-{i % partitions + 1:02d}" for i in range(rows)]}
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as stream:
        stream.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def environment(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        PYTHONPATH=str(tree / "plugin"),
        AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
        AWS_SECRET_ACCESS_KEY="example-secret",
        AWS_CONFIG_FILE=os.devnull + ".absent",
    )
    return env


def cpu_of(case: str, tree: Path, stdin: bytes) -> float:
    ran = subprocess.run(
        [sys.executable, "-c", CASES[case]],
        input=stdin,
        env=environment(tree),
        capture_output=True,
        check=True,
    )
    return float(ran.stdout.split()[-1])


def measure(trees: dict[str, Path], rounds: int) -> dict[tuple[str, str], list[float]]:
    """CPU seconds per (case, tree), one run of each case and tree a round, after a
    first untimed one that writes each tree's bytecode."""
    stdin = {"read": b"", "task": batch_stream()}
    seconds: dict[tuple[str, str], list[float]] = {(c, t): [] for c in CASES for t in trees}
    for first in (True, *([False] * rounds)):
        for name, tree in trees.items():
            for case in CASES:
                spent = cpu_of(case, tree, stdin[case])
                if not first:
                    seconds[(case, name)].append(spent)
    return seconds


def table(seconds: dict[tuple[str, str], list[float]]) -> str:
    lines = ["| case | tree | median CPU | best | worst |", "|---|---|---:|---:|---:|"]
    for (case, tree), values in seconds.items():
        ms = [v * 1000 for v in values]
        lines.append(
            f"| {case} | {tree} | {statistics.median(ms):.0f} ms | {min(ms):.0f} | {max(ms):.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    trees = {"this tree": HERE}
    if args.before is not None:
        trees["before"] = args.before.resolve()
    sys.stdout.write(table(measure(trees, args.rounds)) + "\n")


if __name__ == "__main__":
    main()
