"""Which protocol errors a retry can fix, in Airflow's terms.

A refusal (abort after the point of no return, a job decided elsewhere), bad
options, invalid manifests or a conflict stay the same however often the step
is retried, so they fail the task at once with ``AirflowFailException``. S3
errors, an unknown commit outcome and another job's claim on a partition
(it goes away when that job finishes) propagate unchanged: Airflow's retries
are the cure for those.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException

from zero_rename.errors import (
    AbortRefusedError,
    ConfigError,
    ConflictError,
    DestinationError,
    JobDecidedError,
    JobNotFoundError,
    ManifestError,
    PartitionClaimConflict,
    ValidationError,
)

FINAL_ERRORS: tuple[type[Exception], ...] = (
    AbortRefusedError, ConfigError, ConflictError, DestinationError, JobDecidedError,
    JobNotFoundError, ManifestError, ValidationError,
)
# Enough problems to act on without flooding the task log.
MAX_PROBLEMS = 20


def describe(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ValidationError) and exc.problems:
        shown = exc.problems[:MAX_PROBLEMS]
        more = len(exc.problems) - len(shown)
        text += "\n  - " + "\n  - ".join(shown) + (f"\n  ... and {more} more" if more else "")
    return text


@contextmanager
def protocol_errors() -> Iterator[None]:
    """Turn errors that no retry can fix into ``AirflowFailException``."""
    try:
        yield
    except PartitionClaimConflict:
        raise
    except FINAL_ERRORS as exc:
        raise AirflowFailException(describe(exc)) from exc
