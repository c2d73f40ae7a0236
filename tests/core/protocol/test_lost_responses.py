"""Exactly once under lost responses: every write the protocol makes, answered with
an error after it took effect, and the job still commits once, in one pass.

Here the answer is lost inside the client (a 500 after the request reached S3),
so the protocol's own read-back is what recovers; the wire-level variant, where
botocore re-sends and meets its own write, runs through the fault proxy.
"""

from __future__ import annotations

import pytest

from tests.faults import clear, inject
from tests.helpers import pending_in_bucket, visible, write_task
from tests.whole_job import JOB_WRITES, assert_committed_once, run_job
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3

WRITES = [*JOB_WRITES, pytest.param("DeleteObjects", None, 1, id="cleanup-delete")]


@pytest.mark.parametrize("op,key,nth", WRITES)
def test_one_lost_answer_anywhere_still_commits_once(
    committer: Committer, op: str, key: str | None, nth: int
) -> None:
    lost = inject(committer.store.client, op, when="after", nth=nth, key_contains=key)
    job_id = run_job(committer, cleanup=False)
    assert lost.fired == 1
    clear(committer.store.client, lost)
    committer.cleanup_job(job_id)  # the cleanup step, whose own failures are best effort
    assert_committed_once(committer, job_id)


@pytest.mark.parametrize("nth", [1, 2], ids=["decide-aborted", "abort-step-timing"])
def test_lost_answer_to_the_abort_still_aborts(committer: Committer, nth: int) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-01-01": b"x"})
    lost = inject(
        committer.store.client, "PutObject", when="after", nth=nth, key_contains="job.json"
    )
    assert committer.abort_job(job.job_id).aborted_uploads == 1
    assert lost.fired == 1
    assert committer.job(job.job_id).state == "aborted"
    assert visible(committer) == {} and pending_in_bucket(committer) == []


def test_lost_answer_to_the_stage_manifest_is_read_back(committer: Committer) -> None:
    job = committer.setup_job({"conflict_mode": "append"})
    manifest = write_task(committer, job, "00000", [b"staged"], publish=False)
    assert manifest is not None
    lost = inject(committer.store.client, "PutObject", when="after", key_contains="stage.json")
    committer.save_stage_manifest(job.job_id, [manifest], engine="test")
    assert lost.fired == 1
    committer.commit_job(job.job_id)
    assert list(visible(committer).values()) == [b"staged"]
