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

Each snapshot's files are read from its manifests, which neighbouring snapshots
share: each manifest is read once.
"""

from __future__ import annotations

import logging
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


class _Reader:
    """The data files and manifests snapshots read, each manifest fetched once."""

    def __init__(self, table: Table) -> None:
        self.io = table.io
        self._entries: dict[str, frozenset[str]] = {}

    def manifests(self, snapshot: Snapshot) -> list[ManifestFile]:
        return list(snapshot.manifests(self.io))

    def data_files(self, snapshots: Iterable[Snapshot]) -> tuple[set[str], set[str]]:
        """The live data files and the manifests of ``snapshots``."""
        files: set[str] = set()
        manifests: set[str] = set()
        for snapshot in snapshots:
            for manifest in self.manifests(snapshot):
                manifests.add(manifest.manifest_path)
                files |= self._live(manifest)
        return files, manifests

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
    read; returns how many data files were deleted."""
    refs = {ref.snapshot_id for ref in table.metadata.refs.values()}
    cutoff = datetime_to_millis(before)
    expiring = [
        s for s in table.metadata.snapshots if s.timestamp_ms < cutoff and s.snapshot_id not in refs
    ]
    if not expiring:
        return 0
    reader = _Reader(table)
    # Read before the expiry commits: afterwards the snapshots are gone from the metadata.
    old_files, old_manifests = reader.data_files(expiring)
    table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in expiring]).commit()
    # The table as it is after the expiry, including any commit that landed meanwhile.
    table.refresh()
    kept_files, kept_manifests = reader.data_files(table.metadata.snapshots)
    dest = ctx.dest
    data = _keys(dest.url, old_files - kept_files, data=True)
    metadata = _keys(
        dest.url,
        (old_manifests - kept_manifests) | {s.manifest_list for s in expiring},
        data=False,
    )
    ctx.store.delete_objects(dest.bucket, [dest.dir + k for k in data + metadata])
    log.info(
        "expired %d snapshot(s) of the Iceberg table at %s: %d data file(s) and %d "
        "metadata file(s) deleted",
        len(expiring),
        dest.url,
        len(data),
        len(metadata),
    )
    return len(data)


def _keys(destination: str, paths: Iterable[str], data: bool) -> list[str]:
    """The paths under ``destination``, relative to it: data files where readers see
    them, metadata under ``_iceberg/``; others are not deleted."""
    prefix = destination.rstrip("/") + "/"
    kept = []
    for path in paths:
        if not path.startswith(prefix):
            log.warning("not deleting %s: outside the destination %s", path, destination)
            continue
        relative = path[len(prefix) :]
        if is_visible(relative) if data else relative.startswith(METADATA_PREFIX):
            kept.append(relative)
    return sorted(kept)
