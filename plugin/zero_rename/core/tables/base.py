"""What the protocol hands a table format, and what it asks of one.

A job commit publishes to its table format after every file of its plan is
complete and before its record says ``committed``
(:mod:`zero_rename.core.protocol.formats`): one commit of the format holding
all of the job's files, and for a ``replace`` the removal of the replaced
partitions' files, tagged with the job id. The format's own optimistic
concurrency decides between writers; the protocol's claims have already
serialized the jobs of this destination, so a conflict means a writer outside
zero-rename changed the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from zero_rename.core.data.model import FileStats, TableCommit

# What a job commit's summary in the format carries, to find the job again.
JOB_ID_PROPERTY = "zero-rename.job-id"


@dataclass(frozen=True)
class TableFile:
    """One file of the job, at its final key."""

    path: str  # relative to the destination, as written (escaped partition directories)
    size: int
    rows: int | None
    partition: Mapping[str, str | None]  # column -> value, unescaped (None: Spark's null)
    stats: FileStats | None = None


@dataclass(frozen=True)
class Publication:
    """One job's commit of the table: its files, and what a ``replace`` replaces."""

    job_id: str
    destination: str  # s3://bucket/prefix: the table's location
    conflict_mode: str  # "append" and "fail" append; "replace" replaces
    partition_columns: tuple[str, ...]
    # The partitions the job writes (each column -> value); for a replace, the
    # partitions whose earlier files the commit removes. Unpartitioned: ({},).
    partitions: tuple[Mapping[str, str | None], ...]
    table_schema: str  # Arrow IPC schema, base64; "" when the writer gave none
    files: Iterator[TableFile] = field(default_factory=lambda: iter(()))

    @property
    def replaces(self) -> bool:
        return self.conflict_mode == "replace"


class TableFormat(Protocol):
    """A table format at one destination, for one job's options."""

    name: str

    @property
    def table(self) -> str:
        """The table's name, as people and the record name it."""
        ...

    def check(self, table_schema: str, partition_columns: tuple[str, ...]) -> str:
        """At job setup: the catalog (or log) can be reached, and an existing table
        has this schema's columns and these partition columns; nothing is written.
        Returns the table's state as checked, in the format's own words ("": none
        worth keeping), which the job record keeps for the commit (:meth:`find`
        is given it): a commit that finds the table unchanged since need not read
        or check it again.

        Raises:
            ConfigError: the table is not compatible, saying how.
            DestinationError: the catalog or the table cannot be reached.
        """
        ...

    def find(self, job_id: str, base: str = "") -> TableCommit | None:
        """The commit that published ``job_id``, if one landed; ``base`` (what
        :meth:`check` returned at the job's setup) lets a format read only what
        changed since."""
        ...

    def publish(self, publication: Publication) -> TableCommit:
        """One commit of the format for the job; the table is created on the first.
        A refusal because another writer's commit changed what this one reads is
        retried on the fresh state where the two do not conflict.

        Raises:
            TableConflictError: another writer's commit conflicts; nothing of this
                job was committed to the table.
            any other error: the outcome is unknown; :meth:`find` tells.
        """
        ...

    def expire(self, older_than: timedelta) -> int:
        """Expire what the format's retention allows (Iceberg snapshots, Delta's
        vacuum): files no version younger than ``older_than`` reads are deleted.
        Returns how many files were deleted."""
        ...

    def expirable(self, older_than: timedelta) -> list[str]:
        """What :meth:`expire` would delete now: the data files (relative to the
        destination) no version younger than ``older_than`` reads; nothing is
        written or deleted (a dry run)."""
        ...
