"""Conflict resolution: what to do with files already where the job writes.

Per partition when partition columns are set (S3A's "partitioned" committer),
for the whole destination otherwise ("directory"):

- ``fail``: visible files already in a target: refuse, change nothing.
- ``replace``: the target's existing files are recorded here and deleted only
  after the new files are visible (see :mod:`zero_rename.core.commit`), so a
  crash never leaves a partition empty.
- ``append``: keep them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from zero_rename.core.layout import Destination, is_visible, partition_dir
from zero_rename.core.model import JobRecord, PendingUpload, ReplacedObject
from zero_rename.core.store import S3Store
from zero_rename.errors import ConflictError

log = logging.getLogger(__name__)


def target_dirs(job: JobRecord, uploads: Sequence[PendingUpload]) -> list[str]:
    """Relative directories the job's conflict mode applies to ("" is the whole destination)."""
    columns = job.options.partition_columns
    if not columns:
        return [""]
    return sorted({partition_dir(columns, u.partition) for u in uploads})


def existing_files(store: S3Store, dest: Destination, job: JobRecord,
                   dirs: Sequence[str]) -> list[ReplacedObject]:
    """Visible files in ``dirs`` that this job did not write."""

    def scan(relative: str) -> list[ReplacedObject]:
        return [ReplacedObject(key=o.key, etag=o.etag, size=o.size)
                for o in store.list_objects(dest.bucket, dest.dir + relative)
                if is_visible(o.key[len(dest.dir):]) and job.job_id not in o.key]

    if not dirs:
        return []
    with ThreadPoolExecutor(max(1, min(job.options.threads, len(dirs)))) as pool:
        return [obj for found in pool.map(scan, dirs) for obj in found]


def resolve_conflicts(store: S3Store, dest: Destination, job: JobRecord,
                      uploads: Sequence[PendingUpload]) -> tuple[list[str], list[ReplacedObject]]:
    """Return (target directories, files to replace); raise ConflictError for ``fail``."""
    mode = job.options.conflict_mode
    dirs = target_dirs(job, uploads)
    if mode == "append":
        return dirs, []
    existing = existing_files(store, dest, job, dirs)
    if mode == "fail" and existing:
        conflicting = sorted({_dir_of(dest, o.key) for o in existing})
        raise ConflictError(
            f"conflict mode 'fail': {len(existing)} file(s) already in "
            f"{', '.join(d or dest.url for d in conflicting[:10])} (first: {existing[0].key}); "
            "nothing was changed. Use conflict mode 'replace' or 'append', or abort the job")
    if existing:
        log.info("job %s will replace %d file(s) in %d partition(s)", job.job_id,
                 len(existing), len(dirs))
    return dirs, existing


def _dir_of(dest: Destination, key: str) -> str:
    relative = key[len(dest.dir):]
    return relative.rsplit("/", 1)[0] + "/" if "/" in relative else ""
