"""What a destination holds, read straight from the store (never through the
proxy whose holds the scenarios use): the rows a listing reader sees, the rows
the table's own reader sees, pending uploads and leftovers.

Every row written carries ``(version, id)``: ``version`` names the write that
made it, ``id`` is unique within a write, so duplicates, lost rows and rows of
two writes side by side are counted, not guessed.

- **Listing reader**: what a Hive-style directory reader reads
  (``spark.read.parquet``, a pyarrow dataset, Athena): every ``.parquet`` key
  under the prefix none of whose path elements starts with ``_`` or ``.``
  (the hidden-file rule they share), each file read whole.
- **Table reader**: the files of the table's current state, as its format
  names them (Iceberg through PyIceberg on the shared SQL catalog, Delta
  through ``deltalake``, zero-rename's committed state through
  ``zero_rename.read.snapshot``), read the same way. Plain directories have
  none.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.peers.sessions import Method, Store
from bench.peers.writes import ICEBERG_NAMESPACE, prefix_of

Rows = Counter[tuple[int, int]]  # (version, id) -> how many times a reader sees it
# Objects a committed state keeps on purpose, by path element under the prefix:
# table metadata, zero-rename's job history and claims, success markers.
_DELTA_LOG = "_delta_log"
_ZERO_RENAME = "_zero_rename"
# Where zero-rename keeps an Iceberg table's metadata (write.metadata.path).
_ICEBERG_METADATA = "_iceberg"
_JOB_OBJECT = re.compile(r"^jobs/([^/]+)/(.*)$")
# What a decided job keeps on purpose: its record and file list as history and,
# once committed, the plan's header and committed attempts, which a late attempt
# reads to learn it lost (zero_rename.core.protocol.abort.decided_plan_keys).
_KEPT_ALWAYS = re.compile(r"^(job\.json|files/.*)$")
_KEPT_COMMITTED = re.compile(r"^plan-[^/]+\.json$|^plan-[^/]+/attempts-.*$")
_VERSION_NAMES = {1: "old", 2: "new", 3: "appended"}


@dataclass
class Observed:
    """One look at a destination."""

    listing: Rows
    table: Rows | None  # None: the method has no table reader
    visible_files: int
    table_files: int | None
    unreadable: list[str]  # visible .parquet keys no reader could read
    pending: int  # multipart uploads under the prefix
    leftovers: Counter[str]  # kind -> objects
    local: Counter[str] = field(default_factory=Counter)  # kind -> files on local disk
    leftover_keys: list[str] = field(default_factory=list)
    commits: int | None = None  # the table's commits (snapshots, versions, jobs)


def rows_of(table: Any) -> Rows:
    versions = table.column("version").to_pylist()
    ids = table.column("id").to_pylist()
    return Counter(zip(versions, ids, strict=True))


def expected(version: int, count: int, first: int = 0) -> Rows:
    return Counter((version, i) for i in range(first, first + count))


class Inspector:
    """Reads one row's destination: ``method`` writing ``name`` in ``store``
    (whose endpoint is the server itself, not the proxy)."""

    def __init__(self, client: Any, store: Store, method: Method, name: str) -> None:
        self.client = client
        self.store = store
        self.method = method
        self.name = name
        self.prefix = prefix_of(method, store, name)
        self._rows: dict[tuple[str, str], Rows | None] = {}

    # -- the store ---------------------------------------------------------------
    def objects(self) -> dict[str, str]:
        """Key -> ETag of every object under the prefix."""
        found: dict[str, str] = {}
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.store.bucket, Prefix=self.prefix):
            for item in page.get("Contents", []):
                found[item["Key"]] = item["ETag"]
        return found

    def pending(self) -> int:
        count = 0
        paginator = self.client.get_paginator("list_multipart_uploads")
        for page in paginator.paginate(Bucket=self.store.bucket, Prefix=self.prefix):
            count += len(page.get("Uploads", []))
        return count

    def read(self, key: str, etag: str) -> Rows | None:
        """The rows of one file, or None if it cannot be read as Parquet."""
        cached = (key, etag)
        if cached not in self._rows:
            try:
                body = self.client.get_object(Bucket=self.store.bucket, Key=key)["Body"].read()
                table = pq.read_table(io.BytesIO(body), columns=["id", "version"])
                self._rows[cached] = rows_of(table)
            except Exception:  # a cut or empty object: a reader fails on it
                self._rows[cached] = None
        return self._rows[cached]

    # -- one look ------------------------------------------------------------------
    def observe(self, local_dirs: Mapping[str, Path] | None = None) -> Observed:
        objects = self.objects()
        visible = [k for k in objects if is_listed(k[len(self.prefix) :])]
        listing: Rows = Counter()
        unreadable = []
        for key in visible:
            found = self.read(key, objects[key])
            if found is None:
                unreadable.append(key)
            else:
                listing.update(found)
        table_keys, commits = self.table_state()
        table: Rows | None = None
        if table_keys is not None:
            table = Counter()
            for key in table_keys:
                found = self.read(key, objects.get(key, ""))
                if found is None:
                    unreadable.append(key)
                else:
                    table.update(found)
        leftovers = self.leftovers(objects, visible, table_keys)
        return Observed(
            leftover_keys=sorted(self.leftover_keys(objects)),
            commits=commits,
            listing=listing,
            table=table,
            visible_files=len(visible),
            table_files=None if table_keys is None else len(table_keys),
            unreadable=sorted(set(unreadable)),
            pending=self.pending(),
            leftovers=leftovers,
            local=local_leftovers(local_dirs or {}),
        )

    def job_states(self, objects: Iterable[str]) -> dict[str, str]:
        """zero-rename's job id -> the state its record says."""
        states = {}
        for key in objects:
            found = _JOB_OBJECT.match(key[len(self.prefix + _ZERO_RENAME) + 1 :])
            if key.startswith(self.prefix + _ZERO_RENAME + "/") and found:
                job_id, rest = found.groups()
                if rest == "job.json":
                    body = self.client.get_object(Bucket=self.store.bucket, Key=key)["Body"]
                    states[job_id] = str(json.loads(body.read()).get("state", "?"))
        return states

    def leftover_keys(self, objects: Iterable[str]) -> dict[str, str]:
        """Key -> kind of every object neither data nor kept on purpose."""
        objects = list(objects)
        states = self.job_states(objects) if self.method.zero_rename else {}
        found = {}
        for key in objects:
            kind = leftover_kind(key[len(self.prefix) :], self.method, states)
            if kind:
                found[key] = kind
        return found

    def leftovers(
        self, objects: Iterable[str], visible: list[str], table_keys: list[str] | None
    ) -> Counter[str]:
        """Objects neither data of the current state nor kept on purpose, by kind."""
        kinds: Counter[str] = Counter(self.leftover_keys(objects).values())
        if (
            table_keys is not None
            and self.method.family == "table"
            or (self.method.zero_rename and self.method.table_format != "none")
        ):
            # Data files the table does not name: visible to a listing reader,
            # never to the table's; its maintenance (orphan removal) deletes them.
            named = set(table_keys or ())
            orphans = [k for k in visible if k not in named]
            if orphans:
                kinds["data files outside the table's current version"] += len(orphans)
        return kinds

    # -- the table ---------------------------------------------------------------
    def table_state(self) -> tuple[list[str] | None, int | None]:
        """The data files of the table's current state and how many commits it
        has had; (None, None) for a plain directory."""
        method = self.method
        if method.name == "iceberg-spark":
            return self._iceberg((ICEBERG_NAMESPACE, self.name.replace("-", "_")))
        if method.zero_rename and method.table_format == "iceberg":
            from zero_rename.core.data.layout import Destination
            from zero_rename.core.tables.iceberg_catalog import derived_table_name

            name = derived_table_name(Destination.parse(f"s3://{self.store.bucket}/{self.name}"))
            return self._iceberg(tuple(name.split(".", 1)))
        if method.name == "delta-spark" or method.table_format == "delta":
            return self._delta()
        if method.zero_rename:
            return self._zero_rename()
        return None, None

    def _key(self, uri: str) -> str:
        _, _, rest = uri.partition("://")
        bucket, _, key = rest.partition("/")
        if bucket != self.store.bucket:
            raise ValueError(f"{uri} is outside the bucket {self.store.bucket}")
        return key

    def _iceberg(self, identifier: tuple[str, ...]) -> tuple[list[str], int]:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        catalog = load_catalog(
            "zero_rename",
            type="sql",
            uri=f"sqlite:///{self.store.catalog_db}",
            **{
                "s3.endpoint": self.store.endpoint_url,
                "s3.access-key-id": self.store.access_key,
                "s3.secret-access-key": self.store.secret_key,
                "s3.region": self.store.region,
                "s3.path-style-access": "true",
            },
        )
        try:
            table = catalog.load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            return [], 0
        commits = len(table.metadata.snapshots)
        if table.current_snapshot() is None:
            return [], commits
        return [self._key(task.file.file_path) for task in table.scan().plan_files()], commits

    def _delta(self) -> tuple[list[str], int]:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        options = {
            "AWS_ENDPOINT_URL": self.store.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.store.access_key,
            "AWS_SECRET_ACCESS_KEY": self.store.secret_key,
            "AWS_REGION": self.store.region,
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }
        try:
            table = DeltaTable(f"s3://{self.store.bucket}/{self.name}", storage_options=options)
        except TableNotFoundError:
            return [], 0
        return [self._key(uri) for uri in table.file_uris()], table.version() + 1

    def _zero_rename(self) -> tuple[list[str], int]:
        from zero_rename.core.s3.client import StoreConfig
        from zero_rename.read import snapshot

        config = StoreConfig(endpoint_url=self.store.endpoint_url, region=self.store.region)
        state = snapshot(f"s3://{self.store.bucket}/{self.name}", config)
        return [f.key for f in state.files], len(state.committed_jobs)


