"""Manifest validation: the task manifests describe exactly one committable job.

Checks every expected task exactly once, no destination key twice, every key
inside the destination and in its partition directory, every manifest from
this job, and every upload still pending: confirmed by listing the job's
pending uploads (one request per 1,000 uploads), not one ListParts per upload.
The parts themselves are left to CompleteMultipartUpload, which refuses any
that are missing or differ. Manifests are checked one at a time as they
stream past; what is checked across the whole job is kept as 64-bit digests,
and the task ids compressed: a few bytes a task, not a Python string. The
listing of pending uploads marks the planned uploads it finds, rather than
keeping a third set of digests. Each problem names the task, key or upload at
fault (re-read from the plan's shards where only a digest was kept).
"""

from __future__ import annotations

import logging
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from zero_rename.core.data.layout import (
    Destination,
    check_data_key,
    is_job_data_key,
    partition_dir,
)
from zero_rename.core.data.model import JobRecord, PendingUpload, PlannedUpload, TaskManifest
from zero_rename.core.data.records import JobContext
from zero_rename.core.data.shards import KeySet, StringRuns, digest
from zero_rename.errors import ConfigError, ValidationError

log = logging.getLogger(__name__)

Expected = int | Collection[str] | None
# Problems quoted in the error message; up to PROBLEMS_KEPT of them are in ``problems``.
_SHOWN = 10
PROBLEMS_KEPT = 1000


def upload_digest(key: str, upload_id: str) -> int:
    return digest(key, upload_id)


class Validator:
    """Checks manifests as they stream past, then across them in :meth:`finish`."""

    def __init__(self, dest: Destination, job: JobRecord, expected: Expected) -> None:
        self.dest, self.job, self.expected = dest, job, expected
        self.problems: list[str] = []
        self.problem_count = 0
        # Each manifest's task id, as read, and its digest (to find repeats).
        self.task_ids = StringRuns()
        self.task_digests = KeySet()
        self.keys = KeySet()
        # Digests of keys written more than once: found, and the keys' digests
        # dropped, when the manifests are read (:meth:`manifests_read`).
        self.repeated_keys: set[int] | None = None
        self.uploads = KeySet()
        self.dirs: set[str] = set()
        self.files = 0
        # The files' schema, for a table format: every task's the same.
        self.table_schema = ""
        self._schema_task = ""

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < PROBLEMS_KEPT:
            self.problems.append(text)

    def check(self, manifest: TaskManifest) -> None:
        if manifest.job_id != self.job.job_id:
            self.problem(
                f"manifest of task {manifest.task_id} belongs to job "
                f"{manifest.job_id}, not {self.job.job_id}"
            )
        self.task_ids.add(manifest.task_id)
        self.task_digests.add(digest(manifest.task_id))
        self._check_schema(manifest)
        for upload in manifest.uploads:
            self.files += 1
            self.keys.add(digest(upload.key))
            self.uploads.add(upload_digest(upload.key, upload.upload_id))
            problem = check_data_key(
                self.dest, self.job.job_id, upload.key
            ) or self._partition_problem(upload)
            if problem:
                self.problem(f"task {manifest.task_id}: {problem}")

    def _check_schema(self, manifest: TaskManifest) -> None:
        if not manifest.table_schema:
            return
        if not self.table_schema:
            self.table_schema, self._schema_task = manifest.table_schema, manifest.task_id
        elif manifest.table_schema != self.table_schema:
            self.problem(
                f"task {manifest.task_id} wrote files of another schema than task "
                f"{self._schema_task}; one job's files share one schema"
            )

    def _partition_problem(self, upload: PendingUpload) -> str | None:
        try:
            relative = partition_dir(self.job.options.partition_columns, upload.partition)
        except ConfigError as exc:
            return f"{upload.key}: {exc}"
        self.dirs.add(relative)
        name = upload.key[len(self.dest.dir) :]
        if name != relative + name.rsplit("/", 1)[-1]:
            return f"{upload.key} is not directly in its partition directory {relative or '(root)'}"
        return None

    def manifests_read(self) -> None:
        """Every manifest is checked: the keys' repeats are found now, and their
        digests dropped before the listing of pending uploads."""
        if self.repeated_keys is None:
            self.repeated_keys = self.keys.repeated()
            self.keys = KeySet()

    def task_count(self) -> int:
        """The number of distinct tasks with a manifest."""
        return len(self.task_ids) - sum(n - 1 for n in self._repeated_tasks().values())

    def _repeated_tasks(self) -> Counter[str]:
        """Tasks with more than one manifest, by how many: read back from the task ids
        kept, only where a digest repeats."""
        repeated = self.task_digests.repeated()
        if not repeated:
            return Counter()
        counts = Counter(t for t in self.task_ids if digest(t) in repeated)
        return Counter({t: n for t, n in counts.items() if n > 1})

    def finish(self, uploads: Iterable[PlannedUpload]) -> None:
        """Checks across manifests; ``uploads`` re-reads them (from the plan's shards),
        only to name keys written twice."""
        for task, n in sorted(self._repeated_tasks().items()):
            self.problem(f"task {task} has {n} manifests")
        self._expected_problems()
        self.manifests_read()
        repeated = self.repeated_keys
        if repeated:
            counts = Counter(u.key for u in uploads if digest(u.key) in repeated)
            for key, n in sorted(counts.items()):
                self.problem(f"key {key} is written by {n} uploads")

    def _expected_problems(self) -> None:
        expected = self.expected
        if isinstance(expected, int):
            found = self.task_count()
            if found != expected:
                self.problem(f"expected {expected} task(s), found manifests of {found}")
        elif expected is not None:
            wanted = set(expected)
            self.task_digests.freeze()
            missing = sorted(t for t in wanted if digest(t) not in self.task_digests)
            extra = sorted({t for t in self.task_ids if t not in wanted})
            if missing:
                self.problem(
                    f"no manifest for task(s) {missing[:_SHOWN]}"
                    + (f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else "")
                )
            if extra:
                self.problem(f"manifests of unexpected task(s) {extra[:_SHOWN]}")

    def raise_if_problems(self) -> None:
        if not self.problem_count:
            return
        shown = "; ".join(self.problems[:_SHOWN])
        more = self.problem_count - min(_SHOWN, len(self.problems))
        raise ValidationError(
            f"job {self.job.job_id} cannot commit: {shown}"
            + (f" (and {more} more)" if more else ""),
            self.problems,
        )


