"""Dagster front end: the commit lifecycle as ops, an asset helper, a sensor.

A layer beside :mod:`zero_rename.airflow`, over the same core; it imports
:mod:`zero_rename.core` and :mod:`zero_rename.spark`, never Airflow.
"""

from zero_rename.dagster.assets import commit_partition
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
    "JobRef",
    "ZeroRenameResource",
    "abort_job",
    "abort_on_failure",
    "commit_lifecycle_job",
    "commit_partition",
    "manual_abort_job",
    "stage_op",
    "stale_jobs_sensor",
    "validate_output_op",
]
