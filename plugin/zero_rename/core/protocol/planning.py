"""The commit plan, built in one pass over the task manifests, in bounded memory.

Manifests stream past once: each is validated and its uploads and attempt go
into the plan's shards as they come. Then, across the job: keys written twice,
the expected tasks, uploads still pending (one listing per 1,000), the
partition claim, and conflict resolution under it (files to replace, streamed
into shards too). The plan's header, written last and create-only, is what
the job record's point of no return names. Nothing here is visible to readers.

A plan can be prepared before the job commit (Airflow's validate and
resolve-conflicts steps): the commit reuses it when the manifests it would
take are still the ones the plan was made from (``manifests_id``), checking
again, by listing, that every planned upload is still pending.

Every object of a plan is checked against the digest of what was written: the
shards against the header's ``shard_digests``, the header against the digest
the job record keeps (``plan_digest``, ``prepared_plan_digest``). A plan
changed in S3 after it was written (a shard naming another table's upload,
say) is refused before the point of no return, never committed.
"""

from __future__ import annotations

import logging
import uuid
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import islice
from types import MappingProxyType

from zero_rename.core.data import shards
from zero_rename.core.data.manifests import ManifestSource
from zero_rename.core.data.model import (
    AttemptId,
    CommitPlan,
    JobRecord,
    PendingUpload,
    PlannedUpload,
    ReplacedObject,
    dump,
    load,
    utcnow,
)
from zero_rename.core.data.records import JobContext
from zero_rename.core.data.shards import (
    body_digest,
    check_digest,
    create_shard,
    encode,
    encode_line,
    encode_lines,
    read_shard,
    read_shard_body,
    shard_key,
)
from zero_rename.core.protocol import states
from zero_rename.core.protocol.claims import Claims
from zero_rename.core.protocol.conflicts import resolve_conflicts, target_dirs
from zero_rename.core.protocol.validate import (
    Expected,
    Validator,
    check_pending,
    mark_pending,
    upload_digest,
)
from zero_rename.core.s3.client import S3Store
from zero_rename.core.s3.stats import RequestStats
from zero_rename.core.s3.writes import Version, create_once
from zero_rename.errors import ManifestError

log = logging.getLogger(__name__)


@dataclass
class _Shards:
    """Items buffered until a shard is full, then written create-only. Buffered as
    their lines of the shard: a parsed upload is some 1.8 KiB of Python objects,
    its line a few hundred bytes, and the task manifest it came from is let go."""

    store: S3Store
    bucket: str
    prefix: str
    name: str
    buffer: list[bytes] = field(default_factory=list)
    written: int = 0
    count: int = 0
    digests: list[str] = field(default_factory=list)

    def add(self, item: PendingUpload | ReplacedObject | AttemptId) -> None:
        self.buffer.append(encode_line(item))
        self.count += 1
        if len(self.buffer) >= shards.SHARD_SIZE:
            self.flush()

    def flush(self) -> None:
        self.flush_later()()

    def flush_later(self) -> Callable[[], None]:
        """The buffered shard's bytes and digest now (for a header written beside
        it); its write, to send."""
        if not self.buffer:
            return _no_write
        key = shard_key(self.prefix, self.name, self.written)
        body = encode_lines(self.buffer)
        self.digests.append(body_digest(body))
        if self.name == "uploads":
            _remember(self.bucket, key, self.digests[-1], body)
        self.written += 1
        self.buffer = []
        return lambda: create_shard(self.store, self.bucket, key, body)


def _no_write() -> None:
    """Nothing buffered: no shard to write."""


def shard_digest(plan: CommitPlan, name: str, number: int) -> str:
    """The digest the plan's header keeps for one of its shards ("" for plans
    written before digests were kept)."""
    digests = plan.shard_digests.get(name, ())
    if plan.version >= 3 and number >= len(digests):
        raise ManifestError(f"plan {plan.plan_id} of job {plan.job_id}: no {name} shard {number}")
    return digests[number] if number < len(digests) else ""


# Upload shards the running commit call wrote itself (a few, each at most
# SHARD_SIZE items): it reads them back at once, without a request. Scoped to one
# call, so that a plan written by an earlier step (another process, in Airflow) is
# always read from S3 and checked against its digest there. Kept as the bytes
# written (gzipped JSON lines, about 1 MB a shard), decoded when read back: as
# parsed uploads, four shards held 40,000 of them, some 70 MB.
_RECENT_SHARDS = 4
_recent: ContextVar[OrderedDict[tuple[str, str, str], bytes] | None] = ContextVar(
    "zero_rename_recent_shards", default=None
)


