"""Running ``zero-rename`` in-process, and destinations holding jobs in every state."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.faults import clear, inject
from tests.helpers import write_task
from zero_rename.cli import context
from zero_rename.cli.main import main
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.errors import StoreError


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Ran]


_clients: dict[StoreConfig, S3Store] = {}


def _shared_connect(config: StoreConfig) -> S3Store:
    """The real client, built once per configuration: each new boto3 session spends
    most of a second loading botocore's models, which in-process runs repeat."""
    if config not in _clients:
        _clients[config] = S3Store.connect(config)
    return _clients[config].scoped()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``cli("jobs", "list", dest)`` runs the command as the executable would, in-process.
    (The tests of the installed executable cover a fresh client per run.)"""
    monkeypatch.setattr(context, "connect", _shared_connect)

    def run(*argv: str) -> Ran:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


def committed_job(c: Committer, days: tuple[str, ...] = ("2024-01-01", "2024-01-02")) -> JobRecord:
    """A partitioned job, two tasks, committed."""
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(c, job, "00000", {d: f"a-{d}".encode() * 10 for d in days}, rows=10)
    write_task(c, job, "00001", {days[0]: b"b" * 33}, rows=3)
    c.commit_job(job.job_id)
    return c.job(job.job_id)


def stray_upload(c: Committer, job: JobRecord, task_id: str = "00009") -> str:
    """A zombie attempt's pending upload (magic files start their upload at open)."""
    attempt = c.task_attempt(job, task_id)
    out = attempt.open({c_: "2024-01-09" for c_ in job.options.partition_columns} or None)
    out.write(b"late")
    return out.key


def running_job(c: Committer) -> JobRecord:
    """A job in setup with one task committed: its uploads wait for the job commit."""
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(c, job, "00000", {"2024-02-01": b"r" * 10})
    return job


def committing_job(c: Committer) -> JobRecord:
    """A job past its point of no return whose completes all failed: uploads still pending."""
    job = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(c, job, "00000", {"2024-03-01": b"c" * 10, "2024-03-02": b"d" * 10})
    fault = inject(c.store.client, "CompleteMultipartUpload", times=1000)
    try:
        with pytest.raises(StoreError):
            c.commit_job(job.job_id)
    finally:
        clear(c.store.client, fault)
    record = c.job(job.job_id)
    assert record.state == "committing"
    return record


@pytest.fixture
def committer(dest: str, store_config: StoreConfig) -> Committer:
    """The suite's committer, on the shared client (a fault injected into it must be
    cleared before the CLI runs, as :func:`committing_job` does)."""
    return Committer(dest, store=_shared_connect(store_config))


@pytest.fixture
def other(bucket: str, store_config: StoreConfig) -> Callable[[str], Committer]:
    """Committers for other destinations in the same bucket: ``other("table10")``."""
    return lambda path: Committer(f"s3://{bucket}/{path}", store=_shared_connect(store_config))
