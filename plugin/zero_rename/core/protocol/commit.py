"""Job commit, journaled so that a retry after a crash at any point finishes it once.

1. Seal: compare-and-swap the job record from ``setup`` to ``sealed``. From
   here no task commit can join the job: a task attempt that publishes its
   manifest later reads ``sealed`` and waits for the decision. Abort still wins.
2. Plan (:mod:`zero_rename.core.protocol.planning`): stream and validate the task
   manifests into the plan's shards, confirm by listing that every upload is
   still pending, claim the partitions the job writes, resolve conflicts under
   that claim, save the plan's header. A plan prepared by earlier steps
   (Airflow's validate and resolve-conflicts) is reused when the manifests are
   the same, after listing that its uploads are still pending. Nothing is
   visible yet; a crash here changes nothing, and a retry plans again.
3. Point of no return: compare-and-swap the record from ``sealed`` to
   ``committing``, naming the plan. Exactly one of a commit and an abort wins.
4. Publish (:mod:`zero_rename.core.protocol.publish`): complete the uploads shard by
   shard, journaling progress and writing the job's file list.
5. Write ``_SUCCESS`` (a bounded summary naming the file list) and swap the
   record to ``committed``: the job's new state is whole, and readers of the
   committed state (:mod:`zero_rename.core.views.snapshot`) switch to it at once.
6. Delete the files being replaced, only now, so that neither a crash nor a
   reader ever finds a partition empty; release the claim, clean up.

A planned file that S3 refuses for good in step 4 rolls the job back
(:mod:`zero_rename.core.protocol.rollback`): nothing of it stays visible or pending,
the files it would have replaced stay, and the job is recorded ``aborted``
with the refusal. A commit that finds the job rolling back finishes that.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn, TypeVar

from zero_rename.core.data import manifests as manifest_sources
from zero_rename.core.data.layout import partition_dir
from zero_rename.core.data.manifests import ManifestSource
from zero_rename.core.data.model import (
    CommitPlan,
    CommittedFile,
    JobRecord,
    JobSummary,
    StepTiming,
    SuccessData,
    TableCommit,
    TaskManifest,
    dump,
    utcnow,
)
from zero_rename.core.data.records import JobContext, JobRecords, step_finished, step_started
from zero_rename.core.data.shards import StringRuns, read_shard
from zero_rename.core.data.success import (
    build_success,
    file_shard_key,
    succeeds,
    success_summary,
)
from zero_rename.core.protocol import states
from zero_rename.core.protocol.abort import (
    abort_decided_leftovers,
    abort_stray_uploads,
    abort_uploads,
    decided_plan_keys,
    delete_keys,
    end_table_uploads,
    finish_rollback,
    job_uploads,
    remove_temporary,
    temporary_keys,
)
from zero_rename.core.protocol.claims import Claims
from zero_rename.core.protocol.conflicts import target_dirs
from zero_rename.core.protocol.formats import publish_table, published_to_table
from zero_rename.core.protocol.planning import (
    ManifestsChanged,
    decided_plan,
    plan_digest,
    prepared_for,
    recalling,
)
from zero_rename.core.protocol.publish import (
    FILES_LISTED,
    ProgressCallback,
    delete_replaced,
    publish,
)
from zero_rename.core.protocol.rollback import roll_back
from zero_rename.core.protocol.states import Course
from zero_rename.core.protocol.validate import Expected
from zero_rename.core.s3.client import UploadInfo
from zero_rename.core.s3.rounds import one_round
from zero_rename.core.s3.writes import Version, swap
from zero_rename.errors import (
    CommitRolledBackError,
    JobDecidedError,
    ManifestError,
    UploadRefusedError,
    ZeroRenameError,
    is_final,
)

log = logging.getLogger(__name__)

A = TypeVar("A")
B = TypeVar("B")
Progress = ProgressCallback


def commit_job(
    ctx: JobContext,
    job_id: str,
    manifests: Sequence[TaskManifest] | None = None,
    expected: Expected = None,
    progress: Progress | None = None,
) -> JobSummary:
    """Job commit; safe to call again after any failure, and after success.

    Raises:
        ValidationError, ConflictError: before the point of no return; nothing changed.
        JobDecidedError: the job was aborted.
        CommitRolledBackError: S3 refused a planned file for good after the point of
            no return, and the job was rolled back: nothing of it is left.
        StoreError, CommitStateUnknownError: after it; retry the commit.
    """
    with recalling():
        return _commit_job(ctx, job_id, manifests, expected, progress)


def _commit_job(
    ctx: JobContext,
    job_id: str,
    manifests: Sequence[TaskManifest] | None,
    expected: Expected,
    progress: Progress | None,
) -> JobSummary:
    started = time.monotonic()
    first = _first_reads(ctx, job_id, manifests is not None)
    record = first.record
    ctx = ctx.profiled(record.store_profile)
    course = states.COMMIT_STARTS(record.state)
    if course not in (Course.PLAN, Course.PUBLISH):
        return _follow(ctx, record, course)
    _warn_of_a_small_pool(ctx, record)
    plan: CommitPlan | None = None
    if course is Course.PLAN:
        record, gathered = _seal_round(ctx, record, manifests, first)
        # None: another commit's plan; it may be completing it now, or have crashed.
        record, plan = _plan_and_decide(ctx, record, manifests, expected, gathered)
        course = states.COMMIT_GOES_ON(record.state)
        if course is not Course.PUBLISH:  # another commit finished, or rolls back
            return _decided_elsewhere(ctx, record, course)
    return _publish_decided(ctx, record, plan, progress, started, first.success)


@dataclass(frozen=True)
class FirstReads:
    """What a commit reads first, in one round trip beside the job record: what the
    steps after it would otherwise each wait a round for. Each is None where it
    could not be read (the step reads it again when it comes to it)."""

    record: JobRecord
    stage: bytes | None  # the stage manifest's header (None: none, or manifests given)
    listed: manifest_sources.Listing | None  # the published task manifests, before the seal
    claims: Version | None  # the claims object, for the claim's swap
    success: Version | None  # _SUCCESS, for its swap


def _first_reads(ctx: JobContext, job_id: str, given: bool) -> FirstReads:
    """The job record, read beside what its commit will need from S3 next. None of
    these reads decides anything alone: the stage is checked against the sealed
    record's digest, a listing taken before the seal is confirmed after it, and the
    claims and ``_SUCCESS`` are only the versions their swaps start from (If-Match
    refuses a stale one)."""
    with ThreadPoolExecutor(4) as pool:
        stage = pool.submit(manifest_sources.read_stage_bytes, ctx, job_id) if not given else None
        listed = pool.submit(manifest_sources.list_published, ctx, job_id) if not given else None
        claims = pool.submit(Claims(ctx).read_version)
        success = pool.submit(_success_version, ctx)
        record = ctx.records.get(job_id)
        return FirstReads(
            record,
            _value(stage),
            _value(listed),
            _value(claims),
            _value(success),
        )


def _value(future: Future[A] | None) -> A | None:
    """A read's value; None where it was not sent or failed (it is sent again later)."""
    if future is None:
        return None
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - an early read; its step reads it again
        log.debug("an early read failed (%s); it is read again when needed", exc)
        return None


