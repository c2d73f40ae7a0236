"""Finding a job's task manifests: from the engine, a stage manifest, or published ones."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from zero_rename.core.layout import Destination
from zero_rename.core.model import StageManifest, TaskManifest, dump, load
from zero_rename.core.store import S3Store
from zero_rename.core.writes import create_once
from zero_rename.errors import ManifestError

log = logging.getLogger(__name__)


def save_stage_manifest(store: S3Store, dest: Destination, job_id: str,
                        manifests: Sequence[TaskManifest], engine: str = "") -> str:
    """Save the manifests an engine chose, for a commit run later or elsewhere.

    Create-only: an engine's retry that chose the same attempts succeeds; a
    different choice for the same job is refused, since only one can be true.
    """
    stage = StageManifest(job_id=job_id, engine=engine, manifests=tuple(
        sorted(manifests, key=lambda m: m.task_id)))
    key = dest.job(job_id).stage_manifest_key
    existing = create_once(store, dest.bucket, key, dump(stage))
    if existing is not None:
        found = load(StageManifest, existing, f"s3://{dest.bucket}/{key}")
        chosen = sorted(m.task_attempt_id for m in stage.manifests)
        if sorted(m.task_attempt_id for m in found.manifests) != chosen:
            raise ManifestError(f"job {job_id} already has a stage manifest naming other "
                                "task attempts; run a new job")
    log.info("saved stage manifest of job %s: %d task(s)", job_id, len(stage.manifests))
    return f"s3://{dest.bucket}/{key}"


def load_stage_manifest(store: S3Store, dest: Destination,
                        job_id: str) -> list[TaskManifest] | None:
    key = dest.job(job_id).stage_manifest_key
    found = store.get_object(dest.bucket, key)
    if found is None:
        return None
    stage = load(StageManifest, found[0], f"s3://{dest.bucket}/{key}")
    if stage.job_id != job_id:
        raise ManifestError(f"stage manifest {key} belongs to job {stage.job_id}, not {job_id}")
    return list(stage.manifests)


def load_published(store: S3Store, dest: Destination, job_id: str,
                   threads: int = 16) -> list[TaskManifest]:
    """Task manifests published by first-attempt-wins task commits."""
    keys = [o.key for o in store.list_objects(dest.bucket, dest.job(job_id).tasks_dir)
            if o.key.endswith(".json")]

    def read(key: str) -> TaskManifest:
        found = store.get_object(dest.bucket, key)
        if found is None:
            raise ManifestError(f"task manifest {key} vanished while loading")
        return load(TaskManifest, found[0], f"s3://{dest.bucket}/{key}")

    if not keys:
        return []
    with ThreadPoolExecutor(max(1, min(threads, len(keys)))) as pool:
        return list(pool.map(read, keys))


def load_manifests(store: S3Store, dest: Destination, job_id: str,
                   threads: int = 16) -> list[TaskManifest]:
    """The stage manifest's choice if there is one, else the published task manifests."""
    staged = load_stage_manifest(store, dest, job_id)
    if staged is not None:
        return staged
    return load_published(store, dest, job_id, threads)
