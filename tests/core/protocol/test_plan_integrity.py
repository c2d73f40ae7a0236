"""Before the point of no return the commit trusts nothing an earlier step left in S3:
every planned upload is confirmed pending whichever step built the plan, and a
plan or stage object changed after it was written is refused. Each case ends
with the job not past its point of no return, nothing visible, and the
uploads of other tables untouched."""

from __future__ import annotations

import pytest

from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord, PendingUpload, TaskManifest
from zero_rename.core.data.shards import encode, shard_key
from zero_rename.core.protocol.planning import load_plan
from zero_rename.core.s3.client import StoreConfig
from zero_rename.errors import ManifestError, ValidationError

pytestmark = pytest.mark.s3

DAYS = {"2024-01-01": b"one", "2024-01-02": b"two", "2024-01-03": b"three"}


def written(c: Committer) -> tuple[JobRecord, list[TaskManifest]]:
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    manifests = []
    for i, (day, body) in enumerate(DAYS.items()):
        m = write_task(c, job, f"{i:05d}", {day: body}, publish=False)
        assert m is not None
        manifests.append(m)
    return job, manifests


def assert_stopped_before_deciding(c: Committer, job: JobRecord) -> None:
    record = c.job(job.job_id)
    assert record.state == "sealed" and record.plan_key is None
    assert visible(c) == {}
    c.abort_job(job.job_id)
    assert visible(c) == {}


@pytest.mark.parametrize("step", ["validate", "resolve_conflicts"])
def test_an_upload_aborted_after_an_earlier_step_stops_the_commit(
    committer: Committer, step: str
) -> None:
    """``validate`` leaves an unresolved plan, which the commit resolves under a new
    key; ``resolve_conflicts`` a resolved one, which it takes as it is. Either way
    the uploads are listed again before the point of no return."""
    job, manifests = written(committer)
    getattr(committer, step)(job.job_id, manifests)
    gone = manifests[1].uploads[0]
    committer.store.abort_upload(committer.dest.bucket, gone.key, gone.upload_id)
    with pytest.raises(ValidationError, match="no longer pending") as err:
        committer.commit_job(job.job_id, manifests)
    assert gone.key in str(err.value)
    assert_stopped_before_deciding(committer, job)
    assert pending_in_bucket(committer) == []


def _other_tables_upload(c: Committer, config: StoreConfig) -> PendingUpload:
    """A pending upload of another table in the same bucket."""
    other = Committer(f"s3://{c.dest.bucket}/other", config)
    job = other.setup_job({"conflict_mode": "append"})
    m = write_task(other, job, "00000", [b"not yours"], publish=False)
    assert m is not None
    return m.uploads[0]


def test_a_plan_shard_rewritten_after_validation_is_refused(
    committer: Committer, store_config: StoreConfig
) -> None:
    job, manifests = written(committer)
    committer.validate(job.job_id, manifests)
    foreign = _other_tables_upload(committer, store_config)
    record = committer.job(job.job_id)
    assert record.prepared_plan and record.prepared_plan_digest
    plan = load_plan(committer.ctx, job.job_id, record.prepared_plan)
    key = shard_key(plan.shards_prefix, "uploads", 0)
    committer.store.put_object(committer.dest.bucket, key, encode([foreign]))
    with pytest.raises(ManifestError, match="changed after it was written"):
        committer.commit_job(job.job_id, manifests)
    assert_stopped_before_deciding(committer, job)
    # the other table's upload is still pending, and only it
    assert pending_in_bucket(committer) == [foreign.key]


def test_a_plan_header_rewritten_after_validation_is_refused(committer: Committer) -> None:
    job, manifests = written(committer)
    committer.validate(job.job_id, manifests)
    key = committer.job(job.job_id).prepared_plan
    assert key is not None
    found = committer.store.get_object(committer.dest.bucket, key)
    assert found is not None
    committer.store.put_object(
        committer.dest.bucket, key, found[0].replace(b'"files": 3', b'"files": 2')
    )
    with pytest.raises(ManifestError, match="changed after it was written"):
        committer.commit_job(job.job_id, manifests)
    assert_stopped_before_deciding(committer, job)


def test_a_stage_shard_rewritten_after_the_stage_is_refused(committer: Committer) -> None:
    job, manifests = written(committer)
    committer.save_stage_manifest(job.job_id, manifests, engine="test")
    assert committer.job(job.job_id).stage_digest
    shards = [
        o.key
        for o in committer.store.list_objects(
            committer.dest.bucket, committer.dest.job(job.job_id).dir
        )
        if "/stage/" in o.key
    ]
    assert len(shards) == 1
    committer.store.put_object(committer.dest.bucket, shards[0], encode(manifests[:2]))
    with pytest.raises(ManifestError, match="changed after it was written"):
        committer.commit_job(job.job_id)
    assert_stopped_before_deciding(committer, job)
    assert pending_in_bucket(committer) == []


def test_a_stage_header_rewritten_after_the_stage_is_refused(committer: Committer) -> None:
    job, manifests = written(committer)
    committer.save_stage_manifest(job.job_id, manifests, engine="test")
    key = committer.dest.job(job.job_id).stage_manifest_key
    found = committer.store.get_object(committer.dest.bucket, key)
    assert found is not None
    committer.store.put_object(
        committer.dest.bucket, key, found[0].replace(b'"engine": "test"', b'"engine": "x"')
    )
    with pytest.raises(ManifestError, match="changed after it was written"):
        committer.commit_job(job.job_id)
    assert_stopped_before_deciding(committer, job)