@dataclass(frozen=True)
class Gathered:
    """What the seal's round trip brought besides the seal: the job's manifests (read
    beside it, for a small job), and the directories it claimed beside it."""

    source: ManifestSource | None  # None: list and read them now, after the seal
    claimed: tuple[str, ...] | None  # None: not claimed yet
    claims: Version | None  # the claims as read first, for a claim made later


def _warn_of_a_small_pool(ctx: JobContext, record: JobRecord) -> None:
    if record.options.threads > ctx.store.pool_size:
        # urllib3 would open and discard connections past the pool's size,
        # the bottleneck the zero-rename paper reports at job commit.
        log.warning(
            "job %s commits with %d threads but %d pooled S3 connections; size "
            "StoreConfig.max_pool_connections to the threads",
            record.job_id,
            record.options.threads,
            ctx.store.pool_size,
        )


def _publish_decided(
    ctx: JobContext,
    record: JobRecord,
    plan: CommitPlan | None,
    progress: Progress | None,
    started: float,
    success_before: Version | None,
) -> JobSummary:
    """Past the point of no return: complete the plan's uploads (``plan`` None: the
    decided plan, read, and journaled progress resumed), publish to the table
    format, write ``_SUCCESS`` and record the job committed. ``success_before``:
    ``_SUCCESS`` as read when the commit started (None: read it now)."""
    fresh = plan is not None  # decided by this call: no journal, no file complete yet
    try:
        plan = plan or decided_plan(ctx, record)
        first_files, last = publish(ctx, record, plan, progress, not fresh, fresh)
    except UploadRefusedError as refused:
        return _refused(ctx, record, refused)
    except ManifestError:
        current = ctx.records.get(record.job_id)
        course = states.PUBLISH_FAILED(current.state)
        if course is Course.RAISE:
            raise
        return _decided_elsewhere(ctx, current, course)
    if record.options.table_format == "none":
        # The last file list, then _SUCCESS beside the swap to committed (and the
        # shard's "done" entry): a commit of this job held up here (a paused zombie)
        # while another finished it loses the swap and reports that, and its
        # _SUCCESS, in the commit order of its plan, never takes a later job's place.
        last.file_list()
        finished = Finished(
            first_files, last.done, None, utcnow(), success_before, started, last.journal_keys
        )
        return _record_committed(ctx, record, plan, finished)
    # The last shard's file list, then the record's swap that lets the table commit
    # start: a commit of this job held up here while another finished it (or a
    # rollback by hand won the record first) loses that swap and reports it.
    last.file_list()
    table_started = utcnow()
    fenced = _fence_publish(ctx, record.job_id, table_started)
    course = states.COMMIT_GOES_ON(fenced.state)
    if course is not Course.PUBLISH:
        return _decided_elsewhere(ctx, fenced, course)
    table_started = fenced.steps["publish_table"].started
    try:
        table_commit = publish_table(ctx, record, plan, last.uploads)
    except ZeroRenameError as refused:
        # A conflict, or any refusal no retry can change (the table's schema changed
        # since setup, say): unless the commit landed after all, roll back.
        if not is_final(refused) or published_to_table(ctx, record) is not None:
            raise
        return _refused_by_table(ctx, record, refused)
    finished = Finished(
        first_files,
        last.done,
        table_commit,
        table_started,
        success_before,
        started,
        last.journal_keys,
    )
    return _record_committed(ctx, record, plan, finished)


