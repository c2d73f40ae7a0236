"""What a job's Delta commit holds, and what another writer's commit did to it.

The pieces of :mod:`zero_rename.core.tables.delta` that need no store: the
add and remove actions built from what the writers recorded, the table's
schema from the files' Arrow schema, the app transactions that tag a commit,
and the reading of a commit in ``_delta_log/`` written by someone else,
to decide whether it conflicts with the job's.
"""

from __future__ import annotations

import json
import re
import string
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema
from deltalake.transaction import AddAction, RemoveAction, Transaction

from zero_rename.core.data.layout import partition_dir
from zero_rename.core.tables.base import JOB_ID_PROPERTY, Publication, TableFile
from zero_rename.errors import ConfigError

# App transactions (Delta's ``txn`` action) carry ids of this form.
APP_PREFIX = "zero-rename:"
LOG_DIR = "_delta_log"
# Characters of a library's error text kept in one of ours.
ERROR_CHARS = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

Partition = Mapping[str, str | None]


def job_app_id(job_id: str) -> str:
    """The app transaction that marks the commit publishing ``job_id``."""
    return f"{APP_PREFIX}{job_id}"


def partition_app_id(columns: Sequence[str], values: Partition) -> str:
    """The app transaction a replace of one partition carries: two commits carrying
    the same one conflict in delta-rs, which is what stops two replaces of one
    empty partition from both landing (neither removes a file the other reads).
    Named by the partition's directory, escaped as Spark escapes it."""
    return APP_PREFIX + partition_dir(tuple(columns), dict(values)).rstrip("/")


def transactions(publication: Publication, columns: Sequence[str], version: int) -> list[Any]:
    """The job's app transaction, and a replace's one per partition; each carries
    the version the commit lands in, so that finding the job tells its version."""
    return [Transaction(app_id=i, version=version) for i in app_ids(publication, columns)]


def app_ids(publication: Publication, columns: Sequence[str]) -> list[str]:
    ids = [job_app_id(publication.job_id)]
    if publication.replaces and columns:
        ids += sorted({partition_app_id(columns, p) for p in replaced(publication, columns)})
    return ids


def replaced(publication: Publication, columns: Sequence[str]) -> list[Partition]:
    """The partitions a replace removes the files of. A partitioned table's
    partition must name every column: an empty one (what a job that wrote no
    file may hand over) would otherwise read as the whole table."""
    if not publication.replaces:
        return []
    if not columns:
        return [{}]
    return [p for p in publication.partitions if set(p) == set(columns)]


# -- add and remove actions ----------------------------------------------------------


def add_action(file: TableFile, columns: Sequence[str], now_ms: int) -> AddAction:
    """The add action of one of the job's files. ``path`` is the key as written,
    Spark's escaped directory names included (``dt=a%2Fb``): delta-rs
    percent-encodes it into the log itself, so encoding it here would name
    another key."""
    return AddAction(
        path=file.path,
        size=file.size,
        partition_values={c: file.partition.get(c) for c in columns},
        modification_time=now_ms,
        data_change=True,
        stats=stats_json(file, columns),
    )


# Characters of a path as written that the log holds as delta-rs writes them
# (each percent-encoded but these, and non-ASCII as UTF-8 escapes): a commit
# written here names a file as delta-rs's would, so removes match adds.
_LOG_SAFE = "/=+&~"
_WRITABLE = frozenset(string.ascii_letters + string.digits + "-._%/ =+&~")


def log_path(path: str) -> str | None:
    """A file's path as the log writes it (percent-encoded), or None for a path
    with a character whose encoding is left to delta-rs."""
    others = set(path).difference(_WRITABLE)  # a set: a path repeats its characters
    if others and any(ord(c) < 128 for c in others):
        return None
    return quote(path, safe=_LOG_SAFE)


def add_entry(file: TableFile, columns: Sequence[str], now_ms: int) -> dict[str, Any] | None:
    """The add action of one of the job's files as a log line's object, as
    delta-rs writes it (:func:`add_action`); None for a path :func:`log_path`
    leaves to delta-rs."""
    path = log_path(file.path)
    if path is None:
        return None
    add: dict[str, Any] = {
        "path": path,
        "partitionValues": {c: file.partition.get(c) for c in columns},
        "size": file.size,
        "modificationTime": now_ms,
        "dataChange": True,
    }
    stats = stats_json(file, columns)
    if stats:
        add["stats"] = stats
    return {"add": add}


def commit_file(
    publication: Publication,
    columns: Sequence[str],
    version: int,
    adds: Sequence[dict[str, Any]],
    removes: Sequence[dict[str, Any]] = (),
) -> bytes:
    """The commit file of the job at ``version``: its commit info (the job id), its
    app transactions, its files' add actions and a replace's removes, one JSON
    object a line."""
    mode = "Overwrite" if publication.replaces else "Append"
    info = {
        "timestamp": int(time.time() * 1000),
        "operation": "WRITE",
        "operationParameters": {"mode": mode, "partitionBy": json.dumps(list(columns))},
        "isBlindAppend": not publication.replaces,
        "engineInfo": "zero-rename",
        JOB_ID_PROPERTY: publication.job_id,
        "zero-rename.conflict-mode": publication.conflict_mode,
    }
    lines = [{"commitInfo": info}]
    lines += [{"txn": {"appId": i, "version": version}} for i in app_ids(publication, columns)]
    text = "\n".join(json.dumps(line, separators=(",", ":")) for line in [*lines, *adds, *removes])
    return (text + "\n").encode()


