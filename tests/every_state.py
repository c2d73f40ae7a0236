"""A destination holding a job in every state, for the history and partition views.

Partitions (``dt=``): ``d1`` appended to by two committed jobs; ``d2`` written by
the first and then replaced; ``d3`` another tool's file only; ``d5`` claimed by
a job stuck past its point of no return (nothing of it visible), whose claim
keeps a sealed job out; ``d6`` claimed by a running job whose conflicts are
resolved. An aborted job (``d7``), a rolled-back one (``d4``) and a job still in
setup (``d8``) leave nothing readers see.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from tests.faults import clear, inject
from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord, dump
from zero_rename.errors import PartitionClaimConflict, StoreError

D1, D2, D3, D4, D5, D6, D7, D8 = (f"2024-05-0{i}" for i in range(1, 9))
ABORT_REASON = "step(s) stage failed (DAG daily, run r1)"
FOREIGN = f"dt={D3}/from-another-tool.parquet"
PARTITIONED = {"partition_columns": "dt"}


@dataclass
class EveryState:
    first: JobRecord  # committed, append: d1 (2 files, 10 + 3 rows) and d2 (1 file, 10 rows)
    replace: JobRecord  # committed, replace: d2 (1 file, 4 rows)
    append: JobRecord  # committed, append: d1 (1 file, 5 rows)
    aborted: JobRecord
    rolled_back: JobRecord
    committing: JobRecord  # its completes refused: stuck, holding d5
    sealed: JobRecord  # its commit refused by that claim
    running: JobRecord  # setup, a task committed
    claiming: JobRecord  # setup, conflicts resolved: holds d6

    def committed(self) -> list[JobRecord]:
        return [self.first, self.replace, self.append]


def _job(c: Committer, mode: str, days: dict[str, bytes], rows: int = 1) -> JobRecord:
    job = c.setup_job({**PARTITIONED, "conflict_mode": mode})
    write_task(c, job, "00000", days, rows=rows)
    return job


def _refused_commit(c: Committer, job: JobRecord) -> JobRecord:
    """The job past its point of no return, every complete refused."""
    fault = inject(c.store.client, "CompleteMultipartUpload", times=1000)
    try:
        with pytest.raises(StoreError):
            c.commit_job(job.job_id)
    finally:
        clear(c.store.client, fault)
    return c.job(job.job_id)


def every_state(c: Committer) -> EveryState:
    first = c.setup_job({**PARTITIONED, "conflict_mode": "append"})
    write_task(c, first, "00000", {D1: b"a" * 100, D2: b"b" * 200}, rows=10)
    write_task(c, first, "00001", {D1: b"c" * 30}, rows=3)
    c.commit_job(first.job_id)
    replace = _job(c, "replace", {D2: b"r" * 40}, rows=4)
    c.commit_job(replace.job_id)
    append = _job(c, "append", {D1: b"p" * 50}, rows=5)
    c.commit_job(append.job_id)
    c.store.put_object(c.dest.bucket, c.dest.dir + FOREIGN, b"f" * 7)

    aborted = _job(c, "append", {D7: b"x"})
    c.abort_job(aborted.job_id, reason=ABORT_REASON)
    rolled_back = _refused_commit(c, _job(c, "replace", {D4: b"y"}))
    c.rollback_job(rolled_back.job_id, force=True, reason="rolled back by hand")
    committing = _refused_commit(c, _job(c, "replace", {D5: b"z"}))
    sealed = _job(c, "replace", {D5: b"s"})
    with pytest.raises(PartitionClaimConflict):
        c.commit_job(sealed.job_id)
    running = _job(c, "append", {D8: b"w"})
    claiming = _job(c, "replace", {D6: b"v"})
    c.resolve_conflicts(claiming.job_id)
    return EveryState(
        *(
            c.job(j.job_id)
            for j in (
                first,
                replace,
                append,
                aborted,
                rolled_back,
                committing,
                sealed,
                running,
                claiming,
            )
        )
    )


def age(c: Committer, *jobs: JobRecord, hours: int = 2) -> None:
    """Rewrite the jobs' records as last changed ``hours`` ago, as a commit that
    crashed then would have left them: stuck by any threshold below that."""
    for job in jobs:
        key = c.dest.job(job.job_id).record_key
        found = c.store.get_object(c.dest.bucket, key)
        assert found is not None
        record = JobRecord.model_validate_json(found[0])
        then = record.updated - timedelta(hours=hours)
        c.store.put_object(c.dest.bucket, key, dump(record.model_copy(update={"updated": then})))
