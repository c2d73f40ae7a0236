"""The shared fence read: never an answer read before the caller's commit."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from zero_rename.core.data.model import JobRecord
from zero_rename.core.data.options import JobOptions
from zero_rename.core.protocol.fence import SharedRead


def _record(n: int) -> JobRecord:
    return JobRecord(job_id=f"job-{n}", destination="s3://b/t", options=JobOptions())


def test_every_caller_gets_a_read_sent_after_its_commit() -> None:
    sent: list[float] = []
    lock = threading.Lock()

    def read() -> JobRecord:
        with lock:
            sent.append(time.monotonic())
            n = len(sent)
        time.sleep(0.02)  # the round trip
        return _record(n)

    shared = SharedRead(read)

    def caller(delay: float) -> tuple[float, JobRecord]:
        time.sleep(delay)
        committed_at = time.monotonic()
        return committed_at, shared.after(committed_at)

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(caller, [i * 0.003 for i in range(64)]))
    for committed_at, record in results:
        read_number = int(record.job_id.split("-")[1])
        assert sent[read_number - 1] > committed_at  # sent after the caller's commit
    assert len(sent) < len(results)  # and shared: fewer reads than callers


def test_an_error_reaches_the_callers_that_shared_the_read() -> None:
    def read() -> JobRecord:
        time.sleep(0.02)
        raise OSError("connection reset")

    shared = SharedRead(read)
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(shared.after, time.monotonic()) for _ in range(4)]
        errors = [f.exception() for f in futures]
    assert all(isinstance(e, OSError) for e in errors)
