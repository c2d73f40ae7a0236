"""A committed job published to its table format: one commit, exactly once.

After every file of the plan is complete, and before the record says
``committed``, the job's files go to the format named by its ``table_format``
option as one commit carrying the job id. A retried job commit (after a
crash or a lost answer anywhere) first asks the format for a commit with its
job id, and publishes only if there is none. A commit the format refuses
because another writer's conflicts with it publishes nothing, and the job is
rolled back (:mod:`zero_rename.core.protocol.rollback`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from zero_rename.core.data.layout import partition_values
from zero_rename.core.data.model import CommitPlan, JobRecord, TableCommit
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol.planning import upload_shard
from zero_rename.core.protocol.publish import DecodedShard
from zero_rename.core.tables.base import Publication, TableFile
from zero_rename.core.tables.registry import open_format

log = logging.getLogger(__name__)


def publish_table(
    ctx: JobContext,
    record: JobRecord,
    plan: CommitPlan,
    decoded: DecodedShard | None = None,
) -> TableCommit | None:
    """Publish the job to its table format, or find the commit that did; None
    when the job names no format. ``decoded``: a shard of the plan's uploads the
    caller holds decoded already (the completes' last), not read again.

    Raises:
        TableConflictError: another writer's commit conflicts; nothing was published.
    """
    table = open_format(ctx, record.options)
    if table is None:
        return None
    found = table.find(record.job_id, record.table_base)
    if found is not None:
        log.info("job %s is already published to %s (%s)", record.job_id, table.table, found.id)
        return found
    published = table.publish(_publication(ctx, record, plan, decoded))
    log.info(
        "job %s published to %s %s as %s: %d file(s) added, %d removed",
        record.job_id,
        record.options.table_format,
        table.table,
        published.id,
        published.files,
        published.removed_files,
    )
    return published


def published_to_table(ctx: JobContext, record: JobRecord) -> TableCommit | None:
    """The table format's commit of the job, if its format has one."""
    table = open_format(ctx, record.options)
    return None if table is None else table.find(record.job_id)


def _publication(
    ctx: JobContext,
    record: JobRecord,
    plan: CommitPlan,
    decoded: DecodedShard | None,
) -> Publication:
    # An unpartitioned job writes (and a replace replaces) the whole table: ({},). A
    # partitioned job that wrote no file has no partition: it replaces nothing.
    if record.options.partition_columns:
        partitions = tuple(dict(partition_values(p) or ()) for p in plan.partitions)
    else:
        partitions = ({},)
    return Publication(
        job_id=record.job_id,
        destination=ctx.dest.url,
        conflict_mode=record.options.conflict_mode,
        partition_columns=record.options.partition_columns,
        partitions=partitions,
        table_schema=plan.table_schema,
        files=_files(ctx, plan, decoded),
    )


def _files(ctx: JobContext, plan: CommitPlan, decoded: DecodedShard | None) -> Iterator[TableFile]:
    """The plan's files, a shard at a time (``decoded`` not decoded again)."""
    for number in range(plan.upload_shards):
        if decoded is not None and decoded[0] == number:
            uploads = decoded[1]
        else:
            uploads = upload_shard(ctx, plan, number)
        for upload in uploads:
            yield TableFile(
                path=upload.key[len(ctx.dest.dir) :],
                size=upload.bytes,
                rows=upload.rows,
                # "" is Spark's null partition too: one directory for both.
                partition={k: v or None for k, v in upload.partition.items()},
                stats=upload.stats,
            )
