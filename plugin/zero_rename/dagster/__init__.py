"""Dagster front end: the commit lifecycle as ops, an asset helper, asset checks, a
component for the daily partitioned asset, a sensor.

A layer beside :mod:`zero_rename.airflow`, over the same core; it imports
:mod:`zero_rename.core` and :mod:`zero_rename.spark`, never Airflow.
"""

from zero_rename.dagster.assets import commit_partition
from zero_rename.dagster.checks import (
    MANIFESTS_CHECK,
    OUTPUT_CHECK,
    manifests_check_spec,
    output_check,
)
from zero_rename.dagster.component import DailyPartitionedAssetComponent
from zero_rename.dagster.lifecycle import JobRef
from zero_rename.dagster.ops import (
    abort_job,
    abort_on_failure,
    commit_lifecycle_job,
    manual_abort_job,
    stage_op,
    validate_output_op,
)
from zero_rename.dagster.resources import ZeroRenameResource
from zero_rename.dagster.sensors import stale_jobs_sensor

__all__ = [
    "MANIFESTS_CHECK",
    "OUTPUT_CHECK",
    "DailyPartitionedAssetComponent",
    "JobRef",
    "ZeroRenameResource",
    "abort_job",
    "abort_on_failure",
    "commit_lifecycle_job",
    "commit_partition",
    "manifests_check_spec",
    "manual_abort_job",
    "output_check",
    "stage_op",
    "stale_jobs_sensor",
    "validate_output_op",
]