class LiveFiles:
    """The table's files in the partitions a replace replaces, as the log names them
    (path as written in the log -> its partition values and size), kept from a
    checkpoint and the commits after it."""

    def __init__(self, publication: Publication, columns: Sequence[str]) -> None:
        partitions = replaced(publication, columns)
        self.wanted = {_partition_key(p) for p in partitions}
        self.everything = () in self.wanted
        self.columns = tuple(columns)
        self.files: dict[str, tuple[dict[str, str | None], int | None]] = {}

    def _replaced(self, values: Mapping[str, str | None] | None) -> dict[str, str | None] | None:
        known = dict(values or {})
        mine = {c: known.get(c) for c in self.columns}
        return mine if self.everything or _partition_key(mine) in self.wanted else None

    def read_checkpoint(self, data: bytes) -> None:
        """The add actions of a single-file checkpoint (Parquet)."""
        table = pq.read_table(pa.BufferReader(data), columns=["add"])
        for add in table.column("add").to_pylist():
            if add is None:
                continue
            values = self._replaced(dict(add.get("partitionValues") or []))
            if values is not None:
                self.files[add["path"]] = (values, add.get("size"))

    def apply(self, actions: Iterable[dict[str, Any]]) -> None:
        """A commit's adds and removes, in order."""
        for action in actions:
            if "add" in action:
                add = action["add"]
                values = self._replaced(add.get("partitionValues"))
                if values is not None:
                    self.files[add["path"]] = (values, add.get("size"))
            elif "remove" in action:
                self.files.pop(action["remove"]["path"], None)

    def removes(self, now_ms: int) -> list[dict[str, Any]]:
        """A remove action (a log line's object) for every file kept."""
        return [
            {
                "remove": {
                    "path": path,
                    "dataChange": True,
                    "deletionTimestamp": now_ms,
                    "extendedFileMetadata": size is not None,
                    "partitionValues": values,
                    **({"size": size} if size is not None else {}),
                }
            }
            for path, (values, size) in self.files.items()
        ]


def stats_json(file: TableFile, columns: Sequence[str]) -> str:
    """Delta's per-file statistics from what the writer recorded: ``numRecords``,
    and per column ``minValues``, ``maxValues``, ``nullCount`` where known.
    Partition columns are left out (their value is in the path), as Delta does.
    Without a row count there are none: readers then skip no file by them."""
    if file.rows is None:
        return ""
    stats: dict[str, Any] = {"numRecords": file.rows}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, column in (file.stats.columns if file.stats else {}).items():
        if name in columns:
            continue
        if column.min is not None:
            mins[name] = column.min
        if column.max is not None:
            maxs[name] = column.max
        if column.nulls is not None:
            nulls[name] = column.nulls
    for key, values in (("minValues", mins), ("maxValues", maxs), ("nullCount", nulls)):
        if values:
            stats[key] = values
    return json.dumps(stats, separators=(",", ":"))


def remove_actions(table: DeltaTable, partitions: Iterable[Partition]) -> list[Any]:
    """Remove actions for every file the table holds in ``partitions`` ({}: all).

    The table's file list gives each path as the log writes it, percent-encoded;
    a remove action takes the path unencoded, as an add action does, and
    delta-rs encodes it again into the same text."""
    wanted = {_partition_key(p) for p in partitions}
    if not wanted:
        return []
    everything = () in wanted
    files = pa.table(table.get_add_actions(flatten=True))
    columns = [n[len("partition.") :] for n in files.column_names if n.startswith("partition.")]
    now = int(time.time() * 1000)
    removes = []
    for row in files.to_pylist():
        values = {c: _partition_text(row[f"partition.{c}"]) for c in columns}
        if everything or _partition_key(values) in wanted:
            removes.append(
                RemoveAction(
                    path=unquote(row["path"]),
                    data_change=True,
                    deletion_timestamp=now,
                    size=row["size_bytes"],
                    partition_values=values,
                )
            )
    return removes


def _partition_key(values: Partition) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(values.items()))


