"""Pending uploads under a destination, whose job they belong to, and which may go.

A zero-rename upload carries its job id (a UUID) in its file name. The job's
record lives under the job's destination, which is DEST itself or any
directory on the key's path (DEST may be a parent of many tables, or one
partition of a table), so the record is looked for at each of them. Knowing
the job's state is what keeps an abort from destroying a commit:

- ``committing``: the uploads are the commit's; a retry completes them. Never abort.
- ``committed``: every upload of the plan is complete; what is still pending is
  a stray of an attempt that did not commit. Abort.
- ``aborted`` or no record: leftovers and orphans. Abort.
- no job id, in a table format's folder (``_iceberg/``, ``_delta_log/``): a
  write of the format's metadata (:mod:`zero_rename.core.protocol.table_uploads`).
  Abort once abandoned (started over an hour ago); a younger one may be a
  commit's write in progress.
- ``setup`` or ``sealed``: the job may still run (``sealed``: a job commit is
  planning). Aborting its uploads under it could let a commit without upload
  verification pass its point of no return and fail half-published, so the
  job itself is aborted first (compare-and-swap on its record, which a commit
  past its point of no return refuses), which fences every attempt; see
  :mod:`zero_rename.core.protocol.abort`.

The command line's ``uploads list|abort`` takes owners and decisions from here,
the Commits page its count of pending uploads per job; the sweep itself is
:func:`zero_rename.core.protocol.abort.sweep_uploads`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from zero_rename.core.data.layout import HIDDEN_DIR, Destination, file_job_id
from zero_rename.core.data.records import JobContext, JobRecords
from zero_rename.core.protocol import states, table_uploads
from zero_rename.core.protocol.abort import abort_each, abort_job, sweep_uploads
from zero_rename.core.protocol.states import JobState
from zero_rename.core.protocol.table_uploads import ABANDONED_AFTER, table_format_of
from zero_rename.core.s3.client import S3Store, UploadInfo
from zero_rename.errors import AbortRefusedError, JobNotFoundError

log = logging.getLogger(__name__)

ABORT = "abort"
ABORT_JOB = "abort-job"
KEEP = "keep"
REFUSE = "refuse"


@dataclass(frozen=True)
class Owner:
    """The job an upload belongs to, as its record says; or, for an upload of a
    table format's metadata (no job's), that format."""

    job_id: str | None
    state: JobState | None = None  # None: no record found
    destination: Destination | None = None  # where the record was found
    table_format: str | None = None  # "iceberg", "delta": in that format's folder


@dataclass(frozen=True)
class Pending:
    upload: UploadInfo
    owner: Owner

    @property
    def key(self) -> str:
        return self.upload.key

    def age(self, now: datetime) -> timedelta | None:
        if self.upload.initiated is None:
            return None
        return now - self.upload.initiated


@dataclass(frozen=True)
class Decision:
    action: str  # ABORT, ABORT_JOB, KEEP or REFUSE
    reason: str


class Owners:
    """Looks up (and remembers) the job record of each job id seen under DEST."""

    def __init__(self, ctx: JobContext) -> None:
        store, dest = ctx.store, ctx.dest
        self.ctx = ctx
        self.store = store
        self.dest = dest
        self._known: dict[str, Owner] = {}

    def of(self, key: str) -> Owner:
        job_id = file_job_id(key)
        if job_id is None:
            return Owner(None, table_format=table_format_of(key))
        if job_id not in self._known:
            self._known[job_id] = self._find(job_id, key)
        return self._known[job_id]

    def of_job(self, job_id: str, keys: Sequence[str] = ()) -> Owner:
        """The owner of a job named on the command line: at DEST, or above its uploads."""
        if job_id not in self._known:
            self._known[job_id] = self._find(job_id, keys[0] if keys else self.dest.dir)
        return self._known[job_id]

    def _find(self, job_id: str, key: str) -> Owner:
        for candidate in candidate_destinations(self.dest, key):
            try:
                record = JobRecords(self.store, candidate).get(job_id)
            except JobNotFoundError:
                continue
            return Owner(job_id, record.state, candidate)
        return Owner(job_id)


def candidate_destinations(dest: Destination, key: str) -> list[Destination]:
    """Where the record of the job that wrote ``key`` may be: DEST first (the usual
    place), then every other directory on the key's path."""
    elements = key.split("/")[:-1]
    prefixes = ["/".join(elements[: n + 1]) for n in range(len(elements))]
    ordered = [dest.prefix] + [p for p in prefixes if p != dest.prefix]
    return [
        Destination(dest.bucket, p)
        for p in ordered
        if p and not any(e.startswith(HIDDEN_DIR) for e in p.split("/"))
    ]


