"""``jobs list|show|abort`` against the embedded S3 server."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.cli.conftest import Cli, committed_job, committing_job, running_job, stray_upload
from tests.helpers import pending, strip_time_zones, visible
from zero_rename.cli import context
from zero_rename.cli.exits import ExitCode
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.errors import OutputCheckError

pytestmark = pytest.mark.s3


def test_list_has_one_row_per_job_oldest_first(cli: Cli, committer: Committer, dest: str) -> None:
    done = committed_job(committer)
    running = running_job(committer)
    ran = cli("jobs", "list", dest, "--json")
    assert ran.code == 0, ran.err
    rows = ran.json()
    assert [(r["job_id"], r["state"]) for r in rows] == [
        (done.job_id, "committed"),
        (running.job_id, "setup"),
    ]
    first = rows[0]
    assert (first["files"], first["bytes"], first["rows"]) == (3, 2 * 120 + 33, 23)
    assert first["committer"] == "magic" and first["conflict_mode"] == "append"
    assert first["duration_seconds"] > 0 and rows[1]["duration_seconds"] is None

    table = cli("jobs", "list", dest)
    header = table.out.splitlines()[0].split()
    assert header[:5] == ["job", "id", "state", "created", "committer"]
    # Each job by the first 8 characters of its id, which every command takes; whole
    # with --wide.
    assert [line.split()[0] for line in table.out.splitlines()[1:3]] == [
        done.job_id[:8],
        running.job_id[:8],
    ]
    assert done.job_id not in table.out
    wide = cli("jobs", "list", dest, "--wide").out
    assert done.job_id in wide and running.job_id in wide


def test_show_reports_steps_options_counts_and_pending_uploads(
    cli: Cli, committer: Committer, dest: str
) -> None:
    done = committed_job(committer)
    stray_upload(committer, done)
    data = cli("jobs", "show", dest, done.job_id, "--json").json()
    assert data["state"] == "committed" and data["pending_uploads"] == 1
    assert set(data["steps"]) >= {"setup", "validate", "commit"}
    assert all(s["status"] == "succeeded" for s in data["steps"].values())
    summary = data["summary"]
    assert (summary["tasks"], summary["files"], summary["rows"]) == (2, 3, 23)
    assert summary["partitions"] == ["dt=2024-01-01", "dt=2024-01-02"]
    assert summary["requests"] > 0 and data["options"]["partition_columns"] == ["dt"]

    text = cli("jobs", "show", dest, done.job_id).out
    for expected in (
        "state",
        "committed",
        "steps",
        "commit",
        "options",
        "pending uploads",
        "dt=2024-01-01",
    ):
        assert expected in text


def test_show_reports_the_output_check(cli: Cli, committer: Committer, dest: str) -> None:
    done = committed_job(committer)
    assert "valid at" not in cli("jobs", "show", dest, done.job_id).out  # none ran yet
    committer.validate_output(done.job_id)
    text = cli("jobs", "show", dest, done.job_id).out
    assert "output check" in text and "valid at" in text and "3 file(s) as _SUCCESS" in text

    gone = next(iter(visible(committer)))
    committer.store.delete_objects(committer.dest.bucket, [committer.dest.dir + gone])
    with pytest.raises(OutputCheckError):
        committer.validate_output(done.job_id)
    data = cli("jobs", "show", dest, done.job_id, "--json").json()
    assert data["state"] == "committed" and data["steps"]["validate_output"]["status"] == "failed"
    check = data["output_check"]
    assert (check["outcome"], check["files"], check["problem_count"]) == ("invalid", 3, 1)
    assert check["problems"] == [
        {"kind": "missing", "path": gone, "detail": "listed in _SUCCESS but not there"}
    ]
    text = cli("jobs", "show", dest, done.job_id).out
    assert "invalid at" in text and "output check: 1 problem(s)" in text and gone in text


def test_show_of_a_running_job_counts_its_published_tasks(
    cli: Cli, committer: Committer, dest: str
) -> None:
    job = running_job(committer)
    data = cli("jobs", "show", dest, job.job_id, "--json").json()
    assert data["state"] == "setup" and data["published_task_manifests"] == 1
    assert data["pending_uploads"] == 1 and data["summary"] is None


def test_abort_decides_a_running_job_and_refuses_a_committed_one(
    cli: Cli, committer: Committer, dest: str
) -> None:
    running = running_job(committer)
    ran = cli("jobs", "abort", dest, running.job_id[:8], "--json")  # its id's first characters
    assert ran.code == 0 and ran.json()["aborted_uploads"] == 1
    assert committer.job(running.job_id).state == "aborted" and pending(committer) == []

    for job in (committed_job(committer), committing_job(committer)):
        refused = cli("jobs", "abort", dest, job.job_id)
        assert refused.code == ExitCode.REFUSED and "point of no return" in refused.err
        assert committer.job(job.job_id).state == job.state


def test_unknown_jobs_and_destinations(
    cli: Cli, committer: Committer, dest: str, bucket: str
) -> None:
    committed_job(committer)
    for argv in (
        ["jobs", "show", dest, str(uuid.uuid4())],
        ["jobs", "abort", dest, str(uuid.uuid4())],
        ["jobs", "list", f"s3://{bucket}/no-such-table"],
        ["jobs", "list", "s3://no-such-bucket-here/table"],
    ):
        ran = cli(*argv)
        assert ran.code == ExitCode.NOT_FOUND, argv
        assert ran.err.startswith("error: ") and len(ran.err.strip().splitlines()) == 1
        assert ran.out == ""


def test_verbose_shows_the_traceback(cli: Cli, dest: str, bucket: str) -> None:
    ran = cli("-v", "jobs", "show", dest, str(uuid.uuid4()))
    assert ran.code == ExitCode.NOT_FOUND and "Traceback" in ran.err


@pytest.fixture
def access_denied(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Credentials the bucket policy refuses: HeadBucket answers 403 AccessDenied."""

    def deny(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                "ResponseMetadata": {"HTTPStatusCode": 403},
            },
            "HeadBucket",
        )

    clients: list[Any] = []
    shared = context.connect

    def connect(config: StoreConfig) -> S3Store:
        store = shared(config)
        store.client.meta.events.register("before-call.s3.HeadBucket", deny, unique_id="deny")
        clients.append(store.client)
        return store

    monkeypatch.setattr(context, "connect", connect)
    yield
    for client in clients:
        client.meta.events.unregister("before-call.s3.HeadBucket", unique_id="deny")


