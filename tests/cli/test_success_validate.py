"""``success show`` and ``validate`` against the embedded S3 server."""

from __future__ import annotations

import uuid

import pytest

from tests.cli.conftest import Cli, committed_job
from tests.helpers import write_task
from zero_rename.cli.exits import ExitCode
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3


def test_success_show(cli: Cli, committer: Committer, dest: str) -> None:
    job = committed_job(committer)
    data = cli("success", "show", dest, "--json").json()
    # Hadoop's field names, as the file has them
    assert data["jobId"] == job.job_id and data["committer"] == "magic"
    assert data["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    assert data["metrics"]["committer_files_committed"] == 3
    assert len(data["files"]) == 3 and data["partitions"] == ["dt=2024-01-01", "dt=2024-01-02"]

    text = cli("success", "show", dest, "--files").out
    for expected in (job.job_id, "magic", "rows", "23", "dt=2024-01-02", "etag"):
        assert expected in text
    for f in data["files"]:
        assert f["path"] in text


def test_validate_passes_on_a_fresh_commit(cli: Cli, committer: Committer, dest: str) -> None:
    job = committed_job(committer)
    ran = cli("validate", dest, "--json")
    assert ran.code == 0, ran.out
    assert ran.json() == {
        "destination": dest,
        "job_id": job.job_id,
        "files_checked": 3,
        "valid": True,
        "problems": [],
    }
    assert cli("validate", dest).out.startswith("ok: ")


def _key(committer: Committer, n: int) -> str:
    success = committer.read_success()
    assert success is not None
    return committer.dest.dir + success.files[n].path


def test_validate_finds_deleted_resized_rewritten_and_unlisted_files(
    cli: Cli, committer: Committer, dest: str
) -> None:
    job = committed_job(committer)
    bucket, client = committer.dest.bucket, committer.store.client
    deleted, resized, rewritten = _key(committer, 0), _key(committer, 1), _key(committer, 2)
    client.delete_object(Bucket=bucket, Key=deleted)
    client.put_object(Bucket=bucket, Key=resized, Body=b"shorter")
    size = committer.store.head_object(bucket, rewritten)
    assert size is not None
    client.put_object(Bucket=bucket, Key=rewritten, Body=b"x" * size.size)
    extra = rewritten.replace(".c00", ".c09")
    client.put_object(Bucket=bucket, Key=extra, Body=b"copied in")
    # files of other jobs, and hidden ones, are none of this job's business
    client.put_object(Bucket=bucket, Key=committer.dest.dir + "dt=2024-01-01/other.csv", Body=b"o")
    client.put_object(
        Bucket=bucket, Key=committer.dest.dir + f"dt=2024-01-01/_tmp-{job.job_id}", Body=b"h"
    )

    ran = cli("validate", dest, "--json")
    assert ran.code == ExitCode.FAILED
    found = {(p["kind"], p["path"]) for p in ran.json()["problems"]}
    relative = len(committer.dest.dir)
    assert found == {
        ("missing", deleted[relative:]),
        ("size", resized[relative:]),
        ("etag", rewritten[relative:]),
        ("unlisted", extra[relative:]),
    }
    text = cli("validate", dest)
    assert text.code == ExitCode.FAILED and "4 problem(s)" in text.out


def test_no_success_file(cli: Cli, committer: Committer, dest: str) -> None:
    for argv in (["success", "show", dest], ["validate", dest]):
        ran = cli(*argv)
        assert ran.code == ExitCode.NOT_FOUND and "no _SUCCESS" in ran.err


def test_stray_records_are_left_out_by_every_view_and_reported(
    cli: Cli, committer: Committer, dest: str
) -> None:
    """A backup of a job's record taken before its commit, and a copy of it under
    another job's key: the views show the job as Committer.job does; validate
    (exit 1) and doctor name both copies."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    found = committer.store.get_object(
        committer.dest.bucket, committer.dest.job(job.job_id).record_key
    )
    assert found is not None
    write_task(committer, job, "00000", {"2024-01-01": b"a" * 10})
    committer.commit_job(job.job_id)
    backup = committer.dest.jobs_dir + "zz-backup/job.json"
    copied = committer.dest.job(str(uuid.uuid4())).record_key
    for key in (backup, copied):
        committer.store.put_object(committer.dest.bucket, key, found[0])

    assert committer.job(job.job_id).state == "committed"
    listed = cli("jobs", "list", dest, "--json").json()
    assert [(r["job_id"], r["state"]) for r in listed] == [(job.job_id, "committed")]
    history = cli("jobs", "history", dest, "--json").json()
    assert [(e["job_id"], e["state"]) for e in history] == [(job.job_id, "committed")]
    relative = [k[len(committer.dest.dir) :] for k in (backup, copied)]
    validated = cli("validate", dest, "--json")
    assert validated.code == 1
    problems = validated.json()["problems"]
    assert [(p["kind"], p["path"]) for p in problems] == [("stray", k) for k in sorted(relative)]
    doctor = cli("doctor", dest, "--json", "--race-rounds", "0").json()
    assert [s["key"] for s in doctor["stray_records"]] == sorted([backup, copied])
    assert doctor["safe"] is True
