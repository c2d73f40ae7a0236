"""Job abort and job cleanup, both scoped to one job.

Pending uploads are found by listing the destination's uploads (not only from
manifests: an attempt killed mid-write never wrote one) and kept only where
this job could have written a data file: the job id in a ``part-`` file name,
inside the job's partition directories. The listing prefix ends in '/', so a
job writing ``dest`` never touches ``dest10``; the layout check spares a job
nested inside the destination that reused the job id (``dest/inner``); the
job-id filter spares other jobs writing other partitions of the same table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from itertools import groupby, islice
from typing import Any

from zero_rename.core.data.layout import file_job_id, is_job_data_key
from zero_rename.core.data.model import JobRecord, JobSummary, dump, utcnow
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import (
    JobContext,
    JobRecords,
    running_ended,
    step_finished,
    step_started,
)
from zero_rename.core.data.shards import StringRuns
from zero_rename.core.protocol import states, table_uploads
from zero_rename.core.protocol.claims import Claims
from zero_rename.core.protocol.planning import decided_plan, upload_shards
from zero_rename.core.protocol.publish import delete_replaced
from zero_rename.core.s3.client import DELETE_BATCH, S3Store, UploadInfo
from zero_rename.core.s3.probes import resolve_profile
from zero_rename.core.s3.profiles import AUTO
from zero_rename.core.s3.progress import Advance, Steps, no_steps
from zero_rename.core.s3.writes import swap
from zero_rename.core.tables.ended import take_ended
from zero_rename.errors import (
    AbortRefusedError,
    ContentionError,
    JobNotFoundError,
    ManifestError,
    ZeroRenameError,
)

log = logging.getLogger(__name__)

# S3: "it might be necessary to abort a given multipart upload multiple
# times" while part uploads are in flight, and a zombie task attempt may still
# create uploads: list and abort again, a bounded number of times.
SWEEP_ROUNDS = 3


def _ignore(count: int) -> None:
    """Progress nobody watches."""


def job_uploads(
    ctx: JobContext,
    job_id: str,
    columns: tuple[str, ...] | None = None,
    listed: Sequence[UploadInfo] | None = None,
) -> list[UploadInfo]:
    """Pending uploads of this job under the destination (``columns``: the job's
    partition columns, if known; ``listed``: the destination's uploads, if just
    listed)."""
    dest = ctx.dest
    uploads = ctx.store.list_uploads(dest.bucket, dest.dir) if listed is None else listed
    return [u for u in uploads if is_job_data_key(dest, job_id, u.key, columns)]


def abort_each(
    store: S3Store,
    bucket: str,
    uploads: Sequence[UploadInfo],
    threads: int,
    advance: Callable[[int], None] = _ignore,
) -> tuple[int, int]:
    """Abort each upload, in parallel; returns (aborted, already gone)."""
    if not uploads:
        return 0, 0
    aborted = gone = 0
    with ThreadPoolExecutor(max(1, min(threads, len(uploads)))) as pool:
        futures = [pool.submit(store.abort_upload, bucket, u.key, u.upload_id) for u in uploads]
        for future in as_completed(futures):
            if future.result():
                aborted += 1
            else:
                gone += 1
            advance(1)
    return aborted, gone


def sweep_uploads(
    store: S3Store,
    bucket: str,
    listing: Callable[[], Iterable[UploadInfo]],
    threads: int,
    first: Sequence[UploadInfo] | None = None,
    advance: Callable[[int], None] = _ignore,
) -> tuple[int, int]:
    """Abort what ``listing`` finds, listing again after each pass until it finds
    nothing, for at most SWEEP_ROUNDS passes; ``first``: the first pass's
    uploads, if already listed. Returns (aborted, already gone)."""
    aborted = gone = 0
    batch = list(listing() if first is None else first)
    for round_number in range(SWEEP_ROUNDS):
        if not batch:
            break
        done, missing = abort_each(store, bucket, batch, threads, advance)
        aborted, gone = aborted + done, gone + missing
        if round_number + 1 < SWEEP_ROUNDS:
            time.sleep(0.1)
            batch = list(listing())
    return aborted, gone


def abort_uploads(
    ctx: JobContext,
    job_id: str,
    threads: int = 16,
    columns: tuple[str, ...] | None = None,
    advance: Advance = _ignore,
) -> int:
    """Abort every pending upload of the job; returns how many were aborted
    (``advance`` counts them as they go)."""
    store, dest = ctx.store, ctx.dest
    aborted, _ = sweep_uploads(
        store, dest.bucket, lambda: job_uploads(ctx, job_id, columns), threads, advance=advance
    )
    if aborted:
        log.info("aborted %d pending upload(s) of job %s", aborted, job_id)
    return aborted


def abort_decided_leftovers(
    ctx: JobContext, listed: Iterable[UploadInfo], job_id: str, threads: int
) -> int:
    """Abort what other jobs of the destination left pending after they were decided.

    A task attempt Spark kills after its job's abort swept (the Python worker gets
    SIGKILL past ``spark.python.task.killTimeout``, with no chance to abort what it
    began), or a zombie attempt that died before its fence read, leaves uploads of a
    committed or aborted job that no step will ever complete and that S3 bills for
    until a lifecycle rule ends them. Each later commit's or cleanup's listing of
    the destination judges them: one GET of each such job's record, none when the
    listing holds none. A live job's uploads, and those of a job this destination
    holds no record of, are left alone. Returns how many were aborted."""
    dest = ctx.dest
    by_job: dict[str, list[UploadInfo]] = {}
    for upload in listed:
        other = file_job_id(upload.key)
        if other and other != job_id and is_job_data_key(dest, other, upload.key):
            by_job.setdefault(other, []).append(upload)
    aborted = 0
    for other, uploads in sorted(by_job.items()):
        try:
            record = ctx.records.get(other)
        except ZeroRenameError as exc:  # no record here, or one that cannot be read
            log.debug("uploads of job %s left alone: %s", other, exc)
            continue
        if record.state not in states.FINAL:
            continue
        cols = record.file_columns
        theirs = [u for u in uploads if is_job_data_key(dest, other, u.key, cols)]
        done, _ = abort_each(ctx.store, dest.bucket, theirs, threads)
        if done:
            log.info("aborted %d upload(s) job %s (%s) left pending", done, other, record.state)
        aborted += done
    return aborted


def abort_stray_uploads(ctx: JobContext, record: JobRecord) -> int:
    """After a job is decided: its pending uploads (its losing or killed attempts'),
    its table format's that nobody will complete, and what other decided jobs left
    pending (:func:`abort_decided_leftovers`), from one listing of the destination,
    which holds the format's folder. Returns how many were aborted."""
    dest, options = ctx.dest, record.options
    listed = list(ctx.store.list_uploads(dest.bucket, dest.dir))
    ours = job_uploads(ctx, record.job_id, record.file_columns, listed)
    aborted, _ = sweep_uploads(
        ctx.store,
        dest.bucket,
        lambda: job_uploads(ctx, record.job_id, record.file_columns),
        options.threads,
        first=ours,
    )
    aborted += abort_decided_leftovers(ctx, listed, record.job_id, options.threads)
    if options.table_format != "none":
        aborted += end_table_uploads(ctx, options.table_format, options.threads, listed)
    return aborted


def end_table_uploads(
    ctx: JobContext,
    table_format: str,
    threads: int = 16,
    listed: Sequence[UploadInfo] | None = None,
) -> int:
    """Abort the pending uploads in the table format's folder at the destination
    that nobody will complete: those at a key whose write ended in this process
    (a lost answer's leftover), and those abandoned
    (:mod:`zero_rename.core.protocol.table_uploads`). ``listed``: the uploads under
    the destination, if just listed. Returns how many."""
    prefix = table_uploads.folder(ctx.dest, table_format)
    if prefix is None:
        return 0
    ended = take_ended(ctx.bucket, prefix)
    now = datetime.now(UTC)
    uploads = (
        ctx.store.list_uploads(ctx.bucket, prefix)
        if listed is None
        else (u for u in listed if u.key.startswith(prefix))
    )
    stale = [u for u in uploads if u.key in ended or table_uploads.abandoned(u, now)]
    aborted, _ = abort_each(ctx.store, ctx.bucket, stale, threads)
    if aborted:
        log.info(
            "aborted %d pending upload(s) of the %s table's metadata at %s",
            aborted,
            table_format,
            ctx.dest.url,
        )
    return aborted


def remove_temporary(
    ctx: JobContext, job_id: str, keep: Sequence[str] = (), files: bool = True
) -> int:
    """Delete the job's manifests, plans and journal. The job record stays as history
    and as the fence that late task attempts read, the committed file list
    (``files/``, unless ``files`` is False: a rolled-back job's is no list of
    anything) as the full list ``_SUCCESS`` names, and whatever starts with one
    of ``keep`` (the decided plan's header and committed attempts, which a late
    attempt reads to learn whether it counts)."""
    return delete_keys(ctx, temporary_keys(ctx, job_id, keep, files))


def temporary_keys(
    ctx: JobContext, job_id: str, keep: Sequence[str] = (), files: bool = True
) -> StringRuns:
    """The job's objects :func:`remove_temporary` deletes, listed (one request per
    1,000); kept compressed: a million-file job has a hundred thousand task
    manifests, some 12 MB of key strings."""
    store, dest = ctx.store, ctx.dest
    layout = dest.job(job_id)
    kept = (layout.record_key, *([layout.files_dir] if files else []), *keep)
    keys = StringRuns(sort=True)
    for found in store.list_objects(dest.bucket, layout.dir):
        if not found.key.startswith(kept):
            keys.add(found.key)
    return keys


def delete_keys(ctx: JobContext, keys: StringRuns) -> int:
    """Delete ``keys`` (each once, however often added), a batch of 1,000 at a time."""
    unique = (key for key, _ in groupby(keys.merged()))
    deleted = 0
    while batch := list(islice(unique, DELETE_BATCH)):
        deleted += ctx.store.delete_objects(ctx.bucket, batch)
    return deleted


def decided_plan_keys(ctx: JobContext, record: JobRecord) -> tuple[str, ...]:
    """What of a committed job's plan stays: its header and committed attempts."""
    if record.state not in states.PUBLISHING or not record.plan_key:
        return ()
    try:
        plan = decided_plan(ctx, record)
    except ManifestError:
        return ()
    return (record.plan_key, plan.shards_prefix + "attempts-")


def abort_job(
    ctx: JobContext, job_id: str, reason: str = "", steps: Steps = no_steps
) -> JobSummary:
    """Job abort: decide "aborted", abort every pending upload, remove temporary objects,
    release the job's claim. ``reason`` (the failing step and its error, say) is
    kept in the record's ``error`` for ``jobs show`` and the Commits page.

    Idempotent. Works from ``setup`` and ``sealed`` (a commit that has not passed
    its point of no return loses), without a job record (job setup may never
    have run), and with an unreadable one (unless a plan exists: then the job
    may have passed its point of no return, and that is not guessed). A job
    rolling back (:mod:`zero_rename.core.protocol.rollback`) has its rollback finished.
    Without a record, or with one that replaced an unreadable record, every
    upload carrying the job id in a job file name is swept, whatever the
    partition layout.

    ``steps`` shows its progress (:data:`Steps`).

    Raises:
        AbortRefusedError: the commit passed its point of no return.
    """
    started = time.monotonic()
    record = _decide_aborted(ctx, ctx.records, job_id, reason)
    if record is not None and record.state == states.ROLLING_BACK:
        return finish_rollback(ctx, record, steps)
    if record is not None:
        ctx = ctx.profiled(record.store_profile)
    store, dest = ctx.store, ctx.dest
    threads = record.options.threads if record else 16
    columns = record.file_columns if record else None
    advance = steps("aborting pending uploads", None, "uploads")
    aborted = abort_uploads(ctx, job_id, threads, columns, advance)
    steps("removing temporary objects")
    remove_temporary(ctx, job_id, files=False)  # an aborted job lists no files
    Claims(ctx).release(job_id)
    summary = JobSummary(
        job_id=job_id,
        destination=dest.url,
        state=states.ABORTED,
        aborted_uploads=aborted,
        requests=store.stats.total_requests,
        seconds=round(time.monotonic() - started, 3),
    )
    if record is not None:
        ctx.records.update(
            job_id,
            lambda r: r.model_copy(
                update={"steps": step_finished(r, "abort", detail=f"{aborted} upload(s) aborted")}
            ),
        )
    log.info("aborted job %s at %s", job_id, dest.url)
    return summary


def _decide_aborted(
    ctx: JobContext, records: JobRecords, job_id: str, reason: str = ""
) -> JobRecord | None:
    """Swap the record to ``aborted``; None when there is no record at all. A job
    rolling back is returned as it is (its rollback finishes it); a job past its
    point of no return is refused (AbortRefusedError)."""
    dest = ctx.dest

    def decision(record: JobRecord) -> dict[str, Any]:
        return {
            "error": abort_reason(reason) or record.error,
            # A step the abort stops (a commit that had sealed) ends here, as aborted.
            "steps": running_ended(step_started(record, "abort"), "aborted", keep=("abort",)),
        }

    try:
        return records.advance(job_id, states.ABORT, decision)[0]
    except JobNotFoundError:
        log.warning("no job record for %s at %s; aborting its uploads anyway", job_id, dest.url)
        return None
    except ManifestError as exc:
        return _replace_unreadable(ctx, records, job_id, exc)


# Bounded: a record is read by every fence read of the job's task attempts.
MAX_REASON_CHARS = 1000


def abort_reason(reason: str) -> str:
    """The reason as the record keeps it: one paragraph, at most MAX_REASON_CHARS."""
    text = " ".join(str(reason).split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def _replace_unreadable(
    ctx: JobContext, records: JobRecords, job_id: str, problem: ManifestError
) -> JobRecord:
    """Abort a job whose record cannot be read, by replacing the record (compare-and-
    swap on its ETag) with an aborted one; refused where a plan exists, since the
    job may have passed its point of no return."""
    store, dest = ctx.store, ctx.dest
    layout = dest.job(job_id)
    plans = [
        o.key
        for o in store.list_objects(dest.bucket, layout.dir)
        if o.key.rsplit("/", 1)[-1].startswith("plan-")
    ]
    if plans:
        raise AbortRefusedError(
            f"job {job_id}'s record cannot be read ({problem}) and a commit plan exists "
            f"({plans[0]}): the job may have passed its point of no return. Inspect it by "
            "hand; nothing was changed"
        )
    data, etag = records.read_raw(job_id)
    if store.profile is None:
        # The record that names the store's profile is what cannot be read, and
        # If-Match must carry the ETag in the form the store takes (Ceph RGW 16:
        # unquoted): the probe job setup runs says which (once a process and bucket).
        store = store.with_profile(resolve_profile(store, dest, AUTO))
    now = utcnow()
    record = JobRecord(
        job_id=job_id,
        destination=dest.url,
        options=JobOptions(),
        state=states.ABORTED,
        created=now,
        error=f"aborted with an unreadable record: {str(problem)[:300]}",
        recovered=True,
        store_profile=store.profile,
    )
    body = dump(record)

    def replace(current: bytes | None) -> bytes:
        # Only over the bytes found unreadable: a record written since is decided anew.
        if current != data:
            raise ZeroRenameError(
                f"job {job_id}'s unreadable record changed while it was being aborted; "
                "run the abort again"
            )
        return body

    # One round from what was read: a lost one means the record changed, or the
    # store refused its own ETag in the form the profile sends (_unreplaced says which).
    key = layout.record_key
    try:
        swap(store, dest.bucket, key, replace, f"job record {job_id}", 1, known=(data, etag))
    except ContentionError:
        raise _unreplaced(store, dest.bucket, key, job_id, etag) from None
    log.warning(
        "job %s had an unreadable record (%s); replaced it with an aborted one", job_id, problem
    )
    return record


def _unreplaced(store: S3Store, bucket: str, key: str, job_id: str, etag: str) -> ZeroRenameError:
    """Why the compare-and-swap over an unreadable record lost: the record changed
    meanwhile, or the store refused its own ETag in the form the profile sends."""
    found = store.get_object(bucket, key)
    if found is not None and found[1] == etag and store.profile is not None:
        return ZeroRenameError(
            f"job {job_id}'s unreadable record was not replaced: the store refused If-Match "
            f"with the record's own ETag, sent {store.profile.if_match_form} as the store "
            f"profile {store.profile.name} says; name the store's family (--store-profile, "
            "StoreConfig.profile) as `zero-rename doctor` finds it. Nothing was changed"
        )
    return ZeroRenameError(
        f"job {job_id}'s unreadable record changed while it was being aborted; run the abort again"
    )


def cleanup_job(ctx: JobContext, job_id: str) -> JobSummary:
    """Job cleanup after the job is decided: release its claim, abort stray uploads,
    remove temporary objects.

    A job still in setup, sealed or mid-commit is left alone, with a warning:
    cleaning it would take the decision that only commit or abort may take.
    """
    store, dest = ctx.store, ctx.dest
    started = time.monotonic()
    record = ctx.records.get(job_id)
    ctx = ctx.profiled(record.store_profile)
    store = ctx.store
    if record.state == states.ROLLING_BACK:
        return finish_rollback(ctx, record)
    if record.state not in states.FINAL:
        log.warning(
            "job %s is %s; cleanup leaves it for %s",
            job_id,
            record.state,
            "a commit retry" if record.state == states.COMMITTING else "abort or commit",
        )
        return JobSummary(job_id=job_id, destination=dest.url, state=record.state)
    # A commit cut short after its record said committed leaves replaced files;
    # their list goes with the temporary objects, so delete them first.
    delete_replaced(ctx, record)
    Claims(ctx).release(job_id)
    aborted = abort_stray_uploads(ctx, record)
    keep = decided_plan_keys(ctx, record)
    committed = record.state == states.COMMITTED
    removed = remove_temporary(ctx, job_id, keep, files=committed)
    log.info(
        "cleaned up job %s: %d stray upload(s) aborted, %d temporary object(s) removed",
        job_id,
        aborted,
        removed,
    )
    base = record.summary or JobSummary(job_id=job_id, destination=dest.url, state=record.state)
    return base.model_copy(
        update={
            "aborted_uploads": aborted,
            "requests": store.stats.total_requests,
            "seconds": round(time.monotonic() - started, 3),
        }
    )


# -- finishing a rollback (the decision is core/protocol/rollback.py's) ------------------------
def finish_rollback(ctx: JobContext, record: JobRecord, steps: Steps = no_steps) -> JobSummary:
    """Carry out a rollback the record has decided (``rolling_back``); idempotent;
    ``steps`` shows its progress.

    The order is what keeps a file from appearing after the rollback: every
    pending upload of the job is aborted first (a commit process still running
    elsewhere then fails to complete anything more), and only then is every
    key of the plan deleted. Then the record says ``aborted``, the claim goes,
    and so do the job's temporary objects and its file list.

    Raises:
        ZeroRenameError: an upload of the job is still pending after the sweep;
            the record stays ``rolling_back`` for a retry.
    """
    store, dest = ctx.store, ctx.dest
    started = time.monotonic()
    ctx = ctx.profiled(record.store_profile)
    store = ctx.store
    threads = record.options.threads
    advance = steps("aborting pending uploads", None, "uploads")
    aborted = abort_uploads(ctx, record.job_id, threads, record.file_columns, advance)
    left = job_uploads(ctx, record.job_id, record.file_columns)
    if left:
        raise ZeroRenameError(
            f"job {record.job_id}: {len(left)} upload(s) still pending after the rollback's "
            f"sweep (first {left[0].key}); run the rollback again"
        )
    removed = _delete_planned(ctx, record, steps("deleting planned files", None, "files"))
    aborted_record, _ = ctx.records.advance(
        record.job_id,
        states.ROLLED_BACK,
        lambda r: {
            "steps": running_ended(
                step_finished(r, "rollback", detail="rolled back"), "rolled_back"
            )
        },
    )
    Claims(ctx).release(record.job_id)
    remove_temporary(ctx, record.job_id, files=False)
    aborted += end_table_uploads(ctx, record.options.table_format, threads)
    log.warning(
        "job %s is rolled back at %s: its %d planned file(s) removed, %d pending upload(s) "
        "aborted; %s",
        record.job_id,
        dest.url,
        removed,
        aborted,
        aborted_record.error,
    )
    return JobSummary(
        job_id=record.job_id,
        destination=dest.url,
        state=states.ABORTED,
        aborted_uploads=aborted,
        requests=store.stats.total_requests,
        seconds=round(time.monotonic() - started, 3),
    )


def _delete_planned(ctx: JobContext, record: JobRecord, advance: Advance = _ignore) -> int:
    """Delete every key the job's plan would make visible, a shard at a time (keys
    carry the job id: nothing else is there); where the plan cannot be read, the
    job's files found by listing the destination. Returns the keys deleted."""
    store, dest = ctx.store, ctx.dest
    try:
        plan = decided_plan(ctx, record)
        deleted = 0
        for _, uploads in upload_shards(ctx, plan):
            deleted += store.delete_objects(dest.bucket, [u.key for u in uploads])
            advance(len(uploads))
        return deleted
    except ManifestError as exc:
        log.warning("job %s: %s; looking for its files by listing", record.job_id, exc)
    keys = [
        o.key
        for o in store.list_objects(dest.bucket, dest.dir)
        if is_job_data_key(dest, record.job_id, o.key, record.file_columns)
    ]
    return store.delete_objects(dest.bucket, keys)
