"""Run one daily DAG run in this process: the worker a test kills mid-stage.

Started by a test as a separate interpreter, like ``crash_commit``; the test
kills it with SIGKILL while the stage's local ``spark-submit`` (its child)
writes, and the child lives on.

    python -m tests.airflow.stage_worker DAY ROWS
"""

from __future__ import annotations

import sys
from typing import Any

from tests.airflow.dagruns import run_dag


def main(day: str, rows: int) -> None:
    run: Any = run_dag(
        "daily_partitioned_write", day, {"rows": rows, "options": {"max_rows_per_file": 50}}
    )
    sys.exit(f"the run ended ({run.state}) before it was killed")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
