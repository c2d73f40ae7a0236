"""Checking committed output against its ``_SUCCESS``.

Every file ``_SUCCESS`` lists must be there with its size and ETag, and no
visible file carrying the job id may be missing from the list. The
directories are listed rather than each file HEADed: a listing returns size
and ETag for up to 1,000 keys a request, and the second check needs it
anyway. A partitioned job's files are looked for in its partitions (listed
in parallel), an unpartitioned job's anywhere under the destination.

``zero-rename validate`` and the demos run it through
:meth:`zero_rename.core.committer.Committer.check_output`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass

from zero_rename.core import jobs
from zero_rename.core.layout import Destination, file_job_id
from zero_rename.core.model import CommittedFile, SuccessData
from zero_rename.core.store import ObjectInfo, S3Store
from zero_rename.core.success import committed_files, files_committed

log = logging.getLogger(__name__)

MISSING = "missing"
SIZE = "size"
ETAG = "etag"
UNLISTED = "unlisted"


@dataclass(frozen=True)
class Problem:
    kind: str  # MISSING, SIZE, ETAG or UNLISTED
    path: str  # relative to the destination
    detail: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def scan_dirs(success: SuccessData) -> list[str]:
    """Relative directories holding the job's files: its partitions, or the whole
    destination (unpartitioned, or more partitions than ``_SUCCESS`` lists)."""
    if (success.partition_count or 0) > len(success.partitions):
        return [""]
    return [p.rstrip("/") + "/" for p in success.partitions] or [""]


def visible_objects(
    store: S3Store,
    dest: Destination,
    dirs: Sequence[str],
    threads: int,
    advance: Callable[[int], None] = lambda n: None,
) -> dict[str, ObjectInfo]:
    """Visible objects under each directory, by path relative to the destination."""

    def scan(relative: str) -> list[ObjectInfo]:
        return list(jobs.visible_objects(store, dest, relative))

    found: dict[str, ObjectInfo] = {}
    with ThreadPoolExecutor(max(1, min(threads, len(dirs)))) as pool:
        for future in as_completed([pool.submit(scan, d) for d in dirs]):
            found.update((o.key[len(dest.dir) :], o) for o in future.result())
            advance(1)
    return found


def compare(
    success: SuccessData, files: Iterable[CommittedFile], found: dict[str, ObjectInfo]
) -> list[Problem]:
    """Problems, in the order of the committed files and then of the unlisted paths."""
    problems = []
    listed: set[str] = set()
    for f in files:
        listed.add(f.path)
        obj = found.get(f.path)
        if obj is None:
            problems.append(Problem(MISSING, f.path, "listed in _SUCCESS but not there"))
        elif obj.size != f.bytes:
            problems.append(Problem(SIZE, f.path, f"{obj.size} bytes, _SUCCESS says {f.bytes}"))
        elif f.etag and _bare(obj.etag) != _bare(f.etag):
            problems.append(
                Problem(
                    ETAG,
                    f.path,
                    f"ETag {_bare(obj.etag)}, _SUCCESS says "
                    f"{_bare(f.etag)}: the file was rewritten",
                )
            )
    problems += [
        Problem(UNLISTED, path, f"carries job id {success.job_id} but is not in _SUCCESS")
        for path in sorted(found)
        if path not in listed and file_job_id(path) == success.job_id
    ]
    return problems


def _bare(etag: str) -> str:
    return etag.strip('"')


def check_output(
    store: S3Store,
    dest: Destination,
    success: SuccessData,
    threads: int,
    advance: Callable[[int], None] = lambda n: None,
) -> list[Problem]:
    found = visible_objects(store, dest, scan_dirs(success), threads, advance)
    problems = compare(success, committed_files(store, dest, success), found)
    log.info(
        "checked %d file(s) of job %s at %s: %d problem(s)",
        files_committed(success),
        success.job_id,
        dest.url,
        len(problems),
    )
    return problems
