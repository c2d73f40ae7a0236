"""After the point of no return: complete the plan's uploads, shard by shard.

Each shard of the plan's uploads is read, its uploads completed in parallel
(journaled as they finish), its files written to the job's file list
(``files/``, kept as history and named by ``_SUCCESS``), and the shard marked
done; one shard is in memory at a time. A resumed commit does not complete
again what may be complete already (a repeated complete answers 200 on AWS,
NoSuchUpload on MinIO, a 500 on moto and older Ceph): it lists the job's
pending uploads, completes those, and checks every other planned file by HEAD
against the ETag S3 computes from the recorded parts. Then the files being
replaced are deleted: only now, after the new ones are visible.

A planned file that S3 refuses for good (parts that are not the upload's, an
upload gone with no object in its place) raises :class:`UploadRefusedError`:
no retry can complete it, and the job commit rolls the job back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from zero_rename.core.data.journal import Journal, Progress, read_progress
from zero_rename.core.data.model import (
    CommitPlan,
    CommittedFile,
    JobRecord,
    PlannedUpload,
    ReplacedObject,
)
from zero_rename.core.data.records import JobContext
from zero_rename.core.data.shards import (
    KeySet,
    check_digest,
    decode,
    encode_line,
    encode_lines,
    put_shard,
    read_shard,
    shard_key,
)
from zero_rename.core.data.success import file_shard_key
from zero_rename.core.protocol import states
from zero_rename.core.protocol.planning import decided_plan, shard_digest, upload_shards
from zero_rename.core.protocol.validate import pending_digests, upload_digest
from zero_rename.core.s3.fanout import choose_path, complete_uploads, default_processes
from zero_rename.errors import NoSuchUpload, StoreError, UploadRefusedError

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]
# One shard of the plan's uploads, decoded: its number, its uploads.
DecodedShard = tuple[int, Sequence[PlannedUpload]]
# Files listed in full in _SUCCESS; the file list's shards hold every one.
FILES_LISTED = 100
# CompleteMultipartUpload's answers to a part list that does not match the upload.
_PARTS_REFUSED = {"InvalidPart", "InvalidPartOrder", "EntityTooSmall"}


def publish(
    ctx: JobContext,
    record: JobRecord,
    plan: CommitPlan,
    progress: ProgressCallback | None,
    resumed: bool,
    fresh: bool = False,
) -> tuple[list[CommittedFile], LastShard]:
    """Make every planned file visible; returns the first FILES_LISTED committed
    files (the rest are in the file list's shards), and the last shard's two
    writes, its file list and then its "done" journal entry, for the caller to
    send beside its own next requests (until they are sent, a retry checks that
    shard's files by HEAD: nothing is lost); for a job with a table format, with
    the last shard's uploads, which the table commit then need not decode again
    (a shard at most is kept: a job of 10,000 files is one). The files the job replaces are
    deleted once its record says committed (:func:`delete_replaced`). ``fresh``:
    the plan was decided by this process a moment ago, so no journal can hold
    anything yet (no listing of it)."""
    store, dest = ctx.store, ctx.dest
    journal_state = Progress() if fresh else read_progress(ctx, plan)
    pending = _pending(ctx, record, plan) if resumed else None
    journal = Journal(ctx, plan, journal_state.next_seq)
    reporter = _Reporter(plan.job_id, plan.files, progress)
    first: list[CommittedFile] = []
    last = LastShard(_nothing, _nothing)
    for number, uploads in upload_shards(ctx, plan):
        if number in journal_state.done:
            reporter.skip(len(uploads))
            if len(first) < FILES_LISTED:
                files = read_shard(
                    store, dest.bucket, file_shard_key(dest, plan.job_id, number), CommittedFile
                )
                first += files[: FILES_LISTED - len(first)]
            continue
        last.file_list()  # the previous shard's, before another shard's work
        last.done()
        files, last = _publish_shard(
            ctx,
            plan,
            number,
            uploads,
            journal_state.completed_in(number),
            pending,
            record.options.threads,
            journal,
            reporter,
            # The table commit takes the last shard rather than decoding it again.
            record.options.table_format != "none" and number == plan.upload_shards - 1,
        )
        first += files[: FILES_LISTED - len(first)]
    reporter.finish()
    return first, last


def _pending(ctx: JobContext, record: JobRecord, plan: CommitPlan) -> KeySet:
    dirs = [p + "/" for p in plan.partitions]
    return pending_digests(ctx, record, dirs, record.options.threads, plan.files)


def _publish_shard(
    ctx: JobContext,
    plan: CommitPlan,
    number: int,
    uploads: Sequence[PlannedUpload],
    done: set[int],
    pending: KeySet | None,
    threads: int,
    journal: Journal,
    reporter: _Reporter,
    keep: bool,
) -> tuple[list[CommittedFile], LastShard]:
    """Complete the shard's uploads; returns its first FILES_LISTED files, and the
    writes of its file list and then of its "done" entry (with ``keep``, the
    shard's uploads too). The completions not yet journaled are not written as
    such: the "done" entry stands for them all."""
    store, dest = ctx.store, ctx.dest
    todo = [i for i in range(len(uploads)) if i not in done]
    reporter.skip(len(uploads) - len(todo))
    etags = _complete(ctx, uploads, todo, pending, threads, number, journal, reporter)
    journal.discard()
    first: list[CommittedFile] = []
    lines: list[bytes] = []
    for i, u in enumerate(uploads):
        file = CommittedFile(
            path=u.key[len(dest.dir) :],
            bytes=u.bytes,
            rows=u.rows,
            etag=etags.get(i) or u.expected_etag() or "",
        )
        lines.append(encode_line(file))
        if i < FILES_LISTED:
            first.append(file)
    # Kept as the file list's bytes until written (the next shard's uploads are
    # read first): 10,000 files as objects would be some 6 MiB more.
    body = encode_lines(lines)
    del lines
    key = file_shard_key(dest, plan.job_id, number)

    def file_list() -> None:
        put_shard(store, dest.bucket, key, body, overwrite=True)

    # A copy: upload_shards empties the shard's list once the loop moves on.
    kept = (number, list(uploads)) if keep else None
    return first, LastShard(file_list, lambda: journal.shard_done(number), journal.written, kept)


def _nothing() -> None:
    """No shard to write for (a job of no file)."""


@dataclass(frozen=True)
class LastShard:
    """The writes that end a shard, in this order: a shard marked done has its
    file list."""

    file_list: Callable[[], None]
    done: Callable[[], None]
    # The journal entries this commit wrote (once ``done`` is), for its cleanup.
    journal_keys: Sequence[str] = ()
    # The shard's number and uploads, for a table commit (None: not kept).
    uploads: DecodedShard | None = None


def _complete(
    ctx: JobContext,
    uploads: Sequence[PlannedUpload],
    todo: Sequence[int],
    pending: KeySet | None,
    threads: int,
    shard: int,
    journal: Journal,
    reporter: _Reporter,
) -> dict[int, str]:
    """Complete ``todo`` (indexes into ``uploads``) in parallel; index -> ETag."""
    store = ctx.store
    etags: dict[int, str] = {}
    if not todo:
        return etags
    # One pooled connection stays free for the journal, written from this thread.
    workers = max(1, min(threads, store.pool_size - 1, len(todo)))
    send = {
        i
        for i in todo
        if pending is None or upload_digest(uploads[i].key, uploads[i].upload_id) in pending
    }
    fanout = _fanout(ctx, len(send))
    # What is not pending may be complete already: HEAD tells, on the store's client.
    checks = [i for i in todo if i not in send] if fanout else todo
    with ThreadPoolExecutor(workers) as pool:
        futures = {
            pool.submit(complete_one, ctx, uploads[i], not fanout and i in send): i for i in checks
        }
        try:
            if fanout is not None:
                _complete_fanned_out(
                    ctx,
                    uploads,
                    sorted(send),
                    fanout,
                    workers,
                    lambda i, etag: _done(etags, i, etag, shard, journal, reporter),
                )
            for future in as_completed(futures):
                _done(etags, futures[future], future.result(), shard, journal, reporter)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return etags


def _done(
    etags: dict[int, str], index: int, etag: str, shard: int, journal: Journal, reporter: _Reporter
) -> None:
    etags[index] = etag
    journal.add(shard, index)
    reporter.advance()


def _fanout(ctx: JobContext, uploads: int) -> tuple[str, int] | None:
    """(request path, processes) when the completes can leave botocore or this
    process, else None: through the store's own client."""
    store, dest = ctx.store, ctx.dest
    config = store.config
    if config is None or uploads == 0:
        return None  # a client made elsewhere: its credentials are its own
    processes = config.complete_processes or default_processes(config, uploads)
    path = choose_path(config, dest.bucket, config.request_path)
    if path == "botocore" and processes == 1:
        return None
    return path, processes


def _complete_fanned_out(
    ctx: JobContext,
    uploads: Sequence[PlannedUpload],
    send: Sequence[int],
    how: tuple[str, int],
    threads: int,
    done: Callable[[int, str], None],
) -> None:
    """Complete ``send`` by :func:`complete_uploads`; failures settled here, one by one."""
    store, dest = ctx.store, ctx.dest
    assert store.config is not None
    path, processes = how
    items = ((i, uploads[i].key, uploads[i].upload_id, uploads[i].part_list()) for i in send)
    with complete_uploads(
        store.config,
        dest.bucket,
        items,
        processes=processes,
        threads=threads,
        request_path=path,
        stats=store.stats,
        owner=store.client,
    ) as completions:
        for completion in completions:
            upload = uploads[completion.index]
            if completion.failure is None:
                done(completion.index, completion.etag or "")
                continue
            error = completion.failure.error(f"s3://{dest.bucket}/{upload.key}")
            done(completion.index, settle(ctx, upload, error))


def complete_one(ctx: JobContext, upload: PlannedUpload, is_pending: bool) -> str:
    store, dest = ctx.store, ctx.dest
    if not is_pending:
        return check_completed(ctx, upload, None)
    try:
        return store.complete_upload(dest.bucket, upload.key, upload.upload_id, upload.part_list())
    except StoreError as exc:
        return settle(ctx, upload, exc)


def settle(ctx: JobContext, upload: PlannedUpload, exc: Exception) -> str:
    """The ETag of an upload whose complete failed with ``exc``, if it is complete
    after all; else the error to raise."""
    if isinstance(exc, NoSuchUpload):
        # Completed by an earlier try whose response was lost, or gone:
        # the object's ETag tells which.
        return check_completed(ctx, upload, exc)
    if isinstance(exc, StoreError):
        # Some stores answer a complete of a consumed upload with a 500; and a
        # 5xx may come after the complete took effect. Believe only the ETag.
        if exc.outcome_unknown:
            return check_completed(ctx, upload, exc)
        if exc.code in _PARTS_REFUSED:
            etag = is_complete(ctx, upload)
            if etag is not None:
                return etag  # an earlier try whose answer was lost completed it
            raise UploadRefusedError(
                f"S3 refused the parts recorded for {upload.key} ({exc.code}): the task "
                f"manifest does not describe upload {upload.upload_id}",
                key=upload.key,
                upload_id=upload.upload_id,
                refusal=exc.code,
            ) from exc
    raise exc


def is_complete(ctx: JobContext, upload: PlannedUpload) -> str | None:
    """The object's ETag if the upload already became it, else None."""
    store, dest = ctx.store, ctx.dest
    info = store.head_object(dest.bucket, upload.key)
    expected = upload.expected_etag()
    if info is not None and (info.etag == expected if expected else info.size == upload.bytes):
        return info.etag
    return None


def check_completed(ctx: JobContext, upload: PlannedUpload, error: StoreError | None) -> str:
    """The ETag of the object the upload became, or an error saying why it is not there:
    the complete's own (``error``) while the upload is still pending, for a retry;
    :class:`UploadRefusedError` once it is not, since nothing can complete it then."""
    store, dest = ctx.store, ctx.dest
    info = store.head_object(dest.bucket, upload.key)
    expected = upload.expected_etag()
    if info is not None and (info.etag == expected if expected else info.size == upload.bytes):
        return info.etag
    if error is not None and not isinstance(error, NoSuchUpload) and _still_pending(ctx, upload):
        raise error  # a failed complete of a pending upload: a retry may finish it
    raise UploadRefusedError(
        f"upload {upload.upload_id} of {upload.key} is no longer pending and the object "
        f"there is {'missing' if info is None else 'not the one this job wrote'}",
        key=upload.key,
        upload_id=upload.upload_id,
        refusal="upload-gone" if info is None else "object-replaced",
    ) from error


def _still_pending(ctx: JobContext, upload: PlannedUpload) -> bool:
    """Whether the upload is still pending. Some stores (moto, older Ceph) answer a
    complete of an unknown upload with a 500 rather than NoSuchUpload."""
    store, dest = ctx.store, ctx.dest
    try:
        store.list_parts(dest.bucket, upload.key, upload.upload_id)
    except NoSuchUpload:
        return False
    return True


def delete_replaced(ctx: JobContext, record: JobRecord, plan: CommitPlan | None = None) -> int:
    """Delete the files a committed job replaced; safe to run again.

    Only once the record says ``committed``: from then on readers of the
    committed state skip them (:mod:`zero_rename.core.views.snapshot`), so deleting
    them never shows a reader a partition with neither old nor new files. The
    plan's shards of replaced files are removed by cleanup only after this
    succeeded, so a missing shard means its files are gone already.

    A job published to a table format deletes none: readers of the table's
    older versions may still read them, until the format's own retention
    expires them (``zero-rename table expire``).
    """
    store, dest = ctx.store, ctx.dest
    if record.state != states.COMMITTED or not record.plan_key:
        return 0
    if record.options.table_format != "none":
        return 0
    plan = plan or decided_plan(ctx, record)
    deleted = 0
    prefix = dest.job(plan.job_id).plan_dir(plan.plan_id)
    for number in range(plan.replaced_shards):
        key = shard_key(prefix, "replaced", number)
        found = store.get_object(dest.bucket, key)
        if found is None:
            break  # cleaned up after an earlier run deleted them all
        where = f"s3://{dest.bucket}/{key}"
        # A shard rewritten to name other files must not delete them.
        check_digest(found[0], shard_digest(plan, "replaced", number), f"shard {where}")
        objects = decode(ReplacedObject, found[0], where)
        deleted += store.delete_objects(dest.bucket, [o.key for o in objects])
    if deleted:
        log.info("job %s: deleted %d replaced file(s)", plan.job_id, deleted)
    return deleted


class _Reporter:
    """Logs "files completed of total" every 10% or 10 seconds."""

    def __init__(self, job_id: str, total: int, callback: ProgressCallback | None) -> None:
        self.job_id, self.total, self.done, self.callback = job_id, total, 0, callback
        self.step = max(1, total // 10)
        self.last = time.monotonic()

    def skip(self, count: int) -> None:
        if count:
            self.done += count
            if self.callback:
                self.callback(self.done, self.total)

    def advance(self) -> None:
        self.done += 1
        if self.callback:
            self.callback(self.done, self.total)
        if self.done % self.step == 0 or time.monotonic() - self.last > 10:
            log.info("job %s: completed %d of %d file(s)", self.job_id, self.done, self.total)
            self.last = time.monotonic()

    def finish(self) -> None:
        if self.callback and self.total == 0:
            self.callback(0, 0)
