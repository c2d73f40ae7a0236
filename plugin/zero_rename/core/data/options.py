"""Job options: what a job records at setup and every later step reads back.

Options arrive as strings from Spark writer options, Airflow templates and the
command line, so :func:`parse_options` accepts strings and names any key or
value it cannot use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from zero_rename.core.data.layout import check_key_text
from zero_rename.core.tables import registry
from zero_rename.errors import ConfigError
from zero_rename.frozen import frozen

MIB = 1024 * 1024
# S3: every part but the last must be at least 5 MiB, and at most 5 GiB.
MIN_PART_SIZE = 5 * MIB
MAX_PART_SIZE = 5 * 1024 * MIB
# S3: at most 10,000 parts in one multipart upload.
MAX_PARTS = 10_000

CommitterMode = Literal["magic", "staging"]
ConflictMode = Literal["fail", "replace", "append"]
# What a job commit does when another job holds a claim on a partition it writes.
OnConflict = Literal["fail", "wait"]
# The table format each committed job is published to, as one commit of it: "none",
# or a format of the registry (core/tables/registry.py), whose options join the
# job's (after the core's own, in the record as they always were).
if TYPE_CHECKING:
    TableFormatName = str

    class _FormatOptions(BaseModel):
        """Every table format's options: at run time, the registry's model."""

else:
    TableFormatName = Literal[(registry.NONE, *registry.format_names())]
    _FormatOptions = registry.format_options()


class _CoreOptions(BaseModel):
    """The job options of the protocol itself."""

    model_config = frozen()

    committer: CommitterMode = "magic"
    conflict_mode: ConflictMode = "fail"
    partition_columns: tuple[str, ...] = ()
    part_size: int = Field(default=8 * MIB, ge=MIN_PART_SIZE, le=MAX_PART_SIZE)
    threads: int = Field(default=64, ge=1, le=1024)
    verify_uploads: bool = True
    on_conflict: OnConflict = "fail"
    # Seconds a job commit waits for another job's claim with on_conflict=wait.
    wait_timeout: int = Field(default=600, ge=0, le=7 * 24 * 3600)
    # Publish each committed job as one commit of a table format (core/tables).
    table_format: TableFormatName = "none"

    @field_validator("partition_columns", mode="before")
    @classmethod
    def _split_columns(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(c.strip() for c in value.split(",") if c.strip())
        return value

    @field_validator("partition_columns")
    @classmethod
    def _check_columns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"partition column listed twice in {list(value)}")
        for column in value:
            check_key_text("partition column", column)
            if "/" in column or "=" in column or column.startswith(("_", ".")):
                raise ValueError(
                    f"partition column {column!r} may not contain '/' or '=' "
                    "nor start with '_' or '.' (readers would skip it)"
                )
        return value

    @property
    def mode_name(self) -> str:
        """The S3A name of this committer: magic, directory or partitioned."""
        if self.committer == "magic":
            return "magic"
        return "partitioned" if self.partition_columns else "directory"


class JobOptions(_FormatOptions, _CoreOptions):
    """Options fixed at job setup and stored in the job record: the protocol's own,
    then each table format's (``iceberg_catalog``...)."""

    model_config = frozen()


def parse_options(options: Mapping[str, Any] | None = None, **overrides: Any) -> JobOptions:
    """Build :class:`JobOptions` from loose (often string) values.

    Raises:
        ConfigError: naming each unknown key or bad value, and the valid keys.
    """
    merged = {k: v for k, v in {**(options or {}), **overrides}.items() if v is not None}
    unknown = sorted(set(merged) - set(JobOptions.model_fields))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown}; valid options are {sorted(JobOptions.model_fields)}"
        )
    try:
        return JobOptions.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid option value: {problems}") from None
