"""Every error zero-rename raises, under one root.

The split that matters to a caller is between errors after which the job is
known not to have published anything (safe to retry or abort) and
:class:`CommitStateUnknownError`, after which the job record must be read
before anything is cleaned up.
"""

from __future__ import annotations


class ZeroRenameError(Exception):
    """Root of every error raised by zero-rename."""


class ConfigError(ZeroRenameError, ValueError):
    """An option, destination or argument is invalid; nothing was changed."""


class DestinationError(ZeroRenameError):
    """The destination cannot be written: missing bucket, a file, no access."""


class StoreError(ZeroRenameError):
    """An S3 request failed after its retries were used up.

    ``operation`` names the S3 call and ``code`` the S3 error code, if any.
    """

    def __init__(self, message: str, *, operation: str = "", code: str = "") -> None:
        super().__init__(message)
        self.operation = operation
        self.code = code


class PreconditionFailed(StoreError):
    """A conditional write lost: the object exists (If-None-Match) or changed (If-Match)."""


class NoSuchUpload(StoreError):
    """The multipart upload is not pending: completed, aborted or never created."""


class ManifestError(ZeroRenameError):
    """A manifest, job record or journal object is malformed or from another job."""


class ValidationError(ZeroRenameError):
    """The task manifests do not describe a committable job; ``problems`` lists why."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class ConflictError(ZeroRenameError):
    """Conflict mode ``fail`` found visible files where this job would write."""


class TaskCommitConflict(ZeroRenameError):
    """Another attempt of the same task committed first; this attempt's uploads were aborted."""


class JobDecidedError(ZeroRenameError):
    """The job is already committed or aborted, so this attempt may add nothing to it."""


class AbortRefusedError(ZeroRenameError):
    """The job commit passed its point of no return; retry the commit instead of aborting."""


class JobNotFoundError(ZeroRenameError):
    """No job record exists for this job id at this destination."""


class CommitStateUnknownError(ZeroRenameError):
    """The outcome of a publishing request is unknown; read the job record before cleaning up."""