def pending_uploads(
    ctx: JobContext,
    owners: Owners,
    job_id: str | None = None,
    older_than: timedelta | None = None,
    now: datetime | None = None,
    seen: Callable[[int], None] = lambda n: None,
) -> list[Pending]:
    """Pending uploads under DEST (the listing prefix ends in '/': never DEST10's);
    ``seen`` counts the uploads listed, for progress."""
    store, dest = ctx.store, ctx.dest
    now = now or datetime.now(UTC)
    found = []
    for upload in store.list_uploads(dest.bucket, dest.dir):
        seen(1)
        if job_id is not None and file_job_id(upload.key) != job_id:
            continue
        if older_than is not None and not _older(upload, older_than, now):
            continue
        found.append(Pending(upload, owners.of(upload.key)))
    return sorted(found, key=lambda p: (p.key, p.upload.upload_id))


def _older(upload: UploadInfo, older_than: timedelta, now: datetime) -> bool:
    # An upload without a start time cannot be shown to be old: keep it.
    return upload.initiated is not None and now - upload.initiated >= older_than


def decide_for_job(owner: Owner) -> Decision:
    """What ``uploads abort DEST --job ID`` may do with that job's uploads."""
    state = owner.state
    if state == states.COMMITTING:
        return Decision(
            REFUSE,
            f"job {owner.job_id} is committing: its pending uploads are "
            "the commit's and a commit retry completes them. Retry the commit",
        )
    if state == states.ROLLING_BACK:
        return Decision(
            REFUSE,
            f"job {owner.job_id} is rolling back. Finish the rollback instead "
            "(zero-rename jobs rollback DEST JOB): it aborts these uploads and removes "
            "what the job made visible",
        )
    if state in states.UNDECIDED:
        return Decision(
            REFUSE,
            f"job {owner.job_id} is still in {state} and may be running. "
            "Abort the job instead (zero-rename jobs abort DEST JOB): it records "
            "the abort first, so no attempt can commit afterwards",
        )
    return Decision(ABORT, _abort_reason(state))


def decide_for_sweep(owner: Owner, abandoned: bool = False) -> Decision:
    """What ``uploads abort DEST --all-older-than AGE`` does with an old upload
    (``abandoned``: one of a table format's metadata started ABANDONED_AFTER ago)."""
    if owner.job_id is None and owner.table_format is not None:
        if abandoned:
            return Decision(
                ABORT,
                f"a write of the {owner.table_format} table's metadata, abandoned: "
                f"started over {_span(ABANDONED_AFTER)} ago, and none takes that long",
            )
        return Decision(
            KEEP,
            f"a write of the {owner.table_format} table's metadata started less than "
            f"{_span(ABANDONED_AFTER)} ago: a commit may still be writing it",
        )
    if owner.job_id is None:
        return Decision(KEEP, "not written by a zero-rename job (no job id in the file name)")
    if owner.state == states.COMMITTING:
        return Decision(REFUSE, "job is committing: its commit needs these uploads; retry it")
    if owner.state in states.UNDECIDED:
        return Decision(
            ABORT_JOB,
            f"job left in {owner.state}: aborted as a job, so no attempt can commit afterwards",
        )
    if owner.state == states.ROLLING_BACK:
        return Decision(ABORT_JOB, "job left rolling back: its rollback is finished")
    return Decision(ABORT, _abort_reason(owner.state))


def _abort_reason(state: JobState | None) -> str:
    if state == states.COMMITTED:
        return "job is committed: stray upload of an attempt that did not commit"
    if state == states.ABORTED:
        return "job was aborted: leftover upload"
    return "no job record: orphaned upload"


def named_uploads(ctx: JobContext, job_id: str) -> list[UploadInfo]:
    """Pending uploads under DEST whose file name carries the job id."""
    store, dest = ctx.store, ctx.dest
    return [u for u in store.list_uploads(dest.bucket, dest.dir) if file_job_id(u.key) == job_id]


