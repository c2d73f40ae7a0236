"""The partition view: each partition of a destination, the job that last wrote
it, and the jobs holding it now.

A partition is a directory of files that readers read (``dt=2024-01-01``;
``""``, the destination itself, for files at its top). Its files and bytes are
those of the committed state (:func:`~zero_rename.core.views.snapshot.gather`:
the job records, one listing of the destination, the records that can still
change read again, a ``replace`` honoured from its commit on), summed per
directory and job while the listing streams past: memory grows with the
partitions and the jobs whose files each holds, not with the files. Its rows
are those the committed jobs recorded: a job that wrote one partition has
them in its record's summary; for a job of several partitions its committed
file list (the ``files/`` shards that ``_SUCCESS`` names, 10,000 files a
shard) is read once. A partition holding files no job recorded (another
tool's, or some of a job's deleted by hand) has no row count.

The jobs holding a partition are the claims of ``claims.json`` whose job is
not decided yet: a running commit, or a stuck one
(:func:`~zero_rename.core.views.history.is_stuck`); a claim left by a job
that is committed, aborted or gone is broken by the next job and not shown.
A claimed partition that holds no file yet is shown too.

What it costs, for J jobs, O objects under the destination and P
partitions: one LIST per 1,000 jobs and one GET per job record (records known
final, passed as ``known``, are not read), one LIST per 1,000 objects, the
records that can still change once more, one GET of the claims, and one GET
per 10,000 files of each job still read in two partitions or more; nothing per
file or per partition.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any

from zero_rename.core.data.model import CommittedFile, JobRecord, utcnow
from zero_rename.core.data.records import RECORD_THREADS, JobContext
from zero_rename.core.data.shards import SHARD_SIZE, read_shard
from zero_rename.core.data.success import file_shard_key
from zero_rename.core.protocol.claims import Claim, Claims
from zero_rename.core.protocol.states import LIVE, STUCK_AFTER
from zero_rename.core.views.history import is_stuck, iso, partition_count
from zero_rename.core.views.snapshot import CommittedState, SnapshotFile, gather
from zero_rename.errors import ZeroRenameError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """A job whose claim holds partitions: its commit runs, or is stuck."""

    job_id: str
    state: str  # the job's state
    mode: str  # its conflict mode
    since: datetime  # when it claimed
    hostname: str
    stuck: bool
    dirs: tuple[str, ...]  # the partitions it claims ("" the whole destination)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "state": self.state,
            "mode": self.mode,
            "since": iso(self.since),
            "hostname": self.hostname,
            "stuck": self.stuck,
            "partitions": len(self.dirs),
        }


@dataclass(frozen=True)
class PartitionInfo:
    """One partition: what readers read there, who wrote it last, who holds it."""

    partition: str  # its directory, without the trailing '/'
    files: int
    bytes: int
    rows: int | None  # None: some file's rows are not recorded
    job_id: str | None  # the last committed job whose files it holds
    mode: str | None  # that job's conflict mode
    written_at: datetime | None  # when that job committed (else the newest file)
    jobs: int  # committed jobs whose files it holds (appends add up)
    foreign_files: int  # files no job record accounts for
    holders: tuple[Holder, ...] = ()

    @property
    def stuck(self) -> bool:
        return any(h.stuck for h in self.holders)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, times as ISO 8601 UTC."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["written_at"] = iso(self.written_at)
        data["holders"] = [h.to_json() for h in self.holders]
        data["stuck"] = self.stuck
        return data


@dataclass(frozen=True)
class PartitionView:
    destination: str
    partitions: tuple[PartitionInfo, ...]  # by directory
    holders: tuple[Holder, ...]  # every live claim
    stuck_jobs: tuple[str, ...]  # every stuck job, holding a claim or not
    records: Mapping[str, JobRecord] = field(repr=False)  # those read, for the next view
    requests: int = 0  # S3 requests it took
    # False: the destination held more than ``max_objects`` objects, so no
    # partition is shown (the holders and stuck jobs are).
    complete: bool = True


@dataclass
class _Sum:
    files: int = 0
    bytes: int = 0
    newest: datetime | None = None


class _TooMany(Exception):
    """More objects than the caller wants listed."""


class _ByDirectory:
    """The committed state summed by (directory, job id), up to ``limit`` objects."""

    def __init__(self, limit: int | None = None) -> None:
        self.sums: dict[tuple[str, str | None], _Sum] = {}
        self.limit = limit
        self.seen = 0

    def _count(self) -> None:
        self.seen += 1
        if self.limit is not None and self.seen > self.limit:
            raise _TooMany

    def add(self, file: SnapshotFile) -> None:
        self._count()
        directory = file.relative.rsplit("/", 1)[0] if "/" in file.relative else ""
        found = self.sums.setdefault((directory, file.job_id), _Sum())
        found.files += 1
        found.bytes += file.size
        if file.last_modified is not None and (
            found.newest is None or file.last_modified > found.newest
        ):
            found.newest = file.last_modified

    def skip(self, reason: str) -> None:
        self._count()


def partition_view(
    ctx: JobContext,
    known: Mapping[str, JobRecord] | None = None,
    stuck_after: timedelta = STUCK_AFTER,
    max_objects: int | None = None,
) -> PartitionView:
    """Every partition of the destination, by directory (see the module's docstring).
    With ``max_objects``, a destination holding more objects for readers is not
    summed: the view then holds only the claims' holders and the stuck jobs."""
    try:
        found, state = gather(ctx, lambda: _ByDirectory(max_objects), known=known)
    except _TooMany:
        records = ctx.records.read_all(known)
        return _view(ctx, [], records, stuck_after, complete=False)
    rows = _rows(ctx, found.sums, state)
    by_dir: dict[str, dict[str | None, _Sum]] = {}
    for (directory, job_id), sums in found.sums.items():
        by_dir.setdefault(directory, {})[job_id] = sums
    partitions = [
        _partition(directory, jobs, state, rows) for directory, jobs in sorted(by_dir.items())
    ]
    return _view(ctx, partitions, state.records, stuck_after)


def _view(
    ctx: JobContext,
    partitions: list[PartitionInfo],
    records: Mapping[str, JobRecord],
    stuck_after: timedelta,
    complete: bool = True,
) -> PartitionView:
    now = utcnow()
    holders = _holders(Claims(ctx).read()[0].claims, records, now, stuck_after)
    return PartitionView(
        ctx.dest.url,
        _mark(partitions, holders) if complete else (),
        tuple(holders),
        tuple(sorted(r.job_id for r in records.values() if is_stuck(r, now, stuck_after))),
        records,
        ctx.store.stats.total_requests,
        complete,
    )


def _holders(
    claims: Iterable[Claim],
    records: Mapping[str, JobRecord],
    now: datetime,
    stuck_after: timedelta,
) -> list[Holder]:
    """The live claims: a claim of a decided job, or of none, is stale."""
    live = []
    for claim in claims:
        record = records.get(claim.job_id)
        if record is None or record.state not in LIVE:
            continue
        live.append(
            Holder(
                job_id=claim.job_id,
                state=str(record.state),
                mode=claim.conflict_mode,
                since=claim.since,
                hostname=claim.hostname,
                stuck=is_stuck(record, now, stuck_after),
                dirs=tuple(d.rstrip("/") for d in claim.dirs),
            )
        )
    return live


def _partition(
    directory: str,
    jobs: Mapping[str | None, _Sum],
    state: CommittedState,
    rows: Mapping[tuple[str, str], int | None],
) -> PartitionInfo:
    committed: list[str] = [j for j in jobs if j is not None and j in state.order]
    last = max(committed, key=lambda j: state.order[j], default=None)
    foreign = [s for j, s in jobs.items() if j is None or j not in state.order]
    counted = [rows.get((directory, j)) for j in committed]
    newest = [s.newest for s in foreign if s.newest is not None]
    return PartitionInfo(
        partition=directory,
        files=sum(s.files for s in jobs.values()),
        bytes=sum(s.bytes for s in jobs.values()),
        rows=None if foreign or None in counted else sum(c or 0 for c in counted),
        job_id=last,
        mode=state.records[last].options.conflict_mode if last else None,
        written_at=state.order[last] if last else max(newest, default=None),
        jobs=len(committed),
        foreign_files=sum(s.files for s in foreign),
    )


def _mark(partitions: list[PartitionInfo], holders: Iterable[Holder]) -> tuple[PartitionInfo, ...]:
    """The partitions with their holders; a claimed directory that holds no file yet
    becomes a partition of its own."""
    names = [p.partition for p in partitions]
    held: dict[str, list[Holder]] = {}
    for holder in holders:
        for claimed in holder.dirs:
            hit = _under(names, claimed)
            for name in hit or [claimed]:
                held.setdefault(name, []).append(holder)
    by_name = {p.partition: p for p in partitions}
    for name in held:
        if name not in by_name:
            by_name[name] = PartitionInfo(name, 0, 0, 0, None, None, None, 0, 0)
    return tuple(replace(p, holders=tuple(held.get(n, ()))) for n, p in sorted(by_name.items()))


def _under(names: list[str], claimed: str) -> list[str]:
    """The partitions (sorted ``names``) at or under the claimed directory."""
    if not claimed:
        return list(names)
    start = bisect.bisect_left(names, claimed)
    hit = []
    for name in names[start:]:
        if not name.startswith(claimed):
            break
        if name == claimed or name[len(claimed)] == "/":
            hit.append(name)
    return hit


def _rows(
    ctx: JobContext, sums: Mapping[tuple[str, str | None], _Sum], state: CommittedState
) -> dict[tuple[str, str], int | None]:
    """Rows of each committed job's files in each directory: from its summary when it
    wrote one partition and all its files are still read there, else from its file
    list; None where the files read are not those the job recorded."""
    rows: dict[tuple[str, str], int | None] = {}
    wanted: dict[str, JobRecord] = {}
    for (directory, job_id), found in sums.items():
        if job_id is None or job_id not in state.order:
            continue
        summary = state.records[job_id].summary
        if summary is not None and partition_count(summary) <= 1 and summary.files == found.files:
            rows[(directory, job_id)] = summary.rows
        elif summary is not None:
            wanted[job_id] = state.records[job_id]
    with ThreadPoolExecutor(max(1, min(RECORD_THREADS, len(wanted)))) as pool:
        listed = dict(
            zip(wanted, pool.map(lambda r: _listed(ctx, r), wanted.values()), strict=True)
        )
    for (directory, job_id), found in sums.items():
        if job_id in listed:
            files, counted = listed[job_id].get(directory, (0, None))
            rows[(directory, job_id)] = counted if files == found.files else None
    return rows


def _listed(ctx: JobContext, record: JobRecord) -> dict[str, tuple[int, int | None]]:
    """(files, rows) by directory of a committed job's file list, one shard at a time;
    empty when the list cannot be read (the rows are then unknown, not an error)."""
    summary = record.summary
    shards = math.ceil((summary.files if summary else 0) / SHARD_SIZE)
    found: dict[str, tuple[int, int | None]] = {}
    try:
        for number in range(shards):
            key = file_shard_key(ctx.dest, record.job_id, number)
            for file in read_shard(ctx.store, ctx.bucket, key, CommittedFile):
                directory = file.path.rsplit("/", 1)[0] if "/" in file.path else ""
                files, rows = found.get(directory, (0, 0))
                total = None if rows is None or file.rows is None else rows + file.rows
                found[directory] = (files + 1, total)
    except ZeroRenameError as exc:
        log.warning("the file list of job %s cannot be read: %s", record.job_id, exc)
        return {}
    return found
