"""``_SUCCESS``: Hadoop's SuccessData JSON, a bounded summary of what a job wrote.

Readers of S3A's ``_SUCCESS`` (``name``, ``committer``, ``jobId``,
``filenames``...) read this one too, and Hadoop's manifest committer's parser
accepts it. It stays small whatever the job's size, as Hadoop's manifest
committer keeps it (its S3A predecessor listing every file ran out of memory on
big jobs, HADOOP-16570): the first files and partitions, counts, statistics,
and ``file_list``, the shards that list every file. No credential or endpoint
secret is written here: diagnostics hold only committer settings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

from zero_rename.core.data.layout import Destination
from zero_rename.core.data.model import (
    CommitPlan,
    CommittedFile,
    JobRecord,
    JobSummary,
    SuccessData,
)
from zero_rename.core.data.records import JobContext
from zero_rename.core.data.shards import read_shard, shard_key
from zero_rename.core.protocol import states
from zero_rename.core.s3.stats import RequestStats, combined, total_requests

# Hadoop's SUCCESS_MARKER_FILE_LIMIT: ``filenames`` lists at most 100 files.
FILENAMES_LIMIT = 100
# Partitions listed in _SUCCESS and in a job's summary (XCom, the job record).
PARTITIONS_LISTED = 1000


def file_shard_key(dest: Destination, job_id: str, number: int) -> str:
    """A shard of the job's committed file list (``files/``), which ``_SUCCESS`` names."""
    return shard_key(dest.job(job_id).files_dir, "files", number)


def build_success(
    dest: Destination,
    record: JobRecord,
    plan: CommitPlan,
    first_files: Sequence[CommittedFile],
    job_stats: RequestStats,
    now: datetime | None = None,
) -> SuccessData:
    """``now``: the job's commit time, which its record keeps as the commit step's
    end (:func:`succeeds`)."""
    now = now or datetime.now(UTC)
    stats = combined([plan.task_stats, job_stats.snapshot()])
    options = record.options
    return SuccessData(
        committer=options.mode_name,
        jobId=record.job_id,
        timestamp=int(now.timestamp() * 1000),
        date=now.strftime("%a %b %d %H:%M:%S %Z %Y"),
        description=f"zero-rename job commit of {plan.tasks} task attempt(s)",
        filenames=tuple(f"/{dest.dir}{f.path}" for f in first_files[:FILENAMES_LIMIT]),
        metrics={
            "committer_files_committed": plan.files,
            "committer_bytes_committed": plan.bytes,
            "committer_rows_committed": plan.rows,
            "committer_tasks_committed": plan.tasks,
            "committer_files_replaced": plan.replaced_files,
        },
        iostatistics=stats.snapshot(),
        diagnostics={
            "committer": options.committer,
            "conflict_mode": options.conflict_mode,
            "partition_columns": ",".join(options.partition_columns),
            "part_size": str(options.part_size),
            "threads": str(options.threads),
            "plan_id": plan.plan_id,
            # The directories the job claimed ("/" is the whole destination).
            "claimed": ",".join(d.rstrip("/") or "/" for d in plan.claimed),
        },
        destination=dest.url,
        files=tuple(first_files),
        partitions=plan.partitions[:PARTITIONS_LISTED],
        file_count=plan.files,
        partition_count=len(plan.partitions),
        file_list=tuple(
            file_shard_key(dest, plan.job_id, n)[len(dest.dir) :] for n in range(plan.upload_shards)
        ),
    )


def commit_millis(success: SuccessData) -> tuple[int, str]:
    """Where a ``_SUCCESS`` stands in its destination's commit order: its job's
    commit time (Hadoop's ``timestamp``, milliseconds; the record's commit step
    ends then), then its job id between jobs of one millisecond."""
    return success.timestamp, success.job_id


def succeeds(current: bytes | None, success: SuccessData) -> bool:
    """Whether ``success`` may take the place of the ``_SUCCESS`` that holds
    ``current`` (None: none): never that of a job later in the commit order. A
    ``_SUCCESS`` that is not one (another tool's, damaged) is replaced."""
    if current is None:
        return True
    try:
        other = SuccessData.model_validate_json(current)
    except ValueError:
        return True
    return other.job_id == success.job_id or commit_millis(other) <= commit_millis(success)


def plan_summary(
    dest: Destination,
    plan: CommitPlan,
    state: states.JobState,
    requests: int = 0,
    seconds: float = 0.0,
) -> JobSummary:
    """The job's summary as its plan counts it: the validate step's (the job still
    undecided) and the commit's (committed, with its requests and seconds)."""
    return JobSummary(
        job_id=plan.job_id,
        destination=dest.url,
        state=state,
        files=plan.files,
        bytes=plan.bytes,
        rows=plan.rows,
        partitions=plan.partitions[:PARTITIONS_LISTED],
        partition_count=len(plan.partitions),
        tasks=plan.tasks,
        replaced_files=plan.replaced_files,
        requests=requests,
        seconds=round(seconds, 3),
    )


def success_summary(
    dest: Destination, plan: CommitPlan, job_stats: RequestStats, seconds: float
) -> JobSummary:
    requests = total_requests(job_stats.snapshot())
    return plan_summary(dest, plan, states.COMMITTED, requests, seconds)


def now_millis() -> int:
    return int(time.time() * 1000)


def committed_files(ctx: JobContext, success: SuccessData) -> Iterator[CommittedFile]:
    """Every file a ``_SUCCESS`` stands for: from its file list's shards, one shard
    at a time, or from ``files`` where that lists them all."""
    store, dest = ctx.store, ctx.dest
    if not success.file_list:
        yield from success.files
        return
    for relative in success.file_list:
        yield from read_shard(store, dest.bucket, dest.dir + relative, CommittedFile)


def files_committed(success: SuccessData) -> int:
    """How many files the job committed (older ``_SUCCESS`` files list them all)."""
    return success.file_count if success.file_count is not None else len(success.files)
