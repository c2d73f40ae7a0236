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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from zero_rename.core.layout import Destination, check_job_id
from zero_rename.core.options import JobOptions, parse_options
from zero_rename.core.store import StoreConfig, environment_endpoint
from zero_rename.errors import ConfigError

FORMAT = "zero-rename"

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

_JOB_KEYS = ("committer", "conflict_mode", "part_size", "threads", "verify_uploads",
             "on_conflict", "wait_timeout")
_STORE_KEYS = ("endpoint", "region", "path_style", "store_profile")
_FILE_KEYS = ("compression", "max_file_size", "max_rows_per_file", "max_open_files",
              "row_group_size")
# What Spark's refused save modes error/errorifexists and ignore would do.
IF_EXISTS = {"error": "error", "errorifexists": "error", "ignore": "ignore"}
KNOWN_OPTIONS = frozenset(("path", "partition_by", "job_id", "spool_dir", "upload_threads",
                           "if_exists")
                          + _JOB_KEYS + _STORE_KEYS + _FILE_KEYS)

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


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

    @property
    def orchestrated(self) -> bool:
        """A job id was given: job setup, validation and commit run elsewhere (Airflow)."""
        return self.job_id is not None


def parse_size(key: str, value: str) -> int:
    """``134217728``, ``128m``, ``128MiB``, ``1g``: binary units, as Spark reads sizes."""
    match = _SIZE_RE.match(str(value))
    if not match:
        raise ConfigError(f"option {key!r} must be a size such as 134217728, 128m or 128MiB "
                          f"(got {str(value)[:40]!r})")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def parse_bool(key: str, value: str) -> bool:
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"option {key!r} must be true or false (got {str(value)[:40]!r})")


