"""Rollback of a job commit that the store refused after its point of no return.

Past ``committing`` a job commit's only way forward is to complete every
planned upload. When S3 refuses one for good (the parts a manifest recorded
are not the upload's; the upload is gone and no object took its place), no
retry can finish the job, and stopping there would leave part of it visible
to plain readers, its partitions claimed and its abort refused. The files a
``replace`` would delete are still there at that point (they go only once the
job is committed), so the state before the job can be restored exactly:

1. compare-and-swap the record ``committing -> rolling_back``, with the
   refusal as the reason: from here every commit of the job rolls back
   instead of completing, and task attempts reading the fence see it closed;
2. abort every pending upload of the job, listing until none is left, so
   that no complete still in flight elsewhere makes a file visible later;
3. delete every key of the plan (its keys carry the job id: nothing else is
   there);
4. compare-and-swap ``rolling_back -> aborted``, release the claim, remove the
   job's temporary objects and file list.

Steps 2-4 are :func:`zero_rename.core.protocol.abort.finish_rollback`; each is safe to
repeat, so after a crash a retry of the commit, an abort, a cleanup or an
explicit rollback (:func:`rollback_job`) finishes it. A job whose every
planned file is complete is never rolled back: a commit retry records it.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from zero_rename.core.data.journal import read_progress
from zero_rename.core.data.model import JobRecord, JobSummary, PlannedUpload, utcnow
from zero_rename.core.data.records import JobContext, running_ended, step_started
from zero_rename.core.data.shards import KeySet
from zero_rename.core.protocol import states
from zero_rename.core.protocol.abort import abort_job, abort_reason, finish_rollback
from zero_rename.core.protocol.formats import published_to_table
from zero_rename.core.protocol.planning import decided_plan, upload_shards
from zero_rename.core.protocol.publish import is_complete
from zero_rename.core.protocol.validate import pending_digests, upload_digest
from zero_rename.core.s3.progress import Advance, Steps, no_steps
from zero_rename.errors import RollbackRefusedError

log = logging.getLogger(__name__)

# Files named in a rollback check's answer; the count says how many in all.
LOST_SHOWN = 5


def roll_back(
    ctx: JobContext, job_id: str, reason: str, steps: Steps = no_steps, by_hand: bool = False
) -> JobSummary:
    """Decide the rollback of a job stuck in ``committing`` and carry it out.
    ``by_hand``: an operator's (:func:`rollback_job`), not the commit's own after
    a refusal: refused once the job's table commit may have started.

    Raises:
        JobDecidedError: the job is committed (nothing to roll back), or not past
            its point of no return (abort it instead).
        RollbackRefusedError: the job is in its table, or (``by_hand``) its commit
            may be publishing it there.
    """
    dest = ctx.dest
    _refuse_if_in_the_table(ctx, ctx.records.get(job_id))

    def decision(current: JobRecord) -> dict[str, Any]:
        # Decided on the record the swap writes over: the commit records its
        # publish_table step by compare-and-swap before its table commit starts,
        # so either that step is here, or the commit finds the job rolling back.
        publishing = current.steps.get("publish_table")
        if publishing is not None and by_hand:
            raise RollbackRefusedError(
                f"job {job_id}'s commit to its {current.options.table_format} table may have "
                f"started (its publish_table step, since {publishing.started:%Y-%m-%d %H:%M:%S}"
                "Z): a rollback could race it, or leave the table naming deleted files. Retry "
                "its commit: it finds the table's commit of the job, or makes it"
            )
        changed = step_started(current, "rollback")
        if publishing is not None and publishing.status == "running":
            changed["publish_table"] = publishing.model_copy(
                update={"finished": utcnow(), "status": "failed", "detail": "refused"}
            )
        # The commit it undoes says so, whether it was running or an attempt of it
        # failed (its error kept), and so does any other step it stops.
        commit = changed.get("commit")
        if commit is not None and commit.status == "failed":
            changed["commit"] = commit.model_copy(update={"status": "rolled_back"})
        changed = running_ended(changed, "rolled_back", keep=("rollback",))
        return {"error": abort_reason(f"rolled back: {reason}"), "steps": changed}

    record, moved = ctx.records.advance(job_id, states.ROLL_BACK, decision)
    if record.state == states.ABORTED and "rollback" not in record.steps:
        return JobSummary(job_id=job_id, destination=dest.url, state=states.ABORTED)
    if moved:
        log.warning("job %s at %s is rolling back: %s", job_id, dest.url, record.error)
    return finish_rollback(ctx, record, steps)


def _refuse_if_in_the_table(ctx: JobContext, record: JobRecord) -> None:
    """A job its table format has committed is never rolled back: deleting its files
    would leave the table naming files that are gone. Its commit finishes it."""
    if record.state != states.COMMITTING:
        return
    published = published_to_table(ctx, record)
    if published is not None:
        raise RollbackRefusedError(
            f"job {record.job_id} is published to the {published.format} table "
            f"{published.table} ({published.id}): a rollback would leave the table naming "
            "deleted files. Retry its commit to finish it"
        )


@dataclass
class CommitOutlook:
    """Whether a committing job's commit can still finish: each planned file is
    complete (the journal says so, or its object is there with the ETag its parts
    give), still pending (a retry completes it), or lost (neither)."""

    files: int = 0
    complete: int = 0
    pending: int = 0
    lost: int = 0
    lost_keys: list[str] = field(default_factory=list)

    @property
    def can_finish(self) -> bool:
        return self.lost == 0

    def describe(self) -> str:
        text = (
            f"{self.files} planned file(s): {self.complete} complete, {self.pending} still "
            f"pending, {self.lost} neither"
        )
        if self.lost_keys:
            more = f" and {self.lost - len(self.lost_keys)} more" if self.lost > LOST_SHOWN else ""
            text += f" ({', '.join(self.lost_keys)}{more})"
        return text


def commit_outlook(ctx: JobContext, record: JobRecord, steps: Steps = no_steps) -> CommitOutlook:
    """What a retry of the job's commit would find; reads, never writes. ``steps``
    shows the check of each planned file (a HEAD each, where the journal is silent)."""
    plan = decided_plan(ctx, record)
    progress = read_progress(ctx, plan)
    advance = steps("checking the planned files", plan.files, "files")
    pending = pending_digests(
        ctx, record, [p + "/" for p in plan.partitions], record.options.threads, plan.files
    )
    outlook = CommitOutlook(files=plan.files)
    for number, uploads in upload_shards(ctx, plan):
        journaled = set(range(len(uploads))) if number in progress.done else set()
        journaled |= progress.completed_in(number)
        outlook.complete += len(journaled)
        advance(len(journaled))
        rest = [u for i, u in enumerate(uploads) if i not in journaled]
        for upload, state in zip(rest, _states(ctx, rest, pending, advance), strict=True):
            if state == "lost":
                outlook.lost += 1
                if len(outlook.lost_keys) < LOST_SHOWN:
                    outlook.lost_keys.append(upload.key)
            elif state == "pending":
                outlook.pending += 1
            else:
                outlook.complete += 1
    return outlook


def _states(
    ctx: JobContext,
    uploads: list[PlannedUpload],
    pending: KeySet,
    advance: Advance,
) -> list[str]:

    def state(upload: PlannedUpload) -> str:
        if upload_digest(upload.key, upload.upload_id) in pending:
            found = "pending"
        else:
            found = "complete" if is_complete(ctx, upload) is not None else "lost"
        advance(1)
        return found

    with ThreadPoolExecutor(max(1, min(16, len(uploads)))) as pool:
        return list(pool.map(state, uploads))


def rollback_job(
    ctx: JobContext, job_id: str, force: bool = False, reason: str = "", steps: Steps = no_steps
) -> JobSummary:
    """An operator's rollback of a job, returning the destination to where it was
    before the job. A job rolling back is finished and an aborted one reported; a
    job that can still finish (``setup``, ``sealed``, or ``committing`` with every
    planned file complete or pending) is refused unless ``force``; a committing
    job whose every planned file is complete is always refused: it is committed
    but for its record, which a commit retry writes. ``steps`` shows the check
    and the rollback's progress.

    Raises:
        RollbackRefusedError: as above; nothing was changed.
        JobDecidedError: the job is committed.
    """
    record = ctx.records.get(job_id)
    ctx = ctx.profiled(record.store_profile)
    why = reason or "rolled back by hand"
    if record.state in states.DECIDED - {states.COMMITTING}:
        return roll_back(ctx, job_id, why, steps, by_hand=True)  # finishes, reports, or refuses
    if record.state in states.UNDECIDED:
        if not force:
            raise RollbackRefusedError(
                f"job {job_id} is {record.state}: nothing of it is visible and its commit can "
                "still run. Abort it if it must not (or roll back with --force, which aborts it)"
            )
        return abort_job(ctx, job_id, why, steps)
    outlook = commit_outlook(ctx, record, steps)
    if outlook.pending == 0 and outlook.lost == 0:
        raise RollbackRefusedError(
            f"job {job_id} is committed in all but its record ({outlook.describe()}): retry "
            "its commit to record it; a rollback would delete committed output"
        )
    if outlook.can_finish and not force:
        raise RollbackRefusedError(
            f"job {job_id} can still finish ({outlook.describe()}): retry its commit. "
            "--force rolls it back anyway"
        )
    log.warning("job %s: rolling back by hand; %s", job_id, outlook.describe())
    return roll_back(ctx, job_id, f"{why}; {outlook.describe()}", steps, by_hand=True)
