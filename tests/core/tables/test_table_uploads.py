"""A table format's own writes leave nothing pending, whatever answer is lost and
whenever the committing process is killed.

PyIceberg writes each manifest, manifest list and ``metadata.json`` through
pyarrow's S3 file system. Each test commits an Iceberg job through the fault
proxy, losing one answer of one metadata write or killing the committing
process (a child) as the write reaches the store, then retries the commit where
it did not finish, and ends by checking the table (one snapshot a job, its rows
through PyIceberg's scan), the job record and every pending upload in the
bucket. A ``metadata.json`` above pyarrow's part size (a table property of 11
MiB makes it so) goes as a multipart upload: its leftovers are what the job's
cleanup, ``uploads list`` and the sweep of abandoned ones are for.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import Table

from tests.helpers import pending_in_bucket
from tests.s3proxy import S3Proxy, S3Request
from tests.table_jobs import written_table_job
from tests.table_readers import iceberg_table
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.protocol import table_uploads
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.tables.base import JOB_ID_PROPERTY
from zero_rename.core.tables.iceberg_catalog import HOME_VARIABLE, derived_table_name
from zero_rename.core.views.pending import Owners, pending_uploads

pytestmark = pytest.mark.s3

# Over pyarrow's part size (10 MiB): metadata.json then goes as a multipart upload.
LARGE = 11 * 1024 * 1024
KILLED = -signal.SIGKILL


@pytest.fixture(autouse=True)
def iceberg_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The embedded catalog of this test alone (forked children inherit it)."""
    home = tmp_path / "iceberg"
    monkeypatch.setenv(HOME_VARIABLE, str(home))
    return home


@pytest.fixture
def through(proxy: S3Proxy, dest: str) -> Committer:
    """The committer whose every request, PyIceberg's included, goes through ``proxy``."""
    return Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url))


def written(c: Committer, day: str, ids: list[int]) -> JobRecord:
    """A job whose one task wrote one Parquet file of ``ids`` to ``dt=day``."""
    return written_table_job(c, {day: ids}, table_format="iceberg")


def user_table(c: Committer) -> Table:
    """The table as a PyIceberg user loads it from the embedded catalog."""
    return iceberg_table(derived_table_name(c.dest))


def assert_intact(c: Committer, jobs: list[JobRecord], rows: list[tuple[str, int]]) -> None:
    """Each job committed and one snapshot of the table, which reads ``rows``;
    nothing pending anywhere in the bucket."""
    table = user_table(c)
    assert [s.summary.get(JOB_ID_PROPERTY) for s in table.snapshots() if s.summary] == [
        j.job_id for j in jobs
    ]
    assert [c.job(j.job_id).state for j in jobs] == ["committed"] * len(jobs)
    found = sorted((r["dt"], r["id"]) for r in table.scan().to_arrow().to_pylist())
    assert found == sorted(rows)
    assert pending_in_bucket(c) == []


def large_metadata(c: Committer) -> None:
    """The table's metadata.json made larger than a part, as a table with a long
    history of snapshots and schemas can be: a property of 11 MiB, set as a
    PyIceberg user would."""
    with user_table(c).transaction() as transaction:
        transaction.set_properties({"comment": "x" * LARGE})


# -- lost answers ----------------------------------------------------------------
def first_of_each_key(op: str) -> Callable[[S3Request], bool]:
    """A rule's condition: the first ``op`` of each key only (its resend goes through)."""
    seen: set[str] = set()

    def first(request: S3Request) -> bool:
        new = (op, request.key) not in seen
        seen.add((op, request.key))
        return new

    return first


def test_the_lost_answer_of_every_metadata_write(
    committer: Committer, through: Committer, proxy: S3Proxy
) -> None:
    """Each write of a commit's metadata (manifest, manifest list, metadata.json)
    is one PutObject: its answer lost, pyarrow sends it again, and it lands with
    no upload to leave pending."""
    first = written(committer, "2024-01-01", [1])
    committer.commit_job(first.job_id)
    job = written(committer, "2024-01-02", [2])
    proxy.reset_counts()
    lose = proxy.add(
        "PutObject",
        "lose",
        key_contains="/_iceberg/metadata/",
        times=None,
        when=first_of_each_key("PutObject"),
    )
    through.commit_job(job.job_id)
    assert lose.fired == 3
    assert proxy.counts["CreateMultipartUpload"] == 0  # the job's file was uploaded before
    assert_intact(committer, [first, job], [("2024-01-01", 1), ("2024-01-02", 2)])