def parse_count(key: str, value: str) -> int:
    """An integer >= 0."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigError(f"option {key!r} must be an integer >= 0 (got {str(value)[:40]!r})")
    return number


def parse_positive_int(key: str, value: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"option {key!r} must be a positive integer (got {str(value)[:40]!r})")
    return number


def check_secret_keys(options: Mapping[str, str]) -> None:
    """Refuse option keys that would carry credentials, naming the keys only."""
    secret = sorted(k for k in options if any(w in k.replace("-", "_") for w in _SECRET_WORDS))
    if secret:
        raise ConfigError(
            f"option(s) {secret} refused: credentials are never accepted as options of "
            f"format {FORMAT!r} (they would reach logs and plans). Provide them through the "
            "standard AWS credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a "
            "profile or a role) on the driver and every executor")


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
        raise ConfigError(f"unknown option(s) {unknown} for format {FORMAT!r}; valid options "
                          f"are {sorted(KNOWN_OPTIONS - {'path'})}")
    return lowered


def _no_limit(value: str) -> bool:
    try:
        return int(str(value).strip()) <= 0
    except ValueError:
        return False  # refused, naming the option, by the file options' parser


def conflict_mode_for(overwrite: bool, given: str | None) -> str:
    """The conflict mode a save mode implies.

    ``append`` keeps what is there unless a conflict mode says otherwise.
    ``overwrite`` replaces what the job writes over: the partitions it writes
    (Spark's dynamic partition overwrite), or the whole destination when
    unpartitioned; it cannot be combined with ``append`` or ``fail``.
    """
    if given is not None and given not in ("fail", "replace", "append"):
        raise ConfigError("option 'conflict_mode' must be one of 'fail', 'replace', 'append' "
                          f"(got {given[:40]!r})")
    if not overwrite:
        return given or "append"
    if given not in (None, "replace"):
        raise ConfigError(f"save mode 'overwrite' contradicts option conflict_mode={given!r}; "
                          "use mode('append') with it, or conflict_mode 'replace'")
    return "replace"


def resolve_endpoint(value: str | None) -> str | None:
    """The S3 endpoint: the option, else boto3's environment variables, else AWS.

    Resolved once on the driver, so every executor talks to the same store.
    """
    endpoint = value or environment_endpoint()
    if not endpoint:
        return None
    parsed = urlparse(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"option 'endpoint' must be an http(s) URL (got {endpoint[:80]!r})")
    if parsed.username or parsed.password:
        raise ConfigError("option 'endpoint' may not carry credentials in its URL")
    return endpoint


def parse_file_options(opts: Mapping[str, str]) -> FileOptions:
    codec = str(opts.get("compression", "snappy")).strip().lower()
    codec = _CODEC_ALIASES.get(codec, codec)
    if codec not in CODEC_EXTENSIONS:
        raise ConfigError(f"option 'compression' must be one of {sorted(CODEC_EXTENSIONS)} "
                          f"(got {opts['compression'][:40]!r})")
    max_size = None
    if opts.get("max_file_size"):
        max_size = parse_size("max_file_size", opts["max_file_size"])
        if max_size < 1:
            raise ConfigError("option 'max_file_size' must be positive")
    rows = opts.get("max_rows_per_file")
    return FileOptions(
        compression=codec,
        max_file_size=max_size,
        max_rows_per_file=parse_positive_int("max_rows_per_file", rows) if rows else None,
        max_open_files=parse_positive_int("max_open_files", opts["max_open_files"])
        if "max_open_files" in opts else DEFAULT_MAX_OPEN_FILES,
        row_group_rows=parse_positive_int("row_group_size", opts["row_group_size"])
        if "row_group_size" in opts else DEFAULT_ROW_GROUP_ROWS,
    )


def _job_options(opts: Mapping[str, str], overwrite: bool) -> tuple[JobOptions, frozenset[str]]:
    raw: dict[str, Any] = {k: opts[k] for k in _JOB_KEYS if k in opts}
    if "part_size" in raw:
        raw["part_size"] = parse_size("part_size", raw["part_size"])
    if "verify_uploads" in raw:
        raw["verify_uploads"] = parse_bool("verify_uploads", raw["verify_uploads"])
    explicit = set(raw)
    if "partition_by" in opts:
        raw["partition_columns"] = opts["partition_by"]
        explicit.add("partition_columns")
    if parse_if_exists(opts, overwrite) == "error" and "conflict_mode" not in raw:
        # A second writer that found the destination empty too loses at job commit.
        raw["conflict_mode"] = "fail"
    raw["conflict_mode"] = conflict_mode_for(overwrite, raw.get("conflict_mode"))
    if overwrite:
        explicit.add("conflict_mode")  # overwrite means replace, whatever a job recorded
    return parse_options(raw), frozenset(explicit)


def parse_writer_options(options: Mapping[str, str], overwrite: bool = False) -> WriteConfig:
    """Parse the options of ``df.write.format("zero-rename")``.

    Raises:
        ConfigError: naming each unknown, malformed or refused option.
    """
    opts = check_keys(options)
    path = opts.get("path")
    if not path:
        raise ConfigError(f"format {FORMAT!r} needs a destination: .save('s3://bucket/table')")
    job, explicit = _job_options(opts, overwrite)
    store = StoreConfig(
        endpoint_url=resolve_endpoint(opts.get("endpoint")),
        region=opts.get("region") or None,
        path_style=parse_bool("path_style", opts["path_style"]) if "path_style" in opts else None,
        profile=opts.get("store_profile") or "auto",
    )
    job_id = check_job_id(opts["job_id"]) if opts.get("job_id") else None
    if_exists = parse_if_exists(opts, overwrite)
    if if_exists and job_id:
        raise ConfigError("option if_exists is for a write that sets up its own job; an "
                          "orchestrated job (job_id) was set up already")
    return WriteConfig(destination=Destination.parse(path), store=store, job=job,
                       files=parse_file_options(opts), job_id=job_id,
                       spool_dir=opts.get("spool_dir") or None,
                       upload_threads=parse_count("upload_threads", opts["upload_threads"])
                       if "upload_threads" in opts else DEFAULT_UPLOAD_THREADS,
                       explicit=explicit, if_exists=if_exists)


def parse_if_exists(opts: Mapping[str, str], overwrite: bool) -> str | None:
    """``if_exists``: Spark's save modes error/errorifexists and ignore, which
    Spark refuses for Python data sources, as an option of ``mode("append")``."""
    given = (opts.get("if_exists") or "").strip().lower()
    if not given:
        return None
    if given not in IF_EXISTS:
        raise ConfigError(f"option if_exists={given!r}: expected one of {sorted(IF_EXISTS)}")
    if overwrite:
        raise ConfigError("option if_exists goes with mode('append'): mode('overwrite') "
                          "replaces what exists")
    return IF_EXISTS[given]
