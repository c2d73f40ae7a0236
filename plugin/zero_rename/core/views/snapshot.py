"""The committed state of a destination: which files a reader may read.

A listing of the destination shows more than committed output: the files of a
job still in its job commit (completed one by one), and in ``replace`` mode,
after that commit, the old files it has not deleted yet. Every file a job
writes carries its job id, and every job has a record, so a reader that knows
the records reads exactly the committed state:

- a file of a job whose record is ``committed`` is read; of any other state
  (``setup``, ``sealed``, ``committing``, ``aborted``) it is skipped;
- a file is skipped when a ``replace`` job committed after it over its
  directory: that job's commit deletes it, and it is superseded from the
  moment the job is committed, before the delete;
- a file without a job id (written by another tool) is read, unless a later
  ``replace`` job superseded it; so is a file whose job has no record left.

Consistency: the records are read, the destination listed, then the records
that could still change read again. A replace job deletes old files only once
its record says ``committed``, and completes every upload before that; so if
no record changed state between the two reads, the listing holds every file of
the state the records describe. If one did, the snapshot is taken again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar

from zero_rename.core.data.layout import Destination, file_job_id, partition_values
from zero_rename.core.data.model import JobRecord
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import states
from zero_rename.core.protocol.jobs import visible_objects
from zero_rename.core.s3.client import ObjectInfo
from zero_rename.errors import JobNotFoundError, ZeroRenameError

__all__ = [
    "CommittedState",
    "Gatherer",
    "SnapshotFile",
    "TableSnapshot",
    "committed_at",
    "file_job_id",
    "gather",
    "table_snapshot",
]

log = logging.getLogger(__name__)

SNAPSHOT_ROUNDS = 8


@dataclass(frozen=True)
class SnapshotFile:
    """A data file of the committed state."""

    key: str
    relative: str  # to the destination's directory
    size: int
    partition: tuple[tuple[str, str | None], ...]  # (column, value) from the path
    job_id: str | None  # None: not written by a zero-rename job
    last_modified: datetime | None = None


@dataclass(frozen=True)
class TableSnapshot:
    """What a reader reads: the files of the committed state, and why others are not."""

    destination: str
    files: tuple[SnapshotFile, ...]
    committed_jobs: tuple[str, ...]  # in commit order
    as_of_job: str | None = None
    skipped: Mapping[str, int] = field(default_factory=dict)  # reason -> files

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def partition_columns(self) -> tuple[str, ...]:
        """The partition columns, in path order, from the first file that has any."""
        for f in self.files:
            if f.partition:
                return tuple(c for c, _ in f.partition)
        return ()


class Gatherer(Protocol):
    """What a pass over the committed state collects (every file, or sums of them)."""

    def add(self, file: SnapshotFile) -> None: ...

    def skip(self, reason: str) -> None: ...


G = TypeVar("G", bound=Gatherer)


def gather(
    ctx: JobContext,
    new: Callable[[], G],
    as_of_job: str | None = None,
    known: Mapping[str, JobRecord] | None = None,
) -> tuple[G, CommittedState]:
    """Hand every file of the committed state (now, or right after ``as_of_job``)
    to a fresh ``new()`` as the destination's listing streams past, and every
    other file's reason to its ``skip``; returns it and the state's records.

    A file whose job has no record in the first read of the records is kept
    aside and judged by the second (its job was set up during the listing, or
    has no record at all): so what is held in memory is what ``new()`` keeps.
    Records in ``known`` whose state is final are not read again.
    """
    dest, jobs = ctx.dest, ctx.records
    records = jobs.read_all(known)
    for round_number in range(1, SNAPSHOT_ROUNDS + 1):
        state = CommittedState(dest, records, as_of_job)
        gathered = new()
        unknown = []
        for obj in visible_objects(ctx):
            job_id = file_job_id(obj.key[len(dest.dir) :])
            if job_id is not None and job_id not in records:
                unknown.append(obj)
            else:
                state.judge(obj, gathered)
        again = jobs.read_all(known=records)
        if _same_states(records, again):
            # No job reached committed: the listing holds every file of the state
            # the second read describes, which judges alike what the first judged.
            state = CommittedState(dest, again, as_of_job)
            for obj in unknown:
                state.judge(obj, gathered)
            return gathered, state
        log.info(
            "snapshot of %s: a job changed state while the destination was listed; "
            "listing again (round %d)",
            dest.url,
            round_number,
        )
        records = again
        time.sleep(min(0.05 * 2**round_number, 2.0))
    raise ZeroRenameError(
        f"could not take a consistent snapshot of {dest.url}: jobs kept changing state "
        f"during {SNAPSHOT_ROUNDS} listings; try again"
    )


class _Files:
    """Every file of the state, and how many were skipped for which reason."""

    def __init__(self) -> None:
        self.files: list[SnapshotFile] = []
        self.skipped = {"uncommitted": 0, "replaced": 0, "later": 0}

    def add(self, file: SnapshotFile) -> None:
        self.files.append(file)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1


def table_snapshot(ctx: JobContext, as_of_job: str | None = None) -> TableSnapshot:
    """The committed state of ``dest`` now, or right after job ``as_of_job`` committed."""
    found, state = gather(ctx, _Files, as_of_job)
    if as_of_job is not None:
        _check_not_deleted(ctx.dest, as_of_job, state.committed, state.records)
    return TableSnapshot(
        ctx.dest.url,
        tuple(found.files),
        tuple(r.job_id for r in state.committed),
        as_of_job,
        {k: v for k, v in found.skipped.items() if v},
    )


def _same_states(before: Mapping[str, JobRecord], after: Mapping[str, JobRecord]) -> bool:
    """Whether no job reached ``committed`` between the two reads (a job that
    appeared, or moved between states other than committed, changes nothing a
    reader sees)."""
    for job_id, record in after.items():
        old = before.get(job_id)
        if record.state == states.COMMITTED and (old is None or old.state != states.COMMITTED):
            return False
    return True


def committed_at(record: JobRecord) -> datetime:
    """When the job's record turned ``committed``."""
    step = record.steps.get("commit")
    return step.finished if step is not None and step.finished is not None else record.updated


