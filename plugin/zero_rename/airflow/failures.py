"""Which protocol errors a retry can fix, in Airflow's terms.

The errors no retry can fix (:data:`zero_rename.core.runs.FINAL_ERRORS`: a
refusal, bad options, invalid manifests, a conflict) fail the task at once
with ``AirflowFailException``. S3 errors, an unknown commit outcome and
another job's claim on a partition propagate unchanged: Airflow's retries are
the cure for those.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from airflow.sdk.exceptions import AirflowFailException

from zero_rename.core.runs import final_errors_as


def protocol_errors() -> AbstractContextManager[None]:
    """Turn errors that no retry can fix into ``AirflowFailException``."""
    return final_errors_as(AirflowFailException)