@pytest.mark.usefixtures("access_denied")
def test_refused_access_is_a_store_error(cli: Cli, dest: str) -> None:
    ran = cli("jobs", "list", dest)
    assert ran.code == ExitCode.STORE and "access refused" in ran.err


def test_missing_or_refused_credentials_are_a_configuration_error(
    cli: Cli, dest: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No retry mends them: exit 2, one line saying where credentials come from, never
    botocore's words, never the secret."""
    monkeypatch.setattr(context, "connect", S3Store.connect)  # credentials read afresh
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    for case, env, says in (
        ("none", {}, "no usable S3 credentials for HeadBucket"),
        ("partial", {"AWS_ACCESS_KEY_ID": key}, "no usable S3 credentials (found only part"),
        (
            "key",
            {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWNKEY000000", "AWS_SECRET_ACCESS_KEY": secret},
            "refused the credentials (InvalidAccessKeyId on ListObjectsV2",
        ),
        (
            "secret",
            {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": "wrong-secret"},
            "refused the credentials (SignatureDoesNotMatch on ListObjectsV2",
        ),
        (
            "pasted with its line end",
            {"AWS_ACCESS_KEY_ID": f"{key}\r\nX-Injected: 1", "AWS_SECRET_ACCESS_KEY": secret},
            "access key id holds a character no request can carry",
        ),
    ):
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        ran = cli("jobs", "show", dest, "3286d41d")
        assert (ran.code, ran.out) == (ExitCode.USAGE, ""), case
        assert says in ran.err and "Credentials come from boto3's standard chain" in ran.err
        assert len(ran.err.strip().splitlines()) == 1, case
        assert "Unable to locate" not in ran.err and "wrong-secret" not in ran.err
        assert "AKIAUNKNOWNKEY000000" not in ran.err and "X-Injected" not in ran.err


def test_commit_finishes_a_committing_job_and_refuses_the_rest(
    cli: Cli, committer: Committer, dest: str
) -> None:
    stuck = committing_job(committer)
    ran = cli("jobs", "commit", dest, stuck.job_id[:13], "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["state"] == "committed"
    assert committer.job(stuck.job_id).state == "committed" and pending(committer) == []
    again = cli("jobs", "commit", dest, stuck.job_id)
    assert again.code == 0 and "committed" in again.out

    running = running_job(committer)
    refused = cli("jobs", "commit", dest, running.job_id)
    assert refused.code == ExitCode.REFUSED and "is setup" in refused.err
    assert committer.job(running.job_id).state == "setup"


def test_rollback_checks_first_and_returns_the_destination_to_before_the_job(
    cli: Cli, committer: Committer, dest: str
) -> None:
    stuck = committing_job(committer)  # both uploads still pending: it can finish
    refused = cli("jobs", "rollback", dest, stuck.job_id)
    assert refused.code == ExitCode.REFUSED
    assert "can still finish (2 planned file(s): 0 complete, 2 still pending" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    assert committer.job(stuck.job_id).state == "committing"

    ran = cli("jobs", "rollback", dest, stuck.job_id[:8], "--force", "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert data["state"] == "aborted" and data["aborted_uploads"] == 2
    assert "rolled back from the command line" in data["error"]
    assert pending(committer) == [] and committer.visible_objects() == []
    shown = cli("jobs", "show", dest, stuck.job_id[:8]).out
    assert "rollback" in shown and "aborted" in shown
    # The commit it undid says so, not "running" for ever.
    assert re.search(r"^commit +rolled back +\d", shown, re.MULTILINE)
    again = cli("jobs", "rollback", dest, stuck.job_id)  # finished: says so again, changes nothing
    assert again.code == 0 and "nothing of it is visible" in again.out

    done = committed_job(committer)
    never = cli("jobs", "rollback", dest, done.job_id, "--force")
    assert never.code == ExitCode.REFUSED and "nothing to roll back" in never.err


RED = "\x1b[31mred\x1b[0m"
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"


def test_stored_text_reaches_a_terminal_as_text(cli: Cli, committer: Committer, dest: str) -> None:
    """A record's abort reason and origin, and a listed key, are anyone's text:
    escape sequences in them are shown, not acted on; --json keeps them exact.
    Times written without a zone are read as UTC."""
    job = committer.setup_job({"conflict_mode": "append"}, origin={"airflow_dag_id": LINK})
    committer.abort_job(job.job_id, reason=f"stopped {RED} \u202eevil")
    strip_time_zones(committer, job.job_id)
    # C1 CSI, DEL and a bidi override: controls an S3 listing (XML) can carry.
    committer.store.create_upload(
        committer.dest.bucket, f"{committer.dest.dir}x\x9b31m\x7f\u202e.csv"
    )
    shown = cli("jobs", "show", dest, job.job_id)
    assert shown.code == 0, shown.err
    assert "\\x1b[31mred" in shown.out and "\\x1b]8;;http://evil.example/" in shown.out
    assert "\\u202eevil" in shown.out
    exact = cli("jobs", "show", dest, job.job_id, "--json").json()
    assert (
        exact["error"] == f"stopped {RED} \u202eevil" and exact["origin"]["airflow_dag_id"] == LINK
    )
    listed = cli("jobs", "list", dest, "--wide")
    assert listed.code == 0 and job.job_id in listed.out
    uploads = cli("uploads", "list", dest)
    assert uploads.code == 0 and "x\\x9b31m\\x7f\\u202e.csv" in uploads.out
    for ran in (shown, listed, uploads):
        assert not any(c in ran.out + ran.err for c in "\x1b\x9b\x7f\u202e")


def test_a_job_is_named_by_the_first_characters_of_its_id(
    cli: Cli, committer: Committer, dest: str
) -> None:
    """As git takes a commit's: 8 characters or more, one listing; refused when
    ambiguous (the candidates named, one line, exit 2), too short or not hex."""
    ids = [f"abcdef01-0000-4000-8000-00000000000{n}" for n in (1, 2)]
    for job_id in ids:
        committer.setup_job({"conflict_mode": "append"}, job_id=job_id)
    lone = running_job(committer)

    shown = cli("jobs", "show", dest, lone.job_id[:8], "--json")
    assert shown.code == 0 and shown.json()["job_id"] == lone.job_id
    listed = cli("uploads", "list", dest, "--job", lone.job_id[:8], "--json").json()
    assert listed["job_id"] == lone.job_id and listed["count"] == 1
    assert cli("jobs", "show", dest, ids[1]).code == 0  # a whole id: nothing listed

    ambiguous = cli("jobs", "show", dest, "abcdef01-0000")
    assert ambiguous.code == ExitCode.USAGE and len(ambiguous.err.strip().splitlines()) == 1
    assert f"2 jobs start with it ({ids[0]}, {ids[1]}); give more of it" in ambiguous.err
    for argv, code, says in (
        (["jobs", "abort", dest, "abcdef01"], ExitCode.USAGE, "is ambiguous"),
        (["jobs", "show", dest, "abcdef0"], ExitCode.USAGE, "at least its first 8 characters"),
        (["jobs", "show", dest, "ABCDEF01"], ExitCode.USAGE, "write it in lower case"),
        (["jobs", "show", dest, "abcdef01x"], ExitCode.USAGE, "nor the start of one"),
        (["jobs", "show", dest, "ffffffff"], ExitCode.NOT_FOUND, "no job whose id starts with"),
        (["uploads", "abort", dest, "--job", "ffffffff"], ExitCode.NOT_FOUND, "starts with"),
    ):
        ran = cli(*argv)
        assert (ran.code, ran.out) == (code, ""), argv
        assert says in ran.err and len(ran.err.strip().splitlines()) == 1, argv
    assert {committer.job(i).state for i in ids} == {"setup"}