@dataclass(frozen=True)
class Finished:
    """What the completes and the table commit left for the last writes of a commit."""

    first_files: list[CommittedFile]
    file_list_done: Callable[[], object]
    table_commit: TableCommit | None
    table_started: datetime
    success_before: Version | None
    started: float
    journal_keys: Sequence[str] = ()


def _record_committed(
    ctx: JobContext, record: JobRecord, plan: CommitPlan, done: Finished
) -> JobSummary:
    """Write ``_SUCCESS`` beside the swap of the record to ``committed``; then delete
    the replaced files and clean up."""
    store, dest, job_id = ctx.store, ctx.dest, record.job_id
    # The record's commit step ends now; _SUCCESS stands in the commit order where
    # the plan does (its resolution under the claim), as every commit of the job's
    # plan writes it, a late one too.
    committed_at = utcnow()
    success = build_success(dest, record, plan, done.first_files, store.stats, plan.created)
    summary = success_summary(dest, plan, store.stats, time.monotonic() - done.started)
    try:
        swapped = one_round(
            done.file_list_done,
            lambda: _write_success(ctx, success, done.success_before),
            lambda: _leftovers(ctx, record, plan),
            lambda: ctx.records.advance(
                job_id,
                states.PUBLISHED,
                lambda r: _finished(
                    r, summary, done.table_commit, done.table_started, committed_at
                ),
            ),
        )
    except CommitRolledBackError:
        # A forced rollback swapped the record first, on a check taken before these
        # completes landed: the _SUCCESS that went out beside the swap must not name
        # a job of which nothing stays visible, and the journal's last entry, written
        # after the rollback removed the job's temporary objects, goes too.
        _take_back_success(ctx, success, done.success_before)
        if done.journal_keys:
            store.delete_objects(ctx.bucket, list(done.journal_keys))
        raise
    committed, moved = swapped[3]
    if not moved:  # another commit of the job recorded it first
        return _decided_elsewhere(ctx, committed, Course.REPORT)
    delete_replaced(ctx, committed, plan)
    left: Leftovers | None = swapped[2]
    if left is not None:
        for key in done.journal_keys:
            left.temporary.add(key)
    _cleanup_after_commit(ctx, record, plan, left)
    log.info(
        "committed job %s: %d file(s), %d bytes in %d partition(s) to %s",
        job_id,
        summary.files,
        summary.bytes,
        len(plan.partitions),
        dest.url,
    )
    return summary


