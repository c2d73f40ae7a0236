"""Every error zero-rename raises, under one root, each saying what a retry can do.

Every class carries its :class:`Retry` meaning, the one place where it is
decided: ``FINAL`` (the same however often the step runs: fail it now),
``RETRY`` (a retry may succeed, and nothing half-done needs checking first) or
``UNKNOWN`` (a request's outcome is unknown: the step, idempotent, finds out
when run again; read the job record before cleaning anything up). The front
ends map the meaning to their own outcomes (Airflow's ``AirflowFailException``,
Dagster's ``Failure(allow_retries=False)``, the Spark writer's retry of a
commit) through :func:`retry_of`, and keep no lists of their own.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Retry(enum.Enum):
    """What a retry of the failed step can do."""

    FINAL = "final"
    RETRY = "retry"
    UNKNOWN = "unknown"


class ZeroRenameError(Exception):
    """Root of every error raised by zero-rename. Unclassified failures are worth a
    retry: every step of the protocol is idempotent."""

    retry: ClassVar[Retry] = Retry.RETRY


def retry_of(exc: BaseException) -> Retry:
    """What a retry can do after ``exc``: its class's meaning, or, for an error from
    outside zero-rename, ``RETRY`` (a step is idempotent; the orchestrator's retries
    are for what nobody foresaw)."""
    if isinstance(exc, StoreError):
        return exc.meaning
    if isinstance(exc, ZeroRenameError):
        return exc.retry
    return Retry.RETRY


def is_final(exc: BaseException) -> bool:
    """Whether no retry of the step can change the outcome."""
    return retry_of(exc) is Retry.FINAL


class ConfigError(ZeroRenameError, ValueError):
    """An option, destination or argument is invalid; nothing was changed."""

    retry = Retry.FINAL


class DestinationError(ZeroRenameError):
    """The destination cannot be written: missing bucket, a file, no access."""

    retry = Retry.FINAL


class CredentialsError(DestinationError):
    """No S3 credentials were found, or the store refused them (an unknown key id, a
    wrong secret, an expired session token): a configuration error, the same
    however often the step runs until the credentials are fixed. (Credentials the
    store takes but whose policy refuses a request: ``DestinationError``.)"""


class StoreError(ZeroRenameError):
    """An S3 request failed after its retries were used up.

    ``operation`` names the S3 call, ``code`` the S3 error code and ``status``
    the HTTP status, if any (0: no answer at all).
    """

    def __init__(
        self, message: str, *, operation: str = "", code: str = "", status: int = 0
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.code = code
        self.status = status

    @property
    def outcome_unknown(self) -> bool:
        """Whether the request may have taken effect although it failed.

        A 4xx answer is a refusal: S3 did nothing. No answer (a dropped
        connection, a timeout) or a 5xx may come after the write landed,
        so a write that failed so must be checked by reading, never guessed.
        """
        return not 400 <= self.status < 500 or self.status in (408, 429)

    @property
    def meaning(self) -> Retry:
        """A refusal (4xx) is worth a retry, since stores throttle and credentials
        rotate; a request that may have landed is UNKNOWN until read back."""
        return Retry.UNKNOWN if self.outcome_unknown else Retry.RETRY


class PreconditionFailed(StoreError):
    """A conditional write lost: the object exists (If-None-Match) or changed (If-Match)."""


class ConditionalConflict(StoreError):
    """409 ConditionalRequestConflict: a conditional write raced another operation on the
    key and did not take effect (AWS); read again and retry."""


class NoSuchUpload(StoreError):
    """The multipart upload is not pending: completed, aborted or never created."""


class FanoutWorkerError(ZeroRenameError):
    """Completing uploads in parallel broke down: a worker process died or hit a bug.

    The uploads it had in flight may or may not be complete; a retried commit
    checks them.
    """

    retry = Retry.UNKNOWN


class ContentionError(ZeroRenameError):
    """A compare-and-swap gave up: the object (a job record, the claims) changed
    under every one of its rounds. Nothing was changed by this step; a retry
    starts afresh. (On a store whose compare-and-swap never succeeds, the doctor
    and job setup refuse the store instead.)"""


class ManifestError(ZeroRenameError):
    """A manifest, job record or journal object is malformed or from another job."""

    retry = Retry.FINAL


class ValidationError(ZeroRenameError):
    """The task manifests do not describe a committable job; ``problems`` lists why."""

    retry = Retry.FINAL

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class OutputCheckError(ZeroRenameError):
    """The output check after a job's commit found files that do not match its
    ``_SUCCESS``; ``problems`` lists them. The job stays committed: its files are
    visible as they are, and nothing was changed by the check."""

    retry = Retry.FINAL

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class ConflictError(ZeroRenameError):
    """Conflict mode ``fail`` found visible files where this job would write, or
    another job holds a claim on a partition this job writes."""

    retry = Retry.FINAL


class PartitionClaimConflict(ConflictError):
    """Another job claimed a partition this job writes, in a mode that excludes this one.

    ``holder`` is that job's id and ``partitions`` the overlapping directories
    (``""`` is the whole destination). Nothing of this job was made visible.
    Worth a retry: the claim goes when that job is done.
    """

    retry = Retry.RETRY

    def __init__(self, message: str, holder: str, partitions: tuple[str, ...]) -> None:
        super().__init__(message)
        self.holder = holder
        self.partitions = partitions


class TaskCommitConflict(ZeroRenameError):
    """Another attempt of the same task committed first; this attempt's uploads were aborted."""

    retry = Retry.FINAL