@contextmanager
def recalling() -> Iterator[None]:
    """Within this block, upload shards written here are read back from memory."""
    token = _recent.set(OrderedDict())
    try:
        yield
    finally:
        _recent.reset(token)


def _remember(bucket: str, key: str, digest: str, body: bytes) -> None:
    recent = _recent.get()
    if recent is not None:
        recent[(bucket, key, digest)] = body
        while len(recent) > _RECENT_SHARDS:
            recent.popitem(last=False)


def _recalled(bucket: str, key: str, digest: str) -> list[PlannedUpload] | None:
    """A shard this call wrote, by its digest (so never other bytes than those)."""
    recent = _recent.get()
    if not digest or recent is None:
        return None
    found = recent.get((bucket, key, digest))
    return planned(found, f"s3://{bucket}/{key}") if found else None


def planned(body: bytes, where: str) -> list[PlannedUpload]:
    """A shard of the plan's uploads from its bytes: every line validated as the
    :class:`PendingUpload` it was written from (a shard with a line that is not
    one is refused whole, with a ManifestError naming the line), each kept light,
    the uploads of one partition sharing one read-only mapping of it."""
    partitions: dict[tuple[tuple[str, str | None], ...], Mapping[str, str | None]] = {}
    uploads = []
    for upload in shards.decode_lines(PendingUpload, body, where):
        values = tuple(upload.partition.items())
        partition = partitions.get(values)
        if partition is None:
            partition = partitions[values] = MappingProxyType(dict(values))
        uploads.append(PlannedUpload.of(upload, partition))
    return uploads


def upload_shards(ctx: JobContext, plan: CommitPlan) -> Iterator[tuple[int, list[PlannedUpload]]]:
    """The plan's uploads, a shard at a time. Each shard's list is emptied before the
    next is read (and once the last is done), so that two shards of uploads are
    never held at once: a caller keeps what it needs of a shard by copying it."""
    for number in range(plan.upload_shards):
        uploads = upload_shard(ctx, plan, number)
        yield number, uploads
        uploads.clear()


def upload_shard(ctx: JobContext, plan: CommitPlan, number: int) -> list[PlannedUpload]:
    """One shard of the plan's uploads: from memory where this call wrote it, else read."""
    store, dest = ctx.store, ctx.dest
    key = shard_key(plan.shards_prefix, "uploads", number)
    digest = shard_digest(plan, "uploads", number)
    recalled = _recalled(dest.bucket, key, digest)
    if recalled is not None:
        return recalled
    return read_planned(store, dest.bucket, key, digest)


def read_planned(store: S3Store, bucket: str, key: str, digest: str = "") -> list[PlannedUpload]:
    """A shard of a plan's uploads read from the store (checked against ``digest``
    where given), light (:func:`planned`)."""
    return planned(read_shard_body(store, bucket, key, digest), f"s3://{bucket}/{key}")


def planned_uploads(ctx: JobContext, plan: CommitPlan) -> Iterator[PlannedUpload]:
    for _, uploads in upload_shards(ctx, plan):
        yield from uploads


class ManifestsChanged(Exception):
    """The task manifests listed before the job was sealed are not all it has: a
    listing after the seal found others (the commit plans again from that one)."""


