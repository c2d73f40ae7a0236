"""Writer options of the ``zero-rename`` Spark format, parsed and checked on the driver.

Spark hands a Python data source its options as a case-insensitive mapping of
strings (keys arrive lower-cased, with ``path`` from ``save(path)``). This
module turns them into the core's :class:`JobOptions`, a :class:`StoreConfig`
and the file options of the Parquet writer, and names every unknown or
malformed option. It imports no pyspark, so a command line can check options
before it starts a Spark session.

Save modes: Spark itself refuses ``error``/``errorifexists`` (its default) and
``ignore`` for Python data sources, before any of this code runs; ``append``
and ``overwrite`` arrive here as ``overwrite=False/True``. The option
``if_exists`` (``error`` or ``ignore``, with ``mode("append")``) gives the two
refused modes' semantics.

Every value goes through a pydantic type of this module (:data:`Size`,
:data:`Flag`, :data:`Count`...), in :class:`WriterOptions` here and in the
reader's options, so both accept the same spellings and a bad value is named
with its option in a :class:`ConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from zero_rename.core import (
    Destination,
    JobOptions,
    StoreConfig,
    check_endpoint,
    check_environment_endpoint,
    check_job_id,
    parse_options,
    table_formats,
)
from zero_rename.errors import ConfigError
from zero_rename.frozen import frozen
from zero_rename.spark import FORMAT

# Parquet codecs pyarrow writes, and the infix Spark puts in file names for
# each (part-00000-<job>.c000.snappy.parquet).
CODEC_EXTENSIONS = {
    "snappy": ".snappy.parquet",
    "zstd": ".zstd.parquet",
    "gzip": ".gz.parquet",
    "lz4": ".lz4.parquet",
    "brotli": ".br.parquet",
    "none": ".parquet",
}
_CODEC_ALIASES = {"uncompressed": "none"}

DEFAULT_MAX_OPEN_FILES = 32
# Threads per task attempt that upload its files while it goes on encoding:
# enough to keep a small file's two requests (create, one part) off the
# writing thread, few enough that many task slots per executor stay modest.
DEFAULT_UPLOAD_THREADS = 4
# pyarrow's own default row group length.
DEFAULT_ROW_GROUP_ROWS = 1024 * 1024

# Option keys that would carry credentials. They are refused without echoing
# the value: credentials come from boto3's standard chain on every worker.
_SECRET_WORDS = ("secret", "password", "token", "credential", "access_key", "accesskey")

_JOB_KEYS = (
    "committer",
    "conflict_mode",
    "part_size",
    "threads",
    "verify_uploads",
    "on_conflict",
    "wait_timeout",
    "table_format",
    # and each table format's own options (FORMAT_OPTIONS)
)
# What Spark's refused save modes error/errorifexists and ignore would do.
IF_EXISTS = {"error": "error", "errorifexists": "error", "ignore": "ignore"}

_SIZE_RE = re.compile(r"^(\d+)\s*([kmgt]?)(?:i?b)?$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_FLAGS = {
    "true": True,
    "1": True,
    "yes": True,
    "on": True,
    "false": False,
    "0": False,
    "no": False,
    "off": False,
}

T = TypeVar("T")


# --- the types of option values ------------------------------------------------


def _option_type(parse: Callable[[str], T | None], requirement: str) -> BeforeValidator:
    """A pydantic validator from a parser of the option's text (stripped): a value
    it cannot read (None or ValueError) fails with ``requirement``."""

    def validate(value: Any) -> T:
        try:
            parsed = parse(str(value).strip())
        except ValueError:
            parsed = None
        if parsed is None:
            raise PydanticCustomError("zero_rename_option", requirement)
        return parsed

    return BeforeValidator(validate)


def _size(text: str) -> int | None:
    """``134217728``, ``128m``, ``128MiB``, ``8 MB``, ``1g``: binary units, as Spark reads sizes."""
    match = _SIZE_RE.match(text)
    return int(match[1]) * _SIZE_UNITS[match[2].lower()] if match else None


def _at_least(minimum: int, parse: Callable[[str], int | None]) -> Callable[[str], int | None]:
    def parse_bounded(text: str) -> int | None:
        number = parse(text)
        return number if number is not None and number >= minimum else None

    return parse_bounded


def _codec(text: str) -> str | None:
    codec = _CODEC_ALIASES.get(text.lower(), text.lower())
    return codec if codec in CODEC_EXTENSIONS else None


_SIZES = "a size such as 134217728, 128m or 128MiB"
Size = Annotated[int, _option_type(_size, f"must be {_SIZES}")]
PositiveSize = Annotated[int, _option_type(_at_least(1, _size), f"must be a positive {_SIZES[2:]}")]
Flag = Annotated[bool, _option_type(lambda text: _FLAGS.get(text.lower()), "must be true or false")]
Count = Annotated[int, _option_type(_at_least(0, int), "must be an integer >= 0")]
PositiveInt = Annotated[int, _option_type(_at_least(1, int), "must be a positive integer")]
Codec = Annotated[str, _option_type(_codec, f"must be one of {sorted(CODEC_EXTENSIONS)}")]
IfExists = Annotated[
    str,
    _option_type(lambda text: IF_EXISTS.get(text.lower()), f"must be one of {sorted(IF_EXISTS)}"),
]


class _Options(BaseModel):
    """Options as Spark hands them over (strings, keys lower-cased), typed."""

    model_config = frozen()

    # Options whose empty value means "not given", as it always has. None never
    # comes from Spark; from Python it means "not given" for every option.
    BLANK_IS_UNSET: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _drop_unset(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return {
            k: v
            for k, v in data.items()
            if v is not None and not (k in cls.BLANK_IS_UNSET and not str(v).strip())
        }


class StoreOptions(_Options):
    """The destination and how to reach its store: the writer's and the reader's."""

    BLANK_IS_UNSET = frozenset({"endpoint", "region", "store_profile"})

    path: str = ""
    endpoint: str | None = None
    region: str | None = None
    path_style: Flag | None = None
    store_profile: str = "auto"

    def store_config(self) -> StoreConfig:
        return StoreConfig(
            endpoint_url=resolve_endpoint(self.endpoint),
            region=self.region,
            path_style=self.path_style,
            profile=self.store_profile,
        )


# Spark's spark.sql.files.maxPartitionBytes: small files are read together up to this.
DEFAULT_MAX_PARTITION_BYTES = 128 << 20


class ReaderOptions(StoreOptions):
    """Every option of ``spark.read.format("zero-rename")`` (:mod:`.reader`)."""

    BLANK_IS_UNSET = StoreOptions.BLANK_IS_UNSET | {"as_of_job"}

    as_of_job: str | None = None
    max_partition_bytes: Size = DEFAULT_MAX_PARTITION_BYTES


# Each table format's job options (iceberg_catalog, iceberg_table...), as the table
# formats' registry declares them; the core's JobOptions checks their values.
FORMAT_OPTIONS = tuple(name for plugin in table_formats().values() for name in plugin.option_help)
if TYPE_CHECKING:
    _WriterBase = StoreOptions
else:
    _WriterBase = create_model(
        "FormatWriterOptions",
        __base__=StoreOptions,
        **{name: (str | None, None) for name in FORMAT_OPTIONS},
    )


class WriterOptions(_WriterBase):
    """Every option of ``df.write.format("zero-rename")``."""

    BLANK_IS_UNSET = StoreOptions.BLANK_IS_UNSET | {
        "job_id",
        "spool_dir",
        "if_exists",
        "max_file_size",
        "max_rows_per_file",
        "table_format",
        *FORMAT_OPTIONS,
    }

    partition_by: str | None = None
    job_id: str | None = None
    spool_dir: str | None = None
    # 0: every request from the thread that writes (the core's default).
    upload_threads: Count = DEFAULT_UPLOAD_THREADS
    if_exists: IfExists | None = None
    # The output check after the job commit, on the driver.
    validate_output: Flag = False
    # Job options; the core's JobOptions checks the values left as given.
    committer: str | None = None
    conflict_mode: str | None = None
    part_size: Size | None = None
    threads: str | int | None = None
    verify_uploads: Flag | None = None
    on_conflict: str | None = None
    wait_timeout: str | int | None = None
    # Publish the job as one commit of a table format (none, iceberg, delta); the
    # format's own options (iceberg_catalog...) are the base's, from the registry.
    table_format: str | None = None
    # The Parquet files.
    compression: Codec = "snappy"
    max_file_size: PositiveSize | None = None  # None: no limit (as Spark)
    max_rows_per_file: PositiveInt | None = None  # None: no limit (maxRecordsPerFile=0)
    max_open_files: PositiveInt = DEFAULT_MAX_OPEN_FILES
    row_group_size: PositiveInt = DEFAULT_ROW_GROUP_ROWS


KNOWN_OPTIONS = frozenset(WriterOptions.model_fields)
M = TypeVar("M", bound=_Options)


def validated(model: type[M], options: Mapping[str, Any]) -> M:
    """``options`` as ``model``; a bad value is named with its option.

    Raises:
        ConfigError: naming each malformed option and its value.
    """
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        raise ConfigError(
            "; ".join(
                f"option {'.'.join(str(p) for p in err['loc'])!r} {err['msg']} "
                f"(got {str(err.get('input'))[:40]!r})"
                for err in exc.errors()
            )
        ) from None


@dataclass(frozen=True)
class FileOptions:
    """How a task lays out its Parquet files."""

    compression: str = "snappy"
    max_file_size: int | None = None  # bytes; None: no limit (as Spark)
    max_rows_per_file: int | None = None  # None: no limit (Spark's maxRecordsPerFile=0)
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS

    @property
    def extension(self) -> str:
        return CODEC_EXTENSIONS[self.compression]

    @property
    def parquet_compression(self) -> str:
        return "NONE" if self.compression == "none" else self.compression


@dataclass(frozen=True)
class WriteConfig:
    """Everything the writer needs, parsed from Spark's options and save mode."""

    destination: Destination
    store: StoreConfig
    job: JobOptions
    files: FileOptions = field(default_factory=FileOptions)
    job_id: str | None = None
    spool_dir: str | None = None
    # 0: every request from the thread that writes (the core's default).
    upload_threads: int = DEFAULT_UPLOAD_THREADS
    # Job options the user set explicitly; an orchestrated job must agree on them.
    explicit: frozenset[str] = frozenset()
    # "error" or "ignore": what to do when the destination already holds data.
    if_exists: str | None = None
    # Check the committed files against _SUCCESS after the job commit.
    validate_output: bool = False

    @property
    def orchestrated(self) -> bool:
        """A job id was given: job setup, validation and commit run elsewhere (Airflow)."""
        return self.job_id is not None