def is_listed(relative: str) -> bool:
    """Whether a Hive-style directory reader reads this key as a data file."""
    if not relative.endswith(".parquet"):
        return False
    return not any(part.startswith(("_", ".")) for part in relative.split("/"))


def leftover_kind(
    relative: str, method: Method, job_states: Mapping[str, str] | None = None
) -> str | None:
    """The kind of temporary object ``relative`` is, or None for data, table
    metadata, markers and the history kept on purpose (``job_states``:
    zero-rename's jobs, by id). ``method`` is the writer that left it; every
    method's temporary objects sit under a hidden (``_``/``.``) directory."""
    del method  # the names below do not overlap between methods
    parts = relative.split("/")
    hidden = next((p for p in parts if p.startswith(("_", "."))), None)
    if hidden is None or hidden in ("_SUCCESS", _DELTA_LOG, _ICEBERG_METADATA):
        return None  # data (counted by the readers), a marker or table metadata
    if hidden == _ZERO_RENAME:
        return _zero_rename_kind("/".join(parts[parts.index(hidden) + 1 :]), job_states or {})
    if hidden.startswith("__magic"):
        return "__magic/"
    if hidden.startswith(".spark-staging"):
        return ".spark-staging/"
    if hidden == "_temporary":
        return "_temporary/"
    return hidden + ("/" if hidden != parts[-1] else "")