def prepare(
    ctx: JobContext,
    record: JobRecord,
    manifests: ManifestSource,
    expected: Expected = None,
    resolve: bool = True,
    claims: Version | None = None,
    claimed: Sequence[str] | None = None,
) -> tuple[CommitPlan, str]:
    """Validate the manifests and write the plan; with ``resolve``, also claim the
    target partitions and resolve conflicts. Changes nothing visible. ``claims``:
    the claims object as read a moment ago, to swap from; ``claimed``: the
    directories the job holds its claim on already, so their files are listed
    while the manifests stream (the claim stands: nothing excluding the job changes
    them).

    Raises:
        ValidationError, ConflictError (PartitionClaimConflict): nothing visible changed.
        ManifestsChanged: a listing taken before the seal missed task manifests.
    """
    dest = ctx.dest
    plan_id = uuid.uuid4().hex
    prefix = dest.job(record.job_id).plan_dir(plan_id)
    replaced = _Shards(ctx.store, dest.bucket, prefix, "replaced")
    held = list(claimed) if resolve and claimed is not None else None

    def built(
        validator: Validator, uploads: _Shards, attempts: Attempts, stats: _Totals
    ) -> CommitPlan:
        return CommitPlan(
            job_id=record.job_id,
            plan_id=plan_id,
            manifests_id=manifests.identity,
            shards_prefix=prefix,
            files=uploads.count,
            bytes=stats.bytes,
            rows=stats.rows,
            tasks=validator.task_count(),
            upload_shards=uploads.written,
            attempt_starts=attempts[0],
            partitions=tuple(d.rstrip("/") for d in sorted(validator.dirs) if d),
            task_stats=stats.requests.snapshot(),
            shard_digests={"uploads": tuple(uploads.digests), "attempts": attempts[1]},
            table_schema=validator.table_schema,
        )

    def header(
        validator: Validator, uploads: _Shards, attempts: Attempts, stats: _Totals
    ) -> CommitPlan | None:
        # Under a claim held already, and a conflict mode that replaces nothing (its
        # listing refuses, or there is none), the plan is whole before its shards
        # are written: its header goes beside them. A refusal leaves it undecided.
        if held is None or record.options.conflict_mode == "replace":
            return None
        plan = built(validator, uploads, attempts, stats)
        if held != target_dirs(record, [p + "/" for p in plan.partitions]):
            return None
        return _resolved(plan, plan_id, held, replaced)

    with ThreadPoolExecutor(1) as pool:
        # The claim held: the conflicting files, listed while the manifests stream.
        # Else the claims, read while the manifests are: the claim's swap starts from them.
        listing = (
            pool.submit(resolve_conflicts, ctx, record, held, replaced.add)
            if held is not None
            else None
        )
        reading = (
            pool.submit(Claims(ctx).read_version)
            if resolve and held is None and claims is None
            else None
        )
        validator, uploads, attempts, stats, saved = _stream(
            ctx, record, manifests, prefix, expected, header
        )
        if listing is not None:
            listing.result()
        if reading is not None:
            claims = reading.result()
    if saved is not None:
        return saved
    plan = built(validator, uploads, attempts, stats)
    if held is not None and held == target_dirs(record, [p + "/" for p in plan.partitions]):
        replaced.flush()
        plan = _resolved(plan, plan_id, held, replaced)
    elif resolve:
        plan = resolve_plan(ctx, record, plan, claims=claims if held is None else None)
    return plan, save_plan(ctx, plan)


def _resolved(
    plan: CommitPlan, plan_id: str, claimed: Sequence[str], replaced: _Shards
) -> CommitPlan:
    """The plan, resolved under the claim on ``claimed`` into ``replaced``; its
    ``created`` (its place in the destination's commit order, :mod:`success`) is
    now, after the claim."""
    return plan.model_copy(
        update={
            "plan_id": plan_id,
            "created": utcnow(),
            "claimed": tuple(claimed),
            "resolved": True,
            "replaced_files": replaced.count,
            "replaced_shards": replaced.written,
            "shard_digests": {**plan.shard_digests, "replaced": tuple(replaced.digests)},
            "version": 3,
        }
    )


@dataclass
class _Totals:
    bytes: int = 0
    rows: int = 0
    requests: RequestStats = field(default_factory=RequestStats)


# The first attempt id and the digest of each attempts shard.
Attempts = tuple[tuple[str, ...], tuple[str, ...]]
Header = Callable[[Validator, "_Shards", Attempts, _Totals], CommitPlan | None]