def _refused(ctx: JobContext, record: JobRecord, refused: UploadRefusedError) -> JobSummary:
    """S3 refused a planned file for good. If another commit of this job decided
    meanwhile (a zombie resumed after the job was committed, and perhaps replaced
    by a later job since), report that decision; else roll the job back."""
    current = ctx.records.get(record.job_id)
    course = states.UPLOAD_REFUSED(current.state)
    if course is not Course.ROLL_BACK:
        return _decided_elsewhere(ctx, current, course)
    _roll_back_and_raise(
        ctx,
        record.job_id,
        f"{refused} ({refused.refusal})",
        "Nothing of it is visible or pending and the files it would have replaced are untouched",
        refused,
    )


def _refused_by_table(ctx: JobContext, record: JobRecord, conflict: ZeroRenameError) -> JobSummary:
    """The table format refused the job's commit for good (another writer's commit
    conflicts, or the table no longer fits the job): nothing of the job is in the
    table, so the job is rolled back, and nothing of it stays in the prefix either."""
    _roll_back_and_raise(
        ctx,
        record.job_id,
        f"the {record.options.table_format} table refused its commit: {conflict}",
        "Nothing of it is in the table or the destination",
        conflict,
    )


def _roll_back_and_raise(
    ctx: JobContext, job_id: str, reason: str, left: str, cause: Exception
) -> NoReturn:
    """Roll the job back for ``reason``, then raise the final error saying what is
    ``left`` of it (nothing) and what to do."""
    log.error("job %s: %s; rolling the job back", job_id, reason)
    roll_back(ctx, job_id, reason)
    raise CommitRolledBackError(
        f"job {job_id} was rolled back: {reason}. {left}; run the job again"
    ) from cause


def _decided_elsewhere(ctx: JobContext, current: JobRecord, course: Course) -> JobSummary:
    """The outcome another commit (or rollback) of the job decided while this one ran."""
    log.info("job %s was %s by another process meanwhile", current.job_id, current.state)
    return _follow(ctx, current, course)


def _follow(ctx: JobContext, record: JobRecord, course: Course) -> JobSummary:
    """What a commit does with a job it finds decided (or refused) without it, as
    the state machine's ``course`` says: report it committed, or raise."""
    if course is Course.REPORT:
        return _already_committed(ctx, record)
    if course is Course.REFUSE:
        raise JobDecidedError(f"job {record.job_id} was aborted; it cannot commit: {record.error}")
    if course is Course.FINISH_ROLLBACK:
        finish_rollback(ctx, record)
    raise CommitRolledBackError(f"job {record.job_id} was rolled back: {record.error}")


