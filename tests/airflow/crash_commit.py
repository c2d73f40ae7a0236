"""Run one daily DAG run in this process and die at the commit's Nth CompleteMultipartUpload.

Started by a test as a separate interpreter (a fork of a process that already
ran Airflow could deadlock on locks held by its threads). The process exits on
the spot, as a killed worker would: no handler runs, nothing is flushed.

    python -m tests.airflow.crash_commit DAY ROWS NTH

The run writes at most 50 rows a file, so that the commit has files to spare.
Its commit completes two uploads at a time, so the fault lands half-way
whatever the timing: when the Nth completion is about to be sent, at least
N - 2 have finished and at most N - 1 (with one thread a file, the
completions before it may all still be in flight when the process dies, and
then none of them lands).
"""

from __future__ import annotations

import sys
from typing import Any

from tests.airflow.dagruns import run_dag
from tests.faults import inject
from zero_rename.airflow.hooks import ZeroRenameHook
from zero_rename.core.s3.client import S3Store


def main(day: str, rows: int, nth: int) -> None:
    original = ZeroRenameHook.store

    def store(hook: ZeroRenameHook) -> S3Store:
        # Three pooled connections: one for the journal, two commit threads.
        hook.pool_size = 3
        s = original(hook)
        assert s.pool_size == 3, "the hook's client was made before its pool was sized"
        # Only the commit step completes uploads, so the fault lands in it.
        inject(s.client, "CompleteMultipartUpload", nth=nth, action="exit")
        return s

    ZeroRenameHook.store = store  # type: ignore[method-assign]
    run: Any = run_dag(
        "daily_partitioned_write", day, {"rows": rows, "options": {"max_rows_per_file": 50}}
    )
    sys.exit(f"the run ended ({run.state}) without reaching the fault")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
