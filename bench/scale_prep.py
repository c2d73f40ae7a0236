"""A very large job's task output, written cheaply, for the committer's scale runs.

Writing a million files through task attempts takes hours on two cores: each
CreateMultipartUpload and UploadPart costs botocore about 3.6 ms of client CPU
in one interpreter. The scale runs time only the job commit, so here the bench
writes what task attempts leave behind, and nothing else: per file a pending
multipart upload with its one part, per task one published task manifest (the
core's ``TaskManifest``, named and keyed as task commit names it). Requests are
signed by botocore's SigV4 signer and sent over urllib3 from worker processes,
through the pool the committer's light path sends its completes with
(:class:`zero_rename.core.s3.signing.SignedPool`). The job is set up by the
committer itself, and the task attempts' request count is what this sends.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import random
import re
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import urllib3

from bench.counter import RequestCounter
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import Destination, data_file_name
from zero_rename.core.data.model import JobRecord, Part, PendingUpload, TaskManifest, dump
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.completers import LightTarget
from zero_rename.core.s3.signing import SignedPool

_UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")
_ATTEMPTS = 6  # a busy loopback server sometimes answers 503 SlowDown


class SignedRequests:
    """Requests to one bucket, signed as botocore signs them, sent over urllib3,
    retried on no answer and on 5xx; counted."""

    def __init__(self, config: StoreConfig, target: LightTarget) -> None:
        self.base_path = target.base_path
        self.pool = SignedPool(config, target.origin, target.region)
        self.sent = 0

    def send(
        self,
        method: str,
        key: str,
        query: str = "",
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        path = f"{self.base_path}/{quote(key, safe='/~')}" + (f"?{query}" if query else "")
        for attempt in range(1, _ATTEMPTS + 1):
            self.sent += 1
            try:
                response = self.pool.send(method, path, body, headers)
            except urllib3.exceptions.HTTPError:
                if attempt == _ATTEMPTS:
                    raise
            else:
                if response.status < 300:
                    return response
                if response.status < 500 or attempt == _ATTEMPTS:
                    raise RuntimeError(
                        f"{method} {key}: HTTP {response.status}: {response.data[:300]!r}"
                    )
            time.sleep(random.random() * 0.1 * 2**attempt)
        raise AssertionError("unreachable")


def write_task(
    requests: SignedRequests, dest: Destination, job: JobRecord, task_id: str, count: int
) -> None:
    """One task's ``count`` empty files as pending uploads, then its manifest."""
    uploads = []
    for seq in range(count):
        key = dest.dir + data_file_name(task_id, job.job_id, seq, ".parquet")
        created = requests.send("POST", key, "uploads")
        found = _UPLOAD_ID.search(created.data)
        if found is None:
            raise RuntimeError(
                f"CreateMultipartUpload {key}: no UploadId in {created.data[:300]!r}"
            )
        upload_id = found.group(1).decode()
        part = requests.send("PUT", key, f"partNumber=1&uploadId={quote(upload_id, safe='~')}")
        uploads.append(
            PendingUpload(
                key=key,
                upload_id=upload_id,
                bytes=0,
                parts=(Part(number=1, etag=part.headers["ETag"], size=0),),
            )
        )
    manifest = TaskManifest(
        job_id=job.job_id,
        task_id=task_id,
        attempt=0,
        task_attempt_id=f"attempt_{job.job_id}_{task_id}_0",
        committer=job.options.committer,
        uploads=tuple(uploads),
    )
    requests.send(
        "PUT",
        dest.job(job.job_id).task_manifest_key(task_id),
        body=dump(manifest),
        headers={"If-None-Match": "*", "Content-Type": "application/json"},
    )


def write_tasks(
    config: StoreConfig,
    dest_url: str,
    job_json: str,
    tasks: Sequence[tuple[int, int]],
    threads: int,
) -> int:
    """Worker process: the tasks given as (index, file count); returns requests sent."""
    dest = Destination.parse(dest_url)
    job = JobRecord.model_validate_json(job_json)
    # A pool as large as the thread count, so no thread waits for a connection.
    requests = SignedRequests(
        dataclasses.replace(config, max_pool_connections=threads),
        LightTarget.resolve(config, dest.bucket),
    )
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(lambda t: write_task(requests, dest, job, f"{t[0]:05d}", t[1]), tasks):
            pass
    return requests.sent


# Up to this many files are written by this process, without worker processes.
IN_PROCESS_FILES = 2000


def prepared_scale_job(
    config: StoreConfig,
    dest_url: str,
    files: int,
    files_per_task: int,
    options: dict[str, Any],
    processes: int = 2,
    threads: int = 32,
) -> tuple[Committer, JobRecord, int]:
    """A job set up by the committer whose tasks left ``files`` empty files pending."""
    committer = Committer(dest_url, config)
    with RequestCounter(committer.store.client) as counter:
        job = committer.setup_job(options)
    full, rest = divmod(files, files_per_task)
    tasks = [(i, files_per_task) for i in range(full)] + ([(full, rest)] if rest else [])
    if files <= IN_PROCESS_FILES:
        # A spawned worker costs a second of start-up, more than a few thousand
        # empty files take from this process.
        sent = write_tasks(config, dest_url, job.model_dump_json(), tasks, threads)
        return committer, job, sent + counter.total
    shares = [tasks[i::processes] for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        sent = sum(
            pool.map(
                write_tasks,
                [config] * processes,
                [dest_url] * processes,
                [job.model_dump_json()] * processes,
                shares,
                [threads] * processes,
            )
        )
    return committer, job, sent + counter.total
