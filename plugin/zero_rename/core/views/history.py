"""A destination's history: every job, what it committed, how long its commit took.

Built from the job records alone: a committed job's record carries its
commit's summary (files, bytes, rows, partitions, replaced files, seconds,
requests), an aborted one its reason; nothing else is read.

What it costs: one LIST per 1,000 jobs and one GET per job record, 16 at a
time; records known to be final (``known``, from an earlier read) are not read
again. With a ``limit``, the records are read newest first by the store's
LastModified and the reading stops once no record left can be among the
newest (:meth:`~zero_rename.core.data.records.JobRecords.read_newest`): about
``limit`` GETs, plus those of records written within 15 minutes of the oldest
one returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from zero_rename.core.data.model import JobRecord, JobSummary, utcnow
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import states
from zero_rename.core.protocol.states import STUCK_AFTER, JobState
from zero_rename.core.views.snapshot import committed_at

# Partitions each history entry names (the count says how many in all).
PARTITIONS_NAMED = 10


# What to do about a stuck job, by its state; ``{dest}`` and ``{job}`` name it.
STUCK_ADVICE = {
    states.COMMITTING: "finish its commit (zero-rename jobs commit {dest} {job}) or, if S3 "
    "refuses its files, roll it back (zero-rename jobs rollback {dest} {job})",
    states.ROLLING_BACK: "finish its rollback (zero-rename jobs rollback {dest} {job})",
    states.SEALED: "its commit stopped before deciding: rerun its orchestrator's commit "
    "step, or abort it (zero-rename jobs abort {dest} {job})",
    states.SETUP: "its run stopped before its commit, or its stage is still writing: if "
    "the run that set it up is over, abort it (zero-rename jobs abort {dest} {job})",
}


def stuck_advice(state: str, dest: str, job_id: str) -> str:
    """What a person does about a job stuck in ``state``."""
    advice = STUCK_ADVICE.get(JobState(state), "look at it (zero-rename jobs show {dest} {job})")
    return advice.format(dest=dest, job=job_id)


def partition_count(summary: JobSummary) -> int:
    """How many partitions a commit wrote (an older summary has only their list)."""
    return max(summary.partition_count, len(summary.partitions))


def iso(value: datetime | None) -> str | None:
    """A time for JSON: ISO 8601 in UTC, ``Z``."""
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def is_stuck(record: JobRecord, now: datetime, after: timedelta = STUCK_AFTER) -> bool:
    """Whether the job stopped between its setup and its end, its record unchanged
    ``after`` ago or more: the one place a job is found stuck."""
    return record.state in states.STUCKABLE and now - record.updated >= after


def ended_at(record: JobRecord) -> datetime | None:
    """When the job was committed or aborted; None while it runs."""
    if record.state == states.COMMITTED:
        return committed_at(record)
    if record.state != states.ABORTED:
        return None
    # An abort's step (or a rollback's) ends after the record says aborted.
    ends = [s.finished for n, s in record.steps.items() if n in ("abort", "rollback")]
    return max((e for e in ends if e is not None), default=record.updated)


def entry_time(record: JobRecord) -> datetime:
    """Where the job stands in the history: when it ended, or was set up if it runs.
    Taken by the record's writer before it wrote the record (what
    :meth:`JobRecords.read_newest` needs)."""
    return ended_at(record) or record.created


@dataclass(frozen=True)
class HistoryEntry:
    """One job of the history. Counts are the commit's; None for a job that did not
    commit (nothing of it is visible)."""

    job_id: str
    state: JobState
    created: datetime
    updated: datetime  # when its record last changed
    at: datetime  # :func:`entry_time`
    committed_at: datetime | None
    aborted_at: datetime | None
    seconds: float | None  # the job commit's
    files: int | None
    rows: int | None
    bytes: int | None
    partitions: int | None  # how many
    first_partitions: tuple[str, ...]
    replaced_files: int | None
    requests: int | None  # the job commit's S3 requests
    mode: str  # the conflict mode
    committer: str  # magic or staging
    reason: str  # why it was aborted (the record's error)
    rolled_back: bool  # aborted by a rollback, after its point of no return
    stuck: bool  # see :func:`is_stuck`

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, times as ISO 8601 UTC."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("created", "updated", "at", "committed_at", "aborted_at"):
            data[name] = iso(data[name])
        data["state"] = str(self.state)
        data["first_partitions"] = list(self.first_partitions)
        return data


def history_entry(record: JobRecord, now: datetime, stuck_after: timedelta) -> HistoryEntry:
    summary = record.summary if record.state == states.COMMITTED else None
    ended = ended_at(record)
    return HistoryEntry(
        job_id=record.job_id,
        state=record.state,
        created=record.created,
        updated=record.updated,
        at=entry_time(record),
        committed_at=ended if record.state == states.COMMITTED else None,
        aborted_at=ended if record.state == states.ABORTED else None,
        seconds=summary.seconds if summary else None,
        files=summary.files if summary else None,
        rows=summary.rows if summary else None,
        bytes=summary.bytes if summary else None,
        partitions=partition_count(summary) if summary else None,
        first_partitions=summary.partitions[:PARTITIONS_NAMED] if summary else (),
        replaced_files=summary.replaced_files if summary else None,
        requests=summary.requests if summary else None,
        mode=record.options.conflict_mode,
        committer=record.options.mode_name,
        reason=record.error if record.state in states.FAILED else "",
        rolled_back="rollback" in record.steps,
        stuck=is_stuck(record, now, stuck_after),
    )


@dataclass(frozen=True)
class History:
    """The entries asked for, and how many jobs the destination has in all."""

    destination: str
    entries: tuple[HistoryEntry, ...]
    total: int
    records: Mapping[str, JobRecord] = field(repr=False)  # those read, for the next view
    requests: int = 0  # S3 requests it took


def job_history(
    ctx: JobContext,
    limit: int | None = None,
    newest_first: bool = False,
    known: Mapping[str, JobRecord] | None = None,
    stuck_after: timedelta = STUCK_AFTER,
) -> History:
    """Every job of the destination (or the newest ``limit``), by :func:`entry_time`,
    oldest first unless ``newest_first``."""
    if limit is None:
        read = ctx.records.read_all(known)
        records, total = list(read.values()), len(read)
    else:
        records, total = ctx.records.read_newest(limit, entry_time, known)
    records.sort(key=lambda r: (entry_time(r), r.job_id), reverse=newest_first)
    now = utcnow()
    return History(
        ctx.dest.url,
        tuple(history_entry(r, now, stuck_after) for r in records),
        total,
        {r.job_id: r for r in records},
        ctx.store.stats.total_requests,
    )
