"""One whole job for the fault tests: the writes it makes, running it, and what
"committed exactly once" means for it. The client-side faults
(``tests/core/protocol/test_lost_responses.py``) and the wire faults through the proxy
(``tests/core/protocol/test_wire_faults.py``) lose the same writes."""

from __future__ import annotations

import json

import pytest

from tests.helpers import pending_in_bucket, visible, write_task
from zero_rename.core.committer import Committer
from zero_rename.core.protocol.claims import Claims

FILES = {"2024-01-01": b"day 1", "2024-01-02": b"day 2"}

# (operation, key fragment, nth matching call): each write of a whole job.
JOB_WRITES = [
    pytest.param("PutObject", "job.json", 1, id="job-record-create"),
    pytest.param("PutObject", "tasks/", 1, id="task-manifest"),
    pytest.param("PutObject", "job.json", 2, id="seal"),
    pytest.param("PutObject", "claims.json", 1, id="claim"),
    pytest.param("PutObject", "plan-", 1, id="plan"),
    pytest.param("PutObject", "job.json", 3, id="decide"),
    pytest.param("CompleteMultipartUpload", None, 1, id="complete"),
    pytest.param("PutObject", "journal/", 1, id="journal"),
    pytest.param("PutObject", "_SUCCESS", 1, id="success-marker"),
    pytest.param("PutObject", "job.json", 4, id="committed"),
    pytest.param("PutObject", "claims.json", 2, id="claim-release"),
]


def run_job(
    c: Committer, mode: str = "replace", losing_attempt: bool = False, cleanup: bool = True
) -> str:
    """Set up, write FILES in one task each, commit (and clean up) a partitioned job."""
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": mode, "threads": 4})
    for i, (day, body) in enumerate(FILES.items()):
        write_task(c, job, f"{i:05d}", {day: body})
    if losing_attempt:  # an attempt that never commits: its upload is a stray to abort
        write_task(c, job, "00000", {"2024-01-01": b"lost"}, attempt=1, commit=False)
    c.commit_job(job.job_id)
    if cleanup:
        c.cleanup_job(job.job_id)
    return job.job_id


def assert_committed_once(c: Committer, job_id: str) -> None:
    """FILES visible once, under the job's names; nothing pending; _SUCCESS, the
    record and the claims as a commit leaves them."""
    files = visible(c)
    assert sorted(files.values()) == sorted(FILES.values())
    assert all(job_id in name for name in files)
    assert pending_in_bucket(c) == []
    success = json.loads(c.store.get_object(c.dest.bucket, c.dest.success_key)[0])
    assert success["jobId"] == job_id and len(success["files"]) == len(FILES)
    record = c.job(job_id)
    assert record.state == "committed" and record.claimed == ("dt=2024-01-01/", "dt=2024-01-02/")
    assert Claims(c.ctx).read()[0].claims == ()
