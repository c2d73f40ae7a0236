"""Job records and job setup.

The job record (``_zero_rename/jobs/<job id>/job.json``) is the job's one
mutable object. It is created with If-None-Match and advanced only by
compare-and-swap (If-Match on the ETag read), so two processes can never both
decide a job: one commit and one abort race, exactly one wins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zero_rename.core.data.layout import Destination, is_visible, new_job_id
from zero_rename.core.data.model import JobRecord, StepTiming, dump, load, utcnow
from zero_rename.core.data.options import JobOptions
from zero_rename.core.protocol import states
from zero_rename.core.s3.client import ObjectInfo, S3Store
from zero_rename.core.s3.probes import resolve_profile
from zero_rename.core.s3.profiles import AUTO
from zero_rename.core.s3.writes import create_once, swap
from zero_rename.errors import (
    ConfigError,
    ConflictError,
    DestinationError,
    JobNotFoundError,
    ManifestError,
    ZeroRenameError,
)

log = logging.getLogger(__name__)

RECORD_VERSION: int = JobRecord.model_fields["version"].default
# Records read at once when reading them all (a table may have thousands of jobs).
RECORD_THREADS = 16


class JobRecords:
    """Read, create and compare-and-swap job records of one destination."""

    def __init__(self, store: S3Store, dest: Destination) -> None:
        self.store = store
        self.dest = dest

    def read_raw(self, job_id: str) -> tuple[bytes, str]:
        """The record's bytes and ETag; raises JobNotFoundError."""
        key = self.dest.job(job_id).record_key
        found = self.store.get_object(self.dest.bucket, key)
        if found is None:
            raise JobNotFoundError(f"no job {job_id} at {self.dest.url}")
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
        event: states.Event,
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
        swap(self.store, self.dest.bucket, key, apply, f"job record {job_id}", writer=writer)
        return result[0]

    def list(self) -> list[JobRecord]:
        """Every job record under the destination, oldest first."""
        return sorted(self.read_all().values(), key=lambda r: r.created)

    def read_all(self, known: Mapping[str, JobRecord] | None = None) -> dict[str, JobRecord]:
        """Every job record under the destination, by job id, read in parallel (one
        GET each, after one listing per 1,000 jobs); with ``known``, a record whose
        state can no longer change is taken from there rather than read again."""
        keys = [
            o.key
            for o in self.store.list_objects(self.dest.bucket, self.dest.jobs_dir)
            if o.key.endswith("/job.json")
        ]
        found: dict[str, JobRecord] = {}
        wanted = []
        for key in keys:
            job_id = key[len(self.dest.jobs_dir) :].split("/", 1)[0]
            old = (known or {}).get(job_id)
            if old is not None and old.state in states.FINAL:
                found[job_id] = old
            else:
                wanted.append(key)

        def read(key: str) -> JobRecord | None:
            body = self.store.get_object(self.dest.bucket, key)
            return (
                None if body is None else load(JobRecord, body[0], f"s3://{self.dest.bucket}/{key}")
            )

        with ThreadPoolExecutor(max(1, min(RECORD_THREADS, len(wanted)))) as pool:
            for record in pool.map(read, wanted):
                if record is not None:  # deleted since the listing
                    found[record.job_id] = record
        return found


def step_started(record: JobRecord, step: str) -> dict[str, StepTiming]:
    return {**record.steps, step: StepTiming(started=utcnow())}


def step_finished(
    record: JobRecord, step: str, ok: bool = True, detail: str = ""
) -> dict[str, StepTiming]:
    started = record.steps[step].started if step in record.steps else utcnow()
    return {
        **record.steps,
        step: StepTiming(
            started=started,
            finished=utcnow(),
            status="succeeded" if ok else "failed",
            detail=detail,
        ),
    }


def check_destination(store: S3Store, dest: Destination) -> None:
    """The bucket exists and is ours, and the destination is not a file."""
    store.check_bucket(dest.bucket)
    if store.head_object(dest.bucket, dest.prefix) is not None:
        raise DestinationError(f"destination {dest.url} is a file, not a directory")


def visible_objects(
    store: S3Store, dest: Destination, relative_dir: str = ""
) -> Iterator[ObjectInfo]:
    """Objects under ``dest/relative_dir`` that table readers would see, streamed."""
    return (
        o
        for o in store.list_objects(dest.bucket, dest.dir + relative_dir)
        if is_visible(o.key[len(dest.dir) :])
    )


def visible_files(store: S3Store, dest: Destination, relative_dir: str = "") -> list[str]:
    """Keys under ``dest/relative_dir`` that table readers would see."""
    return [o.key for o in visible_objects(store, dest, relative_dir)]


def setup_job(
    store: S3Store,
    dest: Destination,
    options: JobOptions,
    job_id: str | None = None,
    expected_tasks: int | None = None,
    profile: str = AUTO,
    origin: Mapping[str, str] | None = None,
) -> JobRecord:
    """Job setup: check the destination and the store, and create the job record.

    Running it again with the same job id and options returns the existing
    record, so an orchestrator may retry it. ``profile`` names the store's
    family, or ``auto`` to probe it (once per process and bucket); the job
    record keeps the result for every later step. ``origin`` names who set the
    job up (say an Airflow DAG, run and task), for tools to link back to.

    Raises:
        ConfigError: a bad job id or expected task count; the job id exists with
            other options, or is already decided.
        DestinationError: missing bucket, refused credentials, a file at the destination.
        StoreCapabilityError: the store lacks what the protocol needs (conditional writes).
        ConflictError: conflict mode ``fail`` without partitions, and files already there.
    """
    job_id = dest.job(job_id or new_job_id()).job_id
    _check_expected_tasks(expected_tasks)
    check_destination(store, dest)
    store_profile = resolve_profile(store, dest, profile).require_safe(dest.url)
    if options.conflict_mode == "fail" and not options.partition_columns:
        existing = visible_files(store, dest)
        if existing:
            raise ConflictError(
                f"destination {dest.url} already has {len(existing)} file(s) (first: "
                f"{existing[0]}) and conflict mode is 'fail'; use 'append' or 'replace', "
                "or write elsewhere"
            )
    now = utcnow()
    record = JobRecord(
        job_id=job_id,
        destination=dest.url,
        options=options,
        expected_tasks=expected_tasks,
        store_profile=store_profile,
        origin=dict(origin or {}),
        steps={"setup": StepTiming(started=now, finished=now, status="succeeded")},
    )
    found = JobRecords(store, dest).create(record)
    if found is not record:
        if found.options != options or found.state != states.SETUP:
            raise ConfigError(
                f"job {job_id} already exists at {dest.url} (state {found.state}) "
                "with other options; use a new job id"
            )
        log.info("job %s already set up at %s", job_id, dest.url)
        return found
    log.info(
        "set up job %s at %s (%s committer, conflict mode %s)",
        job_id,
        dest.url,
        options.mode_name,
        options.conflict_mode,
    )
    return record


def _check_expected_tasks(expected_tasks: object) -> None:
    if expected_tasks is None:
        return
    if (
        isinstance(expected_tasks, bool)
        or not isinstance(expected_tasks, int)
        or expected_tasks < 0
    ):
        raise ConfigError(f"expected_tasks must be an integer >= 0 or None, got {expected_tasks!r}")
