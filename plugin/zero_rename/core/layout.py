"""Where things live: destinations, job prefixes, partition directories, file names.

Everything the protocol keeps for a job sits under ``<dest>/_zero_rename/``:
Spark, Hive, Trino and pyarrow skip names that start with ``_`` when they
list a table, so readers never see it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

from zero_rename.errors import ConfigError

HIDDEN_DIR = "_zero_rename"
SUCCESS_NAME = "_SUCCESS"
# Spark and Hive write this for a null or empty partition value.
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# S3: an object key is at most 1,024 bytes of UTF-8.
MAX_KEY_BYTES = 1024

# The characters Spark escapes in partition directory names on Linux
# (ExternalCatalogUtils.escapePathName), as %XX in upper-case hex.
_ESCAPED = set(chr(c) for c in range(0x01, 0x20)) | set("\"#%'*/:=?\\\x7f{[]^")
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_TASK_ID_RE = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


@dataclass(frozen=True)
class Destination:
    """An S3 destination directory: ``s3://bucket/prefix`` (``s3a://`` accepted)."""

    bucket: str
    prefix: str  # without leading or trailing '/'

    @classmethod
    def parse(cls, url: str) -> Destination:
        """Parse and check a destination URL.

        Raises:
            ConfigError: for another scheme, a bucket root or an unsafe path.
        """
        parsed = urlparse(url.strip())
        if parsed.scheme not in ("s3", "s3a"):
            raise ConfigError(f"destination {url!r} must be an s3:// or s3a:// URL")
        bucket = parsed.netloc
        if not _BUCKET_RE.match(bucket):
            raise ConfigError(f"destination {url!r} has an invalid bucket name {bucket!r}")
        parts = [p for p in parsed.path.split("/") if p]
        if not parts:
            raise ConfigError(
                f"destination {url!r} is a bucket root; give a directory such as s3://{bucket}/table"
            )
        for part in parts:
            if part in (".", "..") or part.startswith(HIDDEN_DIR):
                raise ConfigError(f"destination {url!r} has an unsafe path element {part!r}")
        return cls(bucket=bucket, prefix="/".join(parts))

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def dir(self) -> str:
        """The key prefix of the destination, always ending in '/'.

        The trailing '/' keeps ``out/ds1`` from matching ``out/ds10`` in
        prefix listings (the bug the zero-rename paper found in S3A cleanup).
        """
        return self.prefix + "/"

    @property
    def success_key(self) -> str:
        return self.dir + SUCCESS_NAME

    @property
    def hidden_dir(self) -> str:
        return f"{self.dir}{HIDDEN_DIR}/"

    @property
    def jobs_dir(self) -> str:
        return f"{self.hidden_dir}jobs/"

    def job(self, job_id: str) -> JobLayout:
        return JobLayout(self, check_job_id(job_id))


@dataclass(frozen=True)
class JobLayout:
    """The keys one job keeps under the destination's hidden directory."""

    dest: Destination
    job_id: str

    @property
    def dir(self) -> str:
        return f"{self.dest.jobs_dir}{self.job_id}/"

    @property
    def record_key(self) -> str:
        return self.dir + "job.json"

    @property
    def tasks_dir(self) -> str:
        return self.dir + "tasks/"

    def task_manifest_key(self, task_id: str) -> str:
        return f"{self.tasks_dir}{check_task_id(task_id)}.json"

    @property
    def stage_manifest_key(self) -> str:
        return self.dir + "stage.json"

    def plan_key(self, plan_id: str) -> str:
        return f"{self.dir}plan-{plan_id}.json"

    @property
    def journal_dir(self) -> str:
        return self.dir + "journal/"

    def journal_key(self, seq: int) -> str:
        return f"{self.journal_dir}{seq:08d}.json"


def new_job_id() -> str:
    return str(uuid.uuid4())


def check_job_id(job_id: str) -> str:
    """A job id is a UUID: its text is in every file name the job writes,
    which is how a listing of pending uploads finds exactly this job's."""
    try:
        return str(uuid.UUID(str(job_id)))
    except ValueError:
        raise ConfigError(f"job id {job_id!r} is not a UUID") from None


def check_task_id(task_id: str) -> str:
    if not _TASK_ID_RE.match(task_id):
        raise ConfigError(f"task id {task_id!r} must be 1-64 letters, digits, '-' or '_'")
    return task_id


def escape_partition_value(value: str | None) -> str:
    """Escape a partition value as Spark does for a directory name."""
    if value is None or value == "":
        return DEFAULT_PARTITION
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def unescape_partition_value(text: str) -> str | None:
    if text == DEFAULT_PARTITION:
        return None
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text) and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def partition_dir(columns: tuple[str, ...], values: dict[str, str | None]) -> str:
    """The relative directory of a partition, e.g. ``dt=2024-01-01/region=eu/``.

    Raises:
        ConfigError: when the values do not name exactly the partition columns.
    """
    if set(values) != set(columns):
        raise ConfigError(
            f"partition values {sorted(values)} do not match partition columns {list(columns)}"
        )
    parts = []
    for column in columns:
        value = values[column]
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"partition value of {column!r} must be a string or None")
        parts.append(f"{escape_partition_value(column)}={escape_partition_value(value)}/")
    return "".join(parts)


def parse_partition_dir(columns: tuple[str, ...], relative: str) -> dict[str, str | None]:
    """Inverse of :func:`partition_dir` for a key relative to the destination."""
    elements = relative.split("/")[: len(columns)]
    values: dict[str, str | None] = {}
    for column, element in zip(columns, elements):
        name, sep, text = element.partition("=")
        if not sep or unescape_partition_value(name) != column:
            raise ConfigError(f"{relative!r} is not under a {column}=... partition directory")
        values[column] = unescape_partition_value(text)
    return values


def data_file_name(task_id: str, job_id: str, seq: int, extension: str) -> str:
    """``part-00003-<job id>.c000.parquet``: unique per job and task, as Spark names files."""
    if extension and not re.match(r"^(\.[A-Za-z0-9]{1,16})+$", extension):
        raise ConfigError(f"file extension {extension!r} must look like '.parquet' or '.snappy.parquet'")
    return f"part-{check_task_id(task_id)}-{job_id}.c{seq:03d}{extension}"


def is_visible(relative_key: str) -> bool:
    """Whether table readers see this key: no path element starts with '_' or '.'."""
    return not any(p.startswith(("_", ".")) for p in relative_key.split("/"))


def check_data_key(dest: Destination, job_id: str, key: str) -> str | None:
    """Return why ``key`` may not be a data file of ``job_id`` in ``dest``, or None."""
    if not key.startswith(dest.dir):
        return f"key {key!r} is outside the destination {dest.url}"
    relative = key[len(dest.dir) :]
    elements = relative.split("/")
    if any(e in ("", ".", "..") for e in elements):
        return f"key {key!r} has an empty, '.' or '..' path element"
    if not is_visible(relative):
        return f"key {key!r} is hidden from readers (an element starts with '_' or '.')"
    if job_id not in elements[-1]:
        return f"file name of {key!r} does not carry the job id {job_id}"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        return f"key {key[:80]!r}... is longer than S3's {MAX_KEY_BYTES} bytes"
    return None