class JobDecidedError(ZeroRenameError):
    """The job is already committed or aborted, so this attempt may add nothing to it."""

    retry = Retry.FINAL


class AbortRefusedError(ZeroRenameError):
    """The job commit passed its point of no return; retry the commit instead of aborting."""

    retry = Retry.FINAL


class RollbackRefusedError(AbortRefusedError):
    """A rollback was asked of a job whose commit can still finish (or has finished):
    every planned file is complete or still pending. Retry the commit instead."""


class UploadRefusedError(ZeroRenameError):
    """The store refused, for good, to make a planned file visible after the point of
    no return: the parts recorded for it do not match its upload, or its upload is
    gone and the object is not there. No retry can complete it.

    ``key`` and ``upload_id`` name the upload, ``refusal`` says how it was refused
    (an S3 error code such as ``InvalidPart``, or ``upload-gone``). Job commit
    answers it by rolling the job back (:mod:`zero_rename.core.protocol.rollback`).
    """

    retry = Retry.FINAL

    def __init__(self, message: str, *, key: str, upload_id: str, refusal: str) -> None:
        super().__init__(message)
        self.key = key
        self.upload_id = upload_id
        self.refusal = refusal


class CommitRolledBackError(JobDecidedError):
    """The store refused part of the job's commit after its point of no return, so the
    commit was rolled back: no file of the job is visible or pending, the files it
    would have replaced are untouched, and the job is recorded ``aborted`` with the
    refusal. Final: run the job again."""


class TableConflictError(ZeroRenameError):
    """A table format refused the job's commit: another writer's commit to the table
    conflicts with it (``other`` names that commit). Nothing of the job was
    committed to the table; the job commit rolls the job back."""

    retry = Retry.FINAL

    def __init__(self, message: str, other: str = "") -> None:
        super().__init__(message)
        self.other = other


class JobNotFoundError(ZeroRenameError):
    """No job record exists for this job id at this destination."""

    retry = Retry.FINAL


class StageError(ZeroRenameError):
    """An engine's write finished without saving the job's stage manifest (it did
    not write through the zero-rename format with the job's id); running it
    again would do the same."""

    retry = Retry.FINAL


class CommitStateUnknownError(ZeroRenameError):
    """The outcome of a publishing request is unknown; read the job record before cleaning up."""

    retry = Retry.UNKNOWN


class TaskCommitUnknownError(CommitStateUnknownError):
    """A task attempt cannot tell whether its task commit took effect.

    Its uploads were left pending on purpose: the job commit includes them if
    the manifest landed, and job abort or cleanup sweeps them otherwise.
    """


class StoreCapabilityError(DestinationError):
    """The S3 store lacks a behaviour the protocol needs (for example conditional
    writes) and no safe fallback exists; nothing was written."""