def _partition_text(value: Any) -> str | None:
    """A partition value as the log's ``partitionValues`` writes it: the table's
    file list types it by the column (a date, a number) where ours are text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


# -- schemas ---------------------------------------------------------------------------


def table_schema(files: pa.Schema, columns: Sequence[str]) -> Schema:
    """The Delta schema of a table of these files. Partition columns that the files
    lack (Spark keeps them in the path only) are added as strings, last, as
    Spark orders them.

    Raises:
        ConfigError: a column has a type Delta cannot hold.
    """
    missing = [pa.field(c, pa.string()) for c in columns if c not in files.names]
    arrow = pa.schema([*files, *missing])
    try:
        return Schema.from_arrow(arrow)
    except Exception as exc:  # delta-rs raises a bare Exception for a type it lacks
        raise ConfigError(f"the files' schema cannot be a Delta table's: {one_line(exc)}") from None


def incompatibility(table: DeltaTable, schema: Schema | None, columns: Sequence[str]) -> str:
    """How an existing table differs from what the job writes, or "": its partition
    columns must be the job's, and each column of the job's files one of the
    table's, of the same type (columns the files lack read as nulls)."""
    have = tuple(table.metadata().partition_columns)
    if have != tuple(columns):
        return (
            f"is partitioned by {list(have) or 'nothing'}, the job by {list(columns) or 'nothing'}"
        )
    if schema is None:
        return ""
    existing = {f["name"]: f["type"] for f in _fields(table.schema())}
    for field in _fields(schema):
        name, kind = field["name"], field["type"]
        if name not in existing:
            return f"has no column {name!r}, which the job's files have"
        if existing[name] != kind:
            return (
                f"has column {name!r} of type {_type_name(existing[name])}, "
                f"the job's files {_type_name(kind)}"
            )
    return ""


def _fields(schema: Schema) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = json.loads(schema.to_json())["fields"]
    return fields


def _type_name(kind: Any) -> str:
    return kind if isinstance(kind, str) else str(kind.get("type", kind))


# -- other writers' commits ------------------------------------------------------------


def log_key(prefix_dir: str, version: int) -> str:
    """The key of a version's commit file under the table's directory."""
    return f"{prefix_dir}{LOG_DIR}/{version:020d}.json"


_COMMIT_FILE = re.compile(r"(\d{20})\.json")


def checkpoint_name(version: int) -> str:
    """The name of a version's single-file checkpoint."""
    return f"{version:020d}.checkpoint.parquet"


def commit_version(name: str) -> int | None:
    """The version whose commit file ``name`` (a key's last element) is, or None."""
    found = _COMMIT_FILE.fullmatch(name)
    return int(found.group(1)) if found else None


def is_job_commit(actions: Sequence[dict[str, Any]], job_id: str) -> bool:
    """Whether a commit's actions carry the app transaction of ``job_id``."""
    app = job_app_id(job_id)
    return any("txn" in a and a["txn"].get("appId") == app for a in actions)


def changes_table(actions: Sequence[dict[str, Any]]) -> bool:
    """Whether a commit changed the table's schema, settings or protocol, which a
    job checked at its setup must then be checked against again."""
    return any("metaData" in a or "protocol" in a for a in actions)


def parse_entry(data: bytes) -> list[dict[str, Any]]:
    """A commit file's actions, one JSON object a line."""
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def counts(actions: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """How many files a commit added and removed."""
    return (
        sum(1 for a in actions if "add" in a),
        sum(1 for a in actions if "remove" in a),
    )


def describe(actions: Sequence[dict[str, Any]]) -> str:
    """Who made a commit, for an error: its operation and writer."""
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    job = info.get(JOB_ID_PROPERTY)
    who = f"zero-rename job {job}" if job else info.get("engineInfo") or "an unnamed writer"
    mode = (info.get("operationParameters") or {}).get("mode")
    operation = info.get("operation") or "a commit"
    return f"{operation}{f' ({mode})' if mode else ''} by {who}"


def conflict(
    actions: Sequence[dict[str, Any]], publication: Publication, columns: Sequence[str]
) -> str:
    """What in another writer's commit conflicts with the job's, or "".

    A replace conflicts with any change of data in a partition it replaces
    (its files added or removed, data_change true; for an unpartitioned table,
    anywhere) and with another replace of one of them (its app transaction):
    which of the two writers' rows the partition keeps would depend on timing.
    Compaction (data_change false) does not change data: the retried commit
    removes the compacted files instead. An append conflicts with nothing here;
    a change of the table's schema or partitioning is checked on the fresh
    table by the caller.
    """
    if not publication.replaces:
        return ""
    partitions = replaced(publication, columns)
    wanted = {_partition_key(p) for p in partitions}
    apps = {partition_app_id(columns, p) for p in partitions} if columns else set()
    for action in actions:
        if "txn" in action and action["txn"].get("appId") in apps:
            return f"replaced partition {action['txn']['appId'][len(APP_PREFIX) :]} as well"
        for kind, verb in (("add", "added"), ("remove", "removed")):
            change = action.get(kind)
            if not change or not change.get("dataChange", True):
                continue
            values = {c: (change.get("partitionValues") or {}).get(c) for c in columns}
            if () in wanted or _partition_key(values) in wanted:
                where = partition_dir(tuple(columns), values).rstrip("/") if columns else "it"
                return f"{verb} files in {where}, which this job replaces"
    return ""


def one_line(exc: BaseException) -> str:
    """A library's error as one line: delta-rs's errors run over many lines, with
    terminal colours and the response body of the failed request."""
    text = _ANSI.sub("", str(exc)).replace("\u21b3", "\n")
    parts = [p.strip() for p in text.splitlines() if p.strip() and not p.strip().startswith("<")]
    if not parts:
        return type(exc).__name__
    line = parts[0] if len(parts) == 1 else f"{parts[0]} ... {parts[-1]}"
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."
