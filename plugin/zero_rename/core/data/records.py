"""Job records, and the context every step works in.

The job record (``_zero_rename/jobs/<job id>/job.json``) is the job's one
mutable object. It is created with If-None-Match and changed only by
compare-and-swap (If-Match on the ETag read), so two processes can never both
decide a job: one commit and one abort race, exactly one wins. Its state moves
only by an event of the state machine (:mod:`zero_rename.core.protocol.states`),
through :meth:`JobRecords.advance`.
"""

from __future__ import annotations

import builtins
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from zero_rename.core.data.layout import RECORD_NAME, Destination, check_job_id, check_job_ref
from zero_rename.core.data.model import JobRecord, StepStatus, StepTiming, dump, load, utcnow
from zero_rename.core.protocol import states
from zero_rename.core.s3.client import ObjectInfo, S3Store
from zero_rename.core.s3.profiles import StoreProfile
from zero_rename.core.s3.writes import create_once, swap
from zero_rename.errors import ConfigError, JobNotFoundError, ManifestError, ZeroRenameError

log = logging.getLogger(__name__)

RECORD_VERSION: int = JobRecord.model_fields["version"].default
# Records read at once when reading them all (a table may have thousands of jobs).
RECORD_THREADS = 16
# Jobs an ambiguous job id prefix's error names.
AMBIGUOUS_NAMED = 5
# How far a writer's clock may run ahead of the store's: S3 refuses a request
# signed more than 15 minutes off the server's time (RequestTimeTooSkewed).
CLOCK_SKEW = timedelta(minutes=15)


@dataclass(frozen=True)
class StrayRecord:
    """An object under ``jobs/`` that readers do not take for a job record, and why."""

    key: str
    reason: str