def check_secret_keys(options: Mapping[str, str]) -> None:
    """Refuse option keys that would carry credentials, naming the keys only."""
    secret = sorted(k for k in options if any(w in k.replace("-", "_") for w in _SECRET_WORDS))
    if secret:
        raise ConfigError(
            f"option(s) {secret} refused: credentials are never accepted as options of "
            f"format {FORMAT!r} (they would reach logs and plans). Provide them through the "
            "standard AWS credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a "
            "profile or a role) on the driver and every executor"
        )


# Spark's own option names, as PySpark users type them (lower-cased, as all keys).
# maxRecordsPerFile takes Spark's meaning: 0 or less is no limit.
SPARK_ALIASES = {"partitionby": "partition_by", "maxrecordsperfile": "max_rows_per_file"}


def check_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Lower-case the keys, take Spark's names for ours; refuse credentials and
    unknown keys, naming them."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    check_secret_keys(lowered)
    for alias, name in SPARK_ALIASES.items():
        if alias not in lowered:
            continue
        if name in lowered:
            raise ConfigError(f"options {alias!r} and {name!r} name the same setting; give one")
        value = lowered.pop(alias)
        if alias == "maxrecordsperfile" and _no_limit(value):
            continue
        lowered[name] = value
    unknown = sorted(set(lowered) - KNOWN_OPTIONS)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown} for format {FORMAT!r}; valid options "
            f"are {sorted(KNOWN_OPTIONS - {'path'})}"
        )
    return lowered


