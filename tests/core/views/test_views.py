"""The history and partition views of a destination with a job in every state,
and what they cost in requests."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tests.every_state import (
    ABORT_REASON,
    D1,
    D2,
    D3,
    D5,
    D6,
    EveryState,
    every_state,
)
from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data import records as records_mod
from zero_rename.core.protocol import states

pytestmark = pytest.mark.s3


@pytest.fixture
def made(committer: Committer) -> EveryState:
    return every_state(committer)


def test_the_partition_view_shows_each_partitions_writer_and_holders(
    committer: Committer, made: EveryState
) -> None:
    view = committer.partitions()
    live = [made.committing, made.sealed, made.running, made.claiming]
    # What it cost: the 9 jobs listed and read; the destination listed; the live
    # records again; the claims; the file list of the one committed job read in
    # two partitions. Nothing per file or per partition.
    assert view.requests == (1 + 9) + 1 + (1 + len(live)) + 1 + 1
    parts = {p.partition: p for p in view.partitions}
    assert list(parts) == [f"dt={d}" for d in (D1, D2, D3, D5, D6)]

    d1 = parts[f"dt={D1}"]  # two appends: the first job's rows from its file list
    assert (d1.files, d1.bytes, d1.rows, d1.jobs) == (3, 180, 18, 2)
    assert (d1.job_id, d1.mode, d1.foreign_files, d1.holders) == (
        made.append.job_id,
        "append",
        0,
        (),
    )
    assert d1.written_at == made.append.steps["commit"].finished
    d2 = parts[f"dt={D2}"]  # replaced: only the replacing job's file is read
    assert (d2.files, d2.bytes, d2.rows, d2.jobs, d2.job_id, d2.mode) == (
        1,
        40,
        4,
        1,
        made.replace.job_id,
        "replace",
    )
    d3 = parts[f"dt={D3}"]  # another tool's file: no job, rows unknown
    assert (d3.files, d3.bytes, d3.rows, d3.job_id, d3.foreign_files) == (1, 7, None, None, 1)
    assert d3.written_at is not None

    d5, d6 = parts[f"dt={D5}"], parts[f"dt={D6}"]  # claimed, nothing readable yet
    assert (d5.files, d5.job_id, d6.files) == (0, None, 0)
    ((stuck,),) = [d5.holders]
    assert (stuck.job_id, stuck.state, stuck.mode, stuck.stuck) == (
        made.committing.job_id,
        "committing",
        "replace",
        False,  # its record changed moments ago
    )
    assert [(h.job_id, h.state, h.stuck) for h in d6.holders] == [
        (made.claiming.job_id, "setup", False)
    ]
    assert {h.job_id for h in view.holders} == {made.committing.job_id, made.claiming.job_id}
    assert view.stuck_jobs == ()

    # Once their records have not changed for long enough, jobs left in setup, sealed
    # and committing are stuck. Records known final are not read again.
    later = committer.partitions(known=view.records, stuck_after=timedelta(0))
    assert later.requests == (1 + len(live)) + 1 + (1 + len(live)) + 1 + 1
    assert set(later.stuck_jobs) == {
        made.committing.job_id,
        made.sealed.job_id,
        made.running.job_id,
        made.claiming.job_id,
    }
    marked = {p.partition: p.stuck for p in later.partitions}
    assert marked == {f"dt={d}": d in (D5, D6) for d in (D1, D2, D3, D5, D6)}

    # Past max_objects no partition is summed; the holders are still shown.
    bounded = committer.partitions(known=view.records, max_objects=3)
    assert not bounded.complete and bounded.partitions == ()
    assert {h.job_id for h in bounded.holders} == {h.job_id for h in view.holders}
    assert committer.partitions(known=view.records, max_objects=100).complete


def test_the_history_has_every_job_with_its_commits_numbers(
    committer: Committer, made: EveryState
) -> None:
    history = committer.history()
    order = [
        made.first,
        made.replace,
        made.append,
        made.aborted,
        made.rolled_back,
        made.committing,
        made.sealed,
        made.running,
        made.claiming,
    ]
    assert [e.job_id for e in history.entries] == [r.job_id for r in order]
    entries = {e.job_id: e for e in history.entries}

    first = entries[made.first.job_id]
    assert (first.state, first.files, first.rows, first.bytes, first.partitions) == (
        states.COMMITTED,
        3,
        23,
        330,
        2,
    )
    assert first.first_partitions == (f"dt={D1}", f"dt={D2}")
    assert first.mode == "append" and first.seconds is not None and first.seconds > 0
    assert first.committed_at == made.first.steps["commit"].finished and first.requests
    assert entries[made.replace.job_id].replaced_files == 1

    aborted = entries[made.aborted.job_id]
    assert (aborted.state, aborted.reason, aborted.files, aborted.rolled_back) == (
        states.ABORTED,
        ABORT_REASON,
        None,
        False,
    )
    assert aborted.aborted_at is not None and aborted.committed_at is None
    rolled = entries[made.rolled_back.job_id]
    assert rolled.state == states.ABORTED and rolled.rolled_back and rolled.reason
    for live in (made.committing, made.sealed, made.running, made.claiming):
        entry = entries[live.job_id]
        assert entry.state == live.state and entry.at == live.created and not entry.stuck
        assert entry.files is None and entry.committed_at is None

    data = first.to_json()
    assert {"job_id", "state", "committed_at", "seconds", "files", "rows", "bytes"} <= set(data)
    assert data["state"] == "committed" and data["committed_at"].endswith("Z")

    newest = committer.history(limit=2, newest_first=True)
    assert [e.job_id for e in newest.entries] == [made.claiming.job_id, made.running.job_id]
    assert newest.total == 9
    # One listing and a GET per record; none again for those known final.
    assert history.requests == 1 + 9
    live = [made.committing, made.sealed, made.running, made.claiming]
    again = committer.history(known=history.records)
    assert again.requests == 1 + len(live) and again.total == 9


def test_the_newest_jobs_are_read_without_reading_every_record(
    committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records are read newest first by LastModified; the reading stops once the next
    one cannot be among the newest (here without the clock skew S3 allows)."""
    monkeypatch.setattr(records_mod, "CLOCK_SKEW", timedelta(0))
    old = [committer.setup_job({"conflict_mode": "append"}) for _ in range(4)]
    write_task(committer, old[0], "00000", [b"late"])
    time.sleep(1.1)  # LastModified has whole seconds on some stores
    new = committer.setup_job({"conflict_mode": "append"})
    committer.commit_job(old[0].job_id)  # set up long ago, committed last

    newest = committer.history(limit=2, newest_first=True)
    assert [e.job_id for e in newest.entries] == [old[0].job_id, new.job_id]
    assert newest.requests == 1 + 2 and newest.total == 5
    oldest = committer.history(limit=5)
    assert [e.job_id for e in oldest.entries][-2:] == [new.job_id, old[0].job_id]
