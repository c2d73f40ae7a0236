"""Readers racing job commits: every read is exactly some committed state.

A reader thread reads the destination again and again while jobs commit one
after another, in ``append`` and in ``replace`` mode. Each read must equal one
of the committed states the jobs pass through, never a mix of two (part of a
job, or old and new files of a replaced partition together) and never a
replaced partition empty.
"""

from __future__ import annotations

import io
import threading
import time
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.read import read_table

pytestmark = pytest.mark.s3

DAYS = ("d0", "d1", "d2", "d3")
FILES_PER_DAY = 8  # each job's commit takes a while: many completes, small threads
ROUNDS = 3

State = frozenset[tuple[str, str]]  # (dt, tag) of every row


def parquet(tag: str) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"tag": [tag]}), out)
    return out.getvalue()


def run_job(c: Committer, mode: str, tag: str, days: tuple[str, ...]) -> None:
    record = c.setup_job({"partition_columns": "dt", "conflict_mode": mode, "threads": 2})
    attempt = c.task_attempt(record, "00000")
    for day in days:
        for n in range(FILES_PER_DAY):
            with attempt.open({"dt": day}) as out:
                out.write(parquet(f"{tag}/{n}"))
                out.rows = 1
    attempt.commit()
    c.commit_job(record.job_id)


def after(
    state: dict[str, set[str]], mode: str, tag: str, days: tuple[str, ...]
) -> dict[str, set[str]]:
    new = {d: set(tags) for d, tags in state.items()}
    for day in days:
        rows = {f"{tag}/{n}" for n in range(FILES_PER_DAY)}
        new[day] = rows if mode == "replace" else new.get(day, set()) | rows
    return new


def frozen(state: dict[str, set[str]]) -> State:
    return frozenset((d, t) for d, tags in state.items() for t in tags)


def read_state(dest: str, config: StoreConfig) -> State:
    table = read_table(dest, store_config=config)
    rows = list(zip(table.column("dt").to_pylist(), table.column("tag").to_pylist(), strict=True))
    assert len(rows) == len(set(rows)), "a row read twice"
    return frozenset(rows)


@pytest.mark.parametrize("mode", ["append", "replace"])
@pytest.mark.also_on("moto")
def test_every_read_is_a_committed_state(
    committer: Committer, store_config: StoreConfig, mode: str
) -> None:
    c = committer
    state: dict[str, set[str]] = {}
    run_job(c, "append", "base", DAYS)
    state = after(state, "append", "base", DAYS)
    committed = {frozen(state)}
    jobs = [(mode, f"{mode}{r}", DAYS[r % 2 : r % 2 + 2]) for r in range(ROUNDS)]
    for job_mode, tag, days in jobs:
        state = after(state, job_mode, tag, days)
        committed.add(frozen(state))

    seen: Counter[State] = Counter()
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                seen[read_state(c.dest.url, store_config)] += 1
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    def one_more_read() -> None:
        # On a busy machine a read (a listing, then every file) can take longer
        # than a job: let one end between jobs, so that reads keep falling
        # across the next job's commit instead of a few spanning them all.
        before = sum(seen.values())
        deadline = time.monotonic() + 60
        while sum(seen.values()) == before and not errors and time.monotonic() < deadline:
            time.sleep(0.01)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for job_mode, tag, days in jobs:
            one_more_read()
            run_job(c, job_mode, tag, days)
    finally:
        stop.set()
        thread.join(120)
    assert not errors, errors
    assert sum(seen.values()) >= ROUNDS, "the reader hardly read"
    strays = [s for s in seen if s not in committed]
    assert not strays, f"{len(strays)} read(s) matched no committed state: {sorted(strays[0])}"
    assert len(seen) >= 2, "every read saw the same state: no race happened"
    for s in seen:  # no replaced partition ever read empty
        assert {d for d, _ in s} == set(DAYS)
