"""Checking committed output against its ``_SUCCESS``.

Every file ``_SUCCESS`` lists must be there with its size and ETag, and no
visible file carrying the job id may be missing from the list. The
directories are listed rather than each file HEADed: a listing returns size
and ETag for up to 1,000 keys a request, and the second check needs it
anyway. A partitioned job's files are looked for in its partitions (listed
in parallel), an unpartitioned job's anywhere under the destination.

``zero-rename validate`` and the demos run it through
:meth:`zero_rename.core.committer.Committer.check_output`; the orchestrated
step after a job's commit (``validate_output``: an Airflow operator, a Dagster
op, the Spark writer's option) through
:meth:`~zero_rename.core.committer.Committer.validate_output`, which checks
that job (:func:`check_job`) and records the result in its job record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from zero_rename.core.data.layout import SUCCESS_NAME, Destination, file_job_id
from zero_rename.core.data.model import (
    CommittedFile,
    JobRecord,
    OutputCheck,
    OutputProblem,
    SuccessData,
)
from zero_rename.core.data.records import JobContext
from zero_rename.core.data.success import committed_files, files_committed
from zero_rename.core.protocol import jobs
from zero_rename.core.s3.client import ObjectInfo
from zero_rename.errors import OutputCheckError

log = logging.getLogger(__name__)

MISSING = "missing"
SIZE = "size"
ETAG = "etag"
UNLISTED = "unlisted"
SUCCESS = "success"  # _SUCCESS itself: gone, or not what the job committed
# A job.json under jobs/ that readers leave out (``zero-rename validate`` only).
STRAY = "stray"
# Problems a job record keeps (the count says how many in all): the record is
# read by every fence read, so it stays small.
PROBLEMS_RECORDED = 20

# MISSING, SIZE, ETAG, UNLISTED or SUCCESS, by path relative to the destination.
Problem = OutputProblem


def scan_dirs(success: SuccessData) -> list[str]:
    """Relative directories holding the job's files: its partitions, or the whole
    destination (unpartitioned, or more partitions than ``_SUCCESS`` lists)."""
    if (success.partition_count or 0) > len(success.partitions):
        return [""]
    return [p.rstrip("/") + "/" for p in success.partitions] or [""]


def visible_objects(
    ctx: JobContext,
    dirs: Sequence[str],
    threads: int,
    advance: Callable[[int], None] = lambda n: None,
) -> dict[str, ObjectInfo]:
    """Visible objects under each directory, by path relative to the destination;
    ``advance`` counts them as they are listed (from the listing threads)."""
    dest = ctx.dest

    def scan(relative: str) -> list[ObjectInfo]:
        listed = []
        for o in jobs.visible_objects(ctx, relative):
            listed.append(o)
            advance(1)
        return listed

    found: dict[str, ObjectInfo] = {}
    with ThreadPoolExecutor(max(1, min(threads, len(dirs)))) as pool:
        for future in as_completed([pool.submit(scan, d) for d in dirs]):
            found.update((o.key[len(dest.dir) :], o) for o in future.result())
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
            problems.append(
                Problem(kind=MISSING, path=f.path, detail="listed in _SUCCESS but not there")
            )
        elif obj.size != f.bytes:
            detail = f"{obj.size} bytes, _SUCCESS says {f.bytes}"
            problems.append(Problem(kind=SIZE, path=f.path, detail=detail))
        elif f.etag and _bare(obj.etag) != _bare(f.etag):
            problems.append(
                Problem(
                    kind=ETAG,
                    path=f.path,
                    detail=f"ETag {_bare(obj.etag)}, _SUCCESS says "
                    f"{_bare(f.etag)}: the file was rewritten",
                )
            )
    problems += [
        Problem(
            kind=UNLISTED,
            path=path,
            detail=f"carries job id {success.job_id} but is not in _SUCCESS",
        )
        for path in sorted(found)
        if path not in listed and file_job_id(path) == success.job_id
    ]
    return problems


def _bare(etag: str) -> str:
    return etag.strip('"')


def check_output(
    ctx: JobContext,
    success: SuccessData,
    threads: int,
    advance: Callable[[int], None] = lambda n: None,
) -> list[Problem]:
    dest = ctx.dest
    found = visible_objects(ctx, scan_dirs(success), threads, advance)
    problems = compare(success, committed_files(ctx, success), found)
    log.info(
        "checked %d file(s) of job %s at %s: %d problem(s)",
        files_committed(success),
        success.job_id,
        dest.url,
        len(problems),
    )
    return problems


def check_job(
    ctx: JobContext,
    record: JobRecord,
    success: SuccessData | None,
    threads: int,
) -> OutputCheck:
    """A committed job's files against the destination's ``_SUCCESS`` and the
    job's file list (the shards ``_SUCCESS`` names, kept in the job's history).

    ``_SUCCESS`` gone, or listing another number of files than the job
    committed, is a problem. ``_SUCCESS`` of a later job means this one was
    superseded: its files are not checked (a later ``replace`` may have
    deleted them on purpose).
    """
    if success is None:
        gone = Problem(kind=SUCCESS, path=SUCCESS_NAME, detail="deleted since the commit")
        return OutputCheck(outcome="invalid", problem_count=1, problems=(gone,))
    if success.job_id != record.job_id:
        return OutputCheck(outcome="superseded", superseded_by=success.job_id)
    problems = check_output(ctx, success, threads)
    listed = files_committed(success)
    if record.summary is not None and record.summary.files != listed:
        detail = f"lists {listed} file(s); the job committed {record.summary.files}"
        problems.insert(0, Problem(kind=SUCCESS, path=SUCCESS_NAME, detail=detail))
    return OutputCheck(
        outcome="invalid" if problems else "valid",
        files=listed,
        problem_count=len(problems),
        problems=tuple(problems[:PROBLEMS_RECORDED]),
    )


def check_failed(dest: Destination, job_id: str, check: OutputCheck) -> OutputCheckError:
    """The error a failed check raises: what is wrong, and that the job stays committed."""
    return OutputCheckError(
        f"output check of job {job_id} at {dest.url}: {check.describe()}. The job stays "
        "committed: readers see its files as they are now. Restore the files, or write the "
        "affected partitions again with a new job",
        [f"{p.kind} {p.path}: {p.detail}" for p in check.problems],
    )