def _already_committed(ctx: JobContext, record: JobRecord) -> JobSummary:
    """A retry of a committed job: report it, and finish the cleanup a crash may have cut."""
    dest = ctx.dest
    if record.summary is None:
        raise ManifestError(
            f"job record of {record.job_id} at {dest.url} says committed but "
            "holds no summary; it was changed outside zero-rename"
        )
    log.info("job %s is already committed", record.job_id)
    try:
        _restore_success(ctx, record)
    except ZeroRenameError as exc:  # the job is committed whatever happens to its marker
        log.warning("job %s: could not check its _SUCCESS (%s)", record.job_id, exc)
    delete_replaced(ctx, record)  # a crash may have cut them short
    _cleanup_after_commit(ctx, record)
    return record.summary


def _restore_success(ctx: JobContext, record: JobRecord) -> None:
    """Write the committed job's ``_SUCCESS`` where a crash cut it short (it goes
    beside the swap to ``committed``): unless it is there, or a job later in the
    commit order wrote its own. One GET when it is there."""
    current = _success_version(ctx)
    if current[0] is not None and _success_job(current[0]) == record.job_id:
        return
    plan = decided_plan(ctx, record)
    first = (
        read_shard(ctx.store, ctx.bucket, file_shard_key(ctx.dest, record.job_id, 0), CommittedFile)
        if plan.upload_shards
        else []
    )
    success = build_success(
        ctx.dest, record, plan, first[:FILES_LISTED], ctx.store.stats, plan.created
    )
    if succeeds(current[0], success) and _write_success(ctx, success, current):
        log.info("job %s: wrote the _SUCCESS its commit did not", record.job_id)


def _take_back_success(ctx: JobContext, success: SuccessData, before: Version | None) -> None:
    """Put back the ``_SUCCESS`` this commit replaced, where it still holds this
    job's: by compare-and-swap to the bytes before; with none before, a delete
    after a read that found this job's (S3 has no conditional delete everywhere: a
    later job's _SUCCESS written in that one round trip would go with it, a window
    inside a race that is rare itself)."""
    ours = dump(success)
    previous = before[0] if before is not None else None
    if previous is not None:
        swap(
            ctx.store,
            ctx.bucket,
            ctx.dest.success_key,
            lambda current: previous if current == ours else None,
            "_SUCCESS",
        )
    else:
        found = ctx.store.get_object(ctx.bucket, ctx.dest.success_key)
        if found is not None and found[0] == ours:
            ctx.store.delete_objects(ctx.bucket, [ctx.dest.success_key])
    log.info("job %s was rolled back: its _SUCCESS is taken back", success.job_id)


def _success_job(data: bytes) -> str:
    try:
        return SuccessData.model_validate_json(data).job_id
    except ValueError:
        return ""


def _seal_round(
    ctx: JobContext,
    record: JobRecord,
    manifests: Sequence[TaskManifest] | None,
    first: FirstReads,
) -> tuple[JobRecord, Gathered]:
    """Seal the job, and in the same round trip read a small job's manifests (from
    the stage, or the listing taken before the seal) and claim its directories when
    they are known without the manifests (the whole destination when unpartitioned;
    the manifests' partitions when the engine handed them over)."""
    dirs = _known_dirs(record, manifests, first)
    with ThreadPoolExecutor(2) as pool:
        gathering = pool.submit(_early_source, ctx, record, manifests, first)
        claiming = (
            pool.submit(Claims(ctx).acquire, record, dirs, first.claims)
            if dirs is not None
            else None
        )
        sealed = _seal(ctx.records, record)
        if claiming is not None:
            claiming.result()
        source = gathering.result()
    if sealed.stage_digest != record.stage_digest:
        source = None  # a stage saved meanwhile: read what the sealed record names
    return sealed, Gathered(source, None if dirs is None else tuple(dirs), first.claims)


