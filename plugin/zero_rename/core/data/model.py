"""Commit data as typed, versioned, validated JSON.

Each persistent object carries ``kind`` and ``version``; loading one of the
wrong kind or version, or a malformed one, raises :class:`ManifestError`
naming what is wrong.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from zero_rename.core.data.options import MAX_PARTS, JobOptions
from zero_rename.core.protocol import states
from zero_rename.core.protocol.states import JobState
from zero_rename.core.s3.profiles import StoreProfile
from zero_rename.core.tables import registry
from zero_rename.errors import ManifestError
from zero_rename.frozen import frozen

M = TypeVar("M", bound=BaseModel)

# The job's states and every transition between them: zero_rename.core.protocol.states.
# A job record's origin: a few names (DAG, run, task), each short.
MAX_ORIGIN_ENTRIES = 16
MAX_ORIGIN_CHARS = 250


def utcnow() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    # A time written without a zone (by hand, or by another tool) is read as
    # UTC, the zone every time here is written in: compared with S3's own
    # times or subtracted, a naive one would fail with a TypeError.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


# Every time a persisted object carries: aware, a missing zone read as UTC.
Timestamp = Annotated[datetime, AfterValidator(_as_utc)]


def hostname() -> str:
    return socket.gethostname()


class _Frozen(BaseModel):
    model_config = frozen(populate_by_name=True)


class Part(_Frozen):
    number: int = Field(ge=1, le=MAX_PARTS)
    etag: str = Field(min_length=1)
    size: int = Field(ge=0)


# A column's bound as JSON: a number, a string, a boolean (a date, a timestamp
# or a decimal as ISO or decimal text), as Delta's statistics write it.
Bound = int | float | str | bool


class ColumnStats(_Frozen):
    """What a file's writer knows of one column: null count and bounds (None where
    the writer has none, e.g. a binary column or a column of only nulls)."""

    nulls: int | None = Field(default=None, ge=0)
    min: Bound | None = None
    max: Bound | None = None


class FileStats(_Frozen):
    """A file's column statistics as its writer recorded them at write time, so that a
    table format's commit can describe the file without reading it."""

    columns: dict[str, ColumnStats] = Field(default_factory=dict)


class PendingUpload(_Frozen):
    """One file of a task attempt: a multipart upload waiting to be completed.

    ``stats``: what the writer knows of the file's columns (Parquet footers
    carry it), for a table format's commit; None when the writer gave none.
    """

    key: str = Field(min_length=1)
    upload_id: str = Field(min_length=1)
    parts: tuple[Part, ...] = Field(min_length=1)
    bytes: int = Field(ge=0)
    rows: int | None = Field(default=None, ge=0)
    partition: dict[str, str | None] = Field(default_factory=dict)
    stats: FileStats | None = None

    @model_validator(mode="after")
    def _parts_in_order(self) -> PendingUpload:
        numbers = [p.number for p in self.parts]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"parts of {self.key} must be numbered 1..n in order, got {numbers}")
        if sum(p.size for p in self.parts) != self.bytes:
            raise ValueError(
                f"parts of {self.key} add up to {sum(p.size for p in self.parts)} "
                f"bytes, not the {self.bytes} recorded"
            )
        return self

    def part_list(self) -> list[tuple[int, str]]:
        return [(p.number, p.etag) for p in self.parts]

    def expected_etag(self) -> str | None:
        return multipart_etag(tuple(p.etag for p in self.parts))


def multipart_etag(part_etags: Sequence[str]) -> str | None:
    """The ETag S3 gives the completed object: md5 of the parts' binary md5s, '-', count.

    None when a part ETag is not an MD5 (some servers use opaque ETags).
    """
    digests = b""
    for etag in part_etags:
        text = etag.strip('"')
        if len(text) != 32:
            return None
        try:
            digests += bytes.fromhex(text)
        except ValueError:
            return None
    return f'"{hashlib.md5(digests).hexdigest()}-{len(part_etags)}"'  # noqa: S324