class JobRecords:
    """Read, create and compare-and-swap job records of one destination.

    It remembers the bytes and ETag it last read or wrote of each record, so that
    the next compare-and-swap sends its write at once, without reading first: a
    round trip less for each step of a job commit. A record changed meanwhile by
    another process makes that write lose (``If-Match``), and the swap reads.
    """

    def __init__(
        self,
        store: S3Store,
        dest: Destination,
        seen: dict[str, tuple[bytes, str]] | None = None,
    ) -> None:
        self.store = store
        self.dest = dest
        self._seen: dict[str, tuple[bytes, str]] = {} if seen is None else seen

    def read_raw(self, job_id: str) -> tuple[bytes, str]:
        """The record's bytes and ETag; raises JobNotFoundError."""
        key = self.dest.job(job_id).record_key
        found = self.store.get_object(self.dest.bucket, key)
        if found is None:
            raise JobNotFoundError(f"no job {job_id} at {self.dest.url}")
        self._seen[job_id] = found
        return found

    def parse(self, job_id: str, data: bytes) -> JobRecord:
        key = self.dest.job(job_id).record_key
        record = load(JobRecord, data, f"s3://{self.dest.bucket}/{key}")
        if record.job_id != job_id:
            raise ManifestError(f"job record at {key} names job {record.job_id}, not {job_id}")
        return record

    def read(self, job_id: str) -> tuple[JobRecord, str]:
        data, etag = self.read_raw(job_id)
        return self.parse(job_id, data), etag

    def get(self, job_id: str) -> JobRecord:
        return self.read(job_id)[0]

    def create(self, record: JobRecord) -> JobRecord:
        """Create the record; returns it, or the record already there (this job's,
        perhaps written by an earlier try whose response was lost)."""
        key = self.dest.job(record.job_id).record_key
        existing = create_once(self.store, self.dest.bucket, key, dump(record))
        return record if existing is None else self.parse(record.job_id, existing)

    def update(self, job_id: str, change: Callable[[JobRecord], JobRecord | None]) -> JobRecord:
        """Apply ``change`` by compare-and-swap (:func:`~zero_rename.core.s3.writes.swap`):
        it may raise, or return None for no change, and must be safe to call again
        on a newer record. It may not change the state: only :meth:`advance` does."""

        def keep_state(current: JobRecord) -> JobRecord | None:
            new = change(current)
            if new is not None and new.state != current.state:
                raise ZeroRenameError(f"job {job_id}: its state changes only by an event")
            return new

        return self._swap(job_id, keep_state)

    def advance(
        self,
        job_id: str,
        event: states.Event[states.JobState],
        changes: Callable[[JobRecord], dict[str, Any]] = lambda r: {},
    ) -> tuple[JobRecord, bool]:
        """Move the job by ``event`` (:mod:`zero_rename.core.protocol.states`), with
        ``changes(current)`` (step timings, the plan...) in the same write. Returns
        the record and whether this call moved it; a record in a state the event
        stays in is returned as it is.

        Raises:
            the event's refusal of the state found (JobDecidedError, AbortRefusedError...).
        """
        moved = False

        def move(current: JobRecord) -> JobRecord | None:
            nonlocal moved
            moved = event.applies(job_id, current.state)
            if not moved:
                return None
            return current.model_copy(update={**changes(current), "state": event.target})

        return self._swap(job_id, move), moved

    def _swap(self, job_id: str, change: Callable[[JobRecord], JobRecord | None]) -> JobRecord:
        result: list[JobRecord] = []

        def apply(data: bytes | None) -> bytes | None:
            if data is None:
                raise JobNotFoundError(f"no job {job_id} at {self.dest.url}")
            current = self.parse(job_id, data)
            new = change(current)
            if new is not None:
                # Written back in the current format, whatever version was read.
                new = new.model_copy(update={"updated": utcnow(), "version": RECORD_VERSION})
            result[:] = [new or current]
            return None if new is None else dump(new)

        def writer() -> S3Store:
            # The swap goes as the record's store profile says (the ETag's form).
            return self.store.with_profile(result[0].store_profile)

        key = self.dest.job(job_id).record_key
        done = swap(
            self.store,
            self.dest.bucket,
            key,
            apply,
            f"job record {job_id}",
            writer=writer,
            known=self._seen.get(job_id),
        )
        if done.data is not None and done.etag:
            self._seen[job_id] = (done.data, done.etag)
        else:
            self._seen.pop(job_id, None)
        return result[0]

    def list(self, advance: Callable[[int], None] = lambda n: None) -> list[JobRecord]:
        """Every job record under the destination, oldest first; ``advance`` counts
        the records read."""
        return sorted(self.read_all(advance=advance).values(), key=lambda r: r.created)

    def read_all(
        self,
        known: Mapping[str, JobRecord] | None = None,
        advance: Callable[[int], None] = lambda n: None,
    ) -> dict[str, JobRecord]:
        """Every job record under the destination, by job id, read in parallel (one
        GET each, after one listing per 1,000 jobs); with ``known``, a record whose
        state can no longer change is taken from there rather than read again.
        ``advance`` counts the records read (for progress: thousands take seconds)."""
        return {r.job_id: r for r in self._read(self._listed(), known, advance)}

    def read_newest(
        self,
        limit: int,
        when: Callable[[JobRecord], datetime],
        known: Mapping[str, JobRecord] | None = None,
    ) -> tuple[builtins.list[JobRecord], int]:
        """The ``limit`` records latest by ``when``, newest first, and how many
        records the destination holds.

        ``when`` must be a time the record's writer took before writing it (its
        creation, its commit): the store's LastModified of the record is then no
        earlier than ``when`` less :data:`CLOCK_SKEW`. So records are read in
        order of LastModified, newest first, and the reading stops once the next
        one's LastModified is too early for it to be among the newest: about
        ``limit`` GETs, plus those of records written within ``CLOCK_SKEW`` of the
        oldest one returned, after one listing per 1,000 jobs.
        """
        listed = sorted(self._listed(), key=_modified, reverse=True)
        found: builtins.list[JobRecord] = []
        start, batch = 0, limit
        while start < len(listed):
            found += self._read(listed[start : start + batch], known)
            start += batch
            batch = RECORD_THREADS
            if len(found) >= limit and start < len(listed):
                found.sort(key=when, reverse=True)
                following = listed[start].last_modified
                if following is not None and following + CLOCK_SKEW < when(found[limit - 1]):
                    break
        found.sort(key=when, reverse=True)
        return found[:limit], len(listed)

    def resolve(self, ref: str) -> str:
        """The job ``ref`` names: a whole job id as it is (nothing read); the first
        characters of one (:func:`~zero_rename.core.data.layout.check_job_ref`), the
        one job at the destination whose record's id starts with them, found by one
        listing of the records under that prefix (one LIST per 1,000 objects).

        Raises:
            ConfigError: ``ref`` is no job id nor the start of one, or it starts
                several jobs' ids (the first few named).
            JobNotFoundError: no job's id starts with it.
        """
        ref = check_job_ref(ref)
        if len(ref) == len(str(uuid.UUID(int=0))):
            return ref
        found = sorted(
            {
                job
                for o in self.store.list_objects(self.dest.bucket, self.dest.jobs_dir + ref)
                if (job := self.record_job(o.key)) is not None
            }
        )
        if not found:
            raise JobNotFoundError(f"no job whose id starts with {ref} at {self.dest.url}")
        if len(found) > 1:
            named = ", ".join(found[:AMBIGUOUS_NAMED])
            more = (
                f" and {len(found) - AMBIGUOUS_NAMED} more" if len(found) > AMBIGUOUS_NAMED else ""
            )
            raise ConfigError(
                f"job id {ref} is ambiguous at {self.dest.url}: {len(found)} jobs start with it "
                f"({named}{more}); give more of it"
            )
        return found[0]

    def record_job(self, key: str) -> str | None:
        """The job whose record ``key`` is: ``jobs/<job id>/job.json`` with a job id
        in canonical form; None for any other key (a copy under ``jobs/backup/``,
        a task manifest named ``job.json``)."""
        name = key[len(self.dest.jobs_dir) :] if key.startswith(self.dest.jobs_dir) else ""
        job_id, sep, rest = name.partition("/")
        if not sep or rest != RECORD_NAME:
            return None
        try:
            return check_job_id(job_id)
        except ConfigError:
            return None

    def _outside_jobs(self, key: str) -> bool:
        """Whether ``key`` is under no job's directory (``jobs/<job id>/``), where a
        task manifest may be named ``job.json`` too."""
        first = key[len(self.dest.jobs_dir) :].split("/", 1)[0]
        try:
            check_job_id(first)
        except ConfigError:
            return True
        return False

    def _listed(self) -> builtins.list[ObjectInfo]:
        """The destination's job records as listed (one LIST per 1,000 jobs): those
        at a job's own key only (:meth:`record_job`)."""
        return [
            o
            for o in self.store.list_objects(self.dest.bucket, self.dest.jobs_dir)
            if self.record_job(o.key) is not None
        ]

    def _read(
        self,
        listed: Sequence[ObjectInfo],
        known: Mapping[str, JobRecord] | None,
        advance: Callable[[int], None] = lambda n: None,
        strays: builtins.list[StrayRecord] | None = None,
    ) -> builtins.list[JobRecord]:
        """The listed records, RECORD_THREADS at a time; a final one from ``known``.
        A record is the job its key names: one whose content names another job is
        left out, as :meth:`parse` refuses it (and added to ``strays``)."""
        found: builtins.list[JobRecord] = []
        wanted = []
        for obj in listed:
            job_id = self.record_job(obj.key) or ""
            old = (known or {}).get(job_id)
            if old is not None and old.state not in states.LIVE:
                found.append(old)
                advance(1)
            else:
                wanted.append(obj.key)

        def read(key: str) -> JobRecord | None:
            body = self.store.get_object(self.dest.bucket, key)
            if body is None:  # deleted since the listing
                return None
            record = load(JobRecord, body[0], f"s3://{self.dest.bucket}/{key}")
            if record.job_id == self.record_job(key):
                return record
            log.info(
                "s3://%s/%s names job %s: not read as a job", self.dest.bucket, key, record.job_id
            )
            if strays is not None:
                strays.append(StrayRecord(key, f"a job record naming job {record.job_id}"))
            return None

        with ThreadPoolExecutor(max(1, min(RECORD_THREADS, len(wanted)))) as pool:
            for record in pool.map(read, wanted):
                if record is not None:
                    found.append(record)
                advance(1)
        return found

    def strays(self, advance: Callable[[int], None] = lambda n: None) -> builtins.list[StrayRecord]:
        """What readers leave out under the destination's ``jobs/``: a ``job.json``
        at a key that names no job (a backup's copy), and a record at a job's key
        whose content names another job; each read (one GET a record)."""
        listed = list(self.store.list_objects(self.dest.bucket, self.dest.jobs_dir))
        found = [
            StrayRecord(o.key, "a job.json at a key that names no job")
            for o in listed
            if o.key.endswith("/" + RECORD_NAME) and self._outside_jobs(o.key)
        ]
        self._read([o for o in listed if self.record_job(o.key) is not None], None, advance, found)
        return sorted(found, key=lambda s: s.key)


