"""Requests per file for the whole protocol, counted on the wire's near side (every
request botocore sends, retries included): what the design promises is what it costs.

Per file: CreateMultipartUpload, UploadPart, CompleteMultipartUpload. Per task: the
manifest's PUT, the job commit's GET of it, and at most one fence read (shared by
the attempts of a process that commit together). Per job: a few dozen (records, claims, the
plan, the journal, listings of 1,000 uploads a page, cleanup).
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.helpers import visible
from zero_rename.core.committer import Committer
from zero_rename.core.s3.completers import OPERATION, add_request_hook

pytestmark = pytest.mark.s3

TASKS, FILES_PER_TASK = 40, 5
# The job's own requests, whatever its size: records, claims, the plan, the
# journal, a listing page of uploads, cleanup (32 measured with 40 tasks).
JOB_REQUESTS = 36


class Requests:
    """Every request the client sends, by operation, and the job commit's
    completes sent on the light path for it."""

    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        client.meta.events.register("before-send.s3", self._sent)
        add_request_hook(client, self._light)

    def _sent(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self.counts[event_name.rsplit(".", 1)[-1]] += 1

    def _light(self, stage: str, key: str, context: dict[str, Any]) -> None:
        if stage == "send":
            with self._lock:
                self.counts[OPERATION] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def test_library_path_with_expected_tasks(committer: Committer) -> None:
    committer.setup_job({})  # the process has probed the store (once per bucket)
    requests = Requests(committer.store.client)
    job = committer.setup_job({"conflict_mode": "append", "threads": 16}, expected_tasks=TASKS)

    def task(index: int) -> None:
        attempt = committer.task_attempt(job, f"{index:05d}")
        for _ in range(FILES_PER_TASK):
            with attempt.open() as out:
                out.write(b"x")
        attempt.commit()

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(task, range(TASKS)))
    # Until job commit the only reads are the task attempts' fence reads: at most
    # one a task. How many attempts share one depends on how their commits fall
    # in time, so this test does not count on it; tests/core/protocol/test_fence.py shows
    # the sharing with a read of known length.
    fence_reads = requests.counts["GetObject"]
    assert fence_reads <= TASKS, sorted(requests.counts.items())
    committer.commit_job(job.job_id)
    counts = Counter(requests.counts)
    files = TASKS * FILES_PER_TASK
    assert len(visible(committer)) == files
    assert counts["ListParts"] == 0  # uploads confirmed by listing, not one by one
    assert counts["CompleteMultipartUpload"] == files
    # 3 a file, 2 a task (its manifest's PUT and the commit's GET), the fence
    # reads and the job's own few dozen.
    bound = 3 * files + 2 * TASKS + fence_reads + JOB_REQUESTS
    assert sum(counts.values()) <= bound, sorted(counts.items())
