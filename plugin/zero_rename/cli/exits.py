"""Exit codes scripts can rely on, and which error gives which."""

from __future__ import annotations

from enum import IntEnum

from botocore.exceptions import ClientError

from zero_rename.errors import (
    AbortRefusedError,
    ConfigError,
    CredentialsError,
    DestinationError,
    JobDecidedError,
    JobNotFoundError,
    StoreError,
    ZeroRenameError,
)


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    REFUSED = 3
    NOT_FOUND = 4
    STORE = 5
    INTERRUPTED = 130


class Refused(ZeroRenameError):
    """The command would endanger a commit, so it changed nothing."""


class NotFound(ZeroRenameError):
    """The bucket, destination, job or ``_SUCCESS`` does not exist."""


EPILOG = """\
exit codes:
  0    done; nothing wrong found
  1    problems found (validate), or the command failed for a reason other than S3
  2    usage error, bad input (option, duration, URL, job id) or configuration
       (S3 credentials missing or refused)
  3    refused: acting would endanger a commit (its uploads, a committed job);
       nothing of it was changed
  4    not found: bucket, destination, job or _SUCCESS
  5    S3 failed or refused a request (endpoint unreachable, access denied by a policy,
       unsupported call); worth a retry once the store is back
  130  interrupted
"""

_MISSING_CODES = {"404", "NoSuchBucket"}


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code for an error that ends a command."""
    if isinstance(exc, (Refused, AbortRefusedError, JobDecidedError)):
        return ExitCode.REFUSED
    if isinstance(exc, (NotFound, JobNotFoundError)):
        return ExitCode.NOT_FOUND
    if isinstance(exc, (ConfigError, CredentialsError)):  # no retry mends either
        return ExitCode.USAGE
    if isinstance(exc, DestinationError):
        return ExitCode.NOT_FOUND if missing_bucket(exc) else ExitCode.STORE
    if isinstance(exc, StoreError):
        return ExitCode.STORE
    return ExitCode.FAILED


def missing_bucket(exc: BaseException) -> bool:
    """Whether a DestinationError was caused by a missing bucket (not by refused access)."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, StoreError) and cause.code in _MISSING_CODES:
            return True
        if (
            isinstance(cause, ClientError)
            and str(cause.response.get("Error", {}).get("Code", "")) in _MISSING_CODES
        ):
            return True
        cause = cause.__cause__
    return False
