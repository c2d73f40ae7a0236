"""Run one daily DAG run in a fresh interpreter and print its result as JSON.

Started by a test whose run needs Airflow configured otherwise than the test
process already is: the OpenLineage provider reads its transport once per
process, so a run with a transport of its own runs here.

    python -m tests.airflow.run_day DAY ROWS
"""

from __future__ import annotations

import dataclasses
import json
import sys

from tests.airflow.dagruns import run_dag


def main(day: str, rows: int) -> int:
    result = run_dag("daily_partitioned_write", day, {"rows": rows})
    print(json.dumps(dataclasses.asdict(result)))
    return 0 if result.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
