"""A soak of table-format jobs under lost answers and kills (opt-in: minutes long).

Jobs alternate between an Iceberg table and a Delta table in one bucket. Each
is set up and written directly, then committed in a child process through the
fault proxy, which answers a share of every request with a fault (a lost
answer, a 500, a reset connection, a throttle: ``ZERO_RENAME_SOAK_FAULTS``,
4 % by default) and, for a share of the jobs, kills the child at a random
request of its commit (``ZERO_RENAME_SOAK_KILLS``, a third by default). What
the child did not finish is retried here, through the same faults, then the
job's cleanup runs as an orchestrator's teardown would. At the end, with the
faults off: no pending upload anywhere in the bucket, every job committed
once in its table (one snapshot or version each, in commit order), the tables
reading exactly the rows of the committed jobs.

    ZERO_RENAME_TEST_SOAK=1 ZERO_RENAME_SOAK_JOBS=30 \\
        .venv/bin/python -m pytest tests/core/tables/test_table_soak.py -s

It prints its numbers: jobs, kills, faults injected by kind, commit retries,
pending uploads at the end.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.core.tables.test_delta import delta_rows, log_entries
from tests.core.tables.test_table_uploads import user_table
from tests.helpers import pending_in_bucket
from tests.s3proxy import S3Proxy, S3Request
from tests.servers import S3Server
from tests.table_jobs import written_table_job
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.tables.base import JOB_ID_PROPERTY
from zero_rename.core.tables.iceberg_catalog import HOME_VARIABLE
from zero_rename.errors import CommitRolledBackError, ZeroRenameError

pytestmark = [pytest.mark.s3, pytest.mark.soak]

JOBS = int(os.environ.get("ZERO_RENAME_SOAK_JOBS", "30"))
FAULTS = float(os.environ.get("ZERO_RENAME_SOAK_FAULTS", "0.04"))
KILLS = float(os.environ.get("ZERO_RENAME_SOAK_KILLS", "0.33"))
SEED = int(os.environ.get("ZERO_RENAME_SOAK_SEED", "1"))
# A commit is retried this many times before the soak gives up on it.
RETRIES = 20
# The request of a commit a kill comes at: a commit sends about 30 to 45.
KILL_AT = (1, 45)


def _commit(dest: str, endpoint: str, job_id: str) -> None:
    Committer(dest, StoreConfig(endpoint_url=endpoint)).commit_job(job_id)
    os._exit(0)


class Soak:
    def __init__(self, proxy: S3Proxy, seed: int) -> None:
        self.proxy = proxy
        self.rng = random.Random(seed)
        self.numbers: Counter[str] = Counter()

    def commit_in_child(self, c: Committer, job: JobRecord, kill: bool) -> None:
        """Commit ``job`` in a child through the faults; killed at a random request."""
        # Spawned: delta-rs's runtime does not survive a fork of a process that used it.
        child = multiprocessing.get_context("spawn").Process(
            target=_commit, args=(c.dest.url, self.proxy.endpoint_url, job.job_id)
        )
        rule = None
        self.tally()
        if kill:
            at = self.rng.randint(*KILL_AT)
            seen = Counter[str]()

            def die(request: S3Request) -> bool:
                # Asked of every request (a rule's condition comes before its count).
                seen["requests"] += 1
                if seen["requests"] != at or child.pid is None:
                    return False
                os.kill(child.pid, signal.SIGKILL)
                return True

            rule = self.proxy.add("*", "delay", when=die)
        child.start()
        child.join(180)
        sent = sum(self.proxy.counts.values())
        self.numbers["requests of the commits in children"] += sent
        if rule is not None:
            self.proxy.remove(rule)
            self.numbers["kills"] += rule.fired

        self.numbers["child finished" if child.exitcode == 0 else "child failed or killed"] += 1

    def tally(self) -> None:
        """Add the faults injected so far to the numbers, and start counting afresh."""
        for name, count in self.proxy.chaos_fired.items():
            self.numbers[f"fault {name}"] += count
        self.proxy.reset_counts()

    def finish(self, through: Committer, job: JobRecord) -> str:
        """Retry the job's commit through the faults until it is decided, then clean up."""
        state = through.job(job.job_id).state if self._readable(through, job) else "?"
        for _ in range(RETRIES):
            if state in ("committed", "aborted"):
                break
            try:
                through.commit_job(job.job_id)
            except CommitRolledBackError:
                self.numbers["rolled back"] += 1
            except ZeroRenameError as exc:
                self.numbers[f"retried after {type(exc).__name__}"] += 1
            state = through.job(job.job_id).state if self._readable(through, job) else "?"
        for _ in range(RETRIES):
            try:
                through.cleanup_job(job.job_id)
                break
            except ZeroRenameError:
                self.numbers["cleanup retried"] += 1
        return state

    def _readable(self, c: Committer, job: JobRecord) -> bool:
        for _ in range(RETRIES):
            try:
                c.job(job.job_id)
                return True
            except ZeroRenameError:
                time.sleep(0.1)
        return False