def _zero_rename_kind(inner: str, job_states: Mapping[str, str]) -> str | None:
    """The kind of an object under ``_zero_rename/``: None for the claims and
    the records a job keeps (its plans too once committed)."""
    job = _JOB_OBJECT.match(inner)
    if inner == "claims.json" or (job and _KEPT_ALWAYS.match(job.group(2))):
        return None
    state = job_states.get(job.group(1), "?") if job else ""
    if state == "committed" and job and _KEPT_COMMITTED.match(job.group(2)):
        return None
    if state in ("committed", "aborted", ""):
        return "_zero_rename/ temporary objects"
    return f"_zero_rename/ objects of a job left {state}"


def local_leftovers(dirs: Mapping[str, Path]) -> Counter[str]:
    """Files left on local disk by a committer, by kind: the S3A staging
    committers' spool and buffers, zero-rename's staging spool (``zr-*``)."""
    kinds: Counter[str] = Counter()
    for kind, root in dirs.items():
        if not root.exists():
            continue
        for path in root.rglob("*"):
            if not path.is_file() or path.name.endswith(".crc"):
                continue
            relative = path.relative_to(root).parts
            if kind == "spool" and not relative[0].startswith("zr-"):
                continue  # other temporary files of Python or Spark
            kinds[kind] += 1
    return kinds


def describe(seen: Rows | None, states: Mapping[str, Rows]) -> str:
    """``seen`` as the name of the state it equals, or what it holds of each write."""
    if seen is None:
        return "-"
    if not seen:
        return "nothing"
    for name, rows in states.items():
        if seen == rows:
            return name
    versions = sorted({v for v, _ in seen})
    parts = []
    for version in versions:
        mine = {k: n for k, n in seen.items() if k[0] == version}
        written = max(
            (len([k for k in rows if k[0] == version]) for rows in states.values()), default=0
        )
        label = _VERSION_NAMES.get(version, f"v{version}")
        text = f"{label} {len(mine):,}/{written:,}" if written else f"{label} {len(mine):,}"
        doubled = sum(n - 1 for n in mine.values() if n > 1)
        if doubled:
            text += f" (+{doubled:,} duplicates)"
        parts.append(text)
    return " + ".join(parts)


def leftover_text(observed: Observed) -> str:
    kinds = observed.leftovers + Counter({f"local {k}": n for k, n in observed.local.items()})
    if observed.unreadable:
        kinds["unreadable data files"] += len(observed.unreadable)
    if not kinds:
        return "none"
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(kinds.items()))
