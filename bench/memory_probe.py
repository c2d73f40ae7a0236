"""The plan's memory at scale, without S3: how what a job commit keeps per file and
per task grows with the job.

Runs the commit's one pass over the task manifests (``planning._stream``: the
validator, the plan's upload and attempts shards, the listing of pending uploads
and the checks across the job) on synthetic manifests shaped as
:mod:`bench.scale_prep` writes them (10 empty files a task by default), listed
and read as the commit lists and reads published ones, against an in-memory
store that keeps nothing it is sent (a shard written is gone, as it would be to
a remote store), makes each task manifest when it is read, and lists every
planned upload as pending. It reports
this process's resident memory before the pass and its high-water mark (``VmHWM``)
after, so that two sizes give the slope per file. A few minutes at a million files.

    python -m bench.memory_probe --files 1000000
    python -m bench.memory_probe --files 1000000 --before CHECKOUT  # both trees

With ``--trace``, also the peak of memory traced by ``tracemalloc`` and where the
most of it was then (slow: several times the run's time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from zero_rename.core.data import manifests as manifest_sources
from zero_rename.core.data.layout import Destination, data_file_name
from zero_rename.core.data.model import JobRecord, Part, PendingUpload, TaskManifest, dump
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import planning
from zero_rename.core.s3.client import UploadInfo

ROOT = Path(__file__).resolve().parents[1]
JOB_ID = "5f0c1e2d-3a4b-4c5d-8e9f-a0b1c2d3e4f5"
DEST = "s3://probe/out"
ETAG = '"d41d8cd98f00b204e9800998ecf8427e"'


def upload_id(n: int) -> str:
    """An upload id as long as SeaweedFS's, distinct per file."""
    return f"{n * 2654435761 % 2**64:032x}"


def task_id(n: int) -> str:
    return f"{n:05d}"


def file_key(dest: Destination, task: int, seq: int) -> str:
    return dest.dir + data_file_name(task_id(task), JOB_ID, seq, ".parquet")


class ProbeStore:
    """The store calls of the plan's pass: writes kept nowhere, task manifests read
    as made on demand, every planned upload listed as pending."""

    profile = None

    def __init__(self, record: JobRecord, dest: Destination, tasks: Sequence[int]) -> None:
        self.record, self.dest, self.tasks = record, dest, tasks
        self.manifests_dir = dest.job(record.job_id).tasks_dir
        self.first_upload = [0]
        for count in tasks:
            self.first_upload.append(self.first_upload[-1] + count)

    def put_object(self, bucket: str, key: str, body: bytes, **_: Any) -> None:
        return None

    def get_object(self, bucket: str, key: str) -> tuple[bytes, str] | None:
        if not key.startswith(self.manifests_dir):
            return None
        task = int(key[len(self.manifests_dir) :].split(".")[0])
        return dump(
            manifest(self.record, self.dest, task, self.tasks[task], self.first_upload[task])
        ), ETAG

    def listing(self) -> list[tuple[str, str]]:
        """The published task manifests' keys and ETags, as listed."""
        layout = self.dest.job(self.record.job_id)
        return [(layout.task_manifest_key(task_id(t)), ETAG) for t in range(len(self.tasks))]

    def list_uploads(self, bucket: str, prefix: str, *_: Any, **__: Any) -> Iterator[UploadInfo]:
        number = 0
        for task, count in enumerate(self.tasks):
            for seq in range(count):
                yield UploadInfo(file_key(self.dest, task, seq), upload_id(number), None)
                number += 1


def manifest(
    record: JobRecord, dest: Destination, task: int, count: int, first: int
) -> TaskManifest:
    """A task's manifest as :mod:`bench.scale_prep` writes it (``first``: the number
    of its first upload in the job)."""
    uploads = (
        PendingUpload(
            key=file_key(dest, task, seq),
            upload_id=upload_id(first + seq),
            bytes=0,
            parts=(Part(number=1, etag=ETAG, size=0),),
        )
        for seq in range(count)
    )
    return TaskManifest(
        job_id=record.job_id,
        task_id=task_id(task),
        attempt=0,
        task_attempt_id=f"attempt_{record.job_id}_{task_id(task)}_0",
        committer="magic",
        uploads=tuple(uploads),
    )


def status(field: str) -> int:
    """A field of /proc/self/status, in bytes."""
    with open("/proc/self/status") as text:
        for line in text:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def probe(files: int, per_task: int, trace: bool) -> dict[str, Any]:
    dest = Destination.parse(DEST)
    record = JobRecord(
        job_id=JOB_ID,
        destination=DEST,
        options=JobOptions(committer="magic", verify_uploads=True),
        expected_tasks=None,
    )
    full, rest = divmod(files, per_task)
    tasks = [per_task] * full + ([rest] if rest else [])
    store = ProbeStore(record, dest, tasks)
    ctx = JobContext(store, dest)  # type: ignore[arg-type]
    start_rss = status("VmRSS")
    # As the commit does: the published manifests listed (and the listing held to the
    # commit's end), then read from it, 16 at a time.
    listed = manifest_sources.Listing(store.listing())
    source = manifest_sources.published_source(ctx, JOB_ID, listed, 16)
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            samples.append((time.perf_counter() - started, status("VmRSS")))

    if trace:
        tracemalloc.start(4)
    started = time.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = planning._stream(ctx, record, source, "probe/plan/", None, lambda *_: None)
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    report: dict[str, Any] = {
        "package": str(Path(planning.__file__).parents[2]),
        "files": files,
        "tasks": len(tasks),
        "seconds": round(seconds, 1),
        "start_rss_mib": round(start_rss / 2**20, 1),
        "peak_mib": round(status("VmHWM") / 2**20, 1),
        "growth_mib": round((status("VmHWM") - start_rss) / 2**20, 1),
        "rss_mib_at": {
            f"{t:.0f}s": round(rss / 2**20) for t, rss in samples[:: max(1, len(samples) // 12)]
        },
        "files_validated": result[0].files,
    }
    if trace:
        _, peak = tracemalloc.get_traced_memory()
        report["traced_peak_mib"] = round(peak / 2**20, 1)
        top = tracemalloc.take_snapshot().statistics("lineno")[:8]
        report["traced_now"] = [f"{s.size / 2**20:.1f} MiB {s.traceback[0]}" for s in top]
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--files-per-task", type=int, default=10)
    parser.add_argument("--trace", action="store_true", help="also trace with tracemalloc")
    parser.add_argument(
        "--before", type=Path, help="a checkout to probe too, each in a fresh process"
    )
    args = parser.parse_args(argv)
    if args.before is None:
        print(json.dumps(probe(args.files, args.files_per_task, args.trace), indent=1))
        return 0
    command = [sys.executable, "-m", "bench.memory_probe", "--files", str(args.files)]
    command += ["--files-per-task", str(args.files_per_task)] + (["--trace"] if args.trace else [])
    for plugin in (args.before.resolve() / "plugin", ROOT / "plugin"):
        env = {**os.environ, "PYTHONPATH": f"{plugin}{os.pathsep}{ROOT}"}
        subprocess.run(command, env=env, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
