"""A job's task manifests: from the engine, a stage manifest, or published ones.

A job may have a hundred thousand task manifests, so they are streamed, never
held at once: :class:`ManifestSource` yields them one by one and names them
with an identity (``manifests_id``) that a later step can compare to tell
whether the same manifests are still what the job would commit.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from itertools import islice
from typing import TypeVar

from zero_rename.core.data import shards
from zero_rename.core.data.model import StageManifest, TaskManifest, dump, load
from zero_rename.core.data.records import JobContext
from zero_rename.core.data.shards import (
    body_digest,
    check_digest,
    read_shard,
    shard_key,
    write_shard,
)
from zero_rename.core.s3.client import ObjectInfo
from zero_rename.core.s3.writes import create_once
from zero_rename.errors import ManifestError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class StageCounts:
    """What a stage manifest holds, from its header alone."""

    tasks: int
    files: int
    bytes: int
    rows: int


class ManifestSource:
    """The task manifests a job commit would take, streamed once per use."""

    def __init__(
        self,
        identity: str,
        count: int,
        produce: Callable[[], Iterator[TaskManifest]],
        confirm: Callable[[], bool] | None = None,
    ) -> None:
        self.identity = identity
        self.count = count
        self._produce = produce
        # Published manifests listed before the job was sealed: whether a listing now
        # finds the same ones (None: nothing to confirm).
        self.confirm = confirm

    def __iter__(self) -> Iterator[TaskManifest]:
        return self._produce()

    def read_now(self) -> ManifestSource:
        """The same manifests, read now and held in memory: for the few manifests of
        a small job, read beside the seal."""
        held = list(self._produce())
        return ManifestSource(self.identity, self.count, lambda: iter(held), self.confirm)

    @classmethod
    def given(cls, manifests: Sequence[TaskManifest]) -> ManifestSource:
        """Manifests an engine handed over in memory (Spark's commit messages)."""
        return cls(
            "given:" + attempts_digest(m.task_attempt_id for m in manifests),
            len(manifests),
            lambda: iter(manifests),
        )


def attempts_digest(attempt_ids: Iterable[str]) -> str:
    joined = "\n".join(sorted(attempt_ids)).encode("utf-8")
    return hashlib.sha256(joined).hexdigest()[:32]


def source(
    ctx: JobContext, job_id: str, threads: int = 16, stage_digest: str = ""
) -> ManifestSource:
    """The stage manifest's choice if there is one, else the published task manifests.
    ``stage_digest``: the stage header's digest as the job record keeps it."""
    return source_of(ctx, job_id, read_stage_header(ctx, job_id, stage_digest), threads)


def source_of(
    ctx: JobContext, job_id: str, stage: StageManifest | None, threads: int = 16
) -> ManifestSource:
    """The manifests of ``stage`` (its header, read already), or, without one, the
    published task manifests."""
    if stage is not None:
        return _stage_source(ctx, stage)
    return _published_source(ctx, job_id, threads)


# -- stage manifests -----------------------------------------------------------------
def save_stage_manifest(
    ctx: JobContext,
    job_id: str,
    manifests: Sequence[TaskManifest],
    engine: str = "",
) -> tuple[str, str]:
    """Save the manifests an engine chose, for a commit run later or elsewhere;
    returns where the header is and its digest (for the job record to keep).

    Create-only: an engine's retry that chose the same attempts succeeds; a
    different choice for the same job is refused, since only one can be true.
    The manifests go in shards named by the choice's digest, then the header,
    which keeps each shard's digest.
    """
    store, dest = ctx.store, ctx.dest
    ordered = sorted(manifests, key=lambda m: m.task_id)
    digest = attempts_digest(m.task_attempt_id for m in ordered)
    layout = dest.job(job_id)
    groups = _groups(ordered)
    shard_digests = tuple(
        write_shard(
            store,
            dest.bucket,
            shard_key(layout.stage_shards_dir(digest), "manifests", number),
            group,
        )
        for number, group in enumerate(groups)
    )
    uploads = [u for m in ordered for u in m.uploads]
    header = StageManifest(
        job_id=job_id,
        engine=engine,
        tasks=len(ordered),
        files=len(uploads),
        bytes=sum(u.bytes for u in uploads),
        rows=sum(u.rows or 0 for u in uploads),
        shards=len(groups),
        attempts_digest=digest,
        shard_digests=shard_digests,
    )
    key = layout.stage_manifest_key
    body = dump(header)
    existing = create_once(store, dest.bucket, key, body)
    if existing is not None:
        found = load(StageManifest, existing, f"s3://{dest.bucket}/{key}")
        if _digest_of(found) != digest:
            raise ManifestError(
                f"job {job_id} already has a stage manifest naming other "
                "task attempts; run a new job"
            )
    log.info(
        "saved stage manifest of job %s: %d task(s) in %d shard(s)",
        job_id,
        len(ordered),
        len(groups),
    )
    return f"s3://{dest.bucket}/{key}", body_digest(existing or body)


def _groups(manifests: Sequence[TaskManifest]) -> list[list[TaskManifest]]:
    """Consecutive manifests, at most SHARD_SIZE uploads a group (a bigger manifest
    alone); at least one group, so an empty stage still has its shard."""
    groups: list[list[TaskManifest]] = [[]]
    size = 0
    for manifest in manifests:
        if groups[-1] and size + len(manifest.uploads) > shards.SHARD_SIZE:
            groups.append([])
            size = 0
        groups[-1].append(manifest)
        size += len(manifest.uploads)
    return groups


def _digest_of(stage: StageManifest) -> str:
    if stage.version == 1:
        return attempts_digest(m.task_attempt_id for m in stage.manifests)
    return stage.attempts_digest


def read_stage_header(
    ctx: JobContext, job_id: str, expected_digest: str = ""
) -> StageManifest | None:
    return stage_from_bytes(ctx, job_id, read_stage_bytes(ctx, job_id), expected_digest)


def read_stage_bytes(ctx: JobContext, job_id: str) -> bytes | None:
    """The stage manifest's header as stored; None before an engine saved one."""
    found = ctx.store.get_object(ctx.dest.bucket, ctx.dest.job(job_id).stage_manifest_key)
    return None if found is None else found[0]


def stage_from_bytes(
    ctx: JobContext, job_id: str, data: bytes | None, expected_digest: str = ""
) -> StageManifest | None:
    """The header from its bytes, checked against the digest the record keeps."""
    if data is None:
        return None
    dest = ctx.dest
    key = dest.job(job_id).stage_manifest_key
    check_digest(data, expected_digest, f"stage manifest s3://{dest.bucket}/{key}")
    stage = load(StageManifest, data, f"s3://{dest.bucket}/{key}")
    if stage.job_id != job_id:
        raise ManifestError(f"stage manifest {key} belongs to job {stage.job_id}, not {job_id}")
    return stage


def stage_counts(ctx: JobContext, job_id: str) -> StageCounts | None:
    """Tasks, files, bytes and rows of the job's stage manifest; None before it exists."""
    stage = read_stage_header(ctx, job_id)
    if stage is None:
        return None
    if stage.version == 1:
        uploads = [u for m in stage.manifests for u in m.uploads]
        return StageCounts(
            len(stage.manifests),
            len(uploads),
            sum(u.bytes for u in uploads),
            sum(u.rows or 0 for u in uploads),
        )
    return StageCounts(stage.tasks, stage.files, stage.bytes, stage.rows)


def _stage_source(ctx: JobContext, stage: StageManifest) -> ManifestSource:
    store, dest = ctx.store, ctx.dest
    identity = "stage:" + _digest_of(stage)
    if stage.version == 1:
        return ManifestSource(identity, len(stage.manifests), lambda: iter(stage.manifests))
    prefix = dest.job(stage.job_id).stage_shards_dir(stage.attempts_digest)

    digests = stage.shard_digests

    def produce() -> Iterator[TaskManifest]:
        for number in range(stage.shards):
            yield from read_shard(
                store,
                dest.bucket,
                shard_key(prefix, "manifests", number),
                TaskManifest,
                digests[number] if number < len(digests) else "",
            )

    return ManifestSource(identity, stage.tasks, produce)


# -- published manifests -------------------------------------------------------------
# Task manifests listed and read before the job is sealed, beside the seal, when the
# listing finds at most this many; a listing after the seal confirms them.
EARLY_MANIFESTS = 64


class Listing:
    """The published task manifests' keys and ETags, sorted, kept compressed
    (:class:`~zero_rename.core.data.shards.StringRuns`): a million-file job has a
    hundred thousand of them, some 27 MB as Python strings and tuples, held from
    the commit's first round trip to its end. ``identity`` names the listing."""

    def __init__(self, found: Iterable[tuple[str, str]]) -> None:
        # A key and its ETag as one string, split by NUL, which neither holds (a
        # listing's XML cannot carry it): sorted as the (key, ETag) pairs are.
        self._runs = shards.StringRuns(sort=True)
        for key, etag in found:
            self._runs.add(f"{key}\0{etag}")
        hashed = hashlib.sha256()
        for number, line in enumerate(self._runs.merged()):
            hashed.update((b"\n" if number else b"") + line.replace("\0", " ", 1).encode("utf-8"))
        self.identity = hashed.hexdigest()[:32]

    def __len__(self) -> int:
        return len(self._runs)

    def keys(self) -> Iterator[str]:
        for line in self._runs.merged():
            yield line.split("\0", 1)[0]

    def same(self, other: Listing) -> bool:
        """Whether both list the same manifests, by the same bodies."""
        return len(self) == len(other) and self.identity == other.identity


def list_published(ctx: JobContext, job_id: str) -> Listing:
    """The published task manifests' keys and ETags, sorted."""
    return Listing((o.key, o.etag) for o in _published(ctx, job_id))


def _published_source(ctx: JobContext, job_id: str, threads: int) -> ManifestSource:
    return published_source(ctx, job_id, list_published(ctx, job_id), threads)


def published_source(
    ctx: JobContext, job_id: str, listed: Listing, threads: int, confirm: bool = False
) -> ManifestSource:
    """Manifests published by first-attempt-wins task commits; the listing (keys and
    ETags, no bodies) is the identity. ``confirm``: the listing was taken before the
    job was sealed, so the source confirms it by listing again."""
    store, dest = ctx.store, ctx.dest

    def read(key: str) -> TaskManifest:
        found = store.get_object(dest.bucket, key)
        if found is None:
            raise ManifestError(f"task manifest {key} vanished while loading")
        return load(TaskManifest, found[0], f"s3://{dest.bucket}/{key}")

    return ManifestSource(
        "published:" + listed.identity,
        len(listed),
        lambda: bounded_map(read, listed.keys(), threads),
        (lambda: list_published(ctx, job_id).same(listed)) if confirm else None,
    )


def _published(ctx: JobContext, job_id: str) -> Iterator[ObjectInfo]:
    store, dest = ctx.store, ctx.dest
    return (
        o
        for o in store.list_objects(dest.bucket, dest.job(job_id).tasks_dir)
        if o.key.endswith(".json")
    )


def published_count(ctx: JobContext, job_id: str) -> int:
    """Task manifests published so far (one listing); they are removed once the job
    is decided."""
    return sum(1 for _ in _published(ctx, job_id))


def bounded_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[R]:
    """``fn`` over ``items`` on ``threads`` threads, results as they finish, at most
    twice ``threads`` in flight: memory stays bounded however many items (taken
    from ``items`` as they are needed)."""
    todo = iter(items)
    # The pool starts a thread per item sent while none is idle, up to ``threads``.
    with ThreadPoolExecutor(max(1, threads)) as pool:
        pending = {pool.submit(fn, item) for item in islice(todo, max(1, threads) * 2)}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                pending |= {pool.submit(fn, item) for item in islice(todo, len(done))}
                for future in done:
                    yield future.result()
        finally:
            for future in pending:
                future.cancel()


def load_manifests(ctx: JobContext, job_id: str, threads: int = 16) -> list[TaskManifest]:
    """Every task manifest of the job, in memory: for small jobs and tests; the job
    commit streams them instead."""
    return list(source(ctx, job_id, threads))


def load_stage_manifest(ctx: JobContext, job_id: str) -> list[TaskManifest] | None:
    """The stage manifest's task manifests, in memory; None before it exists."""
    stage = read_stage_header(ctx, job_id)
    return None if stage is None else list(_stage_source(ctx, stage))
