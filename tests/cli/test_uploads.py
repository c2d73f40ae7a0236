"""``uploads list`` and ``uploads abort`` against the embedded S3 server."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from tests.cli.conftest import (
    Cli,
    committed_job,
    committing_job,
    running_job,
    stray_upload,
)
from tests.helpers import pending, pending_in_bucket, write_task
from zero_rename.cli.exits import ExitCode
from zero_rename.core.committer import Committer
from zero_rename.core.protocol import table_uploads

pytestmark = pytest.mark.s3


def test_list_shows_each_upload_with_its_job_state(
    cli: Cli, committer: Committer, dest: str
) -> None:
    done = committed_job(committer)
    stray = stray_upload(committer, done)
    running = running_job(committer)
    ran = cli("uploads", "list", dest, "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    states = {u["key"]: (u["job_id"], u["job_state"]) for u in data["uploads"]}
    assert states[stray] == (done.job_id, "committed")
    assert sorted(k for k, v in states.items() if v == (running.job_id, "setup")) == pending(
        committer, running.job_id
    )
    assert data["count"] == 2 and all(u["age_seconds"] >= 0 for u in data["uploads"])

    only = cli("uploads", "list", dest, "--job", running.job_id, "--json").json()
    assert [u["job_id"] for u in only["uploads"]] == [running.job_id]
    assert cli("uploads", "list", dest, "--older-than", "1h", "--json").json()["count"] == 0
    assert cli("uploads", "list", dest, "--older-than", "0s", "--json").json()["count"] == 2

    table = cli("uploads", "list", dest)
    assert table.code == 0
    assert done.job_id in table.out and "committed" in table.out and "setup" in table.out
    assert "2 pending upload(s) of 2 job(s)" in table.out


def test_committed_jobs_strays_are_aborted_and_nothing_else(
    cli: Cli, committer: Committer, dest: str, other: Callable[[str], Committer]
) -> None:
    """Same table, another job; ``table10`` beside ``table``, even with the same job id."""
    done = committed_job(committer)
    stray_upload(committer, done, "00008")
    stray_upload(committer, done, "00009")
    running = running_job(committer)
    sibling = other(dest.rsplit("/", 1)[-1] + "10")
    twin = sibling.setup_job({}, job_id=done.job_id)
    write_task(sibling, twin, "00000", [b"sibling"], commit=False)
    before_running = pending(committer, running.job_id)
    before_sibling = pending(sibling)

    ran = cli("uploads", "abort", dest, "--job", done.job_id, "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["aborted"] == 2 and ran.json()["state"] == "committed"
    assert pending(committer, done.job_id) == []
    assert pending(committer, running.job_id) == before_running
    assert pending(sibling) == before_sibling and len(before_sibling) == 1


def test_a_job_id_used_as_another_jobs_task_id_names_no_upload_of_it(
    cli: Cli, committer: Committer, dest: str
) -> None:
    """Task ids are any 1-64 of [A-Za-z0-9_-], so one may be a UUID, even another
    job's id: ``part-<that id>-<job id>.c000``. Its upload is its job's, in the
    listing, the job-scoped abort and the sweep."""
    done = committed_job(committer)
    stray = stray_upload(committer, done)
    running = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, running, done.job_id, {"2024-02-01": b"r"})
    write_task(committer, running, str(uuid.uuid4()), {"2024-02-02": b"s"})
    theirs = pending(committer, running.job_id)
    assert len(theirs) == 2 and any(done.job_id in k for k in theirs)

    listed = cli("uploads", "list", dest, "--json").json()["uploads"]
    assert {u["key"]: (u["job_id"], u["job_state"]) for u in listed} == {
        stray: (done.job_id, "committed"),
        **{k: (running.job_id, "setup") for k in theirs},
    }
    only = cli("uploads", "list", dest, "--job", done.job_id, "--json").json()["uploads"]
    assert [u["key"] for u in only] == [stray]

    ran = cli("uploads", "abort", dest, "--job", done.job_id, "--json")
    assert ran.code == 0 and ran.json()["aborted"] == 1, ran.err
    assert pending(committer) == theirs
    assert committer.job(running.job_id).state == "setup"

    swept = cli("uploads", "abort", dest, "--all-older-than", "0s", "--json")
    assert swept.code == 0, swept.err
    assert [(j["job_id"], j["uploads"], j["action"]) for j in swept.json()["jobs"]] == [
        (running.job_id, 2, "abort-job")
    ]
    assert committer.job(running.job_id).state == "aborted"
    assert committer.job(done.job_id).state == "committed" and pending(committer) == []


def test_dry_run_changes_nothing(cli: Cli, committer: Committer, dest: str) -> None:
    done = committed_job(committer)
    key = stray_upload(committer, done)
    ran = cli("uploads", "abort", dest, "--job", done.job_id, "--dry-run", "--json")
    assert ran.code == 0 and ran.json()["keys"] == [key] and ran.json()["aborted"] == 0
    assert pending(committer) == [key]
    human = cli("uploads", "abort", dest, "--job", done.job_id, "--dry-run")
    assert "would abort 1" in human.out


def test_uploads_of_a_committing_job_are_refused(cli: Cli, committer: Committer, dest: str) -> None:
    job = committing_job(committer)
    before = pending(committer, job.job_id)
    assert len(before) == 2
    ran = cli("uploads", "abort", dest, "--job", job.job_id)
    assert ran.code == ExitCode.REFUSED
    assert "is committing" in ran.err and "Traceback" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1
    assert pending(committer, job.job_id) == before
    # ...and the commit it protected still finishes.
    assert committer.commit_job(job.job_id).files == 2


def test_uploads_of_a_job_in_setup_are_refused_with_the_way_out(
    cli: Cli, committer: Committer, dest: str
) -> None:
    job = running_job(committer)
    ran = cli("uploads", "abort", dest, "--job", job.job_id)
    assert ran.code == ExitCode.REFUSED and "jobs abort" in ran.err
    assert len(pending(committer, job.job_id)) == 1


def test_orphaned_uploads_without_a_record_are_aborted(
    cli: Cli, committer: Committer, dest: str
) -> None:
    job_id = str(uuid.uuid4())
    bucket, prefix = committer.dest.bucket, committer.dest.dir
    committer.store.create_upload(bucket, f"{prefix}dt=1/part-00000-{job_id}.c000.csv")
    ran = cli("uploads", "abort", dest, "--job", job_id, "--json")
    assert ran.code == 0 and ran.json()["state"] is None and ran.json()["aborted"] == 1
    assert pending(committer) == []


def test_unknown_job_bucket_and_bad_input(cli: Cli, committer: Committer, dest: str) -> None:
    committed_job(committer)
    unknown = cli("uploads", "abort", dest, "--job", str(uuid.uuid4()))
    assert unknown.code == ExitCode.NOT_FOUND and unknown.err.startswith("error: no job")
    missing = cli("uploads", "list", "s3://no-such-bucket-here/t")
    assert missing.code == ExitCode.NOT_FOUND and "does not exist" in missing.err
    assert cli("uploads", "abort", dest, "--all-older-than", "soon").code == ExitCode.USAGE


def test_sweep_by_age(cli: Cli, committer: Committer, dest: str) -> None:
    """Strays, leftovers and orphans go; a job left in setup is aborted as a job; a
    committing job's uploads and uploads zero-rename did not write stay."""
    done = committed_job(committer)
    stray_upload(committer, done)
    abandoned = running_job(committer)
    stuck = committing_job(committer)
    bucket, prefix = committer.dest.bucket, committer.dest.dir
    orphan_key = f"{prefix}dt=1/part-00000-{uuid.uuid4()}.c000.csv"
    foreign_key = f"{prefix}uploads-by-another-tool/file.bin"
    for key in (orphan_key, foreign_key):
        committer.store.create_upload(bucket, key)

    assert cli("uploads", "abort", dest, "--all-older-than", "1h", "--json").json()["uploads"] == 0
    dry = cli("uploads", "abort", dest, "--all-older-than", "0s", "--dry-run", "--json")
    assert dry.code == ExitCode.REFUSED
    assert len(pending(committer)) == 6 and committer.job(abandoned.job_id).state == "setup"

    ran = cli("uploads", "abort", dest, "--all-older-than", "0s", "--json")
    assert ran.code == ExitCode.REFUSED, ran.err  # the committing job's uploads were kept
    actions = {j["job_id"]: j["action"] for j in ran.json()["jobs"]}
    assert actions == {
        done.job_id: "abort",
        abandoned.job_id: "abort-job",
        stuck.job_id: "refuse",
        orphan_key.split("-", 2)[-1][:36]: "abort",
        None: "keep",
    }
    assert ran.json()["aborted"] == 3
    assert sorted(u["key"] for u in ran.json()["kept"]) == sorted(
        [*pending(committer, stuck.job_id), foreign_key]
    )
    assert pending(committer) == sorted([*pending(committer, stuck.job_id), foreign_key])
    assert committer.job(abandoned.job_id).state == "aborted"
    assert committer.commit_job(stuck.job_id).files == 2


