"""The protocol alone, through the library: one daily partitioned job on an embedded S3 server.

    python -m demo.protocol [--keep]

``make demo-core`` runs it, in a few seconds. It starts SeaweedFS in a
temporary directory with bucket ``demo`` and runs one job writing three daily
partitions of ``s3://demo/events`` in three tasks through
:class:`~zero_rename.core.committer.Committer`: one task attempt fails and is
aborted, a second attempt of that task commits. It shows that a reader listing
the bucket sees nothing before job commit, commits, lists the files, then runs
``zero-rename success show`` and ``zero-rename validate`` on the output and
stops the server. With ``--keep`` the server stays up until Ctrl-C, to try the
other ``zero-rename`` commands on the demo's output.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from demo.common import embedded_s3
from zero_rename.cli.main import main as zero_rename
from zero_rename.core import Committer, Destination, JobRecord, StoreConfig, TaskAttempt
from zero_rename.core.data.layout import is_visible
from zero_rename.core.s3.client import make_client
from zero_rename.embedded_s3 import EmbeddedS3

BUCKET = "demo"
DEST = f"s3://{BUCKET}/events"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
TASKS = 3
ROWS_PER_FILE = 100
FAILING_TASK = "00001"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Demo:
    """What the demo's job did."""

    job_id: str
    pending_before_commit: int  # uploads written by the task attempts, still invisible
    visible_before_commit: int  # files a reader listing the bucket saw then
    files: tuple[tuple[str, int], ...]  # visible after job commit: path, bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the server running afterwards, until Ctrl-C, to explore it "
        "with the zero-rename commands",
    )
    args = parser.parse_args(argv)
    print("starting an embedded S3 server (SeaweedFS) on loopback...")
    with embedded_s3(BUCKET) as server:
        print(f"S3 at {server.endpoint_url}, bucket {BUCKET!r}")
        config = StoreConfig(endpoint_url=server.endpoint_url)
        run_job(Committer(DEST, config), config)
        valid = show(DEST)
        if args.keep:
            keep_serving(server)
    print("S3 server stopped")
    return valid


def run_job(committer: Committer, config: StoreConfig, say: Say = print) -> Demo:
    """The job: task attempts, one failed and aborted, then job commit."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    dest = committer.dest
    say(f"\njob {job.job_id}: {TASKS} tasks writing {len(DAYS)} daily partitions of {dest.url}")
    failed = fail_one_attempt(committer, job)
    say(f"  task {FAILING_TASK} attempt 0 wrote {failed} file(s), failed and aborted them")
    for task in range(TASKS):
        attempt = 1 if f"{task:05d}" == FAILING_TASK else 0
        write_attempt(committer, job, f"{task:05d}", attempt).commit()
        say(f"  task {task:05d} attempt {attempt} committed {len(DAYS)} file(s)")
    pending = len(committer.pending_uploads(job.job_id))
    before = len(visible(config, dest))
    say(
        f"before job commit: {pending} pending upload(s), {before} visible file(s): "
        "readers see nothing yet"
    )
    summary = committer.commit_job(job.job_id)
    say(
        f"job commit: {summary.files} upload(s) completed in {summary.seconds:.2f}s, "
        f"{summary.requests} request(s)"
    )
    files = visible(config, dest)
    say(f"\noutput in {dest.url}/")
    for path, size in files:
        say(f"  {path}  {size:,} bytes")
    return Demo(job.job_id, pending, before, tuple(files))


def fail_one_attempt(committer: Committer, job: JobRecord) -> int:
    """An attempt that dies mid-task: its uploads exist, then task abort removes them."""
    attempt = write_attempt(committer, job, FAILING_TASK, 0)
    attempt.abort()
    return len(DAYS)


def write_attempt(
    committer: Committer, job: JobRecord, task_id: str, attempt_number: int
) -> TaskAttempt:
    attempt = committer.task_attempt(job, task_id, attempt_number)
    rng = random.Random(f"{task_id}-{attempt_number}")
    for day in DAYS:
        with attempt.open({"dt": day}, extension=".csv") as f:
            f.write(b"event_id,user,amount\n")
            for row in range(ROWS_PER_FILE):
                f.write(f"{task_id}-{row},user{rng.randrange(50)},{rng.randrange(1000)}\n".encode())
            f.rows = ROWS_PER_FILE
    return attempt


def visible(config: StoreConfig, dest: Destination) -> list[tuple[str, int]]:
    """What a reader listing the destination sees: its files, hidden names skipped."""
    client = make_client(config)
    found: list[tuple[str, int]] = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=dest.bucket, Prefix=dest.dir
    ):
        for obj in page.get("Contents", []):
            path = obj["Key"][len(dest.dir) :]
            if is_visible(path):
                found.append((path, obj["Size"]))
    return found


def show(dest: str) -> int:
    """The output as the ``zero-rename`` command shows it; validate's exit code."""
    print(f"\n$ zero-rename success show {dest}")
    zero_rename(["success", "show", dest])
    print(f"\n$ zero-rename validate {dest}")
    return zero_rename(["validate", dest])


def keep_serving(server: EmbeddedS3) -> None:
    """Wait for Ctrl-C (or SIGTERM); the caller's ``with`` then stops the server."""
    print("\nthe server stays up; from another shell:")
    for name, value in server.environment().items():
        print(f"  export {name}={value}")
    print(f"  zero-rename jobs list {DEST}\npress Ctrl-C to stop")

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