def _known_dirs(
    record: JobRecord, manifests: Sequence[TaskManifest] | None, first: FirstReads
) -> list[str] | None:
    """The directories the job's claim covers, where they are known before its
    manifests are read: None otherwise, or where its earlier steps prepared a plan
    (whose claim they took)."""
    if record.prepared_plan:
        return None
    if not record.options.partition_columns:
        return target_dirs(record, ())
    if manifests is None:
        return None
    try:
        found = {
            partition_dir(record.options.partition_columns, u.partition)
            for m in manifests
            for u in m.uploads
        }
    except ZeroRenameError:
        return None  # validation names the problem
    return target_dirs(record, [d.rstrip("/") + "/" for d in found if d])


def _early_source(
    ctx: JobContext,
    record: JobRecord,
    manifests: Sequence[TaskManifest] | None,
    first: FirstReads,
) -> ManifestSource | None:
    """The manifests as read beside the seal: given, or a small job's, read now from
    its stage or from the listing taken before the seal (confirmed after it). None:
    too many to hold, or not read first; the commit lists and streams them."""
    if manifests is not None:
        return ManifestSource.given(manifests)
    threads = record.options.threads
    if first.stage is not None:
        stage = manifest_sources.stage_from_bytes(
            ctx, record.job_id, first.stage, record.stage_digest
        )
        assert stage is not None
        source = manifest_sources.source_of(ctx, record.job_id, stage, threads)
    elif first.listed is not None:
        source = manifest_sources.published_source(
            ctx, record.job_id, first.listed, threads, confirm=True
        )
    else:
        return None
    if record.prepared_plan or source.count > manifest_sources.EARLY_MANIFESTS:
        return source  # a prepared plan needs only their identity; too many to hold
    return source.read_now()


