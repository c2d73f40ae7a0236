"""Which protocol errors a retry can fix, in Dagster's terms.

The errors no retry can fix (:data:`zero_rename.core.runs.FINAL_ERRORS`: a
refusal, bad options, invalid manifests, a conflict) become
``dagster.Failure(allow_retries=False)``: the op fails at once, whatever its
``RetryPolicy``. S3 errors, an unknown commit outcome and another job's claim
on a partition propagate unchanged, for the ``RetryPolicy`` to retry.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from dagster import Failure

from zero_rename.core.runs import final_errors_as


def protocol_errors() -> AbstractContextManager[None]:
    """Turn errors that no retry can fix into a ``Failure`` that is not retried."""
    return final_errors_as(lambda text: Failure(description=text, allow_retries=False))