class CommittedState:
    """Which listed files the records say a reader reads: the committed jobs in
    commit order, up to ``as_of_job``'s commit when given, and the ``replace``
    jobs among them that superseded older files."""

    def __init__(
        self, dest: Destination, records: Mapping[str, JobRecord], as_of_job: str | None = None
    ) -> None:
        self.dest = dest
        self.records = records
        committed = sorted(
            (r for r in records.values() if r.state == states.COMMITTED), key=committed_at
        )
        self.horizon = None
        if as_of_job is not None:
            target = records.get(as_of_job)
            if target is None:
                raise JobNotFoundError(f"no job {as_of_job} at {dest.url}")
            if target.state != states.COMMITTED:
                raise ZeroRenameError(
                    f"job {as_of_job} is {target.state}, not committed: there "
                    "is no state right after it to read"
                )
            self.horizon = committed_at(target)
            committed = [r for r in committed if committed_at(r) <= self.horizon]
        self.committed = committed
        # job id -> when it committed
        self.order = {r.job_id: committed_at(r) for r in committed}
        self.replaces = [
            (committed_at(r), r.claimed, r.job_id)
            for r in committed
            if r.options.conflict_mode == "replace"
        ]

    def judge(self, obj: ObjectInfo, into: Gatherer) -> None:
        """Add the listed object to ``into`` if readers read it, else say why not."""
        relative = obj.key[len(self.dest.dir) :]
        job_id = file_job_id(relative)
        reason = self.skipped(relative, job_id, obj.last_modified)
        if reason is not None:
            into.skip(reason)
            return
        into.add(
            SnapshotFile(
                obj.key, relative, obj.size, _partition(relative), job_id, obj.last_modified
            )
        )

    def skipped(self, relative: str, job_id: str | None, modified: datetime | None) -> str | None:
        """Why readers skip the file (``uncommitted``, ``later``, ``replaced``), or None."""
        if job_id is not None and job_id in self.records and job_id not in self.order:
            return "later" if self.records[job_id].state == states.COMMITTED else "uncommitted"
        written = self.order.get(job_id) if job_id is not None else None
        if written is None:  # a foreign file, or a job with no record left
            written = modified
            if self.horizon is not None and written is not None and written > self.horizon:
                return "later"
        if _replaced(relative, job_id, written, self.replaces):
            return "replaced"
        return None


def _replaced(
    relative: str,
    job_id: str | None,
    written: datetime | None,
    replaces: Iterable[tuple[datetime, tuple[str, ...], str]],
) -> bool:
    """Whether a replace job committed after the file was written, over its directory."""
    directory = relative.rsplit("/", 1)[0] + "/" if "/" in relative else ""
    for at, claimed, replacer in replaces:
        if replacer == job_id or (written is not None and at <= written):
            continue
        if any(directory.startswith(c) for c in claimed):
            return True
    return False


def _check_not_deleted(
    dest: Destination, as_of_job: str, committed: list[JobRecord], records: Mapping[str, JobRecord]
) -> None:
    """A state whose files a later replace job deleted cannot be read: say so."""
    horizon = committed_at(records[as_of_job])
    included = {r.job_id for r in committed}
    later = sorted(
        (
            r
            for r in records.values()
            if r.state == states.COMMITTED
            and r.job_id not in included
            and r.options.conflict_mode == "replace"
        ),
        key=committed_at,
    )
    touched = {d for r in committed for d in r.claimed}
    for record in later:
        hit = [d for d in touched if any(d.startswith(c) for c in record.claimed)]
        if hit and committed_at(record) > horizon:
            raise ZeroRenameError(
                f"the state right after job {as_of_job} at {dest.url} can no longer be read: "
                f"job {record.job_id}, committed later, replaced {sorted(hit)[:5]} and "
                "deleted the files it replaced"
            )


def _partition(relative: str) -> tuple[tuple[str, str | None], ...]:
    """``(column, value)`` pairs of the ``column=value`` directories of a file."""
    return partition_values(relative.rsplit("/", 1)[0] if "/" in relative else "") or ()
