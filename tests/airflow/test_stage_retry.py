"""A Spark stage whose worker dies while its application writes, and Airflow's retry.

The worker (an interpreter running a daily run) is killed with SIGKILL while its
local ``spark-submit`` writes; the application, its child, lives on, stalled at
its task commits with every file pending (``stalled/sitecustomize.py``), as an
application cut off from a dead worker carries on. The scheduler puts the task
up for retry, and the run goes on in the same DAG run (``dag.test()`` would
replace the run, and what its tasks kept in the task state store with it).
Nothing can find a local application again, so the retry fences it off: the job
is aborted (its pending uploads with it), the stage writes the run's next job
and the later steps commit that one. Then the stalled application resumes: its
task commits meet the aborted job, and nothing of it is left.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from tests.airflow.dagruns import RunResult, load_dag, xcom
from tests.airflow.test_daily_dag import DAG_ID, REPO, ROWS, daily, rows_by_file, run_id_of
from tests.helpers import all_keys, pending
from zero_rename.core.committer import Committer
from zero_rename.core.steps import run_job_id

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.extended]

__all__ = ["daily"]  # the fixture, shared with the daily DAG's tests

STALLED = Path(__file__).parent / "stalled"
TASKS = 2  # the daily application writes with two tasks
STEPS = ("validate", "resolve_conflicts", "commit", "cleanup_job")


@pytest.mark.timeout(1200)
def test_a_stage_whose_worker_died_is_fenced_off_and_written_again_as_the_runs_next_job(
    daily: Committer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day = "2024-03-01"
    first = run_job_id(DAG_ID, run_id_of(day), daily.dest.url)
    second = run_job_id(DAG_ID, run_id_of(day), daily.dest.url, 1)
    hold = tmp_path / f"hold-{first}"
    hold.touch()
    application = kill_the_worker_mid_stage(day, tmp_path, first)
    try:
        stalled = pending(daily, first)
        assert len(stalled) >= TASKS and daily.job(first).state == "setup"

        result = carry_on(DAG_ID, run_id_of(day))

        assert result.state == "success" and result.tries["stage"] == 2
        assert xcom(DAG_ID, result.run_id, "setup_job") == first
        assert xcom(DAG_ID, result.run_id, "stage", "summary")["job_id"] == second
        for task in STEPS:  # handed the first job, each went on with the second
            assert xcom(DAG_ID, result.run_id, task, "summary")["job_id"] == second
        fenced = daily.job(first)
        assert fenced.state == "aborted"
        assert "cannot be found again" in fenced.error and second in fenced.error
        assert pending(daily, first) == []  # the abort took the stalled files' uploads
        # The application still waits: its JVM (its short-lived children may be gone).
        assert any(p.is_running() and p.name() == "java" for p in application)

        hold.unlink()  # it resumes: its task commits read the aborted job
        _, alive = psutil.wait_procs(application, timeout=300)
        assert not alive, "the stalled application did not end"
        # Each of its task commits read the aborted job at its fence, and gave up.
        refused = sorted(f.read_text() for f in tmp_path.glob(f"refused-{first}-*"))
        assert refused == ["JobDecidedError"] * TASKS
    finally:
        hold.unlink(missing_ok=True)
        for process in application:
            if process.is_running():
                process.kill()

    files = rows_by_file(daily)
    assert sum(files.values()) == ROWS
    assert all(p.startswith(f"dt={day}/") and second in p for p in files)
    assert pending(daily) == []
    success = daily.read_success()
    assert success is not None and success.job_id == second
    assert daily.job(second).state == "committed"
    # Nothing of the first job but its record: no stage manifest its driver saved late.
    first_dir = f"_zero_rename/jobs/{first}/"
    assert [k for k in all_keys(daily) if k.startswith(first_dir)] == [f"{first_dir}job.json"]


def kill_the_worker_mid_stage(day: str, hold_dir: Path, job_id: str) -> list[psutil.Process]:
    """Start a worker running ``day``'s run; once each task of its application is
    stalled, SIGKILL the worker. Returns the application's processes, left running."""
    started = time.monotonic()
    env = {
        **os.environ,
        "ZERO_RENAME_HOLD_DIR": str(hold_dir),
        "PYTHONPATH": os.pathsep.join([str(STALLED), str(REPO)]),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.airflow.stage_worker", day, str(ROWS)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while len(list(hold_dir.glob(f"held-{job_id}-*"))) < TASKS:
            assert worker.poll() is None, "the worker ended before its stage was stalled"
            assert time.monotonic() - started < 900, "the stage did not reach its task commits"
            time.sleep(0.5)
        application = psutil.Process(worker.pid).children(recursive=True)
    finally:
        worker.kill()
        worker.wait()
    print(f"worker killed mid-stage after {time.monotonic() - started:.1f} s")
    retry_orphaned_stage(run_id_of(day))
    return application


def retry_orphaned_stage(run_id: str) -> None:
    """What the scheduler does with the stage left "running" by the dead worker once
    its heartbeat times out (minutes later): the task has a retry left, so it is up
    for retry, and due."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        ti = (
            session.query(TaskInstance)
            .filter_by(dag_id=DAG_ID, run_id=run_id, state=TaskInstanceState.RUNNING)
            .one()
        )
        assert ti.task_id == "stage" and ti.try_number == 1 and ti.max_tries >= 1
        ti.state = TaskInstanceState.UP_FOR_RETRY
        ti.end_date = datetime.now(UTC) - timedelta(minutes=10)


def carry_on(dag_id: str, run_id: str) -> RunResult:
    """The scheduler's part of ``dag.test()`` on a run that exists: run what is due,
    a task up for retry included, in this process, until the run ends."""
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.state import DagRunState, TaskInstanceState

    dag = load_dag(dag_id)
    session = settings.Session()
    run = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one()
    run.dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    handlers = list(logging.root.handlers)  # as run_dag: task runs replace them
    started = time.monotonic()
    try:
        while run.state == DagRunState.RUNNING:
            session.expire_all()
            schedulable, _ = run.update_state(session=session)
            for ti in schedulable:
                ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
            session.commit()
            due = [t for t in run.get_task_instances(session=session) if t.state == "scheduled"]
            for ti in due:
                try:
                    _run_task(ti=ti, task=dag.task_dict[ti.task_id])
                except Exception:  # as dag.test(): the task's state says it
                    logging.getLogger(__name__).exception("task %s failed", ti.task_id)
            if not due:
                time.sleep(0.5)
        tis = run.get_task_instances(session=session)
        return RunResult(
            state=str(run.state),
            states={t.task_id: str(t.state) for t in tis},
            tries={t.task_id: t.try_number for t in tis},
            run_id=run_id,
            seconds=time.monotonic() - started,
        )
    finally:
        logging.root.handlers[:] = handlers
        session.close()
