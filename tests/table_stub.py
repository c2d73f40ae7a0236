"""A stand-in table format, for the front ends' tests of what the protocol records
about a table commit (the record's ``table_commit``, its ``publish_table`` step)
and of how they call a format (``check`` at setup, ``expire``), without a catalog.

It keeps its commits in memory, per destination, in the test's own process:
:func:`install` puts it where the formats' registry
(:meth:`zero_rename.core.tables.plugin.FormatPlugin.open`) imports a format's class
from, for one test. The formats themselves are tested
against their own readers (tests/spark/test_table_formats.py and the formats' tests).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from zero_rename.core.data.model import TableCommit
from zero_rename.core.data.options import JobOptions
from zero_rename.core.data.records import JobContext
from zero_rename.core.tables.base import Publication, TableFile
from zero_rename.errors import ConfigError

MODULES = {"iceberg": "IcebergFormat", "delta": "DeltaFormat"}


@dataclass
class Calls:
    """What the formats were asked, across every instance, in order."""

    checks: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    published: list[tuple[Publication, list[TableFile]]] = field(default_factory=list)
    expired: list[tuple[str, timedelta]] = field(default_factory=list)
    # table -> job id -> its commit
    commits: dict[str, dict[str, TableCommit]] = field(default_factory=dict)
    refuse_schema: str | None = None  # check() refuses this schema


class StubFormat:
    format: ClassVar[str] = "delta"
    calls: ClassVar[Calls]

    def __init__(self, ctx: JobContext, options: JobOptions) -> None:
        self.ctx = ctx
        self.options = options
        self.name = self.format

    @property
    def table(self) -> str:
        if self.format == "iceberg":
            return self.options.iceberg_table or "default.table"
        return self.ctx.dest.url

    def check(self, table_schema: str, partition_columns: tuple[str, ...]) -> str:
        self.calls.checks.append((self.table, table_schema, partition_columns))
        if table_schema and table_schema == self.calls.refuse_schema:
            raise ConfigError(f"the {self.format} table {self.table} has other columns")
        return ""

    def find(self, job_id: str, base: str = "") -> TableCommit | None:
        return self.calls.commits.get(self.table, {}).get(job_id)

    def publish(self, publication: Publication) -> TableCommit:
        files = list(publication.files)
        self.calls.published.append((publication, files))
        commits = self.calls.commits.setdefault(self.table, {})
        commit = TableCommit(
            format=self.format,  # type: ignore[arg-type]
            table=self.table,
            id=str(len(commits) + (1000 if self.format == "iceberg" else 0)),
            files=len(files),
        )
        commits[publication.job_id] = commit
        return commit

    def expire(self, older_than: timedelta) -> int:
        self.calls.expired.append((self.table, older_than))
        return 2

    def expirable(self, older_than: timedelta) -> list[str]:
        return ["dt=2024-01-01/part-0.parquet", "dt=2024-01-02/part-0.parquet"]


def install(monkeypatch: pytest.MonkeyPatch, *formats: str) -> Calls:
    """The stand-in as the classes of ``formats`` (default both), for one test."""
    calls = Calls()
    for name in formats or tuple(MODULES):
        cls: Any = type(MODULES[name], (StubFormat,), {"format": name, "calls": calls})
        module = types.ModuleType(f"zero_rename.core.tables.{name}")
        setattr(module, MODULES[name], cls)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    return calls