class PlannedUpload(NamedTuple):
    """One upload of a commit plan as read back from the plan's shards, for the
    completes, the table commit, rollback and abort: what a :class:`PendingUpload`
    holds, in a third of its memory (a shard of 10,000 is some 6 MiB, not 18).
    Made only from a validated ``PendingUpload`` (:meth:`of`), so its parts are
    numbered 1..n in order and their sizes add up to ``bytes``: the ETags in part
    order are all that is kept of them."""

    key: str
    upload_id: str
    part_etags: tuple[str, ...]
    bytes: int
    rows: int | None
    partition: Mapping[str, str | None]
    stats: FileStats | None

    @classmethod
    def of(cls, upload: PendingUpload, partition: Mapping[str, str | None]) -> PlannedUpload:
        """``upload``, light; ``partition``: its partition, shared with the other
        uploads of the shard in the same one (read-only)."""
        etags = tuple(p.etag for p in upload.parts)
        return cls(
            upload.key, upload.upload_id, etags, upload.bytes, upload.rows, partition, upload.stats
        )

    def part_list(self) -> list[tuple[int, str]]:
        return list(enumerate(self.part_etags, 1))

    def expected_etag(self) -> str | None:
        return multipart_etag(self.part_etags)


class TaskManifest(_Frozen):
    """What one task attempt committed: its pending uploads and request statistics."""

    kind: Literal["zero-rename/task-manifest"] = "zero-rename/task-manifest"
    version: Literal[1] = 1
    job_id: str
    task_id: str
    attempt: int = Field(ge=0)
    task_attempt_id: str
    committer: str
    hostname: str = Field(default_factory=hostname)
    created: Timestamp = Field(default_factory=utcnow)
    uploads: tuple[PendingUpload, ...] = ()
    stats: dict[str, Any] = Field(default_factory=dict)
    # The files' schema, an Arrow IPC schema in base64 (empty: not known), for a
    # table format's commit; every manifest of a job must carry the same one.
    table_schema: str = ""

    @property
    def bytes(self) -> int:
        return sum(u.bytes for u in self.uploads)

    @property
    def rows(self) -> int:
        return sum(u.rows or 0 for u in self.uploads)


class StageManifest(_Frozen):
    """The task manifests an engine (Spark's driver) chose for a job, saved for a later commit.

    Version 2 keeps the manifests in ``shards`` shards of JSON lines beside it
    (``stage/manifests-NNNNN.jsonl.gz``) and ``attempts_digest``, a digest of the
    sorted task attempt ids, so a retry can tell its own choice without reading
    them. Version 1 held them inline, in ``manifests``. Version 3 adds
    ``shard_digests``, the SHA-256 of each shard as written.
    """

    kind: Literal["zero-rename/stage-manifest"] = "zero-rename/stage-manifest"
    version: Literal[1, 2, 3] = 3
    job_id: str
    engine: str = ""
    created: Timestamp = Field(default_factory=utcnow)
    manifests: tuple[TaskManifest, ...] = ()
    tasks: int = 0
    files: int = 0
    bytes: int = 0
    rows: int = 0
    shards: int = 0
    attempts_digest: str = ""
    shard_digests: tuple[str, ...] = ()


# A step's status: ``rolled_back`` and ``aborted`` end a step that was running
# when its job was rolled back or aborted (the commit a rollback undid, say).
StepStatus = Literal["running", "succeeded", "failed", "rolled_back", "aborted"]


class StepTiming(_Frozen):
    """One step of the job as its record keeps it. ``error``: the error a failed
    step failed with, its own words in one line, secrets masked
    (:func:`~zero_rename.core.s3.redact.error_line`)."""

    started: Timestamp
    finished: Timestamp | None = None
    status: StepStatus = "running"
    detail: str = ""
    error: str = ""

    @property
    def label(self) -> str:
        """The status for people: ``rolled back``."""
        return self.status.replace("_", " ")

    @property
    def seconds(self) -> float | None:
        return (self.finished - self.started).total_seconds() if self.finished else None