def test_table_format_jobs_under_lost_answers_and_kills_leave_nothing_pending(
    s3_backend: S3Server,
    bucket: str,
    proxy: S3Proxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "iceberg"))
    direct = StoreConfig(endpoint_url=s3_backend.endpoint_url)
    faulty = StoreConfig(endpoint_url=proxy.endpoint_url)
    tables = {f: f"s3://{bucket}/soak_{f}" for f in ("iceberg", "delta")}
    soak = Soak(proxy, SEED)
    committed: dict[str, list[JobRecord]] = {f: [] for f in tables}
    rows: dict[str, list[tuple[str, int]]] = {f: [] for f in tables}
    started = time.monotonic()
    for n in range(JOBS):
        table_format = ("iceberg", "delta")[n % 2]
        c = Committer(tables[table_format], direct)
        day = f"2024-01-{n % 28 + 1:02d}"
        job = written_table_job(c, {day: [n]}, table_format=table_format)
        proxy.chaos(FAULTS, seed=SEED * 1000 + n, actions=("lose", "error500", "reset", "slowdown"))
        soak.commit_in_child(c, job, kill=soak.rng.random() < KILLS)
        state = soak.finish(Committer(tables[table_format], faulty), job)
        proxy.chaos(0)
        soak.numbers[f"{table_format} {state}"] += 1
        if state == "committed":
            committed[table_format].append(c.job(job.job_id))
            rows[table_format].append((day, n))
    soak.tally()
    c = Committer(tables["iceberg"], direct)
    left = pending_in_bucket(c)
    soak.numbers["pending uploads at the end"] = len(left)
    print(f"\nsoak of {JOBS} jobs in {time.monotonic() - started:.0f} s: {dict(soak.numbers)}")
    assert left == []
    for table_format, jobs in committed.items():
        ordered = sorted(jobs, key=lambda r: r.steps["commit"].finished or r.updated)
        assert _in_table(tables[table_format], table_format, direct) == [j.job_id for j in ordered]
    table = user_table(c)
    assert sorted((r["dt"], r["id"]) for r in table.scan().to_arrow().to_pylist()) == sorted(
        rows["iceberg"]
    )
    delta = delta_rows(Committer(tables["delta"], direct), s3_backend)
    assert delta == sorted(((i, day) for day, i in rows["delta"]), key=lambda r: (r[0], str(r[1])))


def _in_table(dest: str, table_format: str, config: StoreConfig) -> list[str]:
    """The job ids of the table's commits, oldest first."""
    c = Committer(dest, config)
    if table_format == "iceberg":
        return [s.summary.get(JOB_ID_PROPERTY, "") for s in user_table(c).snapshots() if s.summary]
    return [
        a["commitInfo"][JOB_ID_PROPERTY]
        for _, actions in sorted(log_entries(c).items())
        for a in actions
        if JOB_ID_PROPERTY in a.get("commitInfo", {})
    ]
