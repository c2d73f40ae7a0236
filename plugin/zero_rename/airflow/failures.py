"""Which protocol errors a retry can fix, in Airflow's terms.

The errors no retry can fix (:data:`zero_rename.core.runs.FINAL_ERRORS`: a
refusal, bad options, invalid manifests, a conflict) fail the task at once
with ``AirflowFailException``. S3 errors, an unknown commit outcome and
another job's claim on a partition propagate unchanged: Airflow's retries are
the cure for those.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException

from zero_rename.core.runs import describe, is_final


@contextmanager
def protocol_errors() -> Iterator[None]:
    """Turn errors that no retry can fix into ``AirflowFailException``."""
    try:
        yield
    except Exception as exc:
        if is_final(exc):
            raise AirflowFailException(describe(exc)) from exc
        raise