class OutputProblem(_Frozen):
    """A committed file that does not match ``_SUCCESS`` (``kind``: missing, size,
    etag, unlisted; or ``success``: ``_SUCCESS`` itself), by path relative to the
    destination."""

    kind: str
    path: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return self.model_dump()


class OutputCheck(_Frozen):
    """What the output check found after the job's commit (the ``validate_output``
    step): the job's files against ``_SUCCESS`` and the job's file list.

    ``outcome`` is ``valid``, ``invalid`` (``problems`` holds the first few of
    ``problem_count``), or ``superseded``: ``_SUCCESS`` is another job's
    (``superseded_by``), committed since, so this job's files were not checked.
    """

    checked: datetime = Field(default_factory=utcnow)
    outcome: Literal["valid", "invalid", "superseded"]
    files: int = Field(default=0, ge=0)  # the files checked: those _SUCCESS lists
    problem_count: int = Field(default=0, ge=0)
    problems: tuple[OutputProblem, ...] = ()
    superseded_by: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome == "invalid"

    def describe(self) -> str:
        """One line, for a step's detail, logs and metadata."""
        if self.outcome == "superseded":
            return (
                f"not checked: _SUCCESS is job {self.superseded_by}'s, committed since; "
                "check that job instead"
            )
        if self.outcome == "valid":
            return f"{self.files} file(s) as _SUCCESS lists them (sizes and ETags)"
        first = "; ".join(f"{p.kind} {p.path}: {p.detail}" for p in self.problems[:3])
        more = self.problem_count - min(3, len(self.problems))
        return f"{self.problem_count} problem(s) in {self.files} file(s): {first}" + (
            f"; and {more} more" if more > 0 else ""
        )


class JobSummary(_Frozen):
    """What a step reports: counts, requests and seconds. Safe for XCom and logs.

    A job commit's ``requests`` counts its S3 requests up to ``_SUCCESS``: the
    summary is stored in the job record, so it cannot count what comes after.
    """

    job_id: str
    destination: str
    state: JobState
    files: int = 0
    bytes: int = 0
    rows: int = 0
    # At most PARTITIONS_LISTED of them; partition_count says how many in all.
    partitions: tuple[str, ...] = ()
    partition_count: int = 0
    tasks: int = 0
    replaced_files: int = 0
    aborted_uploads: int = 0
    requests: int = 0
    seconds: float = 0.0


# A table format of the registry (core/tables/registry.py).
if TYPE_CHECKING:
    FormatName = str
else:
    FormatName = Literal[registry.format_names()]


class TableCommit(_Frozen):
    """The table format's commit that published a job: the Iceberg snapshot or the
    Delta version, of which table; it carries the job id, so a retried commit finds
    it instead of publishing twice."""

    format: FormatName
    table: str
    id: str
    files: int = 0
    removed_files: int = 0

    @property
    def version(self) -> str:
        """The commit as the format names it: ``snapshot 8061…`` or ``version 3``."""
        plugin = registry.format_plugin(self.format)
        return f"{plugin.commit_word if plugin else 'version'} {self.id}"

    def describe(self) -> str:
        """One line, for ``jobs show``, the Commits page, logs and metadata."""
        return (
            f"{self.format} table {self.table} {self.version}: {self.files} file(s) added, "
            f"{self.removed_files} removed"
        )


