"""A job's table commit in ``jobs show``, and ``table expire``: its table, its flags,
its exit codes (a stand-in format, tests/table_stub.py), and the retention of a
real Delta table (the last test)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests import table_stub
from tests.cli.conftest import Cli
from tests.table_jobs import table_job
from tests.table_readers import data_keys, read
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3

DAY = "2024-01-01"


def test_show_gives_the_table_commit_and_its_step(
    cli: Cli, committer: Committer, dest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table_stub.install(monkeypatch)
    job = table_job(committer, {DAY: [1, 2]}, table_format="iceberg", iceberg_table="sales.events")
    data = cli("jobs", "show", dest, job.job_id, "--json").json()
    assert data["table_commit"] == {
        "format": "iceberg",
        "table": "sales.events",
        "id": "1000",
        "files": 1,
        "removed_files": 0,
    }
    assert data["options"]["table_format"] == "iceberg"
    assert data["steps"]["publish_table"]["status"] == "succeeded"

    text = cli("jobs", "show", dest, job.job_id).out
    assert "iceberg table sales.events snapshot 1000: 1 file(s) added, 0 removed" in text
    assert "iceberg (catalog embedded, table sales.events)" in text
    step = next(line for line in text.splitlines() if line.startswith("publish_table"))
    assert "succeeded" in step and "iceberg sales.events: 1000" in step

    plain = table_job(committer, {DAY: [3]})
    assert cli("jobs", "show", dest, plain.job_id, "--json").json()["table_commit"] is None
    assert "table commit" in cli("jobs", "show", dest, plain.job_id).out  # shown as "-"


def test_expire_takes_the_table_of_the_newest_published_job(
    cli: Cli, committer: Committer, dest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = table_stub.install(monkeypatch)
    table_job(committer, {DAY: [1]}, table_format="iceberg", iceberg_table="old.events")
    table_job(committer, {DAY: [2]}, table_format="delta")
    table_job(committer, {DAY: [3]})  # no table format: not the table's
    ran = cli("table", "expire", dest, "--older-than", "7d", "--json")
    assert ran.code == 0, ran.err
    assert ran.json() == {
        "destination": dest,
        "format": "delta",
        "table": dest,
        "older_than_seconds": 7 * 86400,
        "dry_run": False,
        "deleted_files": 2,
    }
    assert calls.expired == [(dest, timedelta(days=7))]

    text = cli("table", "expire", dest, "--older-than", "1d12h").out
    assert text.strip() == (
        f"expired the delta table {dest}: 2 file(s) no version younger than 1d12h reads "
        "were deleted"
    )


def test_expire_flags_name_a_table_without_jobs(
    cli: Cli, dest: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = table_stub.install(monkeypatch)
    ran = cli(
        "table",
        "expire",
        dest,
        "--older-than",
        "24h",
        "--format",
        "iceberg",
        "--iceberg-catalog",
        "prod",
        "--iceberg-table",
        "ns.t",
    )
    assert ran.code == 0, ran.err
    assert calls.expired == [("ns.t", timedelta(hours=24))]
    assert cli("table", "expire", dest, "--older-than", "1h", "--format", "delta").code == 0
    assert calls.expired[-1] == (dest, timedelta(hours=1))


@pytest.mark.parametrize(
    "args,code,message",
    [
        ((), 4, "name the table's format with --format (and --iceberg-catalog, "),
        (("--iceberg-table", "ns.t"), 2, "need --format iceberg"),
        (("--format", "delta", "--iceberg-catalog", "c"), 2, "go with --format iceberg"),
        (("--format", "iceberg", "--iceberg-table", "x;drop"), 2, "must be namespace.table"),
        (("--format", "hudi"), 2, "invalid choice"),
    ],
)
def test_expire_refuses_what_names_no_table(
    cli: Cli, dest: str, args: tuple[str, ...], code: int, message: str
) -> None:
    ran = cli("table", "expire", dest, "--older-than", "7d", *args)
    assert ran.code == code and ran.out == ""
    assert message in ran.err and len(ran.err.strip().splitlines()) == 1


def test_expire_needs_an_age(cli: Cli, dest: str) -> None:
    for args in ((), ("--older-than", "soon")):
        ran = cli("table", "expire", dest, *args)
        assert ran.code == 2 and len(ran.err.strip().splitlines()) == 1


# -- with the real format (zero_rename.core.tables.delta) -----------------------------
def test_expire_deletes_the_files_a_replace_removed_from_a_delta_table(
    cli: Cli, committer: Committer, dest: str
) -> None:
    first = table_job(committer, {DAY: [1, 2], "2024-01-02": [3]}, table_format="delta")
    second = table_job(committer, {DAY: [4]}, "replace", table_format="delta")
    assert second.table_commit is not None and second.table_commit.removed_files == 1
    # The replaced file stays for readers of the older version, until expired.
    old = [k for k in _data_keys(committer) if first.job_id in k and DAY in k]
    assert len(old) == 1

    assert cli("table", "expire", dest, "--older-than", "7d").code == 0
    assert old[0] in _data_keys(committer)  # younger than 7 days: kept
    # A dry run says what would go, and changes nothing: no file, no version of the log.
    before = _every_key(committer)
    dry = cli("table", "expire", dest, "--older-than", "0s", "--dry-run")
    assert dry.code == 0, dry.err
    relative = old[0][len(committer.dest.dir) :]
    assert dry.out.splitlines() == [
        f"dry run: expiring the delta table {dest} would delete 1 file(s) no version younger "
        "than 0s reads; nothing was changed",
        f"  {relative}",
    ]
    wanted = cli("table", "expire", dest, "--older-than", "0s", "--dry-run", "--json").json()
    assert (wanted["dry_run"], wanted["deleted_files"], wanted["would_delete"]) == (
        True,
        0,
        [relative],
    )
    assert _every_key(committer) == before
    ran = cli("table", "expire", dest, "--older-than", "0s", "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["deleted_files"] == 1
    assert old[0] not in _data_keys(committer)
    assert sorted(read("delta", dest, "own").column("id").to_pylist()) == [3, 4]


def _data_keys(c: Committer) -> list[str]:
    return data_keys(c.store, c.dest.bucket, c.dest.dir)


def _every_key(c: Committer) -> list[str]:
    """Every object under the destination: files, the log's versions, the protocol's."""
    return sorted(o.key for o in c.store.list_objects(c.dest.bucket, c.dest.dir))
