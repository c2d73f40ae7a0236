"""Where things live: destinations, job prefixes, partition directories, file names.

Everything the protocol keeps for a job sits under ``<dest>/_zero_rename/``:
Spark, Hive, Trino and pyarrow skip names that start with ``_`` when they
list a table, so readers never see it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from zero_rename.core.s3.redact import has_userinfo, shown_url
from zero_rename.errors import ConfigError

HIDDEN_DIR = "_zero_rename"
RECORD_NAME = "job.json"
SUCCESS_NAME = "_SUCCESS"
# Spark and Hive write this for a null or empty partition value.
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# S3: an object key is at most 1,024 bytes of UTF-8, a bucket name 63 characters.
MAX_KEY_BYTES = 1024
MAX_BUCKET_CHARS = 63
# The longest destination URL any S3 key could be under: s3a://, the bucket, '/',
# a key. Longer text is refused before it is looked at any further.
MAX_DESTINATION_CHARS = len("s3a://") + MAX_BUCKET_CHARS + 1 + MAX_KEY_BYTES

# The characters Spark escapes in partition directory names on Linux
# (ExternalCatalogUtils.escapePathName), as %XX in upper-case hex.
_ESCAPED = set(chr(c) for c in range(0x01, 0x20)) | set("\"#%'*/:=?\\\x7f{[]^")
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
# Matched with fullmatch: '$' would let a trailing newline through.
_TASK_ID_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")
_EXTENSION_RE = re.compile(r"(\.[A-Za-z0-9]{1,16})+")
# ``part-<task>-<job id>.c<seq><ext>``, as data_file_name names files, whole.
# A task id may itself look like a UUID (even another job's id): the job id is
# the one right before ``.c<seq>``, as no task id holds a '.'.
_FILE_NAME_RE = re.compile(
    r"part-[A-Za-z0-9_\-]{1,64}-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"\.c\d{3,}(?:\.[A-Za-z0-9]{1,16})*"
)


@dataclass(frozen=True)
class Destination:
    """An S3 destination directory: ``s3://bucket/prefix`` (``s3a://`` accepted)."""

    bucket: str
    prefix: str  # without leading or trailing '/'

    @classmethod
    def parse(cls, url: str) -> Destination:
        """Parse and check a destination URL.

        Anything a URL parser would silently drop or reinterpret is refused
        rather than guessed: ``s3://b/events#x`` would otherwise write (and in
        ``replace`` mode delete) ``s3://b/events``. Credentials in the URL are
        refused without echoing them.

        Raises:
            ConfigError: for another scheme, a bucket root, credentials, a query
                or fragment, an empty or unsafe path element.
        """
        text = url.strip() if isinstance(url, str) else ""
        check_destination_length(text)
        shown = shown_url(text)
        scheme, sep, rest = text.partition("://")
        if not sep or scheme.lower() not in ("s3", "s3a"):
            raise ConfigError(f"destination {shown!r} must be an s3:// or s3a:// URL")
        if has_userinfo(rest):
            # AWS secret keys contain '/', so "s3://KEY:SE/CRET@bucket/t" splits
            # anywhere: any '@' is taken for a credential and nothing before it shown.
            raise ConfigError(
                f"destination {shown!r} looks like it carries credentials ('@'); remove "
                "them: zero-rename takes credentials only from boto3's standard chain "
                "(environment, profile, role)"
            )
        bucket, _, path = rest.partition("/")
        if any(c in text for c in "?#") or any(ord(c) < 0x20 or c == "\x7f" for c in text):
            raise ConfigError(
                f"destination {shown!r} has a query, a fragment or a control character; "
                "S3 URLs here are s3://bucket/path with neither '?' nor '#'"
            )
        check_key_text("destination", text)
        if not _BUCKET_RE.fullmatch(bucket):
            raise ConfigError(f"destination {shown!r} has an invalid bucket name {bucket!r}")
        parts = path.split("/")
        if parts and parts[-1] == "":
            parts.pop()  # one trailing '/' names the same directory
        if not parts:
            raise ConfigError(
                f"destination {shown!r} is a bucket root; give a directory such as "
                f"s3://{bucket}/table"
            )
        for part in parts:
            if part in ("", ".", "..") or part.startswith(HIDDEN_DIR):
                raise ConfigError(
                    f"destination {shown!r} has an empty or unsafe path element {part!r}"
                )
        prefix = "/".join(parts)
        if len(prefix.encode("utf-8")) + 1 > MAX_KEY_BYTES:
            raise ConfigError(
                f"destination {shown!r} is longer than any S3 key can be "
                f"({MAX_KEY_BYTES:,} bytes, and its files' keys start with it)"
            )
        return cls(bucket=bucket, prefix=prefix)

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
        return self.dir + RECORD_NAME

    @property
    def tasks_dir(self) -> str:
        return self.dir + "tasks/"

    def task_manifest_key(self, task_id: str) -> str:
        return f"{self.tasks_dir}{check_task_id(task_id)}.json"

    @property
    def stage_manifest_key(self) -> str:
        return self.dir + "stage.json"

    def stage_shards_dir(self, digest: str) -> str:
        """Shards of one engine's choice of task manifests, named by its digest, so
        that two different choices never write over each other's shards."""
        return f"{self.dir}stage/{digest}/"

    def plan_key(self, plan_id: str) -> str:
        return f"{self.dir}plan-{plan_id}.json"

    def plan_dir(self, plan_id: str) -> str:
        return f"{self.dir}plan-{plan_id}/"

    @property
    def files_dir(self) -> str:
        """The committed file list's shards: kept, like the record, as history."""
        return self.dir + "files/"

    @property
    def journal_dir(self) -> str:
        return self.dir + "journal/"

    def journal_key(self, seq: int) -> str:
        return f"{self.journal_dir}{seq:08d}.json"


