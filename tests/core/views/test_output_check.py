"""Committed output against its ``_SUCCESS``: what is missing, resized, rewritten or unlisted."""

from __future__ import annotations

import json

import pytest

from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import CommittedFile, JobRecord, SuccessData, dump, load
from zero_rename.core.data.options import JobOptions
from zero_rename.core.s3.client import ObjectInfo
from zero_rename.core.views import output_check as check
from zero_rename.errors import ConfigError, OutputCheckError

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


@pytest.mark.s3
def test_validate_output_records_its_result_and_fails_on_a_rewritten_file(
    committer: Committer,
) -> None:
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    write_task(committer, job, "00000", {"2024-01-01": b"a", "2024-01-02": b"b"})
    with pytest.raises(ConfigError, match="is setup: the output check runs once"):
        committer.validate_output(job.job_id)
    committer.commit_job(job.job_id)

    passed = committer.validate_output(job.job_id)
    record = committer.job(job.job_id)
    assert (passed.outcome, passed.files, passed.problem_count) == ("valid", 2, 0)
    assert record.output_check == passed and record.version == 7
    assert record.steps["validate_output"].status == "succeeded"

    # Rewritten with other bytes of the same size: only the ETag tells.
    success = committer.read_success()
    assert success is not None
    path = next(iter(committer.committed_files(success))).path
    committer.store.put_object(committer.dest.bucket, committer.dest.dir + path, b"z")
    with pytest.raises(OutputCheckError, match="The job stays committed") as raised:
        committer.validate_output(job.job_id)
    (problem,) = raised.value.problems
    assert problem.startswith(f"etag {path}: ETag ") and "the file was rewritten" in problem
    record = committer.job(job.job_id)
    assert record.state == "committed" and record.output_check is not None
    assert (record.output_check.outcome, record.output_check.problem_count) == ("invalid", 1)
    assert record.steps["validate_output"].status == "failed"
    assert f"1 problem(s) in 2 file(s): etag {path}" in record.steps["validate_output"].detail

    # A later job's _SUCCESS: this job's files are no longer what it stands for.
    later = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    write_task(committer, later, "00000", {"2024-01-01": b"new"})
    committer.commit_job(later.job_id)
    superseded = committer.validate_output(job.job_id)
    assert (superseded.outcome, superseded.superseded_by) == ("superseded", later.job_id)


def test_job_records_of_version_4_still_load() -> None:
    record = JobRecord(job_id=JOB, destination="s3://b/t", options=JobOptions())
    old = json.loads(dump(record))
    old.update(version=4)
    del old["output_check"]
    loaded = load(JobRecord, json.dumps(old).encode(), "s3://b/t/job.json")
    assert loaded.version == 4 and loaded.output_check is None