def _stream(
    ctx: JobContext,
    record: JobRecord,
    manifests: ManifestSource,
    prefix: str,
    expected: Expected,
    header: Header,
) -> tuple[Validator, _Shards, Attempts, _Totals, tuple[CommitPlan, str] | None]:
    """One pass over the manifests: validate each, shard its uploads; then the checks
    across the job. Returns the validator, the upload shards, the attempts shards'
    starts and digests, the totals, and the plan with its key where ``header`` gave
    a whole one, which is saved beside the last shards."""
    store, dest = ctx.store, ctx.dest
    if expected is None:
        expected = record.expected_tasks
    validator = Validator(dest, record, expected)
    uploads = _Shards(store, dest.bucket, prefix, "uploads")
    totals = _Totals()
    # Sorted runs, compressed: the attempts shards are written in order.
    attempt_ids = shards.StringRuns(sort=True)
    for manifest in manifests:
        validator.check(manifest)
        for upload in manifest.uploads:
            uploads.add(upload)
            totals.bytes += upload.bytes
            totals.rows += upload.rows or 0
        attempt_ids.add(manifest.task_attempt_id)
        totals.requests.merge_snapshot(manifest.stats)
    # The last shards, the listing of pending uploads and, where it is whole, the
    # plan's header: independent, side by side (the header names the shards by the
    # digests of their bytes, known before they are sent).
    verify = not validator.problem_count and record.options.verify_uploads
    validator.manifests_read()
    last_uploads = uploads.flush_later()
    starts, attempt_digests, attempt_bodies = _attempt_shards(prefix, attempt_ids)
    plan = header(validator, uploads, (starts, attempt_digests), totals)
    writes: list[Callable[[], object]] = [
        last_uploads,
        *(lambda k=k, b=b: create_shard(store, dest.bucket, k, b) for k, b in attempt_bodies),
    ]
    if plan is not None:
        writes.append(lambda: save_plan(ctx, plan))
    with ThreadPoolExecutor(2 + len(writes)) as pool:
        # First the listing of pending uploads, whose request costs the client the
        # most work before it goes out, so that it leaves with the others.
        listed = (
            pool.submit(
                mark_pending,
                ctx,
                record,
                sorted(validator.dirs),
                record.options.threads,
                validator.files,
                validator.uploads,
            )
            if verify
            else None
        )
        # A listing taken before the seal, confirmed now that the job is sealed.
        confirmed = pool.submit(manifests.confirm) if manifests.confirm is not None else None
        written_now = [pool.submit(write) for write in writes]
        results = [w.result() for w in written_now]
        pending = listed.result() if listed is not None else None
        if confirmed is not None and not confirmed.result():
            raise ManifestsChanged(record.job_id)
    written = _ShardedUploads(ctx, prefix, uploads.written)
    validator.finish(written)
    if pending is not None and not validator.problem_count:
        check_pending(validator, pending, written)
    validator.raise_if_problems()
    log.info(
        "validated job %s: %d task manifest(s), %d file(s) in %d shard(s)",
        record.job_id,
        len(validator.task_ids),
        validator.files,
        uploads.written,
    )
    saved = (plan, str(results[-1])) if plan is not None else None
    return validator, uploads, (starts, attempt_digests), totals, saved


class _ShardedUploads:
    """The uploads written so far, read back from their shards (to name problems)."""

    def __init__(self, ctx: JobContext, prefix: str, shards: int) -> None:
        store, dest = ctx.store, ctx.dest
        self.ctx = ctx
        self.store, self.dest, self.prefix, self.shards = store, dest, prefix, shards

    def __iter__(self) -> Iterator[PlannedUpload]:
        for number in range(self.shards):
            key = shard_key(self.prefix, "uploads", number)
            yield from read_planned(self.store, self.dest.bucket, key)


def _attempt_shards(
    prefix: str, attempt_ids: shards.StringRuns
) -> tuple[tuple[str, ...], tuple[str, ...], list[tuple[str, bytes]]]:
    """The attempts shards: the first attempt id and the digest of each, and each
    one's key and bytes, to write."""
    starts: list[str] = []
    digests: list[str] = []
    bodies: list[tuple[str, bytes]] = []
    ordered = attempt_ids.merged()
    while chunk := list(islice(ordered, shards.SHARD_SIZE)):
        body = encode([AttemptId(id=a) for a in chunk])
        digests.append(body_digest(body))
        bodies.append((shard_key(prefix, "attempts", len(bodies)), body))
        starts.append(chunk[0])
    return tuple(starts), tuple(digests), bodies


def resolve_plan(
    ctx: JobContext,
    record: JobRecord,
    plan: CommitPlan,
    recheck: bool = True,
    claims: Version | None = None,
) -> CommitPlan:
    """Claim the plan's target directories, then resolve conflicts under the claim
    into replaced shards; returns the plan, resolved, under a fresh id (its
    uploads and attempts stay in the shards it names). With ``recheck``, a claim
    that had to wait for another job is followed by a listing that the planned
    uploads are still pending: they were confirmed before the wait, which can be long.
    ``claims``: the claims object as read a moment ago, to swap from."""
    store, dest = ctx.store, ctx.dest
    dirs = target_dirs(record, [p + "/" for p in plan.partitions])
    if Claims(ctx).acquire(record, dirs, known=claims) and recheck:
        recheck_pending(ctx, record, plan)
    plan_id = uuid.uuid4().hex
    replaced = _Shards(store, dest.bucket, dest.job(record.job_id).plan_dir(plan_id), "replaced")
    resolve_conflicts(ctx, record, dirs, replaced.add)
    replaced.flush()
    return _resolved(plan, plan_id, dirs, replaced)


def save_plan(ctx: JobContext, plan: CommitPlan) -> str:
    store, dest = ctx.store, ctx.dest
    key = dest.job(plan.job_id).plan_key(plan.plan_id)
    if create_once(store, dest.bucket, key, dump(plan)) is not None:
        raise ManifestError(f"plan key {key} of job {plan.job_id} already holds another plan")
    return key


def plan_digest(plan: CommitPlan) -> str:
    """The digest of the plan's header as :func:`save_plan` writes it, for the job
    record to keep."""
    return body_digest(dump(plan))