def test_sweep_from_a_parent_directory_still_sees_a_tables_committing_job(
    cli: Cli, bucket: str, other: Callable[[str], Committer]
) -> None:
    table = other("warehouse/events")
    stuck = committing_job(table)
    done = committed_job(table)
    stray_upload(table, done)
    ran = cli("uploads", "abort", f"s3://{bucket}/warehouse", "--all-older-than", "0s", "--json")
    assert ran.code == ExitCode.REFUSED
    found = {j["job_id"]: (j["state"], j["destination"]) for j in ran.json()["jobs"]}
    assert found[stuck.job_id] == ("committing", f"s3://{bucket}/warehouse/events")
    assert found[done.job_id][0] == "committed"
    assert len(pending(table, stuck.job_id)) == 2 and pending(table, done.job_id) == []
    # and from inside one partition, the record above is found too
    inside = cli("uploads", "list", f"s3://{bucket}/warehouse/events/dt=2024-03-01", "--json")
    assert [u["job_state"] for u in inside.json()["uploads"]] == ["committing"]


def test_many_uploads_are_aborted_in_parallel(cli: Cli, committer: Committer, dest: str) -> None:
    job_id = str(uuid.uuid4())
    bucket, prefix = committer.dest.bucket, committer.dest.dir
    keys = [f"{prefix}dt={i % 7}/part-{i:05d}-{job_id}.c000.csv" for i in range(120)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: committer.store.create_upload(bucket, k), keys))
    ran = cli("uploads", "abort", dest, "--job", job_id, "--threads", "16", "--json")
    assert ran.code == 0 and ran.json()["aborted"] == 120
    assert pending_in_bucket(committer) == []


