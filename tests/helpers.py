"""Assertions on what a destination holds: visible files, hidden objects, pending uploads."""

from __future__ import annotations

import re

from tests.buckets import pending_uploads
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import is_visible
from zero_rename.core.data.model import JobRecord, TaskManifest
from zero_rename.core.protocol.planning import load_plan

MIB = 1024 * 1024

KEY, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI"
# A credential typed into an endpoint URL, in every shape: a bad port, another
# scheme or none, '/' or '@' in the secret, percent-encoded, or nothing wrong
# but the credential.
CREDENTIAL_URLS = [
    f"http://{KEY}:{SECRET}@127.0.0.1:99999",
    f"ftp://{KEY}:{SECRET}@127.0.0.1:9000",
    f"{KEY}:{SECRET}@127.0.0.1:9000",
    f"https://{KEY}:{SECRET}@127.0.0.1:0x50",
    f"http://{KEY}:{SECRET[:4]}/{SECRET[4:]}@127.0.0.1:9000",
    f"http://{KEY}:{SECRET[:4]}@{SECRET[4:]}@127.0.0.1:9000",
    f"http://{KEY}:{SECRET}%40127.0.0.1:9000",
    f"http://{KEY}%3A{SECRET}@127.0.0.1:9000",
    f"http://{KEY}:{SECRET}@127.0.0.1:9000",
]


def leaks(text: str) -> bool:
    """Whether ``text`` holds any piece of the credential in :data:`CREDENTIAL_URLS`."""
    return any(piece in text for piece in (KEY, SECRET, SECRET[:4], SECRET[4:]))


def visible(c: Committer, under: str = "") -> dict[str, bytes]:
    """Files table readers see under the destination, relative path -> content."""
    out = {}
    for obj in c.store.list_objects(c.dest.bucket, c.dest.dir + under):
        relative = obj.key[len(c.dest.dir) :]
        if is_visible(relative):
            found = c.store.get_object(c.dest.bucket, obj.key)
            assert found is not None
            out[relative] = found[0]
    return out


def all_keys(c: Committer) -> list[str]:
    return sorted(o.key[len(c.dest.dir) :] for o in c.store.list_objects(c.dest.bucket, c.dest.dir))


def pending(c: Committer, job_id: str | None = None) -> list[str]:
    """Keys of pending uploads under the destination (of one job, if given)."""
    return sorted(u.key for u in c.pending_uploads(job_id))


def pending_in_bucket(c: Committer) -> list[str]:
    """Every pending upload in the destination's bucket, whatever its prefix."""
    return sorted(u["Key"] for u in pending_uploads(c.store.client, c.dest.bucket))


def write_task(
    c: Committer,
    job: JobRecord,
    task_id: str,
    files: dict[str, bytes] | list[bytes],
    attempt: int = 0,
    publish: bool = True,
    commit: bool = True,
    rows: int = 1,
) -> TaskManifest | None:
    """Write files in one task attempt. ``files`` maps a partition value (of the
    first partition column) to content, or is a list of contents for an
    unpartitioned job."""
    ta = c.task_attempt(job, task_id, attempt)
    columns = job.options.partition_columns
    items = files.items() if isinstance(files, dict) else [(None, b) for b in files]
    for value, body in items:
        partition = {columns[0]: value} if columns else None
        with ta.open(partition) as out:
            out.write(body)
            out.rows = rows
    return ta.commit(publish=publish) if commit else None


def history_only(c: Committer, job_id: str) -> bool:
    """Whether all the job keeps after its commit is its history: the record, the
    committed file list, and the decided plan's header and committed attempts."""
    layout = c.dest.job(job_id)
    record = c.job(job_id)
    keys = [o.key for o in c.store.list_objects(c.dest.bucket, layout.dir)]
    allowed = [layout.record_key, layout.files_dir]
    if record.plan_key:
        plan = load_plan(c.ctx, job_id, record.plan_key)
        allowed += [record.plan_key, plan.shards_prefix + "attempts-"]
    return (
        layout.record_key in keys
        and all(any(k.startswith(a) for a in allowed) for k in keys)
        and not any(k.startswith(layout.dir + "plan-") and "/uploads-" in k for k in keys)
    )


def strip_time_zones(c: Committer, job_id: str) -> None:
    """Rewrite the job's record with every time naive, as a hand edit or another
    tool might leave it: ``2024-01-01T00:00:00`` for ``...Z``."""
    key = c.dest.job(job_id).record_key
    found = c.store.get_object(c.dest.bucket, key)
    assert found is not None
    naive = re.sub(rb'(T\d\d:\d\d:\d\d(?:\.\d+)?)(?:Z|[+-]\d\d:\d\d)"', rb'\1"', found[0])
    assert naive != found[0] and b'Z"' not in naive
    c.store.put_object(c.dest.bucket, key, naive)