def abort_job_uploads(
    ctx: JobContext,
    job_id: str,
    first: Sequence[Pending],
    threads: int,
    advance: Callable[[int], None] = lambda n: None,
) -> tuple[int, int]:
    """Abort the job's uploads under DEST (``first``: as listed), listing again until
    none is left; returns (aborted, already gone)."""
    store, dest = ctx.store, ctx.dest
    aborted, gone = sweep_uploads(
        store,
        dest.bucket,
        lambda: named_uploads(ctx, job_id),
        threads,
        [p.upload for p in first],
        advance,
    )
    log.info(
        "aborted %d upload(s) of job %s under %s (%d already gone)", aborted, job_id, dest.url, gone
    )
    return aborted, gone


@dataclass(frozen=True)
class JobSweep:
    """One job's old uploads in a sweep (``uploads abort --all-older-than``), and
    what is done with them."""

    owner: Owner
    uploads: tuple[Pending, ...]
    decision: Decision


def plan_sweep(old: Sequence[Pending], now: datetime | None = None) -> list[JobSweep]:
    """The old uploads by job, in order of first appearance, each job decided once
    (job id None: uploads zero-rename did not write; a table format's metadata
    in groups of their own, abandoned or not)."""
    now = now or datetime.now(UTC)
    groups: dict[tuple[str | None, str | None, bool], list[Pending]] = {}
    for p in old:
        gone = p.owner.table_format is not None and table_uploads.abandoned(p.upload, now)
        groups.setdefault((p.owner.job_id, p.owner.table_format, gone), []).append(p)
    return [
        JobSweep(group[0].owner, tuple(group), decide_for_sweep(group[0].owner, gone))
        for (_, _, gone), group in groups.items()
    ]


def _span(age: timedelta) -> str:
    hours = age.total_seconds() / 3600
    return f"{hours:g} hour(s)"


def abort_abandoned_job(store: S3Store, job: JobSweep, reason: str) -> tuple[JobSweep, int]:
    """Abort a job left in setup or sealed as a job: its record is swapped to
    ``aborted`` first, so no task attempt can commit afterwards. A commit that won
    the race since the sweep saw the job keeps it: the decision becomes REFUSE.
    Returns the job as carried out and how many of its uploads were aborted."""
    owner = job.owner
    if owner.job_id is None or owner.destination is None:
        raise ValueError(f"a job is aborted only where its record was found: {owner}")
    try:
        summary = abort_job(JobContext(store.scoped(), owner.destination), owner.job_id, reason)
    except AbortRefusedError as exc:
        return replace(job, decision=Decision(REFUSE, str(exc))), 0
    return job, summary.aborted_uploads


class PendingUploads:
    """A destination's pending uploads, as the ``uploads`` commands take them: found
    with their owners, decided, and aborted, through one context and one cache of
    owners (each job's record read once)."""

    ABORT: ClassVar[str] = ABORT
    ABORT_JOB: ClassVar[str] = ABORT_JOB
    KEEP: ClassVar[str] = KEEP
    REFUSE: ClassVar[str] = REFUSE

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.owners = Owners(ctx)

    def find(
        self,
        job_id: str | None = None,
        older_than: timedelta | None = None,
        now: datetime | None = None,
        seen: Callable[[int], None] = lambda n: None,
    ) -> list[Pending]:
        """As :func:`pending_uploads`."""
        return pending_uploads(self.ctx, self.owners, job_id, older_than, now, seen)

    def owner_of_job(self, job_id: str, keys: Sequence[str] = ()) -> Owner:
        return self.owners.of_job(job_id, keys)

    @staticmethod
    def decide_for_job(owner: Owner) -> Decision:
        return decide_for_job(owner)

    @staticmethod
    def plan_sweep(old: Sequence[Pending], now: datetime | None = None) -> list[JobSweep]:
        return plan_sweep(old, now)

    def abort_job(
        self,
        job_id: str,
        first: Sequence[Pending],
        threads: int,
        advance: Callable[[int], None] = lambda n: None,
    ) -> tuple[int, int]:
        """As :func:`abort_job_uploads`."""
        return abort_job_uploads(self.ctx, job_id, first, threads, advance)

    def abort(
        self,
        uploads: Sequence[UploadInfo],
        threads: int,
        advance: Callable[[int], None] = lambda n: None,
    ) -> tuple[int, int]:
        """Abort these uploads one by one; returns (aborted, already gone)."""
        return abort_each(self.ctx.store, self.ctx.dest.bucket, uploads, threads, advance)

    def abort_abandoned(self, job: JobSweep, reason: str) -> tuple[JobSweep, int]:
        """As :func:`abort_abandoned_job`."""
        return abort_abandoned_job(self.ctx.store, job, reason)
