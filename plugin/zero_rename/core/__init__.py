"""zero-rename's core: the protocol, the commit data, the table formats, the views and
the S3 store, in five rooms.

- :mod:`zero_rename.core.protocol`: the steps and the job state machine;
- :mod:`zero_rename.core.views`: read-only views of a destination (the committed
  state, history, partitions, pending uploads, the output check);
- :mod:`zero_rename.core.tables`: a committed job published to a table format;
- :mod:`zero_rename.core.data`: what the protocol writes (records, manifests,
  plans, layout, shards);
- :mod:`zero_rename.core.s3`: the S3 store (client, requests, listings,
  completes, probes, profiles).

This module is the front door: the front ends (Spark, Airflow, Dagster, the
command line, the Arrow reader) import the core only from here
(``from zero_rename.core import Committer, StoreConfig``), so the names below are
the ones the core promises them, and a change inside the rooms keeps them. The
:class:`Committer` has every step of one destination, the :class:`StepRunner`
the policies the front ends share; the rest are the types, checks and views they
pass around. They are imported on first use, so that a worker importing one
module of the store pays for nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> (the module it comes from, its name there; "": the module itself)
_EXPORTS: dict[str, tuple[str, str]] = {
    "Committer": ("zero_rename.core.committer", "Committer"),
    "StepRunner": ("zero_rename.core.steps", "StepRunner"),
    "SUMMARY_KEY": ("zero_rename.core.steps", "SUMMARY_KEY"),
    "failures_as": ("zero_rename.core.steps", "failures_as"),
    "failure_reason": ("zero_rename.core.steps", "failure_reason"),
    "S3Store": ("zero_rename.core.s3.client", "S3Store"),
    "StoreConfig": ("zero_rename.core.s3.client", "StoreConfig"),
    "botocore_session": ("zero_rename.core.s3.client", "botocore_session"),
    "check_endpoint": ("zero_rename.core.s3.client", "check_endpoint"),
    "check_environment_endpoint": ("zero_rename.core.s3.client", "check_environment_endpoint"),
    "client_config": ("zero_rename.core.s3.client", "client_config"),
    "credentials_and_region": ("zero_rename.core.s3.client", "credentials_and_region"),
    "declared_profile": ("zero_rename.core.s3.client", "declared_profile"),
    "environment_endpoint": ("zero_rename.core.s3.client", "environment_endpoint"),
    "make_client": ("zero_rename.core.s3.client", "make_client"),
    "AUTO_PROFILE": ("zero_rename.core.s3.profiles", "AUTO"),
    "PROFILES": ("zero_rename.core.s3.profiles", "PROFILES"),
    "StoreProfile": ("zero_rename.core.s3.profiles", "StoreProfile"),
    "check_profile_name": ("zero_rename.core.s3.profiles", "check_profile_name"),
    "named_profile": ("zero_rename.core.s3.profiles", "named_profile"),
    "Check": ("zero_rename.core.s3.probes", "Check"),
    "Examination": ("zero_rename.core.s3.probes", "Examination"),
    "examine": ("zero_rename.core.s3.probes", "examine"),
    "RACERS": ("zero_rename.core.s3.races", "RACERS"),
    "RACE_ROUNDS": ("zero_rename.core.s3.races", "RACE_ROUNDS"),
    "Advance": ("zero_rename.core.s3.progress", "Advance"),
    "Steps": ("zero_rename.core.s3.progress", "Steps"),
    "ignore_progress": ("zero_rename.core.s3.progress", "ignore"),
    "no_steps": ("zero_rename.core.s3.progress", "no_steps"),
    "redact": ("zero_rename.core.s3.redact", "redact"),
    "error_line": ("zero_rename.core.s3.redact", "error_line"),
    "shown_url": ("zero_rename.core.s3.redact", "shown_url"),
    "total_requests": ("zero_rename.core.s3.stats", "total_requests"),
    "Destination": ("zero_rename.core.data.layout", "Destination"),
    "MAX_KEY_BYTES": ("zero_rename.core.data.layout", "MAX_KEY_BYTES"),
    "check_bucket_name": ("zero_rename.core.data.layout", "check_bucket_name"),
    "check_destination_length": ("zero_rename.core.data.layout", "check_destination_length"),
    "check_job_id": ("zero_rename.core.data.layout", "check_job_id"),
    "check_job_ref": ("zero_rename.core.data.layout", "check_job_ref"),
    "SHORT_JOB_ID": ("zero_rename.core.data.layout", "SHORT_JOB_ID"),
    "check_key_text": ("zero_rename.core.data.layout", "check_key_text"),
    "file_job_id": ("zero_rename.core.data.layout", "file_job_id"),
    "partition_key": ("zero_rename.core.data.layout", "partition_key"),
    "Bound": ("zero_rename.core.data.model", "Bound"),
    "ColumnStats": ("zero_rename.core.data.model", "ColumnStats"),
    "CommittedFile": ("zero_rename.core.data.model", "CommittedFile"),
    "FileStats": ("zero_rename.core.data.model", "FileStats"),
    "JobRecord": ("zero_rename.core.data.model", "JobRecord"),
    "JobSummary": ("zero_rename.core.data.model", "JobSummary"),
    "OutputCheck": ("zero_rename.core.data.model", "OutputCheck"),
    "SuccessData": ("zero_rename.core.data.model", "SuccessData"),
    "TableCommit": ("zero_rename.core.data.model", "TableCommit"),
    "TaskManifest": ("zero_rename.core.data.model", "TaskManifest"),
    "load_object": ("zero_rename.core.data.model", "load"),
    "utcnow": ("zero_rename.core.data.model", "utcnow"),
    "JobOptions": ("zero_rename.core.data.options", "JobOptions"),
    "parse_options": ("zero_rename.core.data.options", "parse_options"),
    "files_committed": ("zero_rename.core.data.success", "files_committed"),
    "JobState": ("zero_rename.core.protocol.states", "JobState"),
    "table_formats": ("zero_rename.core.tables.registry", "table_formats"),
    "files_schema": ("zero_rename.core.tables.common", "files_schema"),
    "TaskAttempt": ("zero_rename.core.protocol.task", "TaskAttempt"),
    "History": ("zero_rename.core.views.history", "History"),
    "HistoryEntry": ("zero_rename.core.views.history", "HistoryEntry"),
    "PARTITIONS_NAMED": ("zero_rename.core.views.history", "PARTITIONS_NAMED"),
    "STUCK_AFTER": ("zero_rename.core.protocol.states", "STUCK_AFTER"),
    "is_stuck": ("zero_rename.core.views.history", "is_stuck"),
    "partition_count": ("zero_rename.core.views.history", "partition_count"),
    "stuck_advice": ("zero_rename.core.views.history", "stuck_advice"),
    "Problem": ("zero_rename.core.views.output_check", "Problem"),
    "STRAY": ("zero_rename.core.views.output_check", "STRAY"),
    "Holder": ("zero_rename.core.views.partitions", "Holder"),
    "PartitionInfo": ("zero_rename.core.views.partitions", "PartitionInfo"),
    "PartitionView": ("zero_rename.core.views.partitions", "PartitionView"),
    "Decision": ("zero_rename.core.views.pending", "Decision"),
    "JobSweep": ("zero_rename.core.views.pending", "JobSweep"),
    "Pending": ("zero_rename.core.views.pending", "Pending"),
    "PendingUploads": ("zero_rename.core.views.pending", "PendingUploads"),
    "SnapshotFile": ("zero_rename.core.views.snapshot", "SnapshotFile"),
    "TableSnapshot": ("zero_rename.core.views.snapshot", "TableSnapshot"),
    "states": ("zero_rename.core.protocol.states", ""),
}
__all__ = [
    "table_formats",
    "AUTO_PROFILE",
    "Advance",
    "Bound",
    "Check",
    "ColumnStats",
    "CommittedFile",
    "Committer",
    "Decision",
    "Destination",
    "Examination",
    "FileStats",
    "History",
    "HistoryEntry",
    "Holder",
    "JobOptions",
    "JobRecord",
    "JobState",
    "JobSummary",
    "JobSweep",
    "MAX_KEY_BYTES",
    "OutputCheck",
    "PARTITIONS_NAMED",
    "PROFILES",
    "PartitionInfo",
    "PartitionView",
    "Pending",
    "PendingUploads",
    "Problem",
    "RACERS",
    "RACE_ROUNDS",
    "S3Store",
    "SHORT_JOB_ID",
    "STRAY",
    "STUCK_AFTER",
    "SUMMARY_KEY",
    "SnapshotFile",
    "StepRunner",
    "Steps",
    "StoreConfig",
    "StoreProfile",
    "SuccessData",
    "TableCommit",
    "TableSnapshot",
    "TaskAttempt",
    "TaskManifest",
    "botocore_session",
    "check_bucket_name",
    "check_destination_length",
    "check_endpoint",
    "check_environment_endpoint",
    "check_job_id",
    "check_job_ref",
    "check_key_text",
    "check_profile_name",
    "client_config",
    "credentials_and_region",
    "declared_profile",
    "environment_endpoint",
    "error_line",
    "examine",
    "failure_reason",
    "failures_as",
    "file_job_id",
    "files_committed",
    "files_schema",
    "ignore_progress",
    "is_stuck",
    "load_object",
    "make_client",
    "named_profile",
    "no_steps",
    "parse_options",
    "partition_count",
    "partition_key",
    "redact",
    "shown_url",
    "states",
    "stuck_advice",
    "total_requests",
    "utcnow",
]

if TYPE_CHECKING:
    from zero_rename.core.committer import (
        Committer,
    )
    from zero_rename.core.data.layout import (
        MAX_KEY_BYTES,
        SHORT_JOB_ID,
        Destination,
        check_bucket_name,
        check_destination_length,
        check_job_id,
        check_job_ref,
        check_key_text,
        file_job_id,
        partition_key,
    )
    from zero_rename.core.data.model import (
        Bound,
        ColumnStats,
        CommittedFile,
        FileStats,
        JobRecord,
        JobSummary,
        OutputCheck,
        SuccessData,
        TableCommit,
        TaskManifest,
        utcnow,
    )
    from zero_rename.core.data.model import (
        load as load_object,
    )
    from zero_rename.core.data.options import (
        JobOptions,
        parse_options,
    )
    from zero_rename.core.data.success import (
        files_committed,
    )
    from zero_rename.core.protocol import states
    from zero_rename.core.protocol.states import (
        STUCK_AFTER,
        JobState,
    )
    from zero_rename.core.protocol.task import (
        TaskAttempt,
    )
    from zero_rename.core.s3.client import (
        S3Store,
        StoreConfig,
        botocore_session,
        check_endpoint,
        check_environment_endpoint,
        client_config,
        credentials_and_region,
        declared_profile,
        environment_endpoint,
        make_client,
    )
    from zero_rename.core.s3.probes import (
        Check,
        Examination,
        examine,
    )
    from zero_rename.core.s3.profiles import (
        AUTO as AUTO_PROFILE,
    )
    from zero_rename.core.s3.profiles import (
        PROFILES,
        StoreProfile,
        check_profile_name,
        named_profile,
    )
    from zero_rename.core.s3.progress import (
        Advance,
        Steps,
        no_steps,
    )
    from zero_rename.core.s3.progress import (
        ignore as ignore_progress,
    )
    from zero_rename.core.s3.races import (
        RACE_ROUNDS,
        RACERS,
    )
    from zero_rename.core.s3.redact import (
        error_line,
        redact,
        shown_url,
    )
    from zero_rename.core.s3.stats import (
        total_requests,
    )
    from zero_rename.core.steps import (
        SUMMARY_KEY,
        StepRunner,
        failure_reason,
        failures_as,
    )
    from zero_rename.core.tables.common import (
        files_schema,
    )
    from zero_rename.core.tables.registry import (
        table_formats,
    )
    from zero_rename.core.views.history import (
        PARTITIONS_NAMED,
        History,
        HistoryEntry,
        is_stuck,
        partition_count,
        stuck_advice,
    )
    from zero_rename.core.views.output_check import (
        STRAY,
        Problem,
    )
    from zero_rename.core.views.partitions import (
        Holder,
        PartitionInfo,
        PartitionView,
    )
    from zero_rename.core.views.pending import (
        Decision,
        JobSweep,
        Pending,
        PendingUploads,
    )
    from zero_rename.core.views.snapshot import (
        SnapshotFile,
        TableSnapshot,
    )


def __getattr__(name: str) -> Any:
    found = _EXPORTS.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = found
    value = importlib.import_module(module)
    if attribute:
        value = getattr(value, attribute)
    globals()[name] = value
    return value