def check_destination_length(text: str) -> str:
    """Refuse a destination URL longer than any S3 key can be under, before
    anything else is done with it (the command line and the Commits page call
    this first): one line naming its length, its first characters masked.

    Raises:
        ConfigError: ``text`` is longer than MAX_DESTINATION_CHARS.
    """
    if len(text) > MAX_DESTINATION_CHARS:
        raise ConfigError(
            f"destination {shown_url(text)[:60]!r}... is {len(text):,} characters, longer than "
            f"any S3 URL can be (s3://, a bucket of at most {MAX_BUCKET_CHARS} characters, "
            f"a key of at most {MAX_KEY_BYTES:,} bytes)"
        )
    return text


def check_bucket_name(name: str, what: str = "bucket name") -> str:
    """Raises ConfigError unless ``name`` is an S3 bucket name: 3-63 lower-case
    letters, digits, dots and hyphens, a letter or digit at each end."""
    if not isinstance(name, str) or not _BUCKET_RE.fullmatch(name):
        raise ConfigError(f"{what} {shown_url(str(name))!r} is not a valid S3 bucket name")
    return name


def check_key_text(what: str, text: str) -> str:
    """Refuse text no S3 key may hold, naming ``what`` it is: a NUL (servers refuse
    it, or a C library cuts the key there) or a lone surrogate (Python's stand-in
    for bytes that are not UTF-8, as from a non-UTF-8 command line), which S3's
    UTF-8 keys cannot carry.

    Raises:
        ConfigError: saying which text, escaped.
    """
    if "\x00" in text:
        raise ConfigError(f"{what} {text[:80]!r} holds a NUL character, which S3 keys may not")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} {text[:80]!r} is not valid UTF-8 text (a lone surrogate), "
            "which S3 keys must be"
        ) from None
    return text


def check_key_length(key: str) -> str:
    """Raises ConfigError for a key longer than S3 takes, before anything is written."""
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise ConfigError(
            f"key {key[:80]!r}... is longer than S3's {MAX_KEY_BYTES} bytes; "
            "shorten the destination or the partition values"
        )
    return key


def new_job_id() -> str:
    return str(uuid.uuid4())


def check_job_id(job_id: str) -> str:
    """A job id is a UUID in canonical form (lower case, hyphenated): its text is in
    every file name the job writes, which is how a listing of pending uploads finds
    exactly this job's. Another spelling of the same UUID would name other files,
    so it is refused rather than normalised."""
    text = str(job_id)
    try:
        canonical = str(uuid.UUID(text))
    except ValueError:
        raise ConfigError(f"job id {text[:80]!r} is not a UUID") from None
    if text != canonical:
        raise ConfigError(f"job id {text[:80]!r} is not in canonical form; write it as {canonical}")
    return text


# A job id may be given by its first characters, as git takes a commit's: at least
# these many (a 32-bit prefix), the shortest the Commits page and the CLI show.
SHORT_JOB_ID = 8
_JOB_ID_SHAPE = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
_HEX = frozenset("0123456789abcdef")


def check_job_ref(text: str) -> str:
    """A job id, or the first :data:`SHORT_JOB_ID` characters of one or more (in its
    canonical form: lower-case hex, hyphens where a UUID has them). Returns it as
    given; :meth:`~zero_rename.core.data.records.JobRecords.resolve` finds the job.

    Raises:
        ConfigError: not the start of a job id, or too short to name one."""
    text = str(text)
    if len(text) == len(_JOB_ID_SHAPE):
        return check_job_id(text)
    shaped = len(text) < len(_JOB_ID_SHAPE) and all(
        (c == "-") if s == "-" else (c in _HEX) for c, s in zip(text, _JOB_ID_SHAPE, strict=False)
    )
    if not shaped:
        hint = "; write it in lower case" if text != text.lower() else ""
        raise ConfigError(f"job id {text[:80]!r} is not a UUID, nor the start of one{hint}")
    if len(text) < SHORT_JOB_ID:
        raise ConfigError(
            f"job id {text!r} is too short: give at least its first {SHORT_JOB_ID} characters"
        )
    return text