def pending_digests(
    ctx: JobContext,
    job: JobRecord,
    dirs: Sequence[str],
    threads: int,
    files: int = 0,
) -> KeySet:
    """Digests of the job's pending uploads (:func:`_list_pending`)."""
    found = KeySet()
    # An array, not a list: 8 bytes a digest, not a Python int's 40. Each listing's
    # whole, then added at once (one call, so threads never interleave).
    _list_pending(ctx, job, dirs, threads, files, lambda d: found.extend(array("Q", d)))
    return found.freeze()


def mark_pending(
    ctx: JobContext,
    job: JobRecord,
    dirs: Sequence[str],
    threads: int,
    files: int,
    planned: KeySet,
) -> bytearray:
    """Marks of the ``planned`` uploads (:meth:`KeySet.marks`) that the listing of the
    job's pending uploads finds, checked as it streams: a byte per planned upload,
    where a set of what was listed held 8 and more."""
    marks = planned.marks()

    def mark(digests: Iterator[int]) -> None:
        for value in digests:
            planned.mark(value, marks)

    _list_pending(ctx, job, dirs, threads, files, mark)
    return marks


def _list_pending(
    ctx: JobContext,
    job: JobRecord,
    dirs: Sequence[str],
    threads: int,
    files: int,
    take: Callable[[Iterator[int]], object],
) -> None:
    """Digests of the job's pending uploads, handed to ``take`` one listing at a time:
    a paged listing per target directory (a partition, or the whole destination),
    in parallel; or one listing of the whole destination where that costs fewer
    requests (many small partitions) or the store cannot list by prefix (MinIO:
    every listing is of the bucket)."""
    store, dest = ctx.store, ctx.dest
    columns = job.options.partition_columns
    by_prefix = store.profile is None or store.profile.uploads_by_prefix
    if not by_prefix or len(dirs) > max(1, files // 1000):
        dirs = [""]

    def scan(relative: str) -> None:
        # A listing that does not remember what it yielded: a repeat is the same
        # digest twice, which neither a set of digests nor a mark minds.
        uploads = store.list_uploads(dest.bucket, dest.dir + relative, unique=False)
        take(
            upload_digest(u.key, u.upload_id)
            for u in uploads
            if is_job_data_key(dest, job.job_id, u.key, columns)
        )

    prefixes = _outermost(dirs)
    with ThreadPoolExecutor(max(1, min(threads, len(prefixes)))) as pool:
        for _ in pool.map(scan, prefixes):
            pass


def _outermost(dirs: Sequence[str]) -> list[str]:
    """Directories none of which lies inside another (listing a parent covers it)."""
    ordered = sorted(set(dirs)) or [""]
    kept: list[str] = []
    for d in ordered:
        if not any(d.startswith(k) for k in kept):
            kept.append(d)
    return kept


def check_pending(
    validator: Validator, pending: bytearray, uploads: Iterable[PlannedUpload]
) -> None:
    """Name every upload of the manifests that is no longer pending (not marked by
    :func:`mark_pending`); ``uploads`` re-reads them (from the plan's shards) only
    when one is missing."""
    missing = validator.uploads.unmarked(pending)
    if not missing:
        return
    for upload in uploads:
        if upload_digest(upload.key, upload.upload_id) in missing:
            validator.problem(
                f"upload {upload.upload_id} of {upload.key} is no longer "
                "pending (aborted, completed, or never of this job)"
            )
