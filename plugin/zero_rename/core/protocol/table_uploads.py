"""The table formats' own pending uploads at a destination, and ending them.

A table format writes its metadata beside the files (Iceberg's manifests,
manifest lists and ``metadata.json`` under ``_iceberg/``, Delta's log in
``_delta_log/``), through its own S3 client. A write sent as a multipart
upload whose answer was lost, or cut by a killed process, leaves that upload
pending: invisible, billed, and named by no job (the format names its objects
by fresh UUIDs). PyIceberg's writes are single PutObjects below 10 MiB
(:mod:`zero_rename.core.tables.iceberg_io`), delta-rs's log and checkpoints
single PUTs as well, so this is for the large ones, and for other writers.

A pending upload in the job's format folder goes at the job's cleanup when
a write of its key in this process has ended (:mod:`zero_rename.core.tables.ended`),
or when it started more than :data:`ABANDONED_AFTER` ago: no format keeps
one metadata write open that long, so nobody will complete it
(:func:`zero_rename.core.protocol.abort.end_table_uploads`). Younger ones of
unknown writers are left alone: another writer's commit (a job on other
partitions, a Spark job) may be writing them now. ``zero-rename uploads list``
shows them, ``uploads abort --all-older-than`` sweeps them past that age too.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from zero_rename.core.data.layout import Destination
from zero_rename.core.s3.client import UploadInfo
from zero_rename.core.tables.registry import folders

# A table format's metadata write still pending this long after it started is
# abandoned: one object of metadata takes seconds to write, never an hour.
ABANDONED_AFTER = timedelta(hours=1)


def table_format_of(key: str) -> str | None:
    """The table format whose folder holds ``key`` (a path element of it is one),
    or None."""
    elements = key.split("/")[:-1]
    return next((f for f, d in folders().items() if d in elements), None)


def folder(dest: Destination, table_format: str) -> str | None:
    """The key prefix of the format's folder at ``dest``; None for no format."""
    name = folders().get(table_format)
    return f"{dest.dir}{name}/" if name else None


def abandoned(upload: UploadInfo, now: datetime) -> bool:
    return upload.initiated is not None and now - upload.initiated >= ABANDONED_AFTER
