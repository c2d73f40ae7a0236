"""Snapshot expiry for the Iceberg tables zero-rename publishes, with the deletes
PyIceberg 0.12 leaves out.

PyIceberg's ``expire_snapshots`` only removes snapshots from the table's
metadata; the files a ``replace`` dropped stay in the bucket, where Hive-style
readers of the directory still list them. Here, after the expiry committed,
the data files that the expired snapshots read and that no remaining snapshot
reads are deleted, as Iceberg's own expiry does, and so are the expired
snapshots' manifest lists and the manifests only they referenced. Only keys
under the destination are deleted, data files outside ``_`` folders, metadata
under ``_iceberg/``: a table may name files elsewhere, which are not ours.

Once the expiry has committed, nothing in the table names those files any
more, so a crash before the deletes would leave them for good. The candidates
are therefore written to a journal under ``_iceberg/expiry/`` first, and every
run first finishes the journals an earlier run left. A candidate is deleted
only if no snapshot of the table as it is then reads it, so finishing a
journal whose expiry never committed deletes nothing.

Each snapshot's files are read from its manifests, which neighbouring snapshots
share: each manifest is read once.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from datetime import datetime

from pyiceberg.manifest import DataFileContent, ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.utils.datetime import datetime_to_millis

from zero_rename.core.data.layout import is_visible
from zero_rename.core.data.records import JobContext

log = logging.getLogger(__name__)

METADATA_PREFIX = "_iceberg/"
JOURNAL_PREFIX = "_iceberg/expiry/"


class _Reader:
    """The data files and manifests snapshots read, each manifest fetched once."""

    def __init__(self, table: Table) -> None:
        self.io = table.io
        self._entries: dict[str, frozenset[str]] = {}

    def files(self, snapshots: Iterable[Snapshot]) -> set[str]:
        """Every path ``snapshots`` read: live data files, manifests, manifest lists."""
        paths: set[str] = set()
        for snapshot in snapshots:
            paths.add(snapshot.manifest_list)
            for manifest in snapshot.manifests(self.io):
                paths.add(manifest.manifest_path)
                paths |= self._live(manifest)
        return paths

    def _live(self, manifest: ManifestFile) -> frozenset[str]:
        path = manifest.manifest_path
        if path not in self._entries:
            self._entries[path] = frozenset(
                entry.data_file.file_path
                for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True)
                if entry.data_file.content == DataFileContent.DATA
            )
        return self._entries[path]


def expire_snapshots(ctx: JobContext, table: Table, before: datetime) -> int:
    """Expire ``table``'s snapshots older than ``before`` and delete what only they
    read; returns how many data files were deleted (an earlier run's left ones
    included)."""
    reader = _Reader(table)
    deleted = _finish_journals(ctx, table, reader)
    expiring = _expiring(table, before)
    if not expiring:
        return deleted
    # Read before the expiry commits: afterwards nothing names these files.
    candidates = _ours(ctx.dest.url, reader.files(expiring))
    journal = f"{ctx.dest.dir}{JOURNAL_PREFIX}{uuid.uuid4().hex}.json"
    ctx.store.put_object(ctx.dest.bucket, journal, json.dumps(candidates).encode())
    table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in expiring]).commit()
    log.info("expired %d snapshot(s) of the Iceberg table at %s", len(expiring), ctx.dest.url)
    return deleted + _delete_unread(ctx, table, reader, candidates, journal)


def expirable_files(ctx: JobContext, table: Table, before: datetime) -> list[str]:
    """The data files (relative to the destination) :func:`expire_snapshots` would
    delete now: those an earlier run's journals name that no snapshot reads, and
    those only the snapshots older than ``before`` read. Reads, never writes."""
    reader = _Reader(table)
    expiring = _expiring(table, before)
    gone = {s.snapshot_id for s in expiring}
    kept = [s for s in table.metadata.snapshots if s.snapshot_id not in gone]
    doomed = set(_ours(ctx.dest.url, reader.files(expiring))) - set(
        _ours(ctx.dest.url, reader.files(kept))
    )
    prefix = ctx.dest.dir + JOURNAL_PREFIX
    journaled: set[str] = set()
    for found in ctx.store.list_objects(ctx.dest.bucket, prefix):
        got = ctx.store.get_object(ctx.dest.bucket, found.key)
        journaled |= set(json.loads(got[0])) if got is not None else set()
    doomed |= journaled - set(_ours(ctx.dest.url, reader.files(table.metadata.snapshots)))
    return sorted(k for k in doomed if not k.startswith(METADATA_PREFIX))


def _expiring(table: Table, before: datetime) -> list[Snapshot]:
    """The snapshots older than ``before``, but a branch's or tag's head."""
    refs = {ref.snapshot_id for ref in table.metadata.refs.values()}
    cutoff = datetime_to_millis(before)
    return [
        s for s in table.metadata.snapshots if s.timestamp_ms < cutoff and s.snapshot_id not in refs
    ]


def _finish_journals(ctx: JobContext, table: Table, reader: _Reader) -> int:
    deleted = 0
    prefix = ctx.dest.dir + JOURNAL_PREFIX
    for found in list(ctx.store.list_objects(ctx.dest.bucket, prefix)):
        got = ctx.store.get_object(ctx.dest.bucket, found.key)
        if got is None:
            continue  # finished by another run meanwhile
        log.info("finishing the expiry an earlier run left at %s", found.key)
        candidates = json.loads(got[0])
        deleted += _delete_unread(ctx, table, reader, candidates, found.key)
    return deleted


def _delete_unread(
    ctx: JobContext, table: Table, reader: _Reader, candidates: list[str], journal: str
) -> int:
    """Delete the candidates (keys relative to the destination) that no snapshot of
    the table as it is now reads, then the journal; returns the data files deleted."""
    table.refresh()  # any commit that landed meanwhile included
    read = _ours(ctx.dest.url, reader.files(table.metadata.snapshots))
    doomed = sorted(set(candidates) - set(read))
    dest = ctx.dest
    ctx.store.delete_objects(dest.bucket, [dest.dir + k for k in doomed])
    ctx.store.delete_objects(dest.bucket, [journal])
    data = sum(1 for k in doomed if not k.startswith(METADATA_PREFIX))
    log.info(
        "deleted %d data file(s) and %d metadata file(s) no snapshot of the Iceberg table "
        "at %s reads",
        data,
        len(doomed) - data,
        dest.url,
    )
    return data


def _ours(destination: str, paths: Iterable[str]) -> list[str]:
    """The paths under ``destination``, relative to it: data files where readers see
    them, metadata under ``_iceberg/``; others are never deleted."""
    prefix = destination.rstrip("/") + "/"
    kept = []
    for path in paths:
        if not path.startswith(prefix):
            log.debug("not ours to delete: %s is outside %s", path, destination)
            continue
        relative = path[len(prefix) :]
        if is_visible(relative) or relative.startswith(METADATA_PREFIX):
            kept.append(relative)
    return sorted(kept)
