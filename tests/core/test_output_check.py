"""Committed output against its ``_SUCCESS``: what is missing, resized, rewritten or unlisted."""

from __future__ import annotations

import pytest

from tests.helpers import write_task
from zero_rename.core import output_check as check
from zero_rename.core.committer import Committer
from zero_rename.core.model import CommittedFile, SuccessData
from zero_rename.core.store import ObjectInfo

JOB = "5f0c9a4e-2b1d-4c8e-9f3a-1d2e3f4a5b6c"


def _success(*files: CommittedFile) -> SuccessData:
    return SuccessData(
        committer="magic", jobId=JOB, timestamp=0, date="", files=files, partitions=("dt=1",)
    )


def test_compare_reports_each_kind_of_problem() -> None:
    def name(task: str, job: str = JOB) -> str:
        return f"dt=1/part-{task}-{job}.c000.csv"

    success = _success(
        CommittedFile(path=name("a"), bytes=3, etag='"e1"'),
        CommittedFile(path=name("b"), bytes=3, etag='"e2"'),
        CommittedFile(path=name("c"), bytes=3, etag='"e3"'),
        CommittedFile(path=name("d"), bytes=3, etag='"e4"'),
    )
    found = {
        name("a"): ObjectInfo("k", 3, '"e1"'),
        name("c"): ObjectInfo("k", 4, '"e3"'),
        name("d"): ObjectInfo("k", 3, '"other"'),
        name("z"): ObjectInfo("k", 1, '"z"'),
        "dt=1/part-from-another-job.csv": ObjectInfo("k", 1, '"y"'),
        # another job's file, whose task id is this job's id
        name(JOB, "0b7e4c1a-9d2f-4e3b-8a6c-5d4e3f2a1b0c"): ObjectInfo("k", 1, '"o"'),
    }
    problems = check.compare(success, success.files, found)
    assert [(p.kind, p.path[10]) for p in problems] == [
        (check.MISSING, "b"),
        (check.SIZE, "c"),
        (check.ETAG, "d"),
        (check.UNLISTED, "z"),
    ]


def test_partitioned_jobs_are_checked_in_their_partitions() -> None:
    assert check.scan_dirs(_success()) == ["dt=1/"]
    assert check.scan_dirs(SuccessData(committer="x", jobId=JOB, timestamp=0, date="")) == [""]


@pytest.mark.s3
def test_a_committed_job_checks_clean_until_a_file_goes(committer: Committer) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-01-01": b"a", "2024-01-02": b"b"})
    committer.commit_job(job.job_id)
    success = committer.read_success()
    assert success is not None
    listed = [f.path for f in committer.committed_files(success)]
    assert len(listed) == 2
    directories: list[int] = []
    assert committer.check_output(success, threads=2, advance=directories.append) == []
    assert directories == [1, 1]  # one per partition
    committer.store.delete_objects(committer.dest.bucket, [committer.dest.dir + listed[0]])
    problems = committer.check_output(success)
    assert [(p.kind, p.path) for p in problems] == [(check.MISSING, listed[0])]