class JobRecord(_Frozen):
    """The job's one mutable object, advanced only by compare-and-swap (If-Match).

    Version 2 added the ``sealed`` state, ``claimed`` (the partitions the job's
    commit claimed: relative directories, ``""`` for the whole destination)
    and ``store_profile`` (the store behaviour the job runs with). Version 3
    keeps the committed task attempts in the plan's shards, no longer in
    ``committed_attempts`` (read still, for version 2 records). Version 4 adds
    ``origin``: who set the job up (an orchestrator's DAG, run and task), so
    that tools can link a job to the run that wrote it. Version 5 adds the
    ``rolling_back`` state; ``plan_digest``, ``prepared_plan_digest`` and
    ``stage_digest`` (SHA-256 of the plan headers and the stage manifest's
    header as written, so that one changed afterwards is refused before the
    point of no return); ``recovered`` (the record replaced an unreadable
    one: its options are unknown, so sweeps look for the job's files in any
    partition layout); and ``output_check``: the result of the output check
    after the commit (the ``validate_output`` step), written by
    compare-and-swap like every change; and ``table_commit``: the table format's
    commit that published the job (``publish_table`` step). Version 6 adds a
    step's ``error`` (what a failed step failed with, one line) and the step
    statuses ``rolled_back`` and ``aborted`` (a step running when its job was
    rolled back or aborted). Version 7 adds ``table_base``: the table format's
    state job setup checked, which an older release, refusing unknown fields,
    could not read. Older records still load.
    """

    kind: Literal["zero-rename/job"] = "zero-rename/job"
    version: Literal[1, 2, 3, 4, 5, 6, 7] = 7
    job_id: str
    destination: str
    options: JobOptions
    state: JobState = JobState.SETUP
    created: Timestamp = Field(default_factory=utcnow)
    updated: Timestamp = Field(default_factory=utcnow)
    hostname: str = Field(default_factory=hostname)
    expected_tasks: int | None = Field(default=None, ge=0)
    steps: dict[str, StepTiming] = Field(default_factory=dict)
    plan_key: str | None = None
    plan_digest: str = ""
    # The plan the validate or resolve-conflicts step prepared, for the commit to reuse.
    prepared_plan: str | None = None
    prepared_plan_digest: str = ""
    stage_digest: str = ""
    recovered: bool = False
    committed_attempts: tuple[str, ...] = ()
    claimed: tuple[str, ...] = ()
    store_profile: StoreProfile | None = None
    summary: JobSummary | None = None
    error: str = ""
    origin: dict[str, str] = Field(default_factory=dict)
    output_check: OutputCheck | None = None
    table_commit: TableCommit | None = None
    # The table format's state as job setup checked it (TableFormat.check), for
    # the commit: "" for none, and then not written, so that the records of jobs
    # without one read as they did before it.
    table_base: str = Field(default="", max_length=512, exclude_if=lambda base: not base)

    @field_validator("origin")
    @classmethod
    def _bounded_origin(cls, origin: dict[str, str]) -> dict[str, str]:
        # The record is read by every fence read: names, not payloads.
        if len(origin) > MAX_ORIGIN_ENTRIES or any(
            len(k) > MAX_ORIGIN_CHARS or len(v) > MAX_ORIGIN_CHARS for k, v in origin.items()
        ):
            raise ValueError(
                f"origin holds at most {MAX_ORIGIN_ENTRIES} entries of at most "
                f"{MAX_ORIGIN_CHARS} characters"
            )
        return origin

    @property
    def decided(self) -> bool:
        return self.state in states.DECIDED

    @property
    def failed_steps(self) -> dict[str, str]:
        """Each step that failed, with the error it failed with (its own, one line;
        empty where a record older than version 6 kept none)."""
        return {name: t.error for name, t in self.steps.items() if t.status == "failed"}

    @property
    def file_columns(self) -> tuple[str, ...] | None:
        """The partition columns the job's files lie under, for sweeps that find them
        by listing; None (any ``column=value`` layout) when the record replaced an
        unreadable one, whose options are unknown."""
        return None if self.recovered else self.options.partition_columns

    @property
    def closed(self) -> bool:
        """No new task commit may join: a job commit sealed it, or it is decided."""
        return self.state in states.CLOSED


class ReplacedObject(_Frozen):
    key: str
    etag: str
    size: int


