"""Fill the stack's Commits page: the daily DAG for a few days, and a job in each state.

    python -m demo.stack [--dir DIR]

``make stack-demo`` starts the stack (``deploy/stack.sh up``) and runs this. It
drives Airflow through its REST API, as a person would with curl (the local
stack has no login), unpauses ``daily_partitioned_write`` and ``manual_abort``
(Airflow creates them paused; unpaused, the daily DAG also runs its latest
scheduled day), and then:

- **aborted**: triggers the daily DAG for 2024-01-05 and, once its job is set
  up, aborts the job through ``manual_abort`` while the Spark stage writes, as
  an operator stopping a day would; the stage's task commits are refused;
- **committed**: 2024-01-01 to 2024-01-03, 1,000 to 3,000 rows a day;
- **failed**: 2024-01-04 with an input that does not exist: the stage fails and
  the DAG's own ``abort_job`` aborts the job;
- **rolled back**: playing a store in trouble, commits a job of 2024-01-06
  itself, through the library, with every CompleteMultipartUpload refused: the
  commit stops past its point of no return (``committing``); one of its uploads
  is then aborted by hand, so it can never finish, and ``manual_abort`` with
  ``roll_back`` rolls it back;
- **left for you**: the same for 2024-01-07, left ``committing``, for the page's
  "Roll back…" button.

Then it prints the Commits page's address, and each job. Run again, it triggers
the days again (``replace``: one copy of each day stays) and keeps the job left
for you if you have not rolled it back yet.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from demo.common import DAILY_DESTINATION, REPOSITORY
from zero_rename.core import Committer, StoreConfig, states

DAILY = "daily_partitioned_write"
ABORT = "manual_abort"
COMMITTED_DAYS = {"2024-01-01": 1000, "2024-01-02": 2000, "2024-01-03": 3000}
FAILED_DAY, ABORTED_DAY, ROLLED_BACK_DAY, LEFT_DAY = (
    "2024-01-04",
    "2024-01-05",
    "2024-01-06",
    "2024-01-07",
)
# An input that is not there: the stage's Spark read fails.
MISSING_INPUT = "s3://warehouse/no_such_input/"
POLL_SECONDS = 3.0
RUN_TIMEOUT = 1800.0  # every run of the demo, on a busy two-core machine


class DemoError(Exception):
    """The demo cannot go on; the message says why and what to do."""


@dataclass
class Airflow:
    """Airflow's REST API on the stack, without a login (the local stack's default)."""

    url: str

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}/api/v2{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise DemoError(
                    f"Airflow refused {method} {path} ({exc.code}): the demo drives the local "
                    "stack, which has no login (AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS)"
                ) from None
            raise

    def wait_for_dag(self, dag_id: str, timeout: float = 300.0) -> None:
        """Until the DAG processor has parsed the DAG."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.call("GET", f"/dags/{dag_id}")
                return
            except urllib.error.HTTPError as exc:
                if exc.code != 404 or time.monotonic() > deadline:
                    raise DemoError(f"Airflow does not know the DAG {dag_id}: {exc}") from None
            time.sleep(POLL_SECONDS)

    def unpause(self, dag_id: str) -> None:
        self.call("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any], note: str) -> str:
        """A manual run with these params; its run id."""
        run = self.call(
            "POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf, "note": note}
        )
        return str(run["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.call("GET", f"/dags/{dag_id}/dagRuns/{quoted(run_id)}")["state"])

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        path = f"/dags/{dag_id}/dagRuns/{quoted(run_id)}/taskInstances/{task_id}"
        return self.call("GET", path).get("state")

    def job_id(self, run_id: str) -> str:
        """The job the daily run set up: its setup task's return value."""
        path = f"/dags/{DAILY}/dagRuns/{quoted(run_id)}/taskInstances/setup_job/xcomEntries/"
        return str(self.call("GET", path + "return_value")["value"]).strip('"')


def quoted(run_id: str) -> str:
    return urllib.request.quote(run_id, safe="")


def wait_until(what: str, check: Callable[[], bool], timeout: float = RUN_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise DemoError(f"gave up waiting, after {timeout:.0f} s, for {what}")
        time.sleep(POLL_SECONDS)


def stack_environment(state_dir: Path | None) -> dict[str, str]:
    """The stack's addresses and S3 credentials, as ``deploy/stack.sh env`` gives them."""
    command = [sys.executable, str(REPOSITORY / "deploy" / "stack.py")]
    command += ["--dir", str(state_dir)] if state_dir else []
    found = subprocess.run(
        [*command, "env", "--json"], capture_output=True, text=True, timeout=120, check=False
    )
    env = json.loads(found.stdout or "{}") if found.returncode == 0 else {}
    if "AIRFLOW_API_URL" not in env or "AWS_ENDPOINT_URL" not in env:
        raise DemoError("the stack is not running: start it with make stack-up")
    return {k: str(v) for k, v in env.items()}


# -- the jobs the library commits itself --------------------------------------


@contextmanager
def store_in_trouble(client: Any) -> Iterator[None]:
    """Every CompleteMultipartUpload ``client`` sends is answered 503, as by a store
    in trouble, until the block ends: on botocore's path and on the light path
    the commit sends them by (``add_request_hook``)."""
    from botocore.exceptions import ClientError

    from zero_rename.core.s3.completers import add_request_hook, remove_request_hook

    def refuse(**_: Any) -> None:
        error = {"Code": "ServiceUnavailable", "Message": "the demo refuses completions"}
        raise ClientError(
            {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 503}},
            "CompleteMultipartUpload",
        )

    def hook(stage: str, key: str, context: dict[str, Any]) -> None:
        if stage == "before":
            refuse()

    event = "before-call.s3.CompleteMultipartUpload"
    client.meta.events.register(event, refuse, unique_id="demo-refuse")
    add_request_hook(client, hook)
    try:
        yield
    finally:
        client.meta.events.unregister(event, unique_id="demo-refuse")
        remove_request_hook(client, hook)


def day_parquet(day: str, rows: int) -> bytes:
    """A Parquet file of the daily table's columns (``dt`` is the partition)."""
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "region": pa.array(["eu-west"] * rows),
            "amount": pa.array([Decimal("1.00")] * rows, pa.decimal128(12, 2)),
            "event_time": pa.array(
                [start + timedelta(seconds=i * 86400 // rows) for i in range(rows)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def unfinishable_commit(
    destination: str, day: str, config: StoreConfig | None = None, rows: int = 100
) -> str:
    """A job of ``day`` whose commit stopped past its point of no return and can
    never finish: its id. Its completions refused, then its upload aborted by hand."""
    from zero_rename.errors import StoreError

    # One attempt a request: the refusals are the point, not worth retrying.
    committer = Committer(destination, replace(config or StoreConfig(), max_attempts=1))
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    attempt = committer.task_attempt(job, "00000", 0)
    with attempt.open({"dt": day}) as out:
        out.write(day_parquet(day, rows))
        out.rows = rows
    attempt.commit()
    with store_in_trouble(committer.store.client):
        try:
            committer.commit_job(job.job_id)
        except StoreError:
            pass  # what the demo made it do
    for upload in committer.pending_uploads(job.job_id):
        committer.store.abort_upload(committer.dest.bucket, upload.key, upload.upload_id)
    return job.job_id


def committing_jobs(destination: str) -> list[str]:
    return [r.job_id for r in Committer(destination).jobs() if r.state == states.COMMITTING]


# -- the demo -----------------------------------------------------------------


@dataclass
class Outcome:
    what: str
    day: str
    dag_id: str
    run: str  # the Airflow run that decides it


def say(text: str) -> None:
    print(text, flush=True)


def start(airflow: Airflow) -> None:
    say(f"Airflow at {airflow.url}: waiting for its DAG processor to parse the DAGs...")
    for dag_id in (DAILY, ABORT):
        airflow.wait_for_dag(dag_id)
        airflow.unpause(dag_id)
    say(f"unpaused {DAILY} (it also runs its latest scheduled day) and {ABORT}")


def aborted_day(airflow: Airflow) -> Outcome:
    """The daily run of ABORTED_DAY, its job aborted by manual_abort during the stage."""
    run = airflow.trigger(DAILY, {"date": ABORTED_DAY, "rows": 1000}, "aborted by the demo")
    say(f"{ABORTED_DAY}: {DAILY} run {run}; waiting for its job to be set up...")
    wait_until(
        f"the setup of {run}",
        lambda: airflow.task_state(DAILY, run, "setup_job") in ("success", "failed"),
    )
    job = airflow.job_id(run)
    params = {"destination": DAILY_DESTINATION, "job_id": job, "roll_back": False, "force": False}
    abort = airflow.trigger(ABORT, params, f"the demo aborts the job of {ABORTED_DAY}")
    say(f"{ABORTED_DAY}: job {job} set up; {ABORT} run {abort} aborts it during the stage")
    outcome = Outcome("aborted by manual_abort", ABORTED_DAY, ABORT, abort)
    # Before the other days take the executor's slots and Spark's cores.
    finish(airflow, [outcome])
    return outcome


def daily_days(airflow: Airflow) -> list[Outcome]:
    """The days that commit, and the day whose stage fails."""
    outcomes = []
    for day, rows in COMMITTED_DAYS.items():
        run = airflow.trigger(DAILY, {"date": day, "rows": rows}, "the demo's days")
        outcomes.append(Outcome(f"committed, {rows:,} rows", day, DAILY, run))
    run = airflow.trigger(
        DAILY, {"date": FAILED_DAY, "input": MISSING_INPUT}, "an input that is not there"
    )
    outcomes.append(Outcome("failed: its input is not there", FAILED_DAY, DAILY, run))
    say(
        f"{', '.join(COMMITTED_DAYS)}: {DAILY} runs that commit; {FAILED_DAY}: one whose "
        "stage fails (its input does not exist)"
    )
    return outcomes


def rolled_back_day(airflow: Airflow) -> Outcome:
    job = unfinishable_commit(DAILY_DESTINATION, ROLLED_BACK_DAY)
    params = {"destination": DAILY_DESTINATION, "job_id": job, "roll_back": True, "force": False}
    run = airflow.trigger(ABORT, params, f"the demo rolls back the job of {ROLLED_BACK_DAY}")
    say(
        f"{ROLLED_BACK_DAY}: job {job} committed with S3 refusing every completion, then "
        f"its upload aborted by hand: stuck in committing; {ABORT} run {run} rolls it back"
    )
    return Outcome("rolled back by manual_abort", ROLLED_BACK_DAY, ABORT, run)


def finish(airflow: Airflow, outcomes: list[Outcome]) -> None:
    """Until each run has ended; each said as it ends."""
    for o in outcomes:
        ended = ended_check(airflow, o.dag_id, o.run)
        wait_until(f"{o.dag_id} run {o.run}", ended)
        state = airflow.run_state(o.dag_id, o.run)
        say(f"  {o.day}: {o.what}; {o.dag_id} run {o.run}: {state}")


def ended_check(airflow: Airflow, dag_id: str, run: str) -> Callable[[], bool]:
    return lambda: airflow.run_state(dag_id, run) in ("success", "failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="the stack's state directory")
    args = parser.parse_args(argv)
    try:
        env = stack_environment(args.dir)
        os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
        airflow = Airflow(env["AIRFLOW_API_URL"])
        started = time.monotonic()
        start(airflow)
        # A job an earlier run of the demo left committing stays the one left for you.
        earlier = committing_jobs(DAILY_DESTINATION)
        aborted_day(airflow)
        outcomes = [*daily_days(airflow), rolled_back_day(airflow)]
        left = earlier[0] if earlier else unfinishable_commit(DAILY_DESTINATION, LEFT_DAY)
        say(f"waiting for {len(outcomes)} runs (their Spark stages run one at a time)...")
        finish(airflow, outcomes)
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report(airflow.url, left, time.monotonic() - started)
    return 0


def report(url: str, left: str, seconds: float) -> None:
    records = {r.job_id: r for r in Committer(DAILY_DESTINATION).jobs()}
    say(f"\ndone in {seconds:.0f} s. The jobs at {DAILY_DESTINATION}, oldest first:")
    for record in records.values():
        reason = f": {record.error}" if record.error else ""
        say(f"  {record.job_id}  {record.state:<10}  {record.created:%Y-%m-%d %H:%M:%S}Z{reason}")
    say(
        f"\nThe Commits page: {url}/zero-rename/commits (in Airflow's UI: {url}/plugin/commits, "
        "Browse > Commits). No login: on this local stack every visitor is admin.\n"
        f"Job {left} is left committing, its commit unable to finish: its row offers "
        "'Roll back…', which triggers manual_abort with roll_back from the page.\n"
        "make stack-down stops the stack (deploy/stack.sh down --purge also drops its data)."
    )


if __name__ == "__main__":
    sys.exit(main())