def _no_limit(value: str) -> bool:
    try:
        return int(str(value).strip()) <= 0
    except ValueError:
        return False  # refused, naming the option, by WriterOptions


def conflict_mode_for(overwrite: bool, given: str | None) -> str:
    """The conflict mode a save mode implies.

    ``append`` keeps what is there unless a conflict mode says otherwise.
    ``overwrite`` replaces what the job writes over: the partitions it writes
    (Spark's dynamic partition overwrite), or the whole destination when
    unpartitioned; it cannot be combined with ``append`` or ``fail``.
    """
    if given is not None and given not in ("fail", "replace", "append"):
        raise ConfigError(
            "option 'conflict_mode' must be one of 'fail', 'replace', 'append' "
            f"(got {given[:40]!r})"
        )
    if not overwrite:
        return given or "append"
    if given not in (None, "replace"):
        raise ConfigError(
            f"save mode 'overwrite' contradicts option conflict_mode={given!r}; "
            "use mode('append') with it, or conflict_mode 'replace'"
        )
    return "replace"


def resolve_endpoint(value: str | None) -> str | None:
    """The S3 endpoint: the option, else boto3's environment variables, else AWS.

    Resolved once on the driver, so every executor talks to the same store.
    """
    if value:
        return check_endpoint(value, "option 'endpoint'")
    return check_environment_endpoint()