class CommitPlan(_Frozen):
    """Everything job commit will do, fixed before its point of no return.

    Version 2 is a header: the pending uploads, the files being replaced and
    the committed task attempts live in shards of JSON lines under
    ``shards_prefix`` (``uploads-NNNNN``, ``replaced-NNNNN``, ``attempts-NNNNN``),
    at most SHARD_SIZE each. ``attempt_starts`` holds the first (sorted) attempt
    id of each attempts shard, so one GET tells whether an attempt is in the
    plan. ``manifests_id`` identifies the task manifests the plan was made
    from; ``resolved``: conflicts were resolved under the job's claim. Version 3
    adds ``shard_digests``: the SHA-256 of each shard as written, by shard name
    (``uploads``, ``replaced``, ``attempts``), so that a shard changed after it
    was written is refused rather than committed.
    """

    kind: Literal["zero-rename/commit-plan"] = "zero-rename/commit-plan"
    version: Literal[2, 3] = 3
    job_id: str
    plan_id: str
    created: Timestamp = Field(default_factory=utcnow)
    manifests_id: str = ""
    shards_prefix: str
    files: int = 0
    bytes: int = 0
    rows: int = 0
    tasks: int = 0
    upload_shards: int = 0
    replaced_files: int = 0
    replaced_shards: int = 0
    attempt_starts: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    claimed: tuple[str, ...] = ()
    resolved: bool = False
    task_stats: dict[str, Any] = Field(default_factory=dict)
    shard_digests: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # The files' schema (an Arrow IPC schema in base64), from the task manifests.
    table_schema: str = ""


class AttemptId(_Frozen):
    """A line of a plan's attempts shard."""

    id: str


class JournalEntry(_Frozen):
    """Progress of a job commit in one shard of the plan's uploads: indexes within
    the shard now visible, or ``done`` when every upload of the shard is."""

    kind: Literal["zero-rename/journal"] = "zero-rename/journal"
    version: Literal[2] = 2
    job_id: str
    plan_id: str
    seq: int = Field(ge=0)
    shard: int = Field(ge=0)
    completed: tuple[int, ...] = ()
    done: bool = False
    created: Timestamp = Field(default_factory=utcnow)


class CommittedFile(_Frozen):
    path: str
    bytes: int
    rows: int | None = None
    etag: str = ""


class SuccessData(_Frozen):
    """``_SUCCESS``: Hadoop's SuccessData fields, and a bounded summary of what was written.

    ``files`` lists the first FILES_LISTED files and ``partitions`` the first
    PARTITIONS_LISTED partitions; ``file_count`` and ``partition_count`` say
    how many in all, and ``file_list`` names the shards (relative to the
    destination) that list every file with its size, rows and ETag.
    """

    name: Literal["org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"] = (
        "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    )
    committer: str
    job_id: str = Field(alias="jobId")
    job_id_source: str = Field(default="zero-rename", alias="jobIdSource")
    success: bool = True
    timestamp: int
    date: str
    hostname: str = Field(default_factory=hostname)
    description: str = ""
    filenames: tuple[str, ...] = ()
    metrics: dict[str, int] = Field(default_factory=dict)
    iostatistics: dict[str, Any] = Field(default_factory=dict)
    diagnostics: dict[str, str] = Field(default_factory=dict)
    destination: str = ""
    files: tuple[CommittedFile, ...] = ()
    partitions: tuple[str, ...] = ()
    file_count: int | None = None
    partition_count: int | None = None
    file_list: tuple[str, ...] = ()

    @property
    def complete_listing(self) -> bool:
        """Whether ``files`` lists every file (older _SUCCESS files did, and small jobs do)."""
        return not self.file_list or self.file_count == len(self.files)


def dump(model: BaseModel) -> bytes:
    return model.model_dump_json(by_alias=True, indent=1).encode("utf-8")


def load(cls: type[M], data: bytes, where: str) -> M:
    """Parse ``data`` as ``cls``; raises ManifestError saying what is wrong and where."""
    try:
        return cls.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ManifestError(
            f"{where} is not a valid {cls.__name__}: {loc}: {first['msg']}"
            + (f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else "")
        ) from None
