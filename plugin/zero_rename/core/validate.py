"""Manifest validation: the task manifests describe exactly one committable job.

Checks every expected task exactly once, no destination key twice, every key
inside the destination and in its partition directory, every manifest from
this job, and (with ListParts) every upload still pending with the parts the
task recorded, as CompleteMultipartUpload will need them. Each problem names
the task, key or upload at fault.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from zero_rename.core.layout import Destination, check_data_key, partition_dir
from zero_rename.core.model import JobRecord, PendingUpload, TaskManifest
from zero_rename.core.store import S3Store
from zero_rename.errors import ConfigError, NoSuchUpload, ValidationError

log = logging.getLogger(__name__)

Expected = int | Collection[str] | None
# Problems quoted in the error message; all of them are in ``problems``.
_SHOWN = 10


def check_manifests(dest: Destination, job: JobRecord, manifests: Sequence[TaskManifest],
                    expected: Expected = None) -> list[str]:
    """Problems found without S3 requests."""
    problems = _task_problems(job, manifests, expected)
    keys = Counter(u.key for m in manifests for u in m.uploads)
    problems += [f"key {k} is written by {n} uploads" for k, n in keys.items() if n > 1]
    for manifest in manifests:
        for upload in manifest.uploads:
            problem = check_data_key(dest, job.job_id, upload.key) or _partition_problem(
                dest, job, upload)
            if problem:
                problems.append(f"task {manifest.task_id}: {problem}")
    return problems


def _task_problems(job: JobRecord, manifests: Sequence[TaskManifest],
                   expected: Expected) -> list[str]:
    problems = [f"manifest of task {m.task_id} belongs to job {m.job_id}, not {job.job_id}"
                for m in manifests if m.job_id != job.job_id]
    tasks = Counter(m.task_id for m in manifests)
    problems += [f"task {t} has {n} manifests" for t, n in sorted(tasks.items()) if n > 1]
    if isinstance(expected, int):
        if len(tasks) != expected:
            problems.append(f"expected {expected} task(s), found manifests of {len(tasks)}")
    elif expected is not None:
        missing = sorted(set(expected) - set(tasks))
        extra = sorted(set(tasks) - set(expected))
        if missing:
            problems.append(f"no manifest for task(s) {missing[:_SHOWN]}"
                            + (f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""))
        if extra:
            problems.append(f"manifests of unexpected task(s) {extra[:_SHOWN]}")
    return problems


def _partition_problem(dest: Destination, job: JobRecord, upload: PendingUpload) -> str | None:
    try:
        relative = partition_dir(job.options.partition_columns, upload.partition)
    except ConfigError as exc:
        return f"{upload.key}: {exc}"
    name = upload.key[len(dest.dir):]
    if name != relative + name.rsplit("/", 1)[-1]:
        return f"{upload.key} is not directly in its partition directory {relative or '(root)'}"
    return None


def check_uploads(store: S3Store, dest: Destination, uploads: Sequence[PendingUpload],
                  threads: int) -> list[str]:
    """Every upload is still pending with the recorded parts (one ListParts each)."""
    if not uploads:
        return []
    with ThreadPoolExecutor(max(1, min(threads, len(uploads)))) as pool:
        results = pool.map(lambda u: _upload_problem(store, dest, u), uploads)
        return [p for p in results if p]


def _upload_problem(store: S3Store, dest: Destination, upload: PendingUpload) -> str | None:
    """Whether CompleteMultipartUpload with the recorded parts would take this upload.

    It would when every recorded part is on S3 with the recorded ETag: a part
    the server lists twice (SeaweedFS, after an UploadPart whose response was
    lost and which botocore sent again) or a part nobody recorded does not
    stop it, so neither stops validation.
    """
    try:
        parts = store.list_parts(dest.bucket, upload.key, upload.upload_id)
    except NoSuchUpload:
        return f"upload {upload.upload_id} of {upload.key} is no longer pending"
    on_s3: dict[int, set[tuple[str, int]]] = {}
    for p in parts:
        on_s3.setdefault(p.number, set()).add((p.etag.strip('"'), p.size))
    differ = [p.number for p in upload.parts
              if (p.etag.strip('"'), p.size) not in on_s3.get(p.number, set())]
    if differ:
        return (f"upload of {upload.key}: part(s) {differ[:10]} on S3 are missing or differ "
                f"from what the manifest recorded (S3 has parts "
                f"{sorted(on_s3)[:10]}{'...' if len(on_s3) > 10 else ''})")
    return None


def validate(store: S3Store, dest: Destination, job: JobRecord,
             manifests: Sequence[TaskManifest], expected: Expected = None) -> None:
    """Raise ValidationError listing every problem, or return if the job can commit."""
    problems = check_manifests(dest, job, manifests, expected)
    if not problems and job.options.verify_uploads:
        uploads = [u for m in manifests for u in m.uploads]
        problems = check_uploads(store, dest, uploads, job.options.threads)
    if problems:
        shown = "; ".join(problems[:_SHOWN])
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        raise ValidationError(f"job {job.job_id} cannot commit: {shown}{more}", problems)
    log.info("validated job %s: %d task manifest(s), %d file(s)", job.job_id, len(manifests),
             sum(len(m.uploads) for m in manifests))
