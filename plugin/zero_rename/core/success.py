"""``_SUCCESS``: Hadoop's SuccessData JSON, plus every file and partition written.

Readers of S3A's ``_SUCCESS`` (``name``, ``committer``, ``jobId``,
``filenames``...) read this one too. No credential or endpoint secret is
written here: diagnostics hold only committer settings.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from zero_rename.core.layout import Destination
from zero_rename.core.model import (
    CommitPlan,
    CommittedFile,
    JobRecord,
    JobSummary,
    SuccessData,
)
from zero_rename.core.stats import RequestStats, combined, total_requests

# Hadoop's SUCCESS_MARKER_FILE_LIMIT: ``filenames`` lists at most 100 files;
# ``files`` lists them all.
FILENAMES_LIMIT = 100


def build_success(dest: Destination, record: JobRecord, plan: CommitPlan,
                  etags: dict[str, str], job_stats: RequestStats) -> SuccessData:
    now = datetime.now(UTC)
    stats = combined([plan.task_stats, job_stats.snapshot()])
    files = tuple(
        CommittedFile(path=u.key[len(dest.dir):], bytes=u.bytes, rows=u.rows,
                      etag=etags.get(u.key) or u.expected_etag() or "")
        for u in plan.uploads)
    options = record.options
    return SuccessData(
        committer=options.mode_name,
        jobId=record.job_id,
        timestamp=int(now.timestamp() * 1000),
        date=now.strftime("%a %b %d %H:%M:%S %Z %Y"),
        description=f"zero-rename job commit of {len(plan.attempts)} task attempt(s)",
        filenames=tuple("/" + u.key for u in plan.uploads[:FILENAMES_LIMIT]),
        metrics={
            "committer_files_committed": len(files),
            "committer_bytes_committed": sum(f.bytes for f in files),
            "committer_rows_committed": sum(f.rows or 0 for f in files),
            "committer_tasks_committed": len(plan.attempts),
            "committer_files_replaced": len(plan.replaced),
        },
        iostatistics=stats.snapshot(),
        diagnostics={
            "committer": options.committer,
            "conflict_mode": options.conflict_mode,
            "partition_columns": ",".join(options.partition_columns),
            "part_size": str(options.part_size),
            "threads": str(options.threads),
            "plan_id": plan.plan_id,
            # The directories the job claimed ("" is the whole destination).
            "claimed": ",".join(d.rstrip("/") or "/" for d in plan.claimed),
        },
        destination=dest.url,
        files=files,
        partitions=plan.partitions,
    )


def success_summary(dest: Destination, plan: CommitPlan, job_stats: RequestStats,
                    seconds: float) -> JobSummary:
    return JobSummary(
        job_id=plan.job_id, destination=dest.url, state="committed",
        files=len(plan.uploads), bytes=sum(u.bytes for u in plan.uploads),
        rows=sum(u.rows or 0 for u in plan.uploads), partitions=plan.partitions,
        tasks=len(plan.attempts), replaced_files=len(plan.replaced),
        requests=total_requests(job_stats.snapshot()), seconds=round(seconds, 3))


def now_millis() -> int:
    return int(time.time() * 1000)