def _both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``first`` on a thread beside ``second``: independent requests in one round
    trip. Both values, once both are done (an error of either raised)."""
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(first)
        value = second()
        return running.result(), value


def _seal(records: JobRecords, record: JobRecord) -> JobRecord:
    """Close the job to new task commits: ``setup -> sealed``. Idempotent."""
    sealed, moved = records.advance(
        record.job_id, states.SEAL, lambda r: {"steps": step_started(r, "commit")}
    )
    if moved:
        log.info("job %s is sealed: no task commit may join it from now on", record.job_id)
    return sealed


def manifest_source(
    ctx: JobContext, record: JobRecord, manifests: Sequence[TaskManifest] | None
) -> ManifestSource:
    if manifests is not None:
        return ManifestSource.given(manifests)
    return manifest_sources.source(ctx, record.job_id, record.options.threads, record.stage_digest)


def _plan(
    ctx: JobContext,
    record: JobRecord,
    manifests: Sequence[TaskManifest] | None,
    expected: Expected,
    gathered: Gathered,
) -> tuple[CommitPlan, str]:
    """A resolved plan for the job: the one its earlier steps prepared if it still
    fits (its uploads checked again, by listing, to be pending), else a new one."""
    source = gathered.source or manifest_source(ctx, record, manifests)
    claimed = gathered.claimed
    try:
        plan, key = prepared_for(ctx, record, source, expected, True, gathered.claims, claimed)
    except ManifestsChanged:
        # A task commit published its manifest after the listing taken before the
        # seal (and before the seal: it counts). List again, the job sealed now.
        log.info("job %s: task manifests published before the seal; listing again", record.job_id)
        source = manifest_source(ctx, record, manifests)
        plan, key = prepared_for(ctx, record, source, expected, True, None, claimed)
    if plan.manifests_id == source.identity and record.prepared_plan:
        log.info("job %s: taking the plan its earlier steps prepared", record.job_id)
    return plan, key


def _plan_and_decide(
    ctx: JobContext,
    record: JobRecord,
    manifests: Sequence[TaskManifest] | None,
    expected: Expected,
    gathered: Gathered,
) -> tuple[JobRecord, CommitPlan | None]:
    """Plan and pass the point of no return; the record, and the plan where it is
    ours (None: another commit decided first)."""
    records = ctx.records
    try:
        plan, key = _plan(ctx, record, manifests, expected, gathered)
    except ZeroRenameError as exc:
        # A decision racing this plan makes the uploads vanish under it: an abort
        # aborts them, another commit of the job completes them (and removes this
        # plan's shards in its cleanup). Follow the decision, rather than report
        # the problem it caused.
        current = records.get(record.job_id)
        course = states.PLAN_FAILED(current.state)
        if course is Course.REFUSE:
            raise JobDecidedError(
                f"job {record.job_id} was aborted while it was being validated; it cannot commit"
            ) from exc
        if course is Course.FOLLOW:
            log.info("job %s: another commit decided while this one planned", record.job_id)
            return current, None
        raise

    def decision(current: JobRecord) -> dict[str, Any]:
        # The commit's own validation counts as the validate step, unless that
        # step ran on its own before (Airflow's).
        steps = current.steps if "validate" in current.steps else step_finished(current, "validate")
        commit = current.steps.get("commit")
        steps = {
            **steps,
            # Running again, from when it first started: an earlier try that failed
            # before this decision (a claim it waited for) is over.
            "commit": commit.model_copy(update={"status": "running", "finished": None, "error": ""})
            if commit
            else step_started(current, "commit")["commit"],
        }
        return {
            "plan_key": key,
            "plan_digest": plan_digest(plan),
            "claimed": plan.claimed,
            "steps": steps,
        }

    # Another commit may have decided first: then finish its plan, not ours.
    decided, _ = records.advance(record.job_id, states.DECIDE, decision)
    if decided.plan_key != key:
        log.info("job %s: another commit decided first; finishing its plan", record.job_id)
        return decided, None
    log.info(
        "job %s passed its point of no return: %d file(s) to complete, %d to replace",
        record.job_id,
        plan.files,
        plan.replaced_files,
    )
    return decided, plan


def _fence_publish(ctx: JobContext, job_id: str, started: datetime) -> JobRecord:
    """Record that the table commit may start (the ``publish_table`` step), by
    compare-and-swap, before it does: a rollback by hand swaps the same record
    and refuses once this is there, so the two never overlap. A record no longer
    committing (rolled back first) is returned as it is, and nothing is published."""

    def mark(current: JobRecord) -> JobRecord | None:
        if states.COMMIT_GOES_ON(current.state) is not Course.PUBLISH:
            return None
        if "publish_table" in current.steps:
            return None
        step = StepTiming(started=started, status="running")
        return current.model_copy(update={"steps": {**current.steps, "publish_table": step}})

    return ctx.records.update(job_id, mark)


def _success_version(ctx: JobContext) -> Version:
    """``_SUCCESS`` as it is now (its bytes and ETag), for the swap that writes it."""
    found = ctx.store.get_object(ctx.dest.bucket, ctx.dest.success_key)
    return found if found is not None else (None, None)


def _write_success(ctx: JobContext, success: SuccessData, known: Version | None) -> bool:
    """Write ``_SUCCESS`` by compare-and-swap from ``known``, unless a job later in
    the destination's commit order (its commit time, which its record keeps)
    wrote it meanwhile: two jobs committing side by side (other partitions, or
    appends), or a paused commit resumed after a later job, never take it back to
    an earlier job. Returns whether this job's was written."""
    body = dump(success)

    def change(current: bytes | None) -> bytes | None:
        if not succeeds(current, success):
            return None
        return None if current == body else body

    done = swap(ctx.store, ctx.dest.bucket, ctx.dest.success_key, change, "_SUCCESS", known=known)
    if not done.wrote and done.data != body:
        log.info(
            "job %s: _SUCCESS stays with a job committed after it at %s",
            success.job_id,
            ctx.dest.url,
        )
    return done.wrote


