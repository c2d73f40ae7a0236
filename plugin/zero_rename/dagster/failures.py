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

from zero_rename.core import error_line, failures_as


def protocol_errors() -> AbstractContextManager[None]:
    """Turn errors that no retry can fix into a ``Failure`` that is not retried."""
    return failures_as(lambda text: Failure(description=text, allow_retries=False))


def error_text(exc: BaseException | None) -> str:
    """A failed step's error in one line, secrets masked, for an abort's reason: a
    ``Failure`` by its description (the step's own error, as :func:`protocol_errors`
    wrote it), anything else by its type and first line."""
    if exc is None:
        return "an error"
    return error_line((exc.description or "") if isinstance(exc, Failure) else exc)
