"""What a failed step means to Dagster.

An error no retry can fix (its class says so: :func:`zero_rename.errors.is_final`,
a refusal, bad options, invalid manifests, a conflict) becomes
``dagster.Failure(allow_retries=False)``: the op fails at once, whatever its
``RetryPolicy``. Everything else (S3 errors, an unknown commit outcome, another
job's claim on a partition) propagates unchanged, for the ``RetryPolicy``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from dagster import Failure

from zero_rename.core import failures_as


def protocol_errors() -> AbstractContextManager[None]:
    """Turn errors that no retry can fix into a ``Failure`` that is not retried."""
    return failures_as(lambda text: Failure(description=text, allow_retries=False))
