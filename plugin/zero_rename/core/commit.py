"""Job commit, journaled so that a retry after a crash at any point finishes it once.

1. Seal: compare-and-swap the job record from ``setup`` to ``sealed``. From
   here no task commit can join the job: a task attempt that publishes its
   manifest later reads ``sealed`` and waits for the decision. Abort still wins.
2. List and validate the task manifests, claim the partitions the job writes
   (:mod:`zero_rename.core.claims`), resolve conflicts under that claim, and
   save the plan (create-only, under a fresh name). Nothing is visible yet; a
   crash here changes nothing, and a retry plans again.
3. Point of no return: compare-and-swap the record from ``sealed`` to
   ``committing``, naming the plan and the task attempts it commits. Exactly
   one of a commit and an abort wins.
4. Complete the plan's uploads in parallel, journaling progress. A resumed
   commit skips journaled uploads, lists the job's pending uploads, completes
   those and checks every other planned file by HEAD against the ETag S3
   computes from the recorded parts: a lost response is checked, never guessed.
5. Delete the files being replaced: only now, after the new files are
   visible, so a crash never leaves a partition empty.
6. Write ``_SUCCESS``, swap the record to ``committed``, release the claim,
   clean up.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from zero_rename.core.abort import abort_uploads, job_uploads, remove_temporary
from zero_rename.core.claims import Claims
from zero_rename.core.conflicts import resolve_conflicts, target_dirs
from zero_rename.core.jobs import JobRecords, step_finished, step_started
from zero_rename.core.layout import Destination
from zero_rename.core.manifests import load_manifests
from zero_rename.core.model import (
    CommitPlan,
    JobRecord,
    JobSummary,
    JournalEntry,
    PendingUpload,
    TaskManifest,
    dump,
    load,
)
from zero_rename.core.stats import combined
from zero_rename.core.store import S3Store
from zero_rename.core.success import build_success, success_summary
from zero_rename.core.validate import Expected, validate
from zero_rename.core.writes import create_once, put_checked
from zero_rename.errors import (
    CommitStateUnknownError,
    JobDecidedError,
    ManifestError,
    NoSuchUpload,
    StoreError,
    ZeroRenameError,
)

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# Journal a checkpoint after this many completions or seconds, whichever first.
JOURNAL_EVERY_FILES = 1000
JOURNAL_EVERY_SECONDS = 5.0


def commit_job(store: S3Store, dest: Destination, job_id: str,
               manifests: Sequence[TaskManifest] | None = None, expected: Expected = None,
               progress: Progress | None = None) -> JobSummary:
    """Job commit; safe to call again after any failure, and after success.

    Raises:
        ValidationError, ConflictError: before the point of no return; nothing changed.
        JobDecidedError: the job was aborted.
        StoreError, CommitStateUnknownError: after it; retry the commit.
    """
    started = time.monotonic()
    records = JobRecords(store, dest)
    record = records.get(job_id)
    store = store.with_profile(record.store_profile)
    if record.state == "aborted":
        raise JobDecidedError(f"job {job_id} was aborted; it cannot commit")
    if record.state == "committed":
        return _already_committed(store, dest, record)
    if record.options.threads > store.pool_size:
        # urllib3 would open and discard connections past the pool's size,
        # the bottleneck the zero-rename paper reports at job commit.
        log.warning("job %s commits with %d threads but %d pooled S3 connections; size "
                    "StoreConfig.max_pool_connections to the threads", job_id,
                    record.options.threads, store.pool_size)
    resumed = record.state == "committing"
    if not resumed:
        record = _seal(JobRecords(store, dest), record)
        record, ours = _plan_and_decide(store, dest, record, manifests, expected)
        # Another commit's plan: it may be completing it now, or have crashed.
        resumed = not ours
    plan = _load_plan(store, dest, record)
    etags = _complete_all(store, dest, plan, record.options.threads, progress, resumed)
    _delete_replaced(store, dest, plan)
    success = build_success(dest, record, plan, etags, store.stats)
    put_checked(store, dest.bucket, dest.success_key, dump(success))
    summary = success_summary(dest, plan, store.stats, time.monotonic() - started)
    records.update(job_id, lambda r: _finished(r, summary))
    _cleanup_after_commit(store, dest, record)
    log.info("committed job %s: %d file(s), %d bytes in %d partition(s) to %s", job_id,
             summary.files, summary.bytes, len(summary.partitions), dest.url)
    return summary


def _already_committed(store: S3Store, dest: Destination, record: JobRecord) -> JobSummary:
    """A retry of a committed job: report it, and finish the cleanup a crash may have cut."""
    if record.summary is None:
        raise ManifestError(f"job record of {record.job_id} at {dest.url} says committed but "
                            "holds no summary; it was changed outside zero-rename")
    log.info("job %s is already committed", record.job_id)
    _cleanup_after_commit(store, dest, record)
    return record.summary


def _seal(records: JobRecords, record: JobRecord) -> JobRecord:
    """Close the job to new task commits: ``setup -> sealed``. Idempotent."""
    def seal(current: JobRecord) -> JobRecord | None:
        if current.state == "aborted":
            raise JobDecidedError(f"job {current.job_id} was aborted; it cannot commit")
        if current.state != "setup":
            return None
        steps = {**current.steps, "commit": step_started(current, "commit")["commit"]}
        return current.model_copy(update={"state": "sealed", "steps": steps})

    sealed = records.update(record.job_id, seal)
    if sealed.state == "sealed":
        log.info("job %s is sealed: no task commit may join it from now on", record.job_id)
    return sealed


def prepare_plan(store: S3Store, dest: Destination, record: JobRecord,
                 manifests: Sequence[TaskManifest] | None,
                 expected: Expected = None) -> tuple[CommitPlan, str]:
    """Validate, claim the target partitions, resolve conflicts and save the plan;
    changes nothing visible."""
    if manifests is None:
        manifests = load_manifests(store, dest, record.job_id, record.options.threads)
    if expected is None:
        expected = record.expected_tasks
    validate(store, dest, record, manifests, expected)
    uploads = sorted((u for m in manifests for u in m.uploads), key=lambda u: u.key)
    claimed = target_dirs(record, uploads)
    Claims(store, dest).acquire(record, claimed)
    dirs, replaced = resolve_conflicts(store, dest, record, uploads)
    plan = CommitPlan(
        job_id=record.job_id, plan_id=uuid.uuid4().hex, uploads=tuple(uploads),
        attempts=tuple(sorted(m.task_attempt_id for m in manifests)),
        replaced=tuple(replaced),
        partitions=tuple(d.rstrip("/") for d in dirs if d), claimed=tuple(claimed),
        task_stats=combined(m.stats for m in manifests).snapshot())
    key = dest.job(record.job_id).plan_key(plan.plan_id)
    if create_once(store, dest.bucket, key, dump(plan)) is not None:
        raise ManifestError(f"plan key {key} of job {record.job_id} already holds another plan")
    return plan, key


def _plan_and_decide(store: S3Store, dest: Destination, record: JobRecord,
                     manifests: Sequence[TaskManifest] | None,
                     expected: Expected) -> tuple[JobRecord, bool]:
    """Plan and pass the point of no return; the record, and whether the plan is ours."""
    records = JobRecords(store, dest)
    try:
        plan, key = prepare_plan(store, dest, record, manifests, expected)
    except ZeroRenameError as exc:
        # An abort racing this commit makes its uploads vanish mid-validation;
        # say that, rather than the validation problem it caused.
        if records.get(record.job_id).state == "aborted":
            raise JobDecidedError(f"job {record.job_id} was aborted while it was being "
                                  "validated; it cannot commit") from exc
        raise

    def decide(current: JobRecord) -> JobRecord | None:
        if current.state == "aborted":
            raise JobDecidedError(f"job {current.job_id} was aborted while it was being planned")
        if current.state != "sealed":
            return None  # another commit decided first: finish its plan, not ours
        steps = step_finished(current, "validate")
        steps = {**steps, "commit": current.steps.get("commit") or
                 step_started(current, "commit")["commit"]}
        return current.model_copy(update={"state": "committing", "plan_key": key,
                                          "committed_attempts": plan.attempts,
                                          "claimed": plan.claimed, "steps": steps})

    decided = records.update(record.job_id, decide)
    if decided.plan_key != key:
        log.info("job %s: another commit decided first; finishing its plan", record.job_id)
        return decided, False
    log.info("job %s passed its point of no return: %d file(s) to complete, %d to replace",
             record.job_id, len(plan.uploads), len(plan.replaced))
    return decided, True


def _load_plan(store: S3Store, dest: Destination, record: JobRecord) -> CommitPlan:
    if not record.plan_key:
        raise ManifestError(f"job {record.job_id} is {record.state} but names no plan")
    found = store.get_object(dest.bucket, record.plan_key)
    if found is None:
        raise ManifestError(f"plan {record.plan_key} of job {record.job_id} is missing")
    plan = load(CommitPlan, found[0], record.plan_key)
    if plan.job_id != record.job_id:
        raise ManifestError(f"plan {record.plan_key} belongs to job {plan.job_id}")
    return plan


def _journaled(store: S3Store, dest: Destination, plan: CommitPlan) -> tuple[set[int], int]:
    """Indexes already completed, and the next journal sequence number."""
    done: set[int] = set()
    seq = 0
    for obj in store.list_objects(dest.bucket, dest.job(plan.job_id).journal_dir):
        found = store.get_object(dest.bucket, obj.key)
        if found is None:
            continue
        entry = load(JournalEntry, found[0], obj.key)
        if entry.plan_id == plan.plan_id:
            done.update(entry.completed)
        seq = max(seq, entry.seq + 1)
    return done, seq


class _Journal:
    """Writes create-only checkpoints of completed uploads."""

    def __init__(self, store: S3Store, dest: Destination, plan: CommitPlan, seq: int) -> None:
        self.store, self.dest, self.plan, self.seq = store, dest, plan, seq
        self.pending: list[int] = []
        self.last = time.monotonic()

    def add(self, index: int) -> None:
        self.pending.append(index)
        if (len(self.pending) >= JOURNAL_EVERY_FILES
                or time.monotonic() - self.last >= JOURNAL_EVERY_SECONDS):
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        entry = JournalEntry(job_id=self.plan.job_id, plan_id=self.plan.plan_id, seq=self.seq,
                             completed=tuple(sorted(self.pending)))
        while True:
            key = self.dest.job(self.plan.job_id).journal_key(self.seq)
            # A lost response is read back: the entry there is ours, or a
            # concurrent commit's, whose number this one must not take.
            if create_once(self.store, self.dest.bucket, key, dump(entry)) is None:
                break
            self.seq += 1
            entry = entry.model_copy(update={"seq": self.seq})
        self.seq += 1
        self.pending = []
        self.last = time.monotonic()


def _complete_all(store: S3Store, dest: Destination, plan: CommitPlan, threads: int,
                  progress: Progress | None, resumed: bool) -> dict[str, str]:
    """Complete every upload of the plan; returns key -> ETag of those completed now.

    A resumed commit does not complete again what may be complete already: the
    answer to a repeated complete differs by store (AWS 200, MinIO NoSuchUpload,
    moto and old Ceph a 500). It lists the job's pending uploads, completes
    those, and checks every other planned file by its ETag.
    """
    done, seq = _journaled(store, dest, plan)
    todo = [i for i in range(len(plan.uploads)) if i not in done]
    total = len(plan.uploads)
    if done:
        log.info("job %s: %d of %d file(s) already complete by the journal", plan.job_id,
                 len(done), total)
    pending: set[str] | None = None
    if resumed and todo:
        pending = {u.upload_id for u in job_uploads(store, dest, plan.job_id)}
    journal = _Journal(store, dest, plan, seq)
    reporter = _Reporter(plan.job_id, total, len(done), progress)
    etags: dict[str, str] = {}
    # One pooled connection stays free for the journal, written from this thread.
    workers = max(1, min(threads, store.pool_size - 1, len(todo) or 1))
    with ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(_complete_one, store, dest, plan.uploads[i],
                               pending is None or plan.uploads[i].upload_id in pending): i
                   for i in todo}
        try:
            for future in as_completed(futures):
                index = futures[future]
                etags[plan.uploads[index].key] = future.result()
                journal.add(index)
                reporter.advance()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        finally:
            journal.flush()
    reporter.finish()
    return etags


def _complete_one(store: S3Store, dest: Destination, upload: PendingUpload,
                  is_pending: bool) -> str:
    if not is_pending:
        return _check_completed(store, dest, upload, None)
    try:
        return store.complete_upload(dest.bucket, upload.key, upload.upload_id,
                                     upload.part_list())
    except NoSuchUpload as exc:
        # Completed by an earlier try whose response was lost, or gone:
        # the object's ETag tells which.
        return _check_completed(store, dest, upload, exc)
    except StoreError as exc:
        # Some stores answer a complete of a consumed upload with a 500; and a
        # 5xx may come after the complete took effect. Believe only the ETag.
        if exc.outcome_unknown:
            return _check_completed(store, dest, upload, exc)
        raise


def _check_completed(store: S3Store, dest: Destination, upload: PendingUpload,
                     error: StoreError | None) -> str:
    """The ETag of the object the upload became, or an error saying why it is not there."""
    info = store.head_object(dest.bucket, upload.key)
    expected = upload.expected_etag()
    if info is not None and (info.etag == expected if expected else info.size == upload.bytes):
        return info.etag
    if error is not None and not isinstance(error, NoSuchUpload) and _still_pending(
            store, dest, upload):
        raise error  # a failed complete of a pending upload: a retry may finish it
    raise CommitStateUnknownError(
        f"upload {upload.upload_id} of {upload.key} is no longer pending and the object "
        f"there is {'missing' if info is None else 'not the one this job wrote'}; "
        "check whether another process aborted or overwrote it") from error


def _still_pending(store: S3Store, dest: Destination, upload: PendingUpload) -> bool:
    """Whether the upload is still pending. Some stores (moto, older Ceph) answer a
    complete of an unknown upload with a 500 rather than NoSuchUpload."""
    try:
        store.list_parts(dest.bucket, upload.key, upload.upload_id)
    except NoSuchUpload:
        return False
    return True


class _Reporter:
    """Logs "files completed of total" every 10% or 10 seconds."""

    def __init__(self, job_id: str, total: int, done: int, callback: Progress | None) -> None:
        self.job_id, self.total, self.done, self.callback = job_id, total, done, callback
        self.step = max(1, total // 10)
        self.last = time.monotonic()

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


def _delete_replaced(store: S3Store, dest: Destination, plan: CommitPlan) -> None:
    new_keys = {u.key for u in plan.uploads}
    keys = [o.key for o in plan.replaced if o.key not in new_keys]
    if keys:
        store.delete_objects(dest.bucket, keys)
        log.info("job %s: deleted %d replaced file(s)", plan.job_id, len(keys))


def _finished(record: JobRecord, summary: JobSummary) -> JobRecord | None:
    if record.state == "committed":
        return None
    return record.model_copy(update={"state": "committed", "summary": summary,
                                     "steps": step_finished(record, "commit",
                                                            detail=f"{summary.files} file(s)")})


def _cleanup_after_commit(store: S3Store, dest: Destination, record: JobRecord) -> None:
    """Release the claim, abort stray uploads (losing attempts) and remove temporary
    objects, best effort: the job is committed whatever happens here; the cleanup
    step can run it again."""
    try:
        Claims(store, dest).release(record.job_id)
        abort_uploads(store, dest, record.job_id, record.options.threads,
                      record.options.partition_columns)
        remove_temporary(store, dest, record.job_id)
    except Exception:
        log.warning("cleanup after committing job %s failed; run cleanup again",
                    record.job_id, exc_info=True)