def load_plan(ctx: JobContext, job_id: str, key: str, expected_digest: str = "") -> CommitPlan:
    """The plan's header; with ``expected_digest`` (what the job record keeps), one
    changed since it was written is refused."""
    store, dest = ctx.store, ctx.dest
    found = store.get_object(dest.bucket, key)
    if found is None:
        raise ManifestError(f"plan {key} of job {job_id} is missing")
    check_digest(found[0], expected_digest, f"plan s3://{dest.bucket}/{key}")
    plan = load(CommitPlan, found[0], f"s3://{dest.bucket}/{key}")
    if plan.job_id != job_id:
        raise ManifestError(f"plan {key} belongs to job {plan.job_id}")
    return plan


def decided_plan(ctx: JobContext, record: JobRecord) -> CommitPlan:
    """The plan the job's point of no return named."""
    if not record.plan_key:
        raise ManifestError(f"job {record.job_id} is {record.state} but names no plan")
    return load_plan(ctx, record.job_id, record.plan_key, record.plan_digest)


def attempt_committed(ctx: JobContext, record: JobRecord, attempt_id: str) -> bool:
    """Whether the job's decided plan commits this task attempt (for the fence)."""
    if attempt_id in record.committed_attempts:  # records of version 2
        return True
    if record.state not in states.PUBLISHING or not record.plan_key:
        return False
    return attempt_in_plan(ctx, decided_plan(ctx, record), attempt_id)


def plan_attempts(ctx: JobContext, plan: CommitPlan) -> Iterator[str]:
    """The task attempts the plan commits, sorted."""
    for number in range(len(plan.attempt_starts)):
        for attempt in _attempts_shard(ctx, plan, number):
            yield attempt.id


def _attempts_shard(ctx: JobContext, plan: CommitPlan, number: int) -> list[AttemptId]:
    store, dest = ctx.store, ctx.dest
    key = shard_key(plan.shards_prefix, "attempts", number)
    return read_shard(store, dest.bucket, key, AttemptId, shard_digest(plan, "attempts", number))


def attempt_in_plan(ctx: JobContext, plan: CommitPlan, attempt_id: str) -> bool:
    """Whether the plan commits this task attempt: one GET of the shard it would be in."""
    number = bisect_right(plan.attempt_starts, attempt_id) - 1
    if number < 0:
        return False
    return any(a.id == attempt_id for a in _attempts_shard(ctx, plan, number))


def recheck_pending(ctx: JobContext, record: JobRecord, plan: CommitPlan) -> None:
    """Every planned upload still pending (``verify_uploads``), by listing: for a plan
    made earlier, whose uploads someone may have aborted since."""
    dest = ctx.dest
    if not record.options.verify_uploads:
        return
    validator = Validator(dest, record, None)
    for upload in planned_uploads(ctx, plan):
        validator.uploads.add(upload_digest(upload.key, upload.upload_id))
    dirs = [p + "/" for p in plan.partitions]
    pending = mark_pending(ctx, record, dirs, record.options.threads, plan.files, validator.uploads)
    check_pending(validator, pending, planned_uploads(ctx, plan))
    validator.raise_if_problems()


def prepared_for(
    ctx: JobContext,
    record: JobRecord,
    source: ManifestSource,
    expected: Expected,
    resolve: bool,
    claims: Version | None = None,
    claimed: Sequence[str] | None = None,
) -> tuple[CommitPlan, str]:
    """The plan for these manifests, prepared once across the steps that need it: the
    job's prepared plan where it was made from the same manifests (resolved now if
    ``resolve`` and not yet, or its claim no longer stands), else a new one
    (``claims``, ``claimed``: as :func:`prepare` takes them).

    Whichever it is, its uploads are confirmed pending: a new plan's as it is made,
    a reused one's by listing again, after any claim, so that no step's plan
    reaches the point of no return on the word of an older listing.
    """
    key = record.prepared_plan
    if not key:
        return prepare(ctx, record, source, expected, resolve, claims, claimed)
    if source.confirm is not None and not source.confirm():
        raise ManifestsChanged(record.job_id)
    plan = load_plan(ctx, record.job_id, key, record.prepared_plan_digest)
    if plan.manifests_id != source.identity:
        return prepare(ctx, record, source, expected, resolve, claims, claimed)
    if resolve and (not plan.resolved or not Claims(ctx).holds(record.job_id, plan.claimed)):
        plan = resolve_plan(ctx, record, plan, recheck=False)
        key = save_plan(ctx, plan)
    recheck_pending(ctx, record, plan)
    return plan, key