def test_the_lost_answers_of_a_large_metadata_write(
    committer: Committer, through: Committer, proxy: S3Proxy
) -> None:
    """A metadata.json larger than a part goes as a multipart upload; the answers
    to its create, its part and its complete are each lost once. The lost create
    makes pyarrow start another upload and leave the first pending: the job's
    cleanup aborts it, its write having ended in this process."""
    first = written(committer, "2024-01-01", [1])
    committer.commit_job(first.job_id)
    large_metadata(committer)
    job = written(committer, "2024-01-02", [2])
    ops = ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
    rules = [proxy.add(op, "lose", key_contains=".metadata.json") for op in ops]
    through.commit_job(job.job_id)
    assert [r.fired for r in rules] == [1, 1, 1]
    assert_intact(committer, [first, job], [("2024-01-01", 1), ("2024-01-02", 2)])


# -- a process killed during the publish -------------------------------------------
def _commit_in(dest: str, endpoint: str, job_id: str) -> None:
    Committer(dest, StoreConfig(endpoint_url=endpoint)).commit_job(job_id)
    os._exit(0)


def killed_at(proxy: S3Proxy, c: Committer, job: JobRecord, rule: Callable[..., Any]) -> int:
    """Commit ``job`` in a child process through ``proxy``, killed (SIGKILL) when a
    request ``rule`` matches reaches the proxy; the child's exit code."""
    child = multiprocessing.get_context("fork").Process(
        target=_commit_in, args=(c.dest.url, proxy.endpoint_url, job.job_id)
    )

    def kill(request: S3Request) -> bool:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        return True

    rule(kill)
    child.start()
    child.join(120)
    proxy.clear()
    assert child.exitcode is not None
    return child.exitcode


@pytest.mark.parametrize(
    "what, sent",
    [("-m0.avro", True), ("/snap-", True), (".metadata.json", False), (".metadata.json", True)],
    ids=["manifest", "manifest list", "metadata.json refused", "metadata.json landed"],
)
def test_a_kill_at_each_metadata_write(
    committer: Committer, proxy: S3Proxy, what: str, sent: bool
) -> None:
    """The committing process killed as a metadata write reaches the store (the
    write refused, or landed with its answer lost); the commit's retry publishes
    the job once, and nothing is pending."""
    first = written(committer, "2024-01-01", [1])
    committer.commit_job(first.job_id)
    job = written(committer, "2024-01-02", [2])

    def rule(kill: Callable[[S3Request], bool]) -> None:
        proxy.add("PutObject", "lose" if sent else "error", key_contains=what, when=kill)

    assert killed_at(proxy, committer, job, rule) == KILLED
    assert committer.job(job.job_id).state == "committing"
    committer.commit_job(job.job_id)
    assert_intact(committer, [first, job], [("2024-01-01", 1), ("2024-01-02", 2)])


@pytest.mark.moto_xfail(
    reason="moto lists every upload as initiated on 2010-11-10, so the killed write's "
    "upload is taken for abandoned and the retry's cleanup ends it at once",
    raises=ValueError,
)
def test_a_kill_during_a_large_metadata_write_leaves_an_upload_the_sweep_ends(
    committer: Committer, proxy: S3Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between the parts of a large metadata.json: its upload stays pending,
    written by no job and by no write that ended in this process. The retry
    publishes the job once; the upload is shown as the table's metadata, left
    alone while young (a commit may be writing it), and ended by a cleanup once
    abandoned."""
    first = written(committer, "2024-01-01", [1])
    committer.commit_job(first.job_id)
    large_metadata(committer)
    job = written(committer, "2024-01-02", [2])

    def rule(kill: Callable[[S3Request], bool]) -> None:
        proxy.add("UploadPart", "lose", key_contains=".metadata.json", when=kill)

    assert killed_at(proxy, committer, job, rule) == KILLED
    committer.commit_job(job.job_id)
    (left,) = pending_in_bucket(committer)
    assert "/_iceberg/metadata/" in left and left.endswith(".metadata.json")
    (shown,) = pending_uploads(committer.ctx, Owners(committer.ctx))
    assert (shown.owner.job_id, shown.owner.table_format) == (None, "iceberg")
    committer.cleanup_job(job.job_id)
    assert pending_in_bucket(committer) == [left]  # young: left alone
    monkeypatch.setattr(table_uploads, "ABANDONED_AFTER", timedelta(0))
    assert committer.cleanup_job(job.job_id).aborted_uploads == 1
    assert_intact(committer, [first, job], [("2024-01-01", 1), ("2024-01-02", 2)])


def test_table_format_folders_are_told_by_a_path_element() -> None:
    assert table_uploads.table_format_of("t/_iceberg/metadata/00001-x.metadata.json") == "iceberg"
    assert table_uploads.table_format_of("a/t/_delta_log/00000000000000000001.json") == "delta"
    assert table_uploads.table_format_of("t/dt=_iceberg/part-0.parquet") is None
    assert table_uploads.table_format_of("t/x_iceberg/y") is None