def check_task_id(task_id: str) -> str:
    if not isinstance(task_id, str) or not _TASK_ID_RE.fullmatch(task_id):
        raise ConfigError(f"task id {str(task_id)[:80]!r} must be 1-64 letters, digits, '-' or '_'")
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
        check_key_text(f"partition value of {column!r}", value or "")
        parts.append(f"{escape_partition_value(column)}={escape_partition_value(value)}/")
    return "".join(parts)


def parse_partition_dir(columns: tuple[str, ...], relative: str) -> dict[str, str | None]:
    """Inverse of :func:`partition_dir` for a key relative to the destination."""
    elements = relative.split("/")[: len(columns)]
    values: dict[str, str | None] = {}
    for column, element in zip(columns, elements, strict=False):
        name, sep, text = element.partition("=")
        if not sep or unescape_partition_value(name) != column:
            raise ConfigError(f"{relative!r} is not under a {column}=... partition directory")
        values[column] = unescape_partition_value(text)
    return values


def partition_values(relative_dir: str) -> tuple[tuple[str, str | None], ...] | None:
    """``(column, value)`` of each ``column=value`` directory, unescaped; None when
    an element is not one (not a Hive-style layout)."""
    pairs = []
    for element in [e for e in relative_dir.split("/") if e]:
        name, sep, text = element.partition("=")
        if not sep:
            return None
        pairs.append((unescape_partition_value(name) or name, unescape_partition_value(text)))
    return tuple(pairs)


def partition_key(relative_dir: str) -> str:
    """The key an orchestrator names a partition by: ``dt=2024-01-01`` gives
    ``2024-01-01``, as a daily schedule's run keys it; several columns give their
    values joined by ``/`` (``2024-01-01/eu``); a null value is Spark's
    ``__HIVE_DEFAULT_PARTITION__``."""
    pairs = partition_values(relative_dir)
    if pairs is None:
        return relative_dir.strip("/")  # not column=value directories: keep it
    return "/".join(DEFAULT_PARTITION if v is None else v for _, v in pairs)


def file_job_id(key: str) -> str | None:
    """The job that wrote the file at ``key`` (a key or a bare file name), as its
    name says (:func:`data_file_name`), or None for a name no job wrote.

    The one reading of a file name: sweeps, job-scoped listings and aborts,
    conflict checks, validation and snapshots all attribute files by it, so
    none of them takes a UUID-shaped task id for the job.
    """
    found = _FILE_NAME_RE.fullmatch(key.rsplit("/", 1)[-1])
    return found.group(1) if found else None


def data_file_name(task_id: str, job_id: str, seq: int, extension: str) -> str:
    """``part-00003-<job id>.c000.parquet``: unique per job and task, as Spark names files."""
    if extension and not _EXTENSION_RE.fullmatch(extension):
        raise ConfigError(
            f"file extension {extension!r} must look like '.parquet' or '.snappy.parquet'"
        )
    return f"part-{check_task_id(task_id)}-{job_id}.c{seq:03d}{extension}"


def is_visible(relative_key: str) -> bool:
    """Whether table readers see this key as a file: no path element starts with
    '_' or '.', and it is not a directory marker (a key ending in '/', which
    consoles and some tools create for empty "folders")."""
    if not relative_key or relative_key.endswith("/"):
        return False
    return not any(p.startswith(("_", ".")) for p in relative_key.split("/"))


def is_job_data_key(
    dest: Destination, job_id: str, key: str, columns: tuple[str, ...] | None = None
) -> bool:
    """Whether ``key`` is where ``job_id`` could have written a data file in ``dest``.

    Job-scoped sweeps list the destination's pending uploads and keep only
    these: a job id alone is not enough when another destination nested inside
    this one reused it (``s3://b/nest`` and ``s3://b/nest/inner``). A file of
    this job sits in as many ``column=value`` directories as it has partition
    columns (any number, each with '=', when the columns are unknown) and is
    named ``part-<task>-<job id>.c<n><ext>``.
    """
    if not key.startswith(dest.dir):
        return False
    *dirs, name = key[len(dest.dir) :].split("/")
    if file_job_id(name) != job_id:
        return False
    if columns is None:
        return all("=" in d and not d.startswith(("_", ".")) for d in dirs)
    return len(dirs) == len(columns) and all(
        d.startswith(escape_partition_value(c) + "=") for d, c in zip(dirs, columns, strict=True)
    )


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
    if file_job_id(elements[-1]) != job_id:
        return f"file name of {key!r} is not part-<task>-<job id>.c<n> with the job id {job_id}"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        return f"key {key[:80]!r}... is longer than S3's {MAX_KEY_BYTES} bytes"
    return None