def _finished(
    record: JobRecord,
    summary: JobSummary,
    table: TableCommit | None,
    table_started: datetime,
    committed_at: datetime,
) -> dict[str, Any]:
    steps = step_finished(record, "commit", detail=f"{summary.files} file(s)", at=committed_at)
    if table is not None:
        steps["publish_table"] = StepTiming(
            started=table_started,
            finished=utcnow(),
            status="succeeded",
            detail=f"{table.format} {table.table}: {table.id}",
        )
    return {"summary": summary, "steps": steps, "table_commit": table}


@dataclass(frozen=True)
class Leftovers:
    """What a commit leaves to clean once its record says committed, listed beside
    the swap that says so: the job's temporary objects, and its stray uploads
    (losing attempts'; past the decision no upload of the job is pending but these)."""

    temporary: StringRuns
    strays: list[UploadInfo]
    # Every upload pending under the destination, the table format's folder
    # included: what its writes left pending is judged from this listing too.
    listed: list[UploadInfo]


def _leftovers(ctx: JobContext, record: JobRecord, plan: CommitPlan) -> Leftovers | None:
    """The job's leftovers, listed (None: the listing failed, and the cleanup lists
    again). Every temporary object exists by now but the journal's last entry,
    written beside this listing, which the commit names itself."""
    keep = tuple(k for k in (record.plan_key, plan.shards_prefix + "attempts-") if k)
    try:
        temporary, listed = _both(
            lambda: temporary_keys(ctx, record.job_id, keep),
            lambda: list(ctx.store.list_uploads(ctx.dest.bucket, ctx.dest.dir)),
        )
    except ZeroRenameError as exc:
        log.info(
            "job %s: listing what to clean failed (%s); cleanup lists again", record.job_id, exc
        )
        return None
    strays = job_uploads(ctx, record.job_id, record.file_columns, listed)
    return Leftovers(temporary, strays, listed)


def _cleanup_after_commit(
    ctx: JobContext,
    record: JobRecord,
    plan: CommitPlan | None = None,
    left: Leftovers | None = None,
) -> None:
    """Release the claim, abort stray uploads (losing attempts) and remove temporary
    objects, side by side (independent objects), best effort: the job is committed
    whatever happens here; the cleanup step can run it again. ``left``: what the
    commit listed beside its swap to committed, so that all of it goes in one round
    trip (the sweep's listing again only where it found strays)."""
    try:
        keep = (
            (record.plan_key, plan.shards_prefix + "attempts-")
            if plan is not None and record.plan_key
            else decided_plan_keys(ctx, record)
        )
        # The job's strays and, with a table format, what its writes left pending (a
        # lost answer's leftover): its folder is under the destination, listed once
        # for both, beside the swap to committed where that listing worked.
        options = record.options
        parts: list[Callable[[], object]] = [lambda: Claims(ctx).release(record.job_id)]
        if left is None:
            parts += [
                lambda: abort_stray_uploads(ctx, record),
                lambda: remove_temporary(ctx, record.job_id, keep),
            ]
        else:
            listed = left.listed
            if left.strays:
                cols = record.file_columns
                parts.append(lambda: abort_uploads(ctx, record.job_id, options.threads, cols))
            if options.table_format != "none":
                fmt = options.table_format
                parts.append(lambda: end_table_uploads(ctx, fmt, options.threads, listed))
            job_id = record.job_id  # no request unless other jobs' uploads are listed
            parts.append(lambda: abort_decided_leftovers(ctx, listed, job_id, options.threads))
            if len(left.temporary):
                parts.append(lambda: delete_keys(ctx, left.temporary))
        with ThreadPoolExecutor(len(parts)) as pool:
            for future in [pool.submit(part) for part in parts]:
                future.result()
    except Exception:
        log.warning(
            "cleanup after committing job %s failed; run cleanup again",
            record.job_id,
            exc_info=True,
        )