def _job_options(opts: WriterOptions, overwrite: bool) -> tuple[JobOptions, frozenset[str]]:
    given = opts.model_fields_set
    raw: dict[str, Any] = {k: getattr(opts, k) for k in (*_JOB_KEYS, *FORMAT_OPTIONS) if k in given}
    explicit = set(raw)
    if "partition_by" in given:
        raw["partition_columns"] = opts.partition_by
        explicit.add("partition_columns")
    if opts.if_exists == "error" and "conflict_mode" not in raw:
        # A second writer that found the destination empty too loses at job commit.
        raw["conflict_mode"] = "fail"
    raw["conflict_mode"] = conflict_mode_for(overwrite, raw.get("conflict_mode"))
    if overwrite:
        explicit.add("conflict_mode")  # overwrite means replace, whatever a job recorded
    return parse_options(raw), frozenset(explicit)


def _file_options(opts: WriterOptions) -> FileOptions:
    return FileOptions(
        compression=opts.compression,
        max_file_size=opts.max_file_size,
        max_rows_per_file=opts.max_rows_per_file,
        max_open_files=opts.max_open_files,
        row_group_rows=opts.row_group_size,
    )


def parse_writer_options(options: Mapping[str, str], overwrite: bool = False) -> WriteConfig:
    """Parse the options of ``df.write.format("zero-rename")``.

    Raises:
        ConfigError: naming each unknown, malformed or refused option.
    """
    opts = validated(WriterOptions, check_keys(options))
    if not opts.path:
        raise ConfigError(f"format {FORMAT!r} needs a destination: .save('s3://bucket/table')")
    job_id = check_job_id(opts.job_id) if opts.job_id else None
    # if_exists stands for Spark's save modes error/errorifexists and ignore,
    # which Spark refuses for Python data sources, as an option of mode("append").
    if opts.if_exists and overwrite:
        raise ConfigError(
            "option if_exists goes with mode('append'): mode('overwrite') replaces what exists"
        )
    if opts.if_exists and job_id:
        raise ConfigError(
            "option if_exists is for a write that sets up its own job; an "
            "orchestrated job (job_id) was set up already"
        )
    if opts.validate_output and job_id:
        raise ConfigError(
            "option validate_output is for a write that commits its own job; an "
            "orchestrated job (job_id) is checked by its orchestrator's validate_output step"
        )
    job, explicit = _job_options(opts, overwrite)
    return WriteConfig(
        destination=Destination.parse(opts.path),
        store=opts.store_config(),
        job=job,
        files=_file_options(opts),
        job_id=job_id,
        spool_dir=opts.spool_dir,
        upload_threads=opts.upload_threads,
        explicit=explicit,
        if_exists=opts.if_exists,
        validate_output=opts.validate_output,
    )
