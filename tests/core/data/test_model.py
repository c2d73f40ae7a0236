"""Commit data: versioned JSON that refuses what it cannot trust."""

from __future__ import annotations

import hashlib
import json

import pytest

from zero_rename.core.data.model import JobRecord, Part, PendingUpload, TaskManifest, dump, load
from zero_rename.core.data.options import JobOptions
from zero_rename.core.s3.redact import error_line
from zero_rename.errors import ManifestError

JOB = "0b7f3c1e-5d2a-4c8e-9f1a-2b3c4d5e6f70"


def upload(key: str = "t/part-0", parts: int = 2) -> PendingUpload:
    ps = tuple(
        Part(number=i + 1, etag=f'"{hashlib.md5(bytes([i])).hexdigest()}"', size=10)
        for i in range(parts)
    )
    return PendingUpload(key=key, upload_id="u1", parts=ps, bytes=10 * parts, rows=3)


def test_manifest_round_trips() -> None:
    m = TaskManifest(
        job_id=JOB,
        task_id="00001",
        attempt=0,
        task_attempt_id="a",
        committer="magic",
        uploads=(upload(),),
    )
    again = load(TaskManifest, dump(m), "here")
    assert again == m
    assert json.loads(dump(m))["kind"] == "zero-rename/task-manifest"


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(kind="zero-rename/job"), "kind"),
        (lambda d: d.update(extra="x"), "extra"),
        (lambda d: d["uploads"][0].update(bytes=5), "add up"),
        (lambda d: d["uploads"][0]["parts"].reverse(), "numbered"),
        (lambda d: d["uploads"][0].update(parts=[]), "parts"),
    ],
)
def test_manifest_refuses_bad_documents(mutate, message: str) -> None:  # noqa: ANN001
    m = TaskManifest(
        job_id=JOB,
        task_id="00001",
        attempt=0,
        task_attempt_id="a",
        committer="magic",
        uploads=(upload(),),
    )
    doc = json.loads(dump(m))
    mutate(doc)
    with pytest.raises(ManifestError, match="not a valid TaskManifest"):
        load(TaskManifest, json.dumps(doc).encode(), "s3://b/k")
    with pytest.raises(ManifestError, match=message):
        load(TaskManifest, json.dumps(doc).encode(), "s3://b/k")


def test_garbage_is_a_manifest_error() -> None:
    with pytest.raises(ManifestError, match="s3://b/k"):
        load(JobRecord, b"{not json", "s3://b/k")


def test_expected_etag_is_md5_of_part_md5s() -> None:
    u = upload(parts=2)
    digests = b"".join(bytes.fromhex(p.etag.strip('"')) for p in u.parts)
    assert u.expected_etag() == f'"{hashlib.md5(digests).hexdigest()}-2"'
    opaque = u.model_copy(update={"parts": (Part(number=1, etag="opaque", size=20),)})
    assert opaque.expected_etag() is None


def test_job_record_keeps_options() -> None:
    r = JobRecord(job_id=JOB, destination="s3://b/t", options=JobOptions(partition_columns=("dt",)))
    assert load(JobRecord, dump(r), "x").options.partition_columns == ("dt",)


def test_a_version_5_record_still_loads_and_a_step_keeps_its_error() -> None:
    """Version 6 adds a step's error and the statuses of steps an abort or a rollback
    stopped; a record written before loads as it was."""
    old = json.loads(dump(JobRecord(job_id=JOB, destination="s3://b/t", options=JobOptions())))
    old["version"] = 5
    old["steps"] = {"commit": {"started": "2026-01-01T00:00:00Z", "status": "running"}}
    record = load(JobRecord, json.dumps(old).encode(), "x")
    assert record.version == 5 and record.steps["commit"].error == ""
    assert record.failed_steps == {}
    steps = {
        "stage": {"started": "2026-01-01T00:00:00Z", "status": "failed", "error": "E: no"},
        "commit": {"started": "2026-01-01T00:00:00Z", "status": "rolled_back"},
    }
    new = load(JobRecord, json.dumps({**old, "version": 6, "steps": steps}).encode(), "x")
    assert new.failed_steps == {"stage": "E: no"}
    assert new.steps["commit"].label == "rolled back"


def test_an_error_line_is_one_line_with_its_secrets_masked() -> None:
    exc = RuntimeError(
        "\n  spark-submit --conf spark.hadoop.fs.s3a.secret.key=abc/DEF+1 "
        "--conf spark.hadoop.fs.s3a.access.key=AKIAIOSFODNN7EXAMPLE "
        "http://KEY:SECRET@minio:9000 X-Amz-Signature=f00d token: 'tok'\nsecond line"
    )
    line = error_line(exc)
    assert line == (
        "RuntimeError: spark-submit --conf spark.hadoop.fs.s3a.secret.key=*** "
        "--conf spark.hadoop.fs.s3a.access.key=*** http://***@minio:9000 "
        "X-Amz-Signature=*** token: '***'"
    )
    assert error_line("x" * 2000).endswith("...") and len(error_line("x" * 2000)) == 500
    assert error_line(ValueError()) == "ValueError"


@pytest.mark.parametrize(
    ("version", "deferred"),
    [("2.6.0", False), ("2.13.4", False), ("2.14.0b1", True), ("2.14.3", True), ("3.0.0", True)],
)
def test_models_are_built_on_first_use_only_where_pydantic_builds_under_a_lock(
    version: str, deferred: bool
) -> None:
    """Deferred, a model's first use from two threads could validate with its parent's
    validator before pydantic 2.14 (pydantic #13419): there every model is built at import."""
    from zero_rename.frozen import _builds_under_a_lock

    assert _builds_under_a_lock(version) is deferred