def _modified(obj: ObjectInfo) -> datetime:
    """When the store last wrote the object; an object listed without a time first."""
    return obj.last_modified or datetime.max.replace(tzinfo=UTC)


def step_started(record: JobRecord, step: str) -> dict[str, StepTiming]:
    return {**record.steps, step: StepTiming(started=utcnow())}


def step_finished(
    record: JobRecord, step: str, ok: bool = True, detail: str = "", at: datetime | None = None
) -> dict[str, StepTiming]:
    """The record's steps with ``step`` finished ``at`` (default: now)."""
    finished = at or utcnow()
    started = record.steps[step].started if step in record.steps else finished
    return {
        **record.steps,
        step: StepTiming(
            started=started,
            finished=finished,
            status="succeeded" if ok else "failed",
            detail=detail,
        ),
    }


def step_failed(
    record: JobRecord, step: str, error: str, at: datetime | None = None
) -> dict[str, StepTiming]:
    """The record's steps with ``step`` failed ``at`` (default: now) with ``error``,
    one line (:func:`~zero_rename.core.s3.redact.error_line`); its detail is kept."""
    finished = at or utcnow()
    current = record.steps.get(step)
    return {
        **record.steps,
        step: StepTiming(
            started=current.started if current else finished,
            finished=finished,
            status="failed",
            detail=current.detail if current else "",
            error=error,
        ),
    }


def running_ended(
    steps: Mapping[str, StepTiming], status: StepStatus, keep: Sequence[str] = ()
) -> dict[str, StepTiming]:
    """``steps`` with every one still running (but those in ``keep``) ended now as
    ``status``: what a job's abort or rollback does to the steps it stopped, so
    that none reads as running for ever."""
    now = utcnow()
    return {
        name: t.model_copy(update={"finished": now, "status": status})
        if t.status == "running" and name not in keep
        else t
        for name, t in steps.items()
    }


@dataclass(frozen=True)
class JobContext:
    """What a step works on: the store, the destination, and the destination's job
    records. Passed whole instead of a store and a destination side by side."""

    store: S3Store
    dest: Destination

    # What the records last saw of each job (by job id) and the claims of their
    # objects (by key), shared by the contexts derived from this one.
    seen: dict[str, tuple[bytes, str]] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def records(self) -> JobRecords:
        return JobRecords(self.store, self.dest, self.seen)

    @property
    def bucket(self) -> str:
        return self.dest.bucket

    def profiled(self, profile: StoreProfile | None) -> JobContext:
        """The context whose store behaves as the job's store profile says."""
        return JobContext(self.store.with_profile(profile), self.dest, self.seen)
