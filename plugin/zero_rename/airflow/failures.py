"""What a failed step means to Airflow.

An error no retry can fix (its class says so: :func:`zero_rename.errors.is_final`,
a refusal, bad options, invalid manifests, a conflict) fails the task at once
with ``AirflowFailException``. Everything else (S3 errors, an unknown commit
outcome, another job's claim on a partition) propagates unchanged: Airflow's
retries are the cure for those.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from airflow.sdk.exceptions import AirflowFailException

from zero_rename.core import failures_as


def protocol_errors() -> AbstractContextManager[None]:
    """Turn errors that no retry can fix into ``AirflowFailException``."""
    return failures_as(AirflowFailException)
