"""Partition claims: concurrent jobs on one destination, serialized where they must be.

Before its point of no return, a job commit claims the directories it writes
(its partitions, or ``""``, the whole destination, when unpartitioned) in one
object per destination, ``_zero_rename/claims.json``, advanced only by
compare-and-swap. One object rather than one per partition makes a job's
claim all-or-nothing (no deadlock, no half-claimed job) and lets a partition
of one job overlap a parent directory of another (``""`` overlaps everything).

Which modes exclude each other where their directories overlap:

=========  ====  =======  ======
 held by   fail  replace  append
=========  ====  =======  ======
fail        x      x        x
replace     x      x        x
append      x      x        -
=========  ====  =======  ======

Two ``append`` jobs only add files, so they proceed side by side; every other
pair would read a partition the other is changing (``fail`` would miss files,
``replace`` would keep or delete the other's files by timing). A claim is
released when its job is committed or aborted; a claim whose job is already
committed or aborted, or has no record, is broken by the next job that meets it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from zero_rename.core.data.layout import Destination
from zero_rename.core.data.model import JobRecord, Timestamp, dump, hostname, load, utcnow
from zero_rename.core.data.options import ConflictMode
from zero_rename.core.data.records import JobContext, JobRecords
from zero_rename.core.protocol import states
from zero_rename.core.protocol.states import JobState
from zero_rename.core.s3.writes import Version, swap
from zero_rename.errors import (
    JobNotFoundError,
    ManifestError,
    PartitionClaimConflict,
)
from zero_rename.frozen import frozen

log = logging.getLogger(__name__)

CLAIMS_NAME = "claims.json"
# Compare-and-swap rounds; each lost round means another job changed the table.
CLAIM_ROUNDS = 50
# What a claim's job is said to be when its record cannot be read.
UNREADABLE = "unreadable"
# How often a waiting job looks again (with jitter).
WAIT_POLL_SECONDS = 2.0


class Claim(BaseModel):
    model_config = frozen()

    job_id: str
    conflict_mode: ConflictMode
    dirs: tuple[str, ...]
    since: Timestamp = Field(default_factory=utcnow)
    hostname: str = Field(default_factory=hostname)


class ClaimTable(BaseModel):
    """The claims held at one destination."""

    model_config = frozen()

    kind: Literal["zero-rename/claims"] = "zero-rename/claims"
    version: Literal[1] = 1
    claims: tuple[Claim, ...] = ()

    def of(self, job_id: str) -> Claim | None:
        return next((c for c in self.claims if c.job_id == job_id), None)


# What to do about a claim another job holds, by that job's state.
_ADVICE = {
    states.COMMITTING: "retry that job's commit to finish it",
    states.ROLLING_BACK: "retry that job's commit or its rollback to finish the rollback",
    states.SEALED: "its commit is running, or crashed: retry its commit or abort it",
    states.SETUP: "let it finish, or abort it",
}


class _Blocked(Exception):
    """Another job's claim excludes ours: (that claim, our directories it overlaps)."""

    def __init__(self, by: tuple[Claim, tuple[str, ...]]) -> None:
        super().__init__(by[0].job_id)
        self.by = by


def claims_key(dest: Destination) -> str:
    return dest.hidden_dir + CLAIMS_NAME


def overlapping(ours: Sequence[str], theirs: Sequence[str]) -> tuple[str, ...]:
    """Our directories that overlap one of theirs: one is the other or inside it."""
    return tuple(sorted({a for a in ours for b in theirs if a.startswith(b) or b.startswith(a)}))


def compatible(mode: ConflictMode, other: ConflictMode) -> bool:
    return mode == "append" and other == "append"


def describe_dirs(dirs: Sequence[str]) -> str:
    shown = [d.rstrip("/") or "(the whole destination)" for d in dirs[:5]]
    return ", ".join(shown) + (f" and {len(dirs) - 5} more" if len(dirs) > 5 else "")


