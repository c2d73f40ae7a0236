"""Job abort and job cleanup, both scoped to one job.

Pending uploads are found by listing the destination's uploads (not only from
manifests: an attempt killed mid-write never wrote one) and kept only if the
job id is in the file name. The listing prefix ends in '/', so a job writing
``dest`` never touches ``dest10``; and the job-id filter spares other jobs
writing other partitions of the same table.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from zero_rename.core.jobs import JobRecords, step_finished, step_started
from zero_rename.core.layout import Destination
from zero_rename.core.model import JobRecord, JobSummary
from zero_rename.core.store import S3Store, UploadInfo
from zero_rename.errors import AbortRefusedError, JobNotFoundError

log = logging.getLogger(__name__)

# S3: "it might be necessary to abort a given multipart upload multiple
# times" while part uploads are in flight; list and abort until none is left.
SWEEP_ROUNDS = 3


def job_uploads(store: S3Store, dest: Destination, job_id: str) -> list[UploadInfo]:
    """Pending uploads of this job under the destination."""
    return [u for u in store.list_uploads(dest.bucket, dest.dir)
            if job_id in u.key.rsplit("/", 1)[-1]]


def abort_uploads(store: S3Store, dest: Destination, job_id: str, threads: int = 16) -> int:
    """Abort every pending upload of the job; returns how many were aborted."""
    aborted = 0
    for _ in range(SWEEP_ROUNDS):
        uploads = job_uploads(store, dest, job_id)
        if not uploads:
            break
        with ThreadPoolExecutor(max(1, min(threads, len(uploads)))) as pool:
            aborted += sum(pool.map(
                lambda u: store.abort_upload(dest.bucket, u.key, u.upload_id), uploads))
        time.sleep(0.1)
    if aborted:
        log.info("aborted %d pending upload(s) of job %s", aborted, job_id)
    return aborted


def remove_temporary(store: S3Store, dest: Destination, job_id: str) -> int:
    """Delete the job's manifests, plans and journal; the job record stays as history
    and as the fence that late task attempts read."""
    layout = dest.job(job_id)
    keys = [o.key for o in store.list_objects(dest.bucket, layout.dir)
            if o.key != layout.record_key]
    return store.delete_objects(dest.bucket, keys) if keys else 0


def abort_job(store: S3Store, dest: Destination, job_id: str) -> JobSummary:
    """Job abort: decide "aborted", abort every pending upload, remove temporary objects.

    Idempotent. Works without a job record too (job setup may never have run).

    Raises:
        AbortRefusedError: the commit passed its point of no return.
    """
    started = time.monotonic()
    records = JobRecords(store, dest)

    def decide(record: JobRecord) -> JobRecord | None:
        if record.state in ("committing", "committed"):
            raise AbortRefusedError(
                f"job {job_id} is {record.state}: its commit passed the point of no return. "
                "Retry the commit to finish it; aborting now would lose committed output")
        if record.state == "aborted":
            return None
        return record.model_copy(update={"state": "aborted",
                                         "steps": step_started(record, "abort")})

    try:
        record: JobRecord | None = records.update(job_id, decide)
    except JobNotFoundError:
        log.warning("no job record for %s at %s; aborting its uploads anyway", job_id, dest.url)
        record = None
    aborted = abort_uploads(store, dest, job_id, record.options.threads if record else 16)
    remove_temporary(store, dest, job_id)
    summary = JobSummary(job_id=job_id, destination=dest.url, state="aborted",
                         aborted_uploads=aborted, requests=store.stats.total_requests,
                         seconds=round(time.monotonic() - started, 3))
    if record is not None:
        records.update(job_id, lambda r: r.model_copy(update={
            "steps": step_finished(r, "abort", detail=f"{aborted} upload(s) aborted")}))
    log.info("aborted job %s at %s", job_id, dest.url)
    return summary


def cleanup_job(store: S3Store, dest: Destination, job_id: str) -> JobSummary:
    """Job cleanup after the job is decided: abort stray uploads, remove temporary objects.

    A job still in setup or mid-commit is left alone, with a warning: cleaning
    it would take the decision that only commit or abort may take.
    """
    started = time.monotonic()
    record = JobRecords(store, dest).get(job_id)
    if record.state in ("setup", "committing"):
        log.warning("job %s is %s; cleanup leaves it for %s", job_id, record.state,
                    "abort or commit" if record.state == "setup" else "a commit retry")
        return JobSummary(job_id=job_id, destination=dest.url, state=record.state)
    aborted = abort_uploads(store, dest, job_id, record.options.threads)
    removed = remove_temporary(store, dest, job_id)
    log.info("cleaned up job %s: %d stray upload(s) aborted, %d temporary object(s) removed",
             job_id, aborted, removed)
    base = record.summary or JobSummary(job_id=job_id, destination=dest.url, state=record.state)
    return base.model_copy(update={"aborted_uploads": aborted,
                                   "requests": store.stats.total_requests,
                                   "seconds": round(time.monotonic() - started, 3)})
