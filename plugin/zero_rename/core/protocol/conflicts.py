"""Conflict resolution: what to do with files already where the job writes.

Per partition when partition columns are set (S3A's "partitioned" committer),
for the whole destination otherwise ("directory"):

- ``fail``: visible files already in a target: refuse, change nothing.
- ``replace``: the target's existing files are recorded (streamed into the
  plan's shards) and deleted only after the new files are visible (see
  :mod:`zero_rename.core.protocol.commit`), so a crash never leaves a partition empty.
- ``append``: keep them.

It runs under the job's partition claim (:mod:`zero_rename.core.protocol.claims`), so
no other job that excludes this one can change the targets meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence

from zero_rename.core.data.layout import Destination, file_job_id
from zero_rename.core.data.manifests import bounded_map
from zero_rename.core.data.model import JobRecord, ReplacedObject
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol.jobs import visible_objects
from zero_rename.errors import ConflictError

log = logging.getLogger(__name__)

# Files named in a ``fail`` refusal.
_SHOWN = 10


def target_dirs(job: JobRecord, partition_dirs: Collection[str]) -> list[str]:
    """Relative directories the job's conflict mode applies to ("" is the whole destination)."""
    if not job.options.partition_columns:
        return [""]
    return sorted(partition_dirs)


def existing_files(
    ctx: JobContext, job: JobRecord, dirs: Sequence[str]
) -> Iterator[ReplacedObject]:
    """Visible files in ``dirs`` that this job did not write, streamed: one huge
    directory page by page, many small ones listed in parallel."""

    def scan(relative: str) -> Iterator[ReplacedObject]:
        for o in visible_objects(ctx, relative):
            if file_job_id(o.key) != job.job_id:
                yield ReplacedObject(key=o.key, etag=o.etag, size=o.size)

    if len(dirs) == 1:
        yield from scan(dirs[0])
        return
    for found in bounded_map(lambda d: list(scan(d)), list(dirs), job.options.threads):
        yield from found


def resolve_conflicts(
    ctx: JobContext,
    job: JobRecord,
    dirs: Sequence[str],
    replaced: Callable[[ReplacedObject], None],
) -> int:
    """Apply the job's conflict mode to ``dirs``; each file to replace goes to
    ``replaced``. Returns how many; raises ConflictError for ``fail``."""
    dest = ctx.dest
    mode = job.options.conflict_mode
    if mode == "append":
        return 0
    if mode == "fail":
        _refuse_existing(dest, existing_files(ctx, job, dirs))
        return 0
    count = 0
    for obj in existing_files(ctx, job, dirs):
        replaced(obj)
        count += 1
    if count:
        log.info("job %s will replace %d file(s) in %d partition(s)", job.job_id, count, len(dirs))
    return count


def _refuse_existing(dest: Destination, found: Iterator[ReplacedObject]) -> None:
    examples = [obj for _, obj in zip(range(_SHOWN), found, strict=False)]
    if not examples:
        return
    conflicting = sorted({_dir_of(dest, o.key) for o in examples})
    raise ConflictError(
        f"conflict mode 'fail': file(s) already in "
        f"{', '.join(d or dest.url for d in conflicting)} (first: {examples[0].key}); "
        "nothing was changed. Use conflict mode 'replace' or 'append', or abort the job"
    )


def _dir_of(dest: Destination, key: str) -> str:
    relative = key[len(dest.dir) :]
    return relative.rsplit("/", 1)[0] + "/" if "/" in relative else ""
