"""``zero-rename demo``: one daily partitioned job, end to end, on an embedded S3 server.

Self-contained: it starts its own server in a temporary directory and stops
it at the end, so it needs no configuration and leaves nothing behind.
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from zero_rename.cli.context import Context
from zero_rename.cli.output import Output, Result, human_bytes
from zero_rename.cli.serve import announce, serve_until, stop_signals
from zero_rename.cli.success import render_success
from zero_rename.core.committer import Committer
from zero_rename.core.model import JobRecord
from zero_rename.core.store import StoreConfig
from zero_rename.core.task import TaskAttempt
from zero_rename.embedded_s3 import EmbeddedS3

BUCKET = "demo"
DEST = f"s3://{BUCKET}/events"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
TASKS = 3
ROWS_PER_FILE = 100
FAILING_TASK = "00001"


def register(groups: Any, common: argparse.ArgumentParser) -> None:
    demo = groups.add_parser(
        "demo", parents=[common], help="run a small partitioned job on an embedded S3",
        description="Start an embedded S3 server, run a small daily partitioned job through "
                    "the committer (one task attempt fails and is aborted), commit it, show "
                    "the output and its _SUCCESS, then stop the server.")
    demo.add_argument("--keep", action="store_true",
                      help="keep the server running afterwards, until Ctrl-C, to explore it "
                           "with the other commands")
    demo.set_defaults(handler=run_demo)


def run_demo(ctx: Context, args: argparse.Namespace) -> Result:
    out = ctx.out
    out.say("starting an embedded S3 server (SeaweedFS) on loopback...")
    with EmbeddedS3(buckets=(BUCKET,)) as server, environment(server.environment()):
        out.say(f"S3 at {server.endpoint_url}, bucket {BUCKET!r}")
        data = run_job(out, Committer(DEST, StoreConfig(endpoint_url=server.endpoint_url)))
        if args.keep:
            with stop_signals() as stop:
                out.say()
                announce(out, server, kept=False)
                out.say(f"try: zero-rename jobs list {DEST}")
                serve_until(stop, server.endpoint_url)
    out.say("S3 server stopped")
    return Result(data)


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Point boto3's credential chain at the embedded server, and restore it afterwards."""
    names = [*values, "AWS_PROFILE"]
    saved = {name: os.environ.get(name) for name in names}
    os.environ.pop("AWS_PROFILE", None)  # a profile would win over these credentials
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_job(out: Output, committer: Committer) -> dict[str, Any]:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    out.heading(f"\njob {job.job_id}: {TASKS} tasks writing {len(DAYS)} daily partitions "
                f"of {DEST}")
    failed = fail_one_attempt(committer, job)
    out.say(f"  task {FAILING_TASK} attempt 0 wrote {failed} file(s), failed and aborted them")
    for task in range(TASKS):
        attempt = 1 if f"{task:05d}" == FAILING_TASK else 0
        write_attempt(committer, job, f"{task:05d}", attempt).commit()
        out.say(f"  task {task:05d} attempt {attempt} committed {len(DAYS)} file(s)")
    before = {"pending_uploads": len(committer.pending_uploads(job.job_id)),
              "visible_files": len(visible(committer))}
    out.say(f"before job commit: {before['pending_uploads']} pending upload(s), "
            f"{before['visible_files']} visible file(s): readers see nothing yet")
    summary = committer.commit_job(job.job_id)
    out.say(f"job commit: {summary.files} upload(s) completed in {summary.seconds:.2f}s, "
            f"{summary.requests} request(s)")
    return report(out, committer, job.job_id, before)


def fail_one_attempt(committer: Committer, job: JobRecord) -> int:
    """An attempt that dies mid-task: its uploads exist, then task abort removes them."""
    attempt = write_attempt(committer, job, FAILING_TASK, 0)
    attempt.abort()
    return len(DAYS)


def write_attempt(committer: Committer, job: JobRecord, task_id: str,
                  attempt_number: int) -> TaskAttempt:
    attempt = committer.task_attempt(job, task_id, attempt_number)
    rng = random.Random(f"{task_id}-{attempt_number}")
    for day in DAYS:
        with attempt.open({"dt": day}, extension=".csv") as f:
            f.write(b"event_id,user,amount\n")
            for row in range(ROWS_PER_FILE):
                f.write(f"{task_id}-{row},user{rng.randrange(50)},{rng.randrange(1000)}\n"
                        .encode())
            f.rows = ROWS_PER_FILE
    return attempt


def visible(committer: Committer) -> list[tuple[str, int]]:
    dest = committer.dest
    return [(o.key[len(dest.dir):], o.size) for o in committer.visible_objects()]


def report(out: Output, committer: Committer, job_id: str,
           before: dict[str, int]) -> dict[str, Any]:
    success = committer.read_success()
    assert success is not None, "commit_job returned, so _SUCCESS exists"
    files = visible(committer)
    problems = committer.check_output(success, threads=8)
    out.say()
    out.heading(f"output in {committer.dest.url}/")
    out.table(["file", "size"], ((path, human_bytes(size)) for path, size in files),
              right=["size"])
    out.say()
    render_success(out, committer.dest, success)
    out.say()
    out.say("validate: " + ("ok, every file _SUCCESS lists is there as recorded" if not problems
                            else f"{len(problems)} problem(s)"),
            style="green" if not problems else "red")
    return {"destination": committer.dest.url, "job_id": job_id, "before_commit": before,
            "files": [{"path": p, "bytes": s} for p, s in files],
            "success": success.model_dump(mode="json", by_alias=True),
            "problems": [p.to_json() for p in problems]}