def test_a_stray_at_the_same_key_as_a_committed_file_leaves_the_file_intact(
    cli: Cli, committer: Committer, dest: str
) -> None:
    """File names carry the task, not the attempt: a losing attempt's upload has the key
    of the committed file. Aborting it by upload id must not touch the object."""
    done = committed_job(committer)
    zombie = committer.task_attempt(done, "00000", attempt=1)
    out = zombie.open({"dt": "2024-01-01"})
    out.write(b"late attempt")
    success = committer.read_success()
    assert success is not None
    assert out.key in {committer.dest.dir + f.path for f in success.files}
    ran = cli("uploads", "abort", dest, "--job", done.job_id, "--json")
    assert ran.code == 0 and ran.json()["aborted"] == 1
    assert cli("validate", dest).code == 0


def test_a_table_formats_metadata_uploads_are_listed_and_swept_once_abandoned(
    cli: Cli, committer: Committer, dest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A metadata write of a table format left pending (under ``_iceberg/`` or
    ``_delta_log/``): listed as that table's metadata, kept by a sweep while a
    commit may still be writing it, aborted once abandoned."""
    bucket, prefix = committer.dest.bucket, committer.dest.dir
    keys = {
        "iceberg": f"{prefix}_iceberg/metadata/00007-{uuid.uuid4()}.metadata.json",
        "delta": f"{prefix}_delta_log/00000000000000000007.checkpoint.parquet",
    }
    for key in keys.values():
        committer.store.create_upload(bucket, key)
    listed = cli("uploads", "list", dest, "--json").json()["uploads"]
    assert {u["key"]: u["table_format"] for u in listed} == {k: f for f, k in keys.items()}
    assert "(iceberg table metadata)" in cli("uploads", "list", dest).out
    young = cli("uploads", "abort", dest, "--all-older-than", "0s", "--json").json()
    assert young["aborted"] == 0 and {u["key"] for u in young["kept"]} == set(keys.values())
    assert all("may still be writing it" in j["reason"] for j in young["jobs"])
    monkeypatch.setattr(table_uploads, "ABANDONED_AFTER", timedelta(0))
    swept = cli("uploads", "abort", dest, "--all-older-than", "0s", "--json").json()
    assert swept["aborted"] == 2 and pending_in_bucket(committer) == []