class Claims:
    """The claim table of one destination."""

    def __init__(self, ctx: JobContext) -> None:
        store, dest = ctx.store, ctx.dest
        self.ctx = ctx
        self.store = store
        self.dest = dest
        self.key = claims_key(dest)

    def read(self) -> tuple[ClaimTable, str | None]:
        found = self.store.get_object(self.dest.bucket, self.key)
        if found is None:
            return ClaimTable(), None
        return load(ClaimTable, found[0], f"s3://{self.dest.bucket}/{self.key}"), found[1]

    def read_version(self) -> Version:
        """The claims object's bytes and ETag as stored now; (None, None) before any."""
        return self.store.get_object(self.dest.bucket, self.key) or (None, None)

    def acquire(
        self,
        record: JobRecord,
        dirs: Sequence[str],
        known: Version | None = None,
    ) -> bool:
        """Claim ``dirs`` for the job; idempotent. Returns whether it waited for
        another job's claim (``on_conflict=wait``).

        Raises:
            PartitionClaimConflict: another live job holds an overlapping claim that
                excludes this job's mode (after ``wait_timeout`` with ``on_conflict=wait``).
        """
        options = record.options
        deadline = time.monotonic() + options.wait_timeout
        mine = Claim(
            job_id=record.job_id, conflict_mode=options.conflict_mode, dirs=tuple(sorted(dirs))
        )
        waited = False
        while True:
            try:
                _, wrote = self._swap(lambda table: self._with_claim(table, mine), known)
            except _Blocked as blocked:
                if known is not None:
                    known = None  # blocked by the claims as read a moment ago: read them now
                    continue
                if options.on_conflict == "wait" and time.monotonic() < deadline:
                    self._wait(record, blocked.by, deadline)
                    waited = True
                    continue
                raise self._conflict(record, mine, blocked.by) from None
            if wrote:
                log.info(
                    "job %s claimed %s at %s (%s)",
                    record.job_id,
                    describe_dirs(mine.dirs),
                    self.dest.url,
                    options.conflict_mode,
                )
            return waited

    def _with_claim(self, table: ClaimTable, mine: Claim) -> ClaimTable | None:
        """The table with our claim, without the broken ones; None if we hold it."""
        held = table.of(mine.job_id)
        if held is not None and held.dirs == mine.dirs:
            return None
        others = self._live(table, mine.job_id)
        blocking = self._blocking(mine, others)
        if blocking is not None:
            raise _Blocked(blocking)
        return ClaimTable(claims=(*others, mine))

    def holds(self, job_id: str, dirs: Sequence[str]) -> bool:
        """Whether the job's claim stands, on exactly ``dirs``."""
        held = self.read()[0].of(job_id)
        return held is not None and held.dirs == tuple(sorted(dirs))

    def release(self, job_id: str) -> None:
        """Drop the job's claim, if it holds one; idempotent."""

        def without(table: ClaimTable) -> ClaimTable | None:
            if table.of(job_id) is None:
                return None
            return ClaimTable(claims=tuple(c for c in table.claims if c.job_id != job_id))

        if self._swap(without)[1]:
            log.info("job %s released its claim at %s", job_id, self.dest.url)

    def _swap(
        self,
        change: Callable[[ClaimTable], ClaimTable | None],
        known: Version | None = None,
    ) -> tuple[ClaimTable, bool]:
        """Apply ``change`` to the claim table by compare-and-swap."""
        where = f"s3://{self.dest.bucket}/{self.key}"

        def apply(data: bytes | None) -> bytes | None:
            table = ClaimTable() if data is None else load(ClaimTable, data, where)
            new = change(table)
            return None if new is None else dump(new)

        # What this process last saw of the claims (its own claim's write, say): the
        # release after a commit starts from it, without a read.
        seen = self.ctx.seen
        done = swap(
            self.store,
            self.dest.bucket,
            self.key,
            apply,
            f"the claims at {self.dest.url}",
            CLAIM_ROUNDS,
            known=known if known is not None else seen.get(self.key),
        )
        if done.data is not None and done.etag:
            seen[self.key] = (done.data, done.etag)
        table = ClaimTable() if done.data is None else load(ClaimTable, done.data, where)
        return table, done.wrote

    def _live(self, table: ClaimTable, job_id: str) -> tuple[Claim, ...]:
        """Other jobs' claims, without those whose job is decided or gone."""
        records = self.ctx.records
        live = []
        for claim in table.claims:
            if claim.job_id == job_id:
                continue
            state = _state_of(records, claim.job_id)
            if state is None or state in states.FINAL:
                log.info(
                    "breaking the claim of job %s at %s: the job is %s",
                    claim.job_id,
                    self.dest.url,
                    state or "gone",
                )
                continue
            live.append(claim)
        return tuple(live)

    @staticmethod
    def _blocking(mine: Claim, others: Sequence[Claim]) -> tuple[Claim, tuple[str, ...]] | None:
        """The first claim excluding ours, with our directories it overlaps."""
        for other in others:
            shared = overlapping(mine.dirs, other.dirs)
            if shared and not compatible(mine.conflict_mode, other.conflict_mode):
                return other, shared
        return None

    def _wait(
        self, record: JobRecord, blocking: tuple[Claim, tuple[str, ...]], deadline: float
    ) -> None:
        holder, shared = blocking
        log.info(
            "job %s waits for job %s, which holds %s at %s",
            record.job_id,
            holder.job_id,
            describe_dirs(shared),
            self.dest.url,
        )
        pause = random.uniform(0.5, 1.5) * WAIT_POLL_SECONDS
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))

    def _conflict(
        self, record: JobRecord, mine: Claim, blocking: tuple[Claim, tuple[str, ...]]
    ) -> PartitionClaimConflict:
        holder, shared = blocking
        state = _state_of(self.ctx.records, holder.job_id) or "gone"
        advice = (
            _ADVICE.get(state, "let it finish")
            if isinstance(state, JobState)
            else ("let it finish")
        )
        waited = (
            f" after waiting {record.options.wait_timeout} s"
            if record.options.on_conflict == "wait"
            else ""
        )
        theirs = overlapping(holder.dirs, mine.dirs)
        return PartitionClaimConflict(
            f"job {record.job_id} ({mine.conflict_mode}) cannot claim "
            f"{describe_dirs(shared)} at {self.dest.url}{waited}: job {holder.job_id} "
            f"({holder.conflict_mode}, {state}, claimed {holder.since:%Y-%m-%d %H:%M:%S} UTC "
            f"on {holder.hostname}) holds {describe_dirs(theirs)}; {advice}. Nothing of job "
            f"{record.job_id} is visible: retry its commit later, set on_conflict=wait, or "
            "abort it",
            holder=holder.job_id,
            partitions=shared,
        )


def _state_of(records: JobRecords, job_id: str) -> JobState | str | None:
    """The job's state; None when it has no record; :data:`UNREADABLE` for a corrupt
    one, whose claim stands until the job is aborted (which replaces the record)."""
    try:
        return records.get(job_id).state
    except JobNotFoundError:
        return None
    except ManifestError:
        return UNREADABLE
