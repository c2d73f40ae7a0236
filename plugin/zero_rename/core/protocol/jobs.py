"""Job setup, and what table readers see under a destination.

The records themselves (read, create, compare-and-swap, the state machine's
events) are :mod:`zero_rename.core.data.records`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

from zero_rename.core.data.layout import is_visible, new_job_id
from zero_rename.core.data.model import JobRecord, StepTiming, utcnow
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import states
from zero_rename.core.s3.client import ObjectInfo
from zero_rename.core.s3.probes import resolve_profile
from zero_rename.core.s3.profiles import AUTO
from zero_rename.core.s3.rounds import one_round
from zero_rename.core.tables.registry import open_format
from zero_rename.errors import (
    ConfigError,
    ConflictError,
    DestinationError,
)

log = logging.getLogger(__name__)


def check_destination(ctx: JobContext) -> None:
    """The bucket exists and is ours, and the destination is not a file: both
    HEADs in one round trip, the bucket's answer first (a HEAD of a key in a
    missing bucket says only 404)."""
    store, dest = ctx.store, ctx.dest
    found, _ = one_round(
        lambda: store.head_object(dest.bucket, dest.prefix),
        lambda: store.check_bucket(dest.bucket),
    )
    if found is not None:
        raise DestinationError(f"destination {dest.url} is a file, not a directory")


def visible_objects(ctx: JobContext, relative_dir: str = "") -> Iterator[ObjectInfo]:
    """Objects under ``dest/relative_dir`` that table readers would see, streamed."""
    store, dest = ctx.store, ctx.dest
    return (
        o
        for o in store.list_objects(dest.bucket, dest.dir + relative_dir)
        if is_visible(o.key[len(dest.dir) :])
    )


def visible_files(ctx: JobContext, relative_dir: str = "") -> list[str]:
    """Keys under ``dest/relative_dir`` that table readers would see."""
    return [o.key for o in visible_objects(ctx, relative_dir)]


def setup_job(
    ctx: JobContext,
    options: JobOptions,
    job_id: str | None = None,
    expected_tasks: int | None = None,
    profile: str = AUTO,
    origin: Mapping[str, str] | None = None,
    table_schema: str = "",
) -> JobRecord:
    """Job setup: check the destination and the store, and create the job record.

    Running it again with the same job id and options returns the existing
    record, so an orchestrator may retry it. ``profile`` names the store's
    family, or ``auto`` to probe it (once per process and bucket); the job
    record keeps the result for every later step. ``origin`` names who set the
    job up (say an Airflow DAG, run and task), for tools to link back to. With
    a ``table_format``, its catalog (or log) is checked to be reachable and an
    existing table to fit ``table_schema`` (the files' Arrow schema, base64;
    empty: the columns are checked at the first commit) and the partition
    columns, before anything is written.

    Raises:
        ConfigError: a bad job id or expected task count; the job id exists with
            other options, or is already decided.
        DestinationError: missing bucket, refused credentials, a file at the destination.
        StoreCapabilityError: the store lacks what the protocol needs (conditional writes).
        ConflictError: conflict mode ``fail`` without partitions, and files already there.
    """
    store, dest = ctx.store, ctx.dest
    job_id = dest.job(job_id or new_job_id()).job_id
    _check_expected_tasks(expected_tasks)
    # The destination's checks beside the read of the store's profile record: one
    # round trip where there were three, and no probe before they pass.
    store_profile = resolve_profile(
        store, dest, profile, checks=lambda: check_destination(ctx)
    ).require_safe(dest.url)
    table = open_format(ctx, options)
    table_base = table.check(table_schema, options.partition_columns) if table else ""
    if options.conflict_mode == "fail" and not options.partition_columns:
        existing = visible_files(ctx)
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
        table_base=table_base,
        steps={"setup": StepTiming(started=now, finished=now, status="succeeded")},
    )
    found = ctx.records.create(record)
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
